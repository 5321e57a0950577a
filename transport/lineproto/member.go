package lineproto

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencecheck/fencecheck/transport"
	"github.com/fencecheck/fencecheck/transport/pipeline"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Member is a pipeline member (pipeline.Member) served by an adapter behind the exec protocol:
// one adapter process per member, which must list WorkloadPipelines in hello. The adapter runs
// its client's consume-transform-produce loop one call at a time (member_start, poll,
// transact, close); the harness keeps everything else, as for leases:
//
//   - its connections go through a gateway of its own whose upstream dial is Config.Conn.Dial
//     (the member's links), so link faults, Kafka-aware faults and a freeze's stalled
//     connections apply to it unchanged;
//   - its pause points are on the wire: Config.Pause is called with PointAfterProduce before
//     the transaction's first AddOffsetsToTxn goes out (or its first TxnOffsetCommit, for a
//     client that adds the offsets partition implicitly under transaction version 2 and sends
//     no AddOffsetsToTxn), and with PointBeforeCommit before an EndTxn that commits, so an
//     adapter needs no pause points of its own;
//   - its offset fetches are seen on the wire: each OffsetFetch answer for the input topic is
//     reported to Config.Fetched before the client can read it, with the member id and
//     generation (member epoch) of the client's last JoinGroup (ConsumerGroupHeartbeat)
//     answer; a fetch during a transact call is a rewind.
//
// A call the adapter does not answer in time kills it, as for leases; the next call starts a
// new adapter (a new member with the same configuration, whose producer fences the old one).
type Member struct {
	argv   []string
	cfg    pipeline.Config
	margin time.Duration
	gw     *gateway
	watch  *memberWatch
	boot   string

	mu         sync.Mutex // one call at a time; guards proc, closed, restarts, selfDriven
	proc       *adapterProc
	closed     bool
	restarts   int
	name       string // hello's
	selfDriven bool   // hello listed CapSelfDriven: observe, not poll and transact

	// A self-driven member's observe requests to the adapter obsProc: when each was sent, by
	// id, which bounds the begin of a transaction the adapter says began after it.
	obsMu   sync.Mutex
	obsProc *adapterProc
	obsSent map[uint64]time.Time
}

// StartMember validates cfg, opens the member's gateway and starts the adapter argv (argv[0]
// is the program): hello, which must list the pipelines workload, and member_start. Errors
// wrap transport.ErrInvalidConfig for a bad config (an adapter that serves leases only, TLS
// or SASL, which the gateway does not carry yet) and transport.ErrClient when the adapter
// cannot be run or speaks another protocol version.
func StartMember(ctx context.Context, argv []string, cfg pipeline.Config) (*Member, error) {
	cfg, err := cfg.WithDefaults()
	if err != nil {
		return nil, err
	}
	bad := func(err error) error {
		return &transport.Error{Op: transport.OpStart, Kind: transport.ErrInvalidConfig, Stage: transport.StageLocal, Err: err}
	}
	switch {
	case len(argv) == 0:
		return nil, bad(errors.New("exec: no adapter command"))
	case cfg.Conn.Security != nil:
		return nil, bad(errors.New("Security: TLS and SASL are not supported behind the exec protocol yet"))
	}
	m := &Member{argv: argv, cfg: cfg, margin: max(time.Second, cfg.Conn.RequestTimeout/2)}
	m.watch = &memberWatch{input: cfg.Input, pause: m.pause, fetched: cfg.Fetched, txnVersion: cfg.TxnVersion, generation: -1, topics: map[[16]byte]string{}}
	m.gw = newGateway(cfg.Conn.Dial, cfg.Conn.RequestTimeout)
	m.gw.watch = m.watch
	var seeds []string
	for _, s := range strings.Split(cfg.Conn.Bootstrap, ",") {
		if s = strings.TrimSpace(s); s != "" {
			seeds = append(seeds, s)
		}
	}
	if m.boot, err = m.gw.bootstrap(seeds); err != nil {
		m.gw.Close()
		return nil, &transport.Error{Op: transport.OpStart, Kind: transport.ErrClient, Stage: transport.StageLocal, Err: err}
	}
	m.mu.Lock()
	_, err = m.adapterLocked(ctx)
	m.mu.Unlock()
	if err != nil {
		m.gw.Close()
		return nil, err
	}
	return m, nil
}

