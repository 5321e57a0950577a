package lineproto

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fencecheck/fencecheck/transport"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Transport is the harness side of one transport instance behind the protocol: every call of
// the seed's contract is a request to the adapter process. It is safe for concurrent use;
// calls on different roles travel in parallel (the adapter may answer out of order).
//
// The workload's own instruments are not the adapter's business and are served by a
// transport of the harness's on the same links: creating topics (EnsureTopic), reading work
// partitions (ReadPartition) and waiting for open transactions (WaitStable).
type Transport struct {
	argv    []string
	cfg     transport.Config // as given, defaults filled in
	log     *slog.Logger
	helper  *transport.BrokerTransport
	gw      *gateway
	gwBoot  string // the adapter's bootstrap: the gateway's listeners
	margin  time.Duration
	tv      int
	caps    []string
	adapter string // hello's name

	mu       sync.Mutex // guards proc, closed, restarts, parts, minted
	proc     *adapterProc
	closed   bool
	restarts int
	parts    map[string]int32 // partition counts of topics, from the helper
	// minted holds, with CapGatewayToken, the token of each role's holding: the pair the
	// gateway saw the role's last acquire mint, until a write under it fails or an acquire
	// fails. The harness keeps the adapter's side of the contract that needs the token.
	minted map[transport.Role]transport.FencingToken
}

// adapterProc is one running adapter process.
type adapterProc struct {
	cmd      *exec.Cmd
	clientID string
	spawned  time.Time // just before the process started

	wmu sync.Mutex // one line at a time on stdin
	in  io.WriteCloser
	enc *json.Encoder

	mu      sync.Mutex
	next    uint64
	pending map[uint64]chan *Response
	dead    error         // set once stdout ended or the process was killed
	exited  chan struct{} // closed when the process has been waited for
}

// StartupTimeout is how much longer than the request timeout an adapter may take to answer
// hello and start, together.
const StartupTimeout = 30 * time.Second

// Start validates cfg, opens the harness's own transport on cfg's links and the gateway the
// adapter will dial, starts the adapter argv (argv[0] is the program), and sends hello and
// start. Start's errors are the transport's: ErrInvalidConfig for a bad config (TLS and SASL
// are not supported behind the protocol yet), ErrAdmin when no broker answers, and the
// adapter's own start error; ErrClient when the adapter cannot be run or speaks another
// protocol version.
func Start(ctx context.Context, argv []string, cfg transport.Config) (*Transport, error) {
	if len(argv) == 0 {
		return nil, &transport.Error{Op: transport.OpStart, Kind: transport.ErrInvalidConfig, Stage: transport.StageLocal,
			Err: errors.New("exec: no adapter command")}
	}
	if cfg.Security != nil {
		return nil, &transport.Error{Op: transport.OpStart, Kind: transport.ErrInvalidConfig, Stage: transport.StageLocal,
			Err: errors.New("Security: TLS (Security.TLS) and SASL (Security.SASLMechanism) are not supported behind the exec protocol yet")}
	}
	helper, err := transport.Start(ctx, cfg) // validates cfg and checks that a broker answers
	if err != nil {
		return nil, err
	}
	t := &Transport{argv: argv, cfg: helper.Config(), helper: helper, parts: map[string]int32{},
		minted: map[transport.Role]transport.FencingToken{}}
	t.log = t.cfg.Logger
	t.tv = helper.TransactionVersion()
	// An adapter bounds each call by the request timeout itself; the harness gives it a margin
	// for its own scheduling before it calls the adapter hung.
	t.margin = max(time.Second, t.cfg.RequestTimeout/2)
	t.gw = newGateway(cfg.Dial, t.cfg.RequestTimeout)
	var seeds []string
	for _, s := range strings.Split(t.cfg.Bootstrap, ",") {
		if s = strings.TrimSpace(s); s != "" {
			seeds = append(seeds, s)
		}
	}
	if t.gwBoot, err = t.gw.bootstrap(seeds); err != nil {
		t.shutdown()
		return nil, &transport.Error{Op: transport.OpStart, Kind: transport.ErrClient, Stage: transport.StageLocal, Err: err}
	}
	t.mu.Lock()
	_, err = t.adapterLocked(ctx)
	t.mu.Unlock()
	if err != nil {
		t.shutdown()
		return nil, err
	}
	return t, nil
}

