package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/fencecheck/fencecheck/transport/internal/knobs"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/twmb/franz-go/plugin/kslog"
)

// BrokerTransport is the CoordinationTransport that talks to a Kafka cluster. One transport
// serves every role of one process. It is safe for concurrent use; calls on one role are
// serialized, calls on different roles run in parallel.
type BrokerTransport struct {
	cfg  Config
	log  *slog.Logger
	opts []kgo.Opt // shared by the admin client and every producer
	tv   int       // the transaction version in effect: 1 or 2

	// admin sends admin requests, fetches and registrations (a plain idempotent producer).
	admin *kgo.Client
	adm   *kadm.Client

	topicsMu sync.Mutex
	topics   map[string]*topicInfo

	mu      sync.Mutex
	closed  bool
	roles   map[Role]*roleState
	closing sync.WaitGroup // producers being closed in the background
	// noWarmUp: the producers this transport builds skip warmUp (the no-warm-up mutant only).
	noWarmUp atomic.Bool
	// noConfirm: Describe returns its answer unconfirmed (the no-confirm mutant only).
	noConfirm atomic.Bool
}

// roleState is this process's view of one role.
type roleState struct {
	mu   sync.Mutex // serializes AcquireEpoch and writes: one transaction at a time
	held atomic.Pointer[holding]
}

// holding is an epoch this process holds: the minted token and the producer bound to it.
type holding struct {
	token  FencingToken
	client *kgo.Client
	warm   map[string]bool // topics whose partitions this producer has loaded (see warmUp)
	// noWarmUp skips warmUp: set only by the no-warm-up mutant (knobs.DisableWarmUp).
	noWarmUp bool
}

func init() {
	knobs.DisableWarmUp = func(tr any) { tr.(*BrokerTransport).noWarmUp.Store(true) }
	knobs.DisableConfirm = func(tr any) { tr.(*BrokerTransport).noConfirm.Store(true) }
}

// Start builds a transport against the cluster at cfg.Bootstrap. It validates cfg and opens
// the admin connection; it creates no topic and no producer.
//
// Errors: ErrInvalidConfig (naming the field) for an unusable config, and when
// TransactionVersion is 2 but the cluster has not finalized transaction.version 2; ErrAdmin
// when no bootstrap address accepts the admin connection.
func Start(ctx context.Context, cfg Config) (*BrokerTransport, error) {
	cfg, seeds, err := cfg.withDefaults()
	if err != nil {
		return nil, &Error{Op: OpStart, Kind: ErrInvalidConfig, Err: err, Stage: StageLocal}
	}
	t := &BrokerTransport{
		cfg:    cfg,
		log:    cfg.Logger,
		topics: map[string]*topicInfo{},
		roles:  map[Role]*roleState{},
	}
	t.opts = t.clientOpts(seeds)
	t.admin, err = kgo.NewClient(t.with(
		kgo.DefaultProduceTopic(cfg.Topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0),
		kgo.RecordDeliveryTimeout(cfg.RequestTimeout),
	)...)
	if err != nil {
		return nil, &Error{Op: OpStart, Kind: ErrInvalidConfig, Err: err, Stage: StageLocal}
	}
	t.adm = kadm.NewClient(t.admin)

	ctx, cancel := context.WithTimeout(ctx, cfg.RequestTimeout)
	defer cancel()
	tv2, err := t.clusterHasTV2(ctx, len(seeds))
	if err != nil {
		t.admin.Close()
		return nil, &Error{Op: OpStart, Kind: ErrAdmin, Err: err, Stage: StageSend}
	}
	switch {
	case cfg.TransactionVersion == 2 && !tv2:
		t.admin.Close()
		return nil, &Error{Op: OpStart, Kind: ErrInvalidConfig, Stage: StageLocal,
			Err: errors.New("TransactionVersion: 2 required, but the cluster has not finalized transaction.version 2")}
	case cfg.TransactionVersion == 1 || !tv2:
		t.tv = 1
	default:
		t.tv = 2
	}
	return t, nil
}

// TransactionVersion returns the transaction protocol version this transport's producers
// run: 1 (the epoch changes only on InitProducerId or a timeout abort) or 2 (KIP-890 part 2:
// every commit bumps the epoch).
func (t *BrokerTransport) TransactionVersion() int { return t.tv }