// Adapter is the name the adapter gave in hello.
func (m *Member) Adapter() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.name
}

// pause is the gateway's pause point: Config.Pause, timed, so that a call's bound does not
// count the time the member was stopped.
func (m *Member) pause(point string) {
	if m.cfg.Pause == nil {
		return
	}
	start := time.Now()
	m.cfg.Pause(context.Background(), point)
	m.watch.paused.Add(int64(time.Since(start)))
}

// adapterLocked returns the running adapter, starting one (hello, member_start) if none runs.
// m.mu is held.
func (m *Member) adapterLocked(ctx context.Context) (*adapterProc, error) {
	if m.closed {
		return nil, &transport.Error{Op: transport.OpStart, Kind: transport.ErrClosed, Stage: transport.StageLocal}
	}
	if m.proc != nil && !m.proc.isDead() {
		return m.proc, nil
	}
	if m.proc != nil {
		m.proc, m.restarts = nil, m.restarts+1
	}
	log := m.cfg.Conn.Logger
	clientID := m.cfg.Conn.ClientID
	if m.restarts > 0 {
		clientID = fmt.Sprintf("%s-r%d", clientID, m.restarts)
	}
	p, err := spawn(m.argv, clientID, log)
	if err != nil {
		return nil, &transport.Error{Op: transport.OpStart, Kind: transport.ErrClient, Stage: transport.StageLocal, Err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, StartupTimeout+m.cfg.Conn.RequestTimeout)
	defer cancel()
	resp, err := hello(ctx, p)
	if err == nil && !slices.Contains(resp.Workloads, WorkloadPipelines) {
		p.kill()
		return nil, &transport.Error{Op: transport.OpStart, Kind: transport.ErrInvalidConfig, Stage: transport.StageLocal,
			Err: fmt.Errorf("the adapter %q serves %s only, not pipelines (its hello lists no %q workload)", resp.Name, workloadsOf(resp), WorkloadPipelines)}
	}
	if err != nil {
		return nil, &transport.Error{Op: transport.OpStart, Kind: transport.ErrClient, Stage: transport.StageLocal, Err: err}
	}
	m.name = resp.Name
	m.selfDriven = slices.Contains(resp.Capabilities, CapSelfDriven)
	m.watch.setSelfDriven(m.selfDriven)
	c := m.cfg
	resp, err = p.call(ctx, &Request{Op: OpMemberStart, Pipeline: &MemberConfig{
		Bootstrap: m.boot, ClientID: clientID, Group: c.Group, Input: c.Input, Output: c.Output,
		TransactionalID: c.TransactionalID, TxnIDPerPartition: c.TxnIDPerPartition,
		SessionTimeoutMS: c.SessionTimeout.Milliseconds(), RebalanceTimeoutMS: c.RebalanceTimeout.Milliseconds(),
		TransactionTimeoutMS: c.Conn.LeaseDuration.Milliseconds(), RequestTimeoutMS: c.Conn.RequestTimeout.Milliseconds(),
		MaxPoll: c.MaxPoll, Protocol: c.Protocol, TransactionVersion: c.Conn.TransactionVersion,
		Label: c.Label, Stateful: c.Stateful,
	}})
	if err == nil && resp.Outcome != OutcomeOK {
		err = failed(transport.OpStart, resp)
	}
	if err != nil {
		return nil, startFailed(p, err)
	}
	m.proc = p
	log.Info("pipeline adapter started", "pid", p.cmd.Process.Pid, "client_id", clientID, "adapter", m.name)
	return p, nil
}

func workloadsOf(r *Response) string {
	if len(r.Workloads) == 0 {
		return WorkloadLeases
	}
	return strings.Join(r.Workloads, ", ")
}

// call sends req to the adapter and waits at most bound for its answer, not counting the time
// the member spent paused meanwhile. An adapter that does not answer is killed: its member is
// gone, and the next call starts another. A nil response comes with an error.
func (m *Member) call(ctx context.Context, req *Request, bound time.Duration) (*Response, error) {
	r, _, err := m.callOn(ctx, req, bound)
	return r, err
}

// callOn is call, and says which adapter process it asked.
func (m *Member) callOn(ctx context.Context, req *Request, bound time.Duration) (*Response, *adapterProc, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, err := m.adapterLocked(ctx)
	if err != nil {
		return nil, nil, err
	}
	paused := m.watch.paused.Load()
	type answer struct {
		r   *Response
		err error
	}
	ch := make(chan answer, 1)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		r, err := p.call(cctx, req)
		ch <- answer{r, err}
	}()
	deadline := time.Now().Add(bound)
	for {
		timer := time.NewTimer(time.Until(deadline))
		select {
		case a := <-ch:
			timer.Stop()
			return a.r, p, a.err
		case <-timer.C:
			if now := m.watch.paused.Load(); now != paused {
				deadline, paused = deadline.Add(time.Duration(now-paused)), now
				continue
			}
			cancel()
			<-ch
			m.cfg.Conn.Logger.Warn("killing the pipeline adapter", "pid", p.cmd.Process.Pid, "client_id", p.clientID,
				"why", fmt.Sprintf("%s did not answer within %v", req.Op, bound))
			p.kill()
			return nil, p, fmt.Errorf("%w: %s within %v", errHung, req.Op, bound)
		}
	}
}