// shutdown closes the harness's side: the gateway and the helper.
func (t *Transport) shutdown() {
	t.gw.Close()
	ctx, cancel := context.WithTimeout(context.Background(), t.cfg.RequestTimeout)
	defer cancel()
	_ = t.helper.Close(ctx)
}

// TransactionVersion is the transaction version the adapter reported at start.
func (t *Transport) TransactionVersion() int { return t.tv }

// Capabilities are the optional capabilities the adapter announced in hello.
func (t *Transport) Capabilities() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.caps...)
}

// CanDescribe reports whether the adapter can describe a role (it did not announce
// CapNoDescribe). When it cannot, Describe fails without I/O.
func (t *Transport) CanDescribe() bool { return !t.has(CapNoDescribe) }

func (t *Transport) gatewayToken() bool { return t.has(CapGatewayToken) }

func (t *Transport) has(capability string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Contains(t.caps, capability)
}

// Adapter is the name (and version) the adapter gave in hello.
func (t *Transport) Adapter() string { return t.adapter }

// Restarts counts the adapter processes killed and replaced because a call hung.
func (t *Transport) Restarts() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.restarts
}

// Pid is the process id of the running adapter, 0 when none runs.
func (t *Transport) Pid() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.proc == nil || t.proc.cmd.Process == nil {
		return 0
	}
	return t.proc.cmd.Process.Pid
}

// Freeze stops the adapter process (SIGSTOP): every call of the instance hangs, as a frozen
// process's would. Thaw continues it (SIGCONT).
func (t *Transport) Freeze() error { return t.signal(syscall.SIGSTOP) }

// Thaw continues an adapter that Freeze stopped.
func (t *Transport) Thaw() error { return t.signal(syscall.SIGCONT) }

func (t *Transport) signal(sig syscall.Signal) error {
	t.mu.Lock()
	p := t.proc
	t.mu.Unlock()
	if p == nil {
		return errors.New("exec: no adapter running")
	}
	return p.cmd.Process.Signal(sig)
}