// Config returns the configuration in effect, defaults filled in.
func (t *BrokerTransport) Config() Config { return t.cfg }

// with returns the shared options followed by extra, in a new slice: appending to t.opts
// directly would let two concurrent calls write into its spare capacity and build a producer
// with the other's transactional id.
func (t *BrokerTransport) with(extra ...kgo.Opt) []kgo.Opt {
	return slices.Concat(t.opts, extra)
}

// clientOpts returns the options every client of this transport shares.
func (t *BrokerTransport) clientOpts(seeds []string) []kgo.Opt {
	cfg := t.cfg
	opts := []kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.ClientID(cfg.ClientID),
		kgo.WithLogger(kslog.New(slog.New(warnFloor{cfg.Logger.Handler()}))),
		// The metrics push doubled RSS under client churn and tells the harness nothing.
		kgo.DisableClientMetrics(),
		kgo.DialTimeout(cfg.RequestTimeout),
		// kgo retries internally; cap it so a call fails inside its deadline, not after.
		kgo.RetryTimeout(cfg.RequestTimeout),
		// Refresh metadata quickly after a leader or coordinator moves.
		kgo.MetadataMinAge(cfg.RequestTimeout / 20),
	}
	if cfg.TransactionVersion == 1 {
		// Speaking 3.9 protocol versions keeps KIP-890 part 2 off even on a TV2 cluster.
		opts = append(opts, kgo.MaxVersions(kversion.V3_9_0()))
	}
	dial := cfg.Dial
	if s := cfg.Security; s != nil && s.TLS != nil {
		dial = TLSDialer(dial, s.TLS)
	}
	if dial != nil {
		opts = append(opts, kgo.Dialer(dial))
	}
	if s := cfg.Security; s != nil {
		switch s.SASLMechanism {
		case SASLPlain:
			opts = append(opts, kgo.SASL(plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism()))
		case SASLScramSHA256:
			opts = append(opts, kgo.SASL(scram.Auth{User: s.Username, Pass: s.Password}.AsSha256Mechanism()))
		case SASLScramSHA512:
			opts = append(opts, kgo.SASL(scram.Auth{User: s.Username, Pass: s.Password}.AsSha512Mechanism()))
		}
	}
	return opts
}

// ClientOptions validates cfg as Start does and returns the franz-go options every client of a
// transport with cfg shares: seeds, client id, timeouts, the transaction version's protocol cap,
// the dialer (links, TLS) and SASL. The pipeline members build their clients on it, so that a
// cluster's links and security reach them as they reach the lease transport. Errors wrap
// ErrInvalidConfig and name the field.
func ClientOptions(cfg Config) ([]kgo.Opt, error) {
	c, seeds, err := cfg.withDefaults()
	if err != nil {
		return nil, &Error{Op: OpStart, Kind: ErrInvalidConfig, Err: err, Stage: StageLocal}
	}
	return (&BrokerTransport{cfg: c}).clientOpts(seeds), nil
}

// TLSDialer wraps base (or a plain net.Dialer) in a TLS client handshake with conf, naming
// the dialed host as the server unless conf names one; a failed handshake closes the
// connection. The transport dials this way with Security.TLS (kgo.Dialer cannot be combined
// with kgo.DialTLSConfig), and so do the clients of the conformance suite.
func TLSDialer(base func(ctx context.Context, network, addr string) (net.Conn, error), conf *tls.Config) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if base == nil {
		var d net.Dialer
		base = d.DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := base(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		c := conf.Clone()
		if c.ServerName == "" {
			host, _, _ := net.SplitHostPort(addr)
			c.ServerName = host
		}
		tc := tls.Client(conn, c)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, err
		}
		return tc, nil
	}
}

// clusterHasTV2 asks a broker for its finalized features; it is also the check that the
// admin connection works.
//
// kgo sends the request to the next seed in turn and does not retry a connection that was
// accepted and closed at once (it takes that for a TLS or SASL mismatch). A link proxy whose
// broker is down does exactly that, so one dead broker among the seeds failed Start about
// once per seed count. Each seed is tried once before giving up.
func (t *BrokerTransport) clusterHasTV2(ctx context.Context, seeds int) (bool, error) {
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName = "fencecheck"
	req.ClientSoftwareVersion = "1"
	var resp *kmsg.ApiVersionsResponse
	var err error
	for range seeds {
		if resp, err = req.RequestWith(ctx, t.admin); err == nil || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		if cause := securityCause(err, t.cfg.Security); cause != "" {
			return false, fmt.Errorf("no bootstrap address accepted the admin connection: %s: %w", cause, err)
		}
		return false, fmt.Errorf("no bootstrap address accepted the admin connection: %w", err)
	}
	for _, f := range resp.FinalizedFeatures {
		if f.Name == "transaction.version" {
			return f.MaxVersionLevel >= 2, nil
		}
	}
	return false, nil
}