// Poll asks the adapter for records, waiting until ctx's deadline (500 ms without one). It
// waits for the adapter's answer even when ctx ends first: the adapter's consumer has moved
// past whatever records it polled, so an answer dropped would be records skipped (the batch
// is returned, and with it ctx's error only when it is empty).
func (m *Member) Poll(ctx context.Context) (pipeline.Batch, error) {
	if err := m.notSelfDriven(OpPoll); err != nil {
		return pipeline.Batch{}, err
	}
	wait := 500 * time.Millisecond
	if d, ok := ctx.Deadline(); ok {
		wait = max(time.Until(d), 0)
	}
	r, err := m.call(context.WithoutCancel(ctx), &Request{Op: OpPoll, WaitMS: wait.Milliseconds()}, wait+m.cfg.Conn.RequestTimeout+m.margin)
	if err == nil && r.Outcome != OutcomeOK {
		err = failed(transport.OpRead, r)
	}
	if err != nil {
		if ctx.Err() != nil {
			return pipeline.Batch{}, ctx.Err()
		}
		return pipeline.Batch{}, err
	}
	b := pipeline.Batch{MemberID: r.MemberID, Generation: -1}
	if r.Generation != nil {
		b.Generation = *r.Generation
	}
	for _, rec := range r.Records {
		b.Records = append(b.Records, pipeline.Record{Partition: rec.Partition, Offset: rec.Offset, Key: rec.Key, Value: rec.Value})
	}
	return b, nil
}