// adapterLocked returns the running adapter, starting one (hello, start) if none runs. A
// replacement gets a new client id, so broker logs tell the processes apart. t.mu is held.
func (t *Transport) adapterLocked(ctx context.Context) (*adapterProc, error) {
	if t.closed {
		return nil, &transport.Error{Op: transport.OpStart, Kind: transport.ErrClosed, Stage: transport.StageLocal}
	}
	if t.proc != nil {
		if !t.proc.isDead() {
			return t.proc, nil
		}
		t.log.Warn("the adapter died; starting another", "client_id", t.proc.clientID, "error", t.proc.deadErr())
		t.proc = nil
		t.restarts++
	}
	clientID := t.cfg.ClientID
	if t.restarts > 0 {
		clientID = fmt.Sprintf("%s-r%d", clientID, t.restarts)
	}
	p, err := spawn(t.argv, clientID, t.log)
	if err != nil {
		return nil, &transport.Error{Op: transport.OpStart, Kind: transport.ErrClient, Stage: transport.StageLocal, Err: err}
	}
	// Starting is not an operation of the history: a runtime such as a JVM takes seconds to
	// boot, more when a run starts a dozen at once on a busy machine.
	ctx, cancel := context.WithTimeout(ctx, StartupTimeout+t.cfg.RequestTimeout)
	defer cancel()
	resp, err := hello(ctx, p)
	if err != nil {
		return nil, &transport.Error{Op: transport.OpStart, Kind: transport.ErrClient, Stage: transport.StageLocal, Err: err}
	}
	if len(resp.Workloads) > 0 && !slices.Contains(resp.Workloads, WorkloadLeases) {
		p.kill()
		return nil, &transport.Error{Op: transport.OpStart, Kind: transport.ErrInvalidConfig, Stage: transport.StageLocal,
			Err: fmt.Errorf("the adapter %q serves %s, not leases", resp.Name, strings.Join(resp.Workloads, ", "))}
	}
	t.caps, t.adapter = resp.Capabilities, resp.Name
	c := t.cfg
	resp, err = p.call(ctx, &Request{Op: OpStart, Config: &Config{
		Bootstrap: t.gwBoot, ClientID: clientID, Topic: c.Topic,
		LeaseMS: c.LeaseDuration.Milliseconds(), RequestTimeoutMS: c.RequestTimeout.Milliseconds(),
		FetchMaxWaitMS: c.FetchMaxWait.Milliseconds(), FetchPartitionMax: c.FetchPartitionMax,
		TopicPartitions: c.TopicPartitions, TopicReplication: c.TopicReplication,
		TransactionVersion: c.TransactionVersion,
	}})
	if err == nil && resp.Outcome != OutcomeOK {
		err = t.fail(transport.OpStart, "", resp)
	}
	if err != nil {
		return nil, startFailed(p, err)
	}
	if resp.TransactionVersion != 0 {
		t.tv = resp.TransactionVersion
	}
	clear(t.minted) // a new adapter holds nothing
	t.proc = p
	t.log.Info("adapter started", "pid", p.cmd.Process.Pid, "client_id", clientID, "adapter", t.adapter,
		"capabilities", strings.Join(t.caps, ","), "transaction_version", t.tv)
	return p, nil
}

// startFailed kills p, whose start (or member_start) failed with err, and returns err as the
// transport's error: the adapter's own when it answered, ErrClient when it did not.
func startFailed(p *adapterProc, err error) error {
	p.kill()
	var te *transport.Error
	if !errors.As(err, &te) {
		err = &transport.Error{Op: transport.OpStart, Kind: transport.ErrClient, Stage: transport.StageLocal, Err: err}
	}
	return err
}

// hello sends hello to the adapter p and checks its answer: the protocol version and the
// capabilities this harness knows. It kills p when the answer will not do.
func hello(ctx context.Context, p *adapterProc) (*Response, error) {
	resp, err := p.call(ctx, &Request{Op: OpHello, Version: Version})
	if err == nil && resp.Outcome == OutcomeOK && resp.Version != Version {
		err = fmt.Errorf("%w: the adapter speaks version %d, the harness %d", ErrProtocol, resp.Version, Version)
	}
	if err == nil && resp.Outcome != OutcomeOK {
		err = fmt.Errorf("hello: %s", resp.Error.Message)
	}
	if err != nil {
		p.kill()
		return nil, err
	}
	for _, c := range resp.Capabilities {
		if err == nil && !slices.Contains(capabilities, c) {
			err = fmt.Errorf("%w: hello: unknown capability %q (this harness knows %s)", ErrProtocol, c, strings.Join(capabilities, ", "))
		}
	}
	for _, w := range resp.Workloads {
		if err == nil && w != WorkloadLeases && w != WorkloadPipelines {
			err = fmt.Errorf("%w: hello: unknown workload %q (this harness knows %s and %s)", ErrProtocol, w, WorkloadLeases, WorkloadPipelines)
		}
	}
	if err != nil {
		p.kill()
		return nil, err
	}
	return resp, nil
}

// Hello starts the adapter argv, asks it hello and closes it: its name and the workloads it
// serves (WorkloadLeases alone when its hello lists none). A campaign asks before it plans a
// pipeline's runs through an adapter.
func Hello(ctx context.Context, argv []string, log *slog.Logger) (name string, workloads []string, err error) {
	if len(argv) == 0 {
		return "", nil, errors.New("exec: no adapter command")
	}
	p, err := spawn(argv, "fencecheck-hello", log)
	if err != nil {
		return "", nil, err
	}
	defer p.kill()
	ctx, cancel := context.WithTimeout(ctx, StartupTimeout)
	defer cancel()
	resp, err := hello(ctx, p)
	if err != nil {
		return "", nil, err
	}
	_, _ = p.call(ctx, &Request{Op: OpClose})
	if len(resp.Workloads) == 0 {
		return resp.Name, []string{WorkloadLeases}, nil
	}
	return resp.Name, resp.Workloads, nil
}