// role returns the state of role, or ErrClosed.
func (t *BrokerTransport) role(op Op, role Role) (*roleState, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, &Error{Op: op, Role: role, Kind: ErrClosed, Stage: StageLocal}
	}
	rs := t.roles[role]
	if rs == nil {
		rs = &roleState{}
		t.roles[role] = rs
	}
	return rs, nil
}

// checkOpen returns ErrClosed once Close has begun.
func (t *BrokerTransport) checkOpen(op Op, role Role) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return &Error{Op: op, Role: role, Kind: ErrClosed, Stage: StageLocal}
	}
	return nil
}

// bound gives a call its deadline: the caller's, or RequestTimeout, whichever comes first.
func (t *BrokerTransport) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, t.cfg.RequestTimeout)
}

// HeldToken returns the token AcquireEpoch minted for role in this process, if it still
// holds it. It is what this process believes; Describe asks the cluster.
func (t *BrokerTransport) HeldToken(role Role) (FencingToken, bool) {
	if h := t.holding(role); h != nil {
		return h.token, true
	}
	return FencingToken{}, false
}

// BoundProducer returns the transactional producer bound to this process's epoch for role,
// or nil when it holds none. The broker fences every write made with it once a newer holder
// takes the role. Prefer WriteFenced, which runs the transaction and classifies the outcome;
// a caller that uses the producer directly must not run a transaction while a transport call
// on the same role is in flight.
func (t *BrokerTransport) BoundProducer(role Role) *kgo.Client {
	if h := t.holding(role); h != nil {
		return h.client
	}
	return nil
}

func (t *BrokerTransport) holding(role Role) *holding {
	t.mu.Lock()
	rs := t.roles[role]
	t.mu.Unlock()
	if rs == nil {
		return nil
	}
	return rs.held.Load()
}

// release forgets h (if it is still the holding of rs) and closes its producer in the
// background: kgo's Close waits for in-flight requests, and no call may block past its
// deadline.
func (t *BrokerTransport) release(rs *roleState, h *holding) {
	if h == nil || !rs.held.CompareAndSwap(h, nil) {
		return
	}
	t.closeClient(h.client)
}

func (t *BrokerTransport) closeClient(cl *kgo.Client) {
	t.closing.Add(1)
	go func() {
		defer t.closing.Done()
		cl.Close()
	}()
}

// Close closes every producer and connection this transport opened and waits (bounded by
// ctx) until they are closed. Calls after Close return ErrClosed. Close is idempotent.
func (t *BrokerTransport) Close(ctx context.Context) error {
	t.mu.Lock()
	if !t.closed {
		t.closed = true
		for _, rs := range t.roles {
			t.release(rs, rs.held.Load())
		}
		t.closeClient(t.admin)
	}
	t.mu.Unlock()

	done := make(chan struct{})
	go func() { t.closing.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("close: producers still closing: %w", ctx.Err())
	}
}

// await runs fn, which may ignore its context (kgo's in-flight produces and commits do), and
// returns when it finishes or ctx ends. ok is false when ctx ended first; fn then keeps
// running until the caller closes the client it uses.
func await(ctx context.Context, fn func() error) (err error, ok bool) {
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err, true
	case <-ctx.Done():
		return ctx.Err(), false
	}
}

// warnFloor passes records at warn and above: franz-go's info logs are per request.
type warnFloor struct{ slog.Handler }

func (w warnFloor) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && w.Handler.Enabled(ctx, l)
}
func (w warnFloor) WithAttrs(as []slog.Attr) slog.Handler { return warnFloor{w.Handler.WithAttrs(as)} }
func (w warnFloor) WithGroup(n string) slog.Handler       { return warnFloor{w.Handler.WithGroup(n)} }