// Transact asks the adapter to copy b in one transaction: outs, and b's offsets sent with the
// group's metadata. A call that is not answered is Unknown, and the member must restart.
func (m *Member) Transact(ctx context.Context, b pipeline.Batch, outs []pipeline.Output) pipeline.Result {
	if err := m.notSelfDriven(OpTransact); err != nil {
		return pipeline.Result{Outcome: transport.Fail, Err: err}
	}
	req := &Request{Op: OpTransact, MemberID: b.MemberID, Generation: &b.Generation}
	for p, o := range b.Offsets() {
		req.Offsets = append(req.Offsets, Offset{Partition: p, Offset: o})
	}
	slices.SortFunc(req.Offsets, func(a, b Offset) int { return int(a.Partition - b.Partition) })
	for _, o := range outs {
		req.Outputs = append(req.Outputs, Output{Partition: o.Partition, Key: o.Key, Value: o.Value})
	}
	bound := 3 * m.cfg.Conn.RequestTimeout // several requests, and a rewind's stable fetch
	if d, ok := ctx.Deadline(); ok || ctx.Err() != nil {
		left := int64(0) // an ended context: nothing more than an abort
		if ctx.Err() == nil {
			left = max(time.Until(d), 0).Milliseconds()
		}
		req.TimeoutMS = &left
		bound = min(bound, time.Duration(left)*time.Millisecond+m.cfg.Conn.RequestTimeout)
	}
	m.watch.begin()
	defer m.watch.end()
	// The adapter bounds the transaction by the time left; the harness waits for its answer
	// even when ctx ends meanwhile, since only the adapter knows how far it got.
	r, err := m.call(context.WithoutCancel(ctx), req, bound+m.margin)
	if err != nil {
		return pipeline.Result{Outcome: transport.Unknown, Restart: true,
			Err: &transport.Error{Op: transport.OpWrite, Kind: transport.ErrClient, Stage: transport.StageCommit, Err: err}}
	}
	res := pipeline.Result{Token: r.Token.fencing(), Restart: r.Restart}
	switch r.Outcome {
	case OutcomeOK:
		res.Outcome = transport.OK
	case OutcomeFail:
		res.Outcome, res.Err = transport.Fail, failed(transport.OpWrite, r)
	default:
		res.Outcome, res.Err = transport.Unknown, failed(transport.OpWrite, r)
	}
	return res
}

// Close sends close, waits a moment for the adapter to exit, kills it if it has not, and
// closes the gateway. A self-driven member's close answer (what it did while closing) is
// dropped: Stop returns it.
func (m *Member) Close() { m.Stop() }

// SelfDriven reports whether the adapter's hello listed CapSelfDriven: the workload observes
// the member (Observe, Stop) instead of driving it.
func (m *Member) SelfDriven() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.selfDriven
}

func (m *Member) notSelfDriven(op string) error {
	if m.SelfDriven() {
		return &transport.Error{Op: transport.OpRead, Kind: transport.ErrInvalidConfig, Stage: transport.StageLocal,
			Err: fmt.Errorf("%s: the adapter %q is self-driven (capability %s): observe it", op, m.Adapter(), CapSelfDriven)}
	}
	return nil
}

// Observe asks a self-driven adapter what its member did, waiting for something until ctx's
// deadline (500 ms without one). Each transaction is bounded on the harness's clock: it began
// after the observe request the adapter names as the last it had received (or, naming none,
// after the adapter was started), and ended before the answer that reports it came. A call
// that fails (the adapter hung and was killed, or died) is Err: the next Observe starts a new
// adapter, a new member whose producer fences the old one.
func (m *Member) Observe(ctx context.Context) pipeline.Observation {
	if !m.SelfDriven() {
		return pipeline.Observation{Err: &transport.Error{Op: transport.OpRead, Kind: transport.ErrInvalidConfig, Stage: transport.StageLocal,
			Err: fmt.Errorf("observe: the adapter %q is not self-driven (its hello lists no %s)", m.Adapter(), CapSelfDriven)}}
	}
	wait := 500 * time.Millisecond
	if d, ok := ctx.Deadline(); ok {
		wait = max(time.Until(d), 0)
	}
	req := &Request{Op: OpObserve, WaitMS: wait.Milliseconds()}
	sent := time.Now()
	r, p, err := m.callOn(context.WithoutCancel(ctx), req, wait+m.cfg.Conn.RequestTimeout+m.margin)
	if err == nil && r.Outcome != OutcomeOK && !r.Restart {
		err = failed(transport.OpRead, r)
	}
	if err != nil {
		return pipeline.Observation{Err: err}
	}
	return m.observed(p, req.ID, sent, time.Now(), r)
}