// spawn starts the adapter process argv and its reader goroutines.
func spawn(argv []string, clientID string, log *slog.Logger) (*adapterProc, error) {
	spawned := time.Now()
	cmd := exec.Command(argv[0], argv[1:]...)
	// The adapter dies with the harness, even when the harness is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	errp, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("run adapter %q: %w", argv[0], err)
	}
	p := &adapterProc{cmd: cmd, clientID: clientID, spawned: spawned, in: in, enc: json.NewEncoder(in),
		pending: map[uint64]chan *Response{}, exited: make(chan struct{})}
	log = log.With("adapter_pid", cmd.Process.Pid, "client_id", clientID)
	var pipes sync.WaitGroup
	pipes.Go(func() { // stderr goes to the run's log, a record per line
		sc := bufio.NewScanner(errp)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			log.Info("adapter stderr", "line", sc.Text())
		}
	})
	pipes.Go(func() { p.read(out, log) })
	go func() {
		pipes.Wait() // Wait must not run before the pipes are drained
		err := cmd.Wait()
		log.Info("adapter exited", "status", err)
		close(p.exited)
	}()
	return p, nil
}

// read dispatches the adapter's responses until stdout ends.
func (p *adapterProc) read(out io.Reader, log *slog.Logger) {
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), maxFrame)
	for sc.Scan() {
		var r Response
		err := json.Unmarshal(sc.Bytes(), &r)
		if err == nil {
			err = r.check()
		}
		if err != nil {
			log.Warn("adapter broke the protocol; killing it", "line", sc.Text(), "error", err)
			p.die(fmt.Errorf("%w: %v", ErrProtocol, err))
			p.kill()
			break
		}
		p.mu.Lock()
		ch := p.pending[r.ID]
		delete(p.pending, r.ID)
		p.mu.Unlock()
		if ch != nil {
			ch <- &r
		}
	}
	_, _ = io.Copy(io.Discard, out)
	p.die(errors.New("adapter exited"))
}

// die fails every pending call with err; later calls fail at once.
func (p *adapterProc) die(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dead == nil {
		p.dead = err
	}
	for id, ch := range p.pending {
		close(ch)
		delete(p.pending, id)
	}
}

// kill ends the process (SIGKILL, after SIGCONT would not matter: a stopped process dies too).
func (p *adapterProc) kill() {
	p.die(errors.New("adapter killed"))
	if p.cmd.Process != nil {
		_ = p.cmd.Process.Kill()
	}
	p.in.Close()
}

func (p *adapterProc) isDead() bool { return p.deadErr() != nil }

func (p *adapterProc) deadErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dead
}

// errHung: the adapter did not answer within the harness's bound.
var errHung = errors.New("the adapter did not answer in time")

// call sends req and waits for its response or ctx's end. A nil response comes with an
// error: the adapter died (the outcome is unknown) or ctx ended (errHung).
func (p *adapterProc) call(ctx context.Context, req *Request) (*Response, error) {
	ch := make(chan *Response, 1)
	p.mu.Lock()
	if p.dead != nil {
		p.mu.Unlock()
		return nil, p.dead
	}
	p.next++
	req.ID = p.next
	p.pending[req.ID] = ch
	p.mu.Unlock()
	p.wmu.Lock()
	err := p.enc.Encode(req)
	p.wmu.Unlock()
	if err != nil {
		p.mu.Lock()
		delete(p.pending, req.ID)
		p.mu.Unlock()
		return nil, fmt.Errorf("send %s: %w", req.Op, err)
	}
	select {
	case r, ok := <-ch:
		if !ok {
			p.mu.Lock()
			defer p.mu.Unlock()
			return nil, p.dead
		}
		return r, nil
	case <-ctx.Done():
		p.mu.Lock()
		delete(p.pending, req.ID)
		p.mu.Unlock()
		return nil, fmt.Errorf("%w: %w", errHung, ctx.Err())
	}
}