// Stop closes the member as Close does and returns what a self-driven member did while
// closing (its client commits what it processed): close's answer, which may take up to two
// request timeouts.
func (m *Member) Stop() pipeline.Observation {
	m.mu.Lock()
	p, selfDriven := m.proc, m.selfDriven
	m.closed, m.proc = true, nil
	m.mu.Unlock()
	var obs pipeline.Observation
	if p != nil && !p.isDead() {
		bound := m.cfg.Conn.RequestTimeout
		if selfDriven {
			bound = 2*m.cfg.Conn.RequestTimeout + m.margin
		}
		ctx, cancel := context.WithTimeout(context.Background(), bound)
		sent := time.Now()
		r, err := p.call(ctx, &Request{Op: OpClose})
		cancel()
		if err == nil && selfDriven {
			obs = m.observed(p, 0, sent, time.Now(), r)
		}
		select {
		case <-p.exited:
		case <-time.After(time.Second):
		}
		p.kill()
	}
	m.gw.Close()
	return obs
}

// observed turns a self-driven adapter p's answer r to observe request id (0: close), sent
// at sent and answered at got, into what the member did.
func (m *Member) observed(p *adapterProc, id uint64, sent, got time.Time, r *Response) pipeline.Observation {
	m.obsMu.Lock()
	defer m.obsMu.Unlock()
	if m.obsProc != p {
		m.obsProc, m.obsSent = p, map[uint64]time.Time{}
	}
	if id != 0 {
		m.obsSent[id] = sent
	}
	obs := pipeline.Observation{Restart: r.Restart}
	if r.Restart && r.Error != nil {
		obs.Err = fmt.Errorf("adapter: %s", r.Error.Message)
	}
	for i := range r.Events {
		e := &r.Events[i]
		if err := e.check(); err != nil {
			m.cfg.Conn.Logger.Warn("self-driven adapter: malformed event", "err", err)
			obs.Err = err
			continue
		}
		switch e.Type {
		case EventPoll:
			b := &pipeline.Batch{MemberID: e.MemberID, Generation: e.Generation}
			for _, rec := range e.Records {
				b.Records = append(b.Records, pipeline.Record{Partition: rec.Partition, Offset: rec.Offset})
			}
			obs.Events = append(obs.Events, pipeline.Event{Poll: b})
		case EventTxn:
			began, ok := m.obsSent[e.After]
			if !ok {
				began = p.spawned // before any observe it knew of: after the adapter started
			}
			t := &pipeline.ObservedTxn{Ref: e.Ref, Number: e.Txn, TransactionalID: e.TransactionalID,
				MemberID: e.MemberID, Generation: e.Generation, Outputs: e.Outputs, Offsets: map[int32]int64{},
				Began: began, Ended: got}
			for _, in := range e.Inputs {
				t.Inputs = append(t.Inputs, pipeline.Record{Partition: in.Partition, Offset: in.Offset})
			}
			for _, o := range e.Offsets {
				t.Offsets[o.Partition] = o.Offset
			}
			t.Result.Token = e.Token.fencing()
			switch e.Outcome {
			case OutcomeOK:
				t.Result.Outcome = transport.OK
			case OutcomeFail:
				t.Result.Outcome, t.Result.Err = transport.Fail, failed(transport.OpWrite, &Response{Outcome: e.Outcome, Error: e.Error})
			default:
				t.Result.Outcome, t.Result.Err = transport.Unknown, failed(transport.OpWrite, &Response{Outcome: e.Outcome, Error: e.Error})
			}
			obs.Events = append(obs.Events, pipeline.Event{Txn: t})
		}
	}
	return obs
}

// failed turns a failed answer into the transport's error: Stage carries the adapter's
// outcome (transport.Classify).
func failed(op transport.Op, r *Response) error {
	msg := errors.New("adapter: " + r.Error.Message)
	if r.Error.Kind == "fenced" && op == transport.OpWrite {
		msg = fmt.Errorf("%w: %w", pipeline.ErrFenced, msg) // a member fenced by its generation
	}
	if r.Outcome == OutcomeUnknown {
		return &transport.Error{Op: op, Kind: ErrorKinds[r.Error.Kind], Stage: transport.StageCommit, Err: msg}
	}
	return &transport.Error{Op: op, Kind: ErrorKinds[r.Error.Kind], Stage: transport.StageLocal, Err: msg}
}