// do runs one call of op on role: it bounds it by the request timeout plus the margin, kills
// and forgets an adapter that did not answer within it (the next call starts a new one), and
// turns a failure into a *transport.Error whose Classify is the adapter's outcome.
func (t *Transport) do(ctx context.Context, op transport.Op, role transport.Role, req *Request) (*Response, error) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, &transport.Error{Op: op, Role: role, Kind: transport.ErrClosed, Stage: transport.StageLocal}
	}
	p, err := t.adapterLocked(ctx)
	t.mu.Unlock()
	if err != nil {
		// No request of this call left the harness.
		return nil, &transport.Error{Op: op, Role: role, Kind: transport.ErrClient, Stage: transport.StageLocal, Err: err}
	}
	bound := t.cfg.RequestTimeout + t.margin
	cctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	resp, err := p.call(cctx, req)
	if err != nil {
		if errors.Is(err, errHung) && ctx.Err() == nil {
			// Hung past the request timeout: its effect is unknown, and an adapter that does not
			// answer cannot be trusted with the next call either.
			t.replace(p, fmt.Sprintf("%s did not answer within %v", req.Op, bound))
		}
		return nil, unknown(op, role, err)
	}
	if resp.Outcome != OutcomeOK {
		return nil, t.fail(op, role, resp)
	}
	return resp, nil
}

// replace kills p and forgets it, if it is still the running adapter.
func (t *Transport) replace(p *adapterProc, why string) {
	t.mu.Lock()
	if t.proc == p {
		t.proc = nil
		t.restarts++
	}
	t.mu.Unlock()
	t.log.Warn("killing the adapter", "pid", p.cmd.Process.Pid, "client_id", p.clientID, "why", why)
	p.kill()
}

// unknown is the error of a call whose answer never came: Classify says Unknown where the call
// could have had an effect.
func unknown(op transport.Op, role transport.Role, err error) error {
	stage := transport.StageSend
	if op == transport.OpWrite {
		stage = transport.StageCommit
	}
	return &transport.Error{Op: op, Role: role, Kind: transport.ErrClient, Stage: stage, Err: err}
}

// fail turns a failed response into the transport's error. Stage carries the adapter's
// outcome to transport.Classify: the adapter, not the harness, knows how far the call got.
func (t *Transport) fail(op transport.Op, role transport.Role, r *Response) error {
	msg := errors.New("adapter: " + r.Error.Message)
	if r.Outcome == OutcomeUnknown {
		e := unknown(op, role, msg).(*transport.Error)
		e.Kind = ErrorKinds[r.Error.Kind]
		return e
	}
	return &transport.Error{Op: op, Role: role, Kind: ErrorKinds[r.Error.Kind], Stage: transport.StageLocal, Err: msg}
}

// partition returns the partition of role on topic, asking the helper for the topic's
// partition count once (creating the topic if it does not exist yet, as the seed's calls do).
func (t *Transport) partition(ctx context.Context, op transport.Op, role transport.Role) (int32, error) {
	t.mu.Lock()
	n, ok := t.parts[t.cfg.Topic]
	t.mu.Unlock()
	if !ok {
		var err error
		if n, err = t.helper.EnsureTopic(ctx, t.cfg.Topic, t.cfg.TopicPartitions); err != nil {
			var te *transport.Error
			if errors.As(err, &te) && errors.Is(err, transport.ErrClosed) {
				return 0, &transport.Error{Op: op, Role: role, Kind: transport.ErrClosed, Stage: transport.StageLocal}
			}
			return 0, &transport.Error{Op: op, Role: role, Kind: transport.ErrAdmin, Stage: transport.StageLocal, Err: err}
		}
		t.mu.Lock()
		t.parts[t.cfg.Topic] = n
		t.mu.Unlock()
	}
	return transport.PartitionFor(role, n), nil
}

// checkOpen returns ErrClosed once Close has begun: nothing is sent.
func (t *Transport) checkOpen(op transport.Op, role transport.Role) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return &transport.Error{Op: op, Role: role, Kind: transport.ErrClosed, Stage: transport.StageLocal}
	}
	return nil
}

// AcquireEpoch asks the adapter to mint role's token (see transport.BrokerTransport.AcquireEpoch).
//
// With CapGatewayToken the token is the pair of the last successful InitProducerId for the
// role's transactional id that the gateway relayed to this adapter after the acquire was
// sent. One acquire per role is in flight at a time, and members of a role play on distinct
// processes, so no other request of this adapter can have minted it; a competitor's mint
// crosses another process's gateway.
func (t *Transport) AcquireEpoch(ctx context.Context, role transport.Role) (transport.FencingToken, error) {
	mark := t.gw.mintMark()
	t.forget(role)
	resp, err := t.do(ctx, transport.OpAcquire, role, &Request{Op: OpAcquire, Role: string(role)})
	if err != nil {
		return transport.FencingToken{}, err
	}
	if !t.gatewayToken() {
		if resp.Token == nil {
			return transport.FencingToken{}, unknown(transport.OpAcquire, role, fmt.Errorf("%w: acquire answered ok without a token", ErrProtocol))
		}
		return resp.Token.fencing(), nil
	}
	txnID := transport.TransactionalID(t.cfg.Topic, role)
	seen, ok := t.gw.mintedSince(txnID, mark)
	switch {
	case !ok:
		return transport.FencingToken{}, unknown(transport.OpAcquire, role,
			fmt.Errorf("%w: acquire answered ok, but the gateway relayed no successful InitProducerId for %q to this adapter", ErrProtocol, txnID))
	case resp.Token != nil && *resp.Token != seen:
		return transport.FencingToken{}, unknown(transport.OpAcquire, role,
			fmt.Errorf("%w: acquire answered token %d/%d, but InitProducerId returned %d/%d to this adapter", ErrProtocol,
				resp.Token.ProducerID, resp.Token.Epoch, seen.ProducerID, seen.Epoch))
	}
	tok := seen.fencing()
	t.mu.Lock()
	t.minted[role] = tok
	t.mu.Unlock()
	return tok, nil
}

// forget drops the harness's record of role's holding (CapGatewayToken).
func (t *Transport) forget(role transport.Role) {
	t.mu.Lock()
	delete(t.minted, role)
	t.mu.Unlock()
}

// write runs a write request under token. With CapGatewayToken the harness checks the token
// first, as the seed asks of the transport (ErrNotHeld, nothing sent), and forgets the
// holding when the write fails, as the adapter does.
func (t *Transport) write(ctx context.Context, role transport.Role, token transport.FencingToken, req *Request) error {
	if !t.gatewayToken() {
		_, err := t.do(ctx, transport.OpWrite, role, req)
		return err
	}
	t.mu.Lock()
	held, ok := t.minted[role]
	t.mu.Unlock()
	if !ok || held != token {
		return &transport.Error{Op: transport.OpWrite, Role: role, Kind: transport.ErrNotHeld, Stage: transport.StageLocal,
			Err: fmt.Errorf("token %v is not the holding's", token)}
	}
	_, err := t.do(ctx, transport.OpWrite, role, req)
	if err != nil {
		t.forget(role)
	}
	return err
}