// Kafka API keys a member's gateway watches.
const (
	keyOffsetFetch            = 9
	keyJoinGroup              = 11
	keyAddOffsetsToTxn        = 25
	keyEndTxn                 = 26
	keyTxnOffsetCommit        = 28
	keyConsumerGroupHeartbeat = 68
)

// memberWatch is what a pipeline member's gateway sees of its client: the group identity it
// was given, the offsets it fetched, and the requests at which it pauses.
type memberWatch struct {
	input   string
	pause   func(point string)
	fetched func(pipeline.Fetch)
	// txnVersion is told the transaction version of each EndTxn the client sends (nil: none).
	txnVersion func(int)
	paused     atomic.Int64 // nanoseconds spent paused, ever

	mu          sync.Mutex
	selfDriven  bool // the member runs its own loop: every transaction is watched, none is a transact call
	inTxn       bool // a transact call is in flight
	offsetsSent bool // this transaction's first AddOffsetsToTxn or TxnOffsetCommit went out
	commitSent  bool // this transaction's first EndTxn that commits went out
	memberID    string
	generation  int32
	topics      map[[16]byte]string // topic ids, from Metadata answers (OffsetFetch v10 names topics by id)
}

func (w *memberWatch) setSelfDriven(on bool) {
	w.mu.Lock()
	w.selfDriven = on
	w.mu.Unlock()
}

func (w *memberWatch) begin() {
	w.mu.Lock()
	w.inTxn, w.offsetsSent, w.commitSent = true, false, false
	w.mu.Unlock()
}

func (w *memberWatch) end() {
	w.mu.Lock()
	w.inTxn = false
	w.mu.Unlock()
}

// answers reports whether the gateway must hand the answers to requests of key to answer.
func (w *memberWatch) answers(key int16) bool {
	return w != nil && (key == keyOffsetFetch || key == keyJoinGroup || key == keyConsumerGroupHeartbeat || key == keyMetadata)
}

// request is called with each request frame the client sends, before it goes upstream: at a
// pause point it blocks while the member is frozen there.
func (w *memberWatch) request(key, version int16, frame []byte) {
	if w == nil || (key != keyAddOffsetsToTxn && key != keyTxnOffsetCommit && key != keyEndTxn) {
		return
	}
	if key == keyEndTxn && w.txnVersion != nil {
		w.txnVersion(endTxnTransactionVersion(version))
	}
	w.mu.Lock()
	point := ""
	switch {
	case !w.inTxn && !w.selfDriven:
	case key == keyEndTxn && w.selfDriven:
		// A self-driven member's transactions come with no call to bracket them: each EndTxn
		// ends one, and the next transaction's points are armed again (a retried EndTxn
		// reaches the point again; a freeze stops a member once).
		req := kmsg.NewPtrEndTxnRequest()
		if readRequest(frame, version, req) == nil && req.Commit {
			point = pipeline.PointBeforeCommit
		}
		w.offsetsSent, w.commitSent = false, false
	case (key == keyAddOffsetsToTxn || key == keyTxnOffsetCommit) && !w.offsetsSent:
		// Under transaction version 1 AddOffsetsToTxn always comes first. Under version 2
		// a client may add the offsets partition implicitly (KIP-890: kafka-clients 4.x
		// does) and send only the TxnOffsetCommit: the point is the same, the offsets
		// about to join the transaction.
		w.offsetsSent, point = true, pipeline.PointAfterProduce
	case key == keyEndTxn && !w.commitSent:
		// Once per transaction, as a member in-process pauses: a client that retries its
		// EndTxn (kafka-clients does, on a new connection, after its request timeout) is
		// not stopped again; while frozen, its retry stalls on the member's links.
		req := kmsg.NewPtrEndTxnRequest()
		if readRequest(frame, version, req) == nil && req.Commit {
			w.commitSent, point = true, pipeline.PointBeforeCommit
		}
	}
	w.mu.Unlock()
	if point != "" {
		w.pause(point)
	}
}