// Register asks the adapter to append member's registration to role's partition.
func (t *Transport) Register(ctx context.Context, role transport.Role, member transport.MemberID) (int64, error) {
	if err := t.checkOpen(transport.OpRegister, role); err != nil {
		return 0, err
	}
	p, err := t.partition(ctx, transport.OpRegister, role)
	if err != nil {
		return 0, err
	}
	resp, err := t.do(ctx, transport.OpRegister, role, &Request{Op: OpRegister, Role: string(role), Member: string(member),
		Topic: t.cfg.Topic, Partition: &p, Key: transport.EncodeKey(role),
		Value: transport.AppendValue(nil, transport.Value{Kind: transport.KindRegistration, Member: member})})
	if err != nil {
		return 0, err
	}
	if resp.JoinSeq == nil {
		return 0, unknown(transport.OpRegister, role, fmt.Errorf("%w: register answered ok without join_seq", ErrProtocol))
	}
	return *resp.JoinSeq, nil
}

// WriteLease asks the adapter to write lease under token in one transaction; the record
// (encoded here, carrying token) is in the request.
func (t *Transport) WriteLease(ctx context.Context, role transport.Role, token transport.FencingToken, lease transport.Lease) error {
	if err := t.checkOpen(transport.OpWrite, role); err != nil {
		return err
	}
	p, err := t.partition(ctx, transport.OpWrite, role)
	if err != nil {
		return err
	}
	return t.write(ctx, role, token, &Request{Op: OpWriteLease, Role: string(role), Token: tokenOf(token),
		Lease: &Lease{Holder: string(lease.Holder), Seq: lease.Seq, DurationNS: int64(lease.Duration),
			WrittenAtNS: lease.WrittenAt.UnixNano()},
		Topic: t.cfg.Topic, Partition: &p, Key: transport.EncodeKey(role),
		Value: transport.AppendValue(nil, transport.Value{Kind: transport.KindLease, Token: token, Member: lease.Holder, Lease: lease})})
}

// WriteFenced asks the adapter to write recs under token in one transaction.
func (t *Transport) WriteFenced(ctx context.Context, role transport.Role, token transport.FencingToken, recs ...*kgo.Record) error {
	req := &Request{Op: OpWriteFenced, Role: string(role), Token: tokenOf(token)}
	for _, r := range recs {
		req.Records = append(req.Records, Write{Topic: r.Topic, Partition: r.Partition, Key: r.Key, Value: r.Value})
	}
	return t.write(ctx, role, token, req)
}

// ReadRoleRecords asks the adapter for the committed records of role's partition and decodes
// them as transport.BrokerTransport.ReadRoleRecords does: records of other writers and roles
// are dropped, an undecodable value of the role is ErrRecord.
func (t *Transport) ReadRoleRecords(ctx context.Context, role transport.Role) (transport.RoleRecords, error) {
	if err := t.checkOpen(transport.OpRead, role); err != nil {
		return transport.RoleRecords{}, err
	}
	p, err := t.partition(ctx, transport.OpRead, role)
	if err != nil {
		return transport.RoleRecords{}, err
	}
	resp, err := t.do(ctx, transport.OpRead, role, &Request{Op: OpReadRole, Role: string(role), Topic: t.cfg.Topic, Partition: &p})
	if err != nil {
		return transport.RoleRecords{}, err
	}
	var out transport.RoleRecords
	last := int64(-1)
	for _, r := range resp.Records {
		if r.Offset <= last {
			return transport.RoleRecords{}, &transport.Error{Op: transport.OpRead, Role: role, Kind: transport.ErrRecord,
				Stage: transport.StageSend, Err: fmt.Errorf("%w: offset %d after %d: records out of order", ErrProtocol, r.Offset, last)}
		}
		last = r.Offset
		if k, err := transport.DecodeKey(r.Key); err != nil || k != role {
			continue
		}
		v, err := transport.DecodeValue(r.Value)
		if err != nil {
			return transport.RoleRecords{}, &transport.Error{Op: transport.OpRead, Role: role, Kind: transport.ErrRecord,
				Stage: transport.StageSend, Err: fmt.Errorf("offset %d: %w", r.Offset, err)}
		}
		switch v.Kind {
		case transport.KindRegistration:
			out.Registrations = append(out.Registrations, transport.Registration{Member: v.Member, JoinSeq: r.Offset})
		case transport.KindLease:
			out.Leases = append(out.Leases, transport.LeaseRecord{Lease: v.Lease, Token: v.Token, Offset: r.Offset})
		}
	}
	return out, nil
}

// Describe asks the adapter which token its coordinator reports for role.
//
// An adapter that announced CapNoDescribe is not asked: the call fails (ErrAdmin) without I/O.
func (t *Transport) Describe(ctx context.Context, role transport.Role) (transport.FencingToken, bool, error) {
	if err := t.checkOpen(transport.OpDescribe, role); err != nil {
		return transport.FencingToken{}, false, err
	}
	if !t.CanDescribe() {
		return transport.FencingToken{}, false, &transport.Error{Op: transport.OpDescribe, Role: role, Kind: transport.ErrAdmin,
			Stage: transport.StageLocal, Err: errors.New("the adapter cannot describe (capability no-describe)")}
	}
	resp, err := t.do(ctx, transport.OpDescribe, role, &Request{Op: OpDescribe, Role: string(role)})
	if err != nil {
		return transport.FencingToken{}, false, err
	}
	if !resp.Held {
		return transport.FencingToken{}, false, nil
	}
	return resp.Token.fencing(), true, nil
}

// HeldToken asks the adapter which token it holds for role. A call that fails reports none.
// With CapGatewayToken the adapter says only whether it holds the role, and the token is the
// harness's record of the acquire.
func (t *Transport) HeldToken(role transport.Role) (transport.FencingToken, bool) {
	resp, err := t.do(context.Background(), "held", role, &Request{Op: OpHeld, Role: string(role)})
	if err != nil || !resp.Held {
		return transport.FencingToken{}, false
	}
	if t.gatewayToken() {
		t.mu.Lock()
		tok, ok := t.minted[role]
		t.mu.Unlock()
		return tok, ok
	}
	return resp.Token.fencing(), true
}

// EnsureTopic creates topic through the harness's own transport.
func (t *Transport) EnsureTopic(ctx context.Context, topic string, partitions int32) (int32, error) {
	n, err := t.helper.EnsureTopic(ctx, topic, partitions)
	if err == nil && topic == t.cfg.Topic {
		t.mu.Lock()
		t.parts[topic] = n
		t.mu.Unlock()
	}
	return n, err
}

// ReadPartition reads a partition through the harness's own transport, on this process's links.
func (t *Transport) ReadPartition(ctx context.Context, topic string, partition int32) ([]*kgo.Record, error) {
	return t.helper.ReadPartition(ctx, topic, partition)
}

// WaitStable waits through the harness's own transport (see transport.BrokerTransport.WaitStable).
func (t *Transport) WaitStable(ctx context.Context, topic string, partition int32) error {
	return t.helper.WaitStable(ctx, topic, partition)
}

// Close sends close to the adapter, waits for it to exit (bounded by ctx; then it is
// killed), and closes the gateway and the harness's own transport. Calls after Close return
// ErrClosed. Close is idempotent.
func (t *Transport) Close(ctx context.Context) error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	p := t.proc
	t.proc = nil
	t.mu.Unlock()
	var err error
	if p != nil {
		cctx, cancel := context.WithTimeout(ctx, t.cfg.RequestTimeout+t.margin)
		resp, cerr := p.call(cctx, &Request{Op: OpClose})
		cancel()
		if cerr == nil && resp.Outcome != OutcomeOK {
			cerr = t.fail("close", "", resp)
		}
		p.in.Close()
		select {
		case <-p.exited:
		case <-ctx.Done():
			cerr = errors.Join(cerr, fmt.Errorf("adapter did not exit: %w", ctx.Err()))
		}
		p.kill()
		select {
		case <-p.exited:
		case <-time.After(5 * time.Second): // a child of the adapter may still hold its pipes
		}
		if cerr != nil {
			err = fmt.Errorf("close adapter: %w", cerr)
		}
	}
	t.gw.Close()
	return errors.Join(err, t.helper.Close(ctx))
}