// endTxnTransactionVersion is the transaction version an EndTxn of version v belongs to:
// KIP-890's clients send v5 or later only under transaction version 2 (the broker bumps the
// epoch at each end of such a transaction), and v4 or earlier under version 1.
func endTxnTransactionVersion(v int16) int {
	if v >= 5 {
		return 2
	}
	return 1
}

// answer reads an answer to a watched request before the client gets it.
func (w *memberWatch) answer(frame []byte, req sent) {
	switch req.key {
	case keyMetadata:
		resp := kmsg.NewPtrMetadataResponse()
		if readResponse(frame, req.version, resp) != nil {
			return
		}
		w.mu.Lock()
		for _, t := range resp.Topics {
			if t.Topic != nil && t.TopicID != [16]byte{} {
				w.topics[t.TopicID] = *t.Topic
			}
		}
		w.mu.Unlock()
	case keyJoinGroup:
		resp := kmsg.NewPtrJoinGroupResponse()
		if readResponse(frame, req.version, resp) != nil || resp.ErrorCode != 0 {
			return
		}
		w.mu.Lock()
		w.memberID, w.generation = resp.MemberID, resp.Generation
		w.mu.Unlock()
	case keyConsumerGroupHeartbeat:
		resp := kmsg.NewPtrConsumerGroupHeartbeatResponse()
		if readResponse(frame, req.version, resp) != nil || resp.ErrorCode != 0 {
			return
		}
		w.mu.Lock()
		if resp.MemberID != nil {
			w.memberID = *resp.MemberID
		}
		w.generation = resp.MemberEpoch
		w.mu.Unlock()
	case keyOffsetFetch:
		w.offsetFetch(frame, req)
	}
}

// offsetFetch reports where the client starts on the input partitions an OffsetFetch answer
// gave offsets for (a partition answered with an error, UNSTABLE_OFFSET_COMMIT say, is asked
// again).
func (w *memberWatch) offsetFetch(frame []byte, req sent) {
	if w.fetched == nil {
		return
	}
	resp := kmsg.NewPtrOffsetFetchResponse()
	if readResponse(frame, req.version, resp) != nil || resp.ErrorCode != 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	starts := map[int32]int64{}
	add := func(topic string, id [16]byte, p int32, offset int64, code int16) {
		if topic == "" {
			topic = w.topics[id]
		}
		if topic != w.input || code != 0 {
			return
		}
		starts[p] = max(offset, 0) // -1: nothing committed, the input's first offset
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			add(t.Topic, [16]byte{}, p.Partition, p.Offset, p.ErrorCode)
		}
	}
	for _, g := range resp.Groups {
		if g.ErrorCode != 0 {
			continue
		}
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				add(t.Topic, t.TopicID, p.Partition, p.Offset, p.ErrorCode)
			}
		}
	}
	if len(starts) == 0 {
		return
	}
	w.fetched(pipeline.Fetch{Starts: starts, MemberID: w.memberID, Generation: w.generation, Rewind: w.inTxn, Began: req.at})
}

// readRequest decodes a request frame's body into req (version set).
func readRequest(frame []byte, version int16, req kmsg.Request) error {
	req.SetVersion(version)
	// After size, key, version and correlation id: the client id (a nullable int16-length
	// string), then a flexible header's tagged fields.
	body := frame[12:]
	if len(body) < 2 {
		return errors.New("short request")
	}
	n := int(int16(binary.BigEndian.Uint16(body)))
	body = body[2:]
	if n > 0 {
		if n > len(body) {
			return errors.New("short request")
		}
		body = body[n:]
	}
	if req.IsFlexible() {
		n, err := skipTags(body)
		if err != nil {
			return err
		}
		body = body[n:]
	}
	return req.ReadFrom(body)
}

// readResponse decodes a response frame's body into resp (version set).
func readResponse(frame []byte, version int16, resp kmsg.Response) error {
	resp.SetVersion(version)
	body := frame[8:]
	if resp.IsFlexible() {
		n, err := skipTags(body)
		if err != nil {
			return err
		}
		body = body[n:]
	}
	return resp.ReadFrom(body)
}
