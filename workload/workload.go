package workload

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/cluster/links"
	"github.com/fencecheck/fencecheck/transport"
	"github.com/twmb/franz-go/pkg/kgo"
)

// flushEvery bounds how much history a killed run can lose.
const flushEvery = 100 * time.Millisecond

// startConcurrency bounds how many transports start at once: each start creates links
// through the toxiproxy API and dials every broker.
const startConcurrency = 8

// Workload is one run's processes, members and readers, with the recording client that
// writes their operations into the history. Build it with New, then Run it once, have the
// runner heal the faults, call FinalReads, and Close it.
type Workload struct {
	cfg     Config
	cl      cluster.Cluster
	log     *slog.Logger
	seed    uint64
	rec     *recorder
	faultID func() int64
	// pauseWindows: Freeze records member-pause windows (see WithoutPauseWindows).
	startTransport StartFunc
	// processSecurity, when set, gives a process its own principal (WithProcessSecurity).
	processSecurity func(process int) *cluster.Security
	pauseWindows    bool
	roles           []string
	workTopic       string

	procs   []*process
	members []*member
	readers []*reader

	pauses   pauses
	stopping chan struct{} // closed when Run stops the members
	ran      atomic.Bool
	closed   atomic.Bool
}

// process is one transport instance and the commit gate in its dial path.
type process struct {
	n    int    // 1-based, as the cluster's links number processes
	name string // "p3"
	tr   Transport
	gate *commitGate
	// What the transport reported when it started (see reported): the transaction version
	// its producers speak (0: it did not say), whether it can describe, the client's name.
	tv       int
	describe bool
	client   string
}

// reported fills what p's transport says about itself: a transport that does not say speaks
// the cluster's transaction version and can describe. An exec adapter reports what its client
// does (transport/lineproto).
func (p *process) reported() {
	p.describe = true
	if r, ok := p.tr.(interface{ TransactionVersion() int }); ok {
		p.tv = r.TransactionVersion()
	}
	if r, ok := p.tr.(interface{ CanDescribe() bool }); ok {
		p.describe = r.CanDescribe()
	}
	if r, ok := p.tr.(interface{ Adapter() string }); ok {
		p.client = r.Adapter()
	}
}

// ProcessMeta fills the history header fields that the processes' transports determine:
// the transaction version they speak (the one most of them speak; the others per process,
// and the cluster's when it differs), the processes that cannot describe, and the client's
// name. Call it after New, before writing the header.
func (wl *Workload) ProcessMeta(m *history.Meta) {
	count := map[int]int{}
	for _, p := range wl.procs {
		if p.tv != 0 {
			count[p.tv]++
		}
	}
	tv := 0
	for v, n := range count {
		if n > count[tv] || (n == count[tv] && v < tv) {
			tv = v
		}
	}
	if tv != 0 {
		if m.TransactionVersion != 0 && m.TransactionVersion != tv {
			m.ClusterTransactionVersion = m.TransactionVersion
		}
		m.TransactionVersion = tv
	}
	for _, p := range wl.procs {
		if p.tv != 0 && p.tv != tv {
			if m.ProcessTransactionVersions == nil {
				m.ProcessTransactionVersions = map[string]int{}
			}
			m.ProcessTransactionVersions[p.name] = p.tv
		}
		if !p.describe {
			m.NoDescribe = append(m.NoDescribe, p.name)
		}
		if m.Client == "" {
			m.Client = p.client
		}
	}
}

// Transport is what the workload drives in each process: *transport.BrokerTransport, or a
// wrapper of it (fencecheck's deliberately broken mutants, which prove the checker has teeth).
type Transport interface {
	transport.CoordinationTransport
	WriteFenced(ctx context.Context, role transport.Role, token transport.FencingToken, recs ...*kgo.Record) error
	ReadPartition(ctx context.Context, topic string, partition int32) ([]*kgo.Record, error)
	EnsureTopic(ctx context.Context, topic string, partitions int32) (int32, error)
	WaitStable(ctx context.Context, topic string, partition int32) error
	Close(ctx context.Context) error
}

// StartFunc builds a process's transport; transport.Start is the default (see WithTransport).
type StartFunc func(ctx context.Context, cfg transport.Config) (Transport, error)

func startReal(ctx context.Context, cfg transport.Config) (Transport, error) {
	tr, err := transport.Start(ctx, cfg)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return tr, nil
}

// reader is a loop of reads and describes on one process.
type reader struct {
	proc      *process
	plan      *ReaderPlan
	cl        *client
	workTopic string
}

// Option configures New.
type Option interface{ apply(*options) }

type options struct {
	security    func(process int) *cluster.Security
	startTr     StartFunc
	start       time.Time
	faultIDs    func() int64
	noPauseRecs bool
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// WithStart sets the run's time base: history times are nanoseconds since start, so the
// workload's events and the nemesis's fault windows share one clock. Default: when New is
// called.
func WithStart(start time.Time) Option { return optionFunc(func(o *options) { o.start = start }) }

// WithFaultIDs sets the allocator of fault window ids, shared with the nemesis so member
// pauses and other faults never collide. Default: a counter of the workload's own from 1.
func WithFaultIDs(next func() int64) Option {
	return optionFunc(func(o *options) { o.faultIDs = next })
}

// WithTransport makes every process's transport with start instead of transport.Start. The
// final reads always use transport.Start: they are the reference the checker judges by.
func WithTransport(start StartFunc) Option { return optionFunc(func(o *options) { o.startTr = start }) }

// WithProcessSecurity gives process n (1-based) its own client security, when security(n)
// is not nil, instead of the cluster's: a process that authenticates as another principal,
// say one the ACLs deny every transactional id. Only its SASL part is used: the links speak
// the cluster's TLS.
func WithProcessSecurity(security func(process int) *cluster.Security) Option {
	return optionFunc(func(o *options) { o.security = security })
}

// WithoutPauseWindows leaves the recording of member-pause windows to the caller: the
// nemesis records every fault it injects, freezes included, so the workload must not record
// them a second time. Default: Freeze records its windows.
func WithoutPauseWindows() Option { return optionFunc(func(o *options) { o.noPauseRecs = true }) }

// New validates cfg, checks that the file-descriptor limit can hold cfg.Processes, starts
// one transport per process (each dialing through its own links from c), creates the
// coordination and work topics, and lays out the members and readers. It records nothing;
// Run does. On error nothing is left running. It logs to log as given: the caller names the
// component and the run (seed included).
func New(ctx context.Context, cfg Config, c cluster.Cluster, w *history.Writer, log *slog.Logger, seed uint64, opts ...Option) (_ *Workload, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if c == nil || w == nil {
		return nil, errors.New("workload: a cluster and a history writer are required")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	o := options{start: time.Now()}
	for _, opt := range opts {
		opt.apply(&o)
	}
	if o.startTr == nil {
		o.startTr = startReal
	}
	if o.faultIDs == nil {
		var n atomic.Int64
		o.faultIDs = func() int64 { return n.Add(1) }
	}
	info := c.Info()
	if err := checkFileLimit(cfg, info, c.Network()); err != nil {
		return nil, err
	}

	wl := &Workload{
		cfg: cfg, cl: c, log: log, seed: seed, faultID: o.faultIDs, pauseWindows: !o.noPauseRecs,
		startTransport: o.startTr, processSecurity: o.security,
		workTopic: cfg.workTopic(), stopping: make(chan struct{}),
	}
	for i := range cfg.Roles {
		wl.roles = append(wl.roles, RoleName(i))
	}
	wl.pauses.active = map[*Pause]struct{}{}
	wl.rec = &recorder{w: w, start: o.start, lease: cfg.Lease.D(), log: wl.log,
		stats: newCounters(cfg.Lease.D(), wl.roles), broken: make(chan struct{})}

	defer func() {
		if err != nil {
			_ = wl.Close(context.WithoutCancel(ctx))
		}
	}()
	began := time.Now()
	if err := wl.startProcesses(ctx); err != nil {
		return nil, err
	}
	if err := wl.createTopics(ctx); err != nil {
		return nil, err
	}
	wl.layout()
	wl.log.Info("workload ready", "processes", cfg.Processes, "roles", cfg.Roles, "members", len(wl.members),
		"readers", len(wl.readers), "took", time.Since(began).Round(time.Millisecond))
	return wl, nil
}

// startProcesses starts the transports, startConcurrency at a time.
func (wl *Workload) startProcesses(ctx context.Context) error {
	cfg := wl.cfg
	wl.procs = make([]*process, cfg.Processes)
	sem := make(chan struct{}, startConcurrency)
	errs := make([]error, cfg.Processes)
	var wg sync.WaitGroup
	for i := range wl.procs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			n := i + 1
			p := &process{n: n, name: links.ProcessName(n), gate: &commitGate{arms: map[string]*gateArm{}, fire: wl.freeze}}
			dial, err := wl.cl.Links(ctx, n)
			if err != nil {
				errs[i] = fmt.Errorf("links of %s: %w", p.name, err)
				return
			}
			tc := wl.transportConfig(p.name)
			tc.Dial = p.gate.dial(dial)
			// A secured cluster's links speak TLS themselves (links.Network.SetTLS), so the
			// transport adds only SASL on top of them.
			sec := cluster.ClientSecurity(wl.cl)
			if wl.processSecurity != nil {
				if own := wl.processSecurity(n); own != nil {
					sec = own
				}
			}
			tc.Security = transportSecurity(sec.SASLOnly())
			if p.tr, err = wl.startTransport(ctx, tc); err != nil {
				errs[i] = fmt.Errorf("start %s: %w", p.name, err)
				return
			}
			p.reported()
			wl.procs[i] = p
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// transportConfig is the transport configuration of process (a process of the run, or the
// final reads): on the cluster's bootstrap addresses, dialing them directly until the caller
// sets Dial.
func (wl *Workload) transportConfig(process string) transport.Config {
	tc := transport.NewConfig(strings.Join(wl.cl.Bootstrap(), ","), wl.cfg.Lease.D())
	tc.ClientID = "fencecheck-" + process
	tc.Topic = wl.cfg.topic()
	tc.RequestTimeout = wl.cfg.RequestTimeout.D()
	tc.TopicPartitions = wl.cfg.TopicPartitions
	tc.TopicReplication = wl.cfg.replication(wl.cl.Info().Brokers)
	tc.TransactionVersion = wl.cfg.TransactionVersion
	tc.Logger = wl.log.With("process", process)
	tc.Security = transportSecurity(cluster.ClientSecurity(wl.cl))
	return tc
}

// transportSecurity is the transport's form of a cluster's client security.
func transportSecurity(s *cluster.Security) *transport.ClientSecurity {
	if !s.Enabled() {
		return nil
	}
	return &transport.ClientSecurity{TLS: s.TLS, SASLMechanism: s.SASLMechanism, Username: s.Username, Password: s.Password}
}

// createTopics creates the coordination and work topics through the first process and
// checks the work topic's partition count; with Retention it sets retention.ms on both.
func (wl *Workload) createTopics(ctx context.Context) error {
	tr := wl.procs[0].tr
	if _, err := tr.EnsureTopic(ctx, wl.cfg.topic(), wl.cfg.TopicPartitions); err != nil {
		return fmt.Errorf("coordination topic: %w", err)
	}
	n, err := tr.EnsureTopic(ctx, wl.workTopic, wl.cfg.workPartitions())
	if err != nil {
		return fmt.Errorf("work topic: %w", err)
	}
	if n < wl.cfg.workPartitions() {
		return fmt.Errorf("work topic %q exists with %d partitions, the workload needs %d: %w", wl.workTopic, n, wl.cfg.workPartitions(), ErrConfig)
	}
	if wl.cfg.Retention <= 0 {
		return nil
	}
	admin, err := cluster.AdminClient(wl.cl, wl.log)
	if err != nil {
		return fmt.Errorf("retention: %w", err)
	}
	defer admin.Close()
	ms := fmt.Sprint(wl.cfg.Retention.D().Milliseconds())
	resp, err := kadm.NewClient(admin).AlterTopicConfigs(ctx,
		[]kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: &ms}}, wl.cfg.topic(), wl.workTopic)
	if err == nil {
		for _, r := range resp {
			err = errors.Join(err, r.Err)
		}
	}
	if err != nil {
		return fmt.Errorf("retention: set retention.ms=%s: %w", ms, err)
	}
	return nil
}

// layout creates the members (members of a role on distinct processes) and the readers.
func (wl *Workload) layout() {
	cfg := wl.cfg
	plan := NewPlan(cfg, wl.seed)
	payload := make([]byte, cfg.Load.WorkPayload)
	for i := range payload {
		payload[i] = 'a' + byte(i%26)
	}
	for r, role := range wl.roles {
		for j := range cfg.MembersPerRole {
			p := wl.procs[cfg.processOf(r, j)-1]
			id := MemberName(j)
			wl.members = append(wl.members, &member{
				w: wl, proc: p, role: role, id: id, name: p.name + "/" + role + "/" + id,
				txnID: transport.TransactionalID(cfg.topic(), transport.Role(role)),
				workP: int32(r) % cfg.workPartitions(), payload: payload,
				plan: plan.Member(r, j), cl: wl.rec.newClient(p.tr, p.name, id),
			})
		}
	}
	for i := range cfg.Readers {
		p := wl.procs[i%cfg.Processes]
		wl.readers = append(wl.readers, &reader{proc: p, plan: plan.Reader(i), cl: wl.rec.newClient(p.tr, p.name, ""), workTopic: wl.workTopic})
	}
}

// Run runs the members and readers for d (or until ctx ends), then stops them: no new
// operation starts, pauses end, and operations in flight get up to RequestTimeout to finish
// before their calls are cancelled. It flushes the history every 100 ms and at the end. It
// returns ctx's error when ctx ended first, and the history's error if it could not be
// written. Run runs once.
func (wl *Workload) Run(ctx context.Context, d time.Duration) error {
	if !wl.ran.CompareAndSwap(false, true) {
		return errors.New("workload: Run called twice")
	}
	if wl.closed.Load() {
		return errors.New("workload: Run after Close")
	}
	// Calls are not cut by ctx: stopping lets them finish, so the history does not end with
	// a burst of cancelled (unknown) operations.
	callCtx, cancelCalls := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelCalls()
	stopFlush := wl.flushLoop()
	defer stopFlush()

	wl.pauses.mu.Lock()
	wl.pauses.open = true
	wl.pauses.mu.Unlock()
	wl.rec.stats.begin.Store(wl.rec.now())
	wl.log.Info("workload running", "for", d)

	var wg sync.WaitGroup
	for _, m := range wl.members {
		wg.Go(func() { m.run(callCtx) })
	}
	for _, r := range wl.readers {
		wg.Go(func() { r.run(callCtx, wl.stopping) })
	}

	t := time.NewTimer(d)
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-wl.rec.broken: // nothing more can be recorded: the run is over
	}
	t.Stop()
	wl.stop()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	grace := time.NewTimer(wl.cfg.RequestTimeout.D() + time.Second)
	select {
	case <-done:
	case <-grace.C:
		wl.log.Warn("operations still in flight after the grace period; cancelling them")
		cancelCalls()
		<-done
	}
	grace.Stop()
	wl.rec.stats.end.Store(wl.rec.now())
	s := wl.Stats()
	wl.log.Info("workload stopped", "ops", s.Ops, "ops_per_s", int(s.OpsPerSecond), "handoffs", s.Handoffs,
		"fences", s.Fences, "held", fmt.Sprintf("%.3f", s.HeldFraction))
	return errors.Join(wl.rec.w.Flush(), wl.rec.failed(), ctx.Err())
}

// stop closes the run to new operations and pauses.
func (wl *Workload) stop() {
	wl.pauses.mu.Lock()
	wl.pauses.open = false
	wl.pauses.mu.Unlock()
	select {
	case <-wl.stopping:
	default:
		close(wl.stopping)
	}
	wl.ThawAll()
}

// flushLoop flushes the history every flushEvery until the returned function is called.
func (wl *Workload) flushLoop() (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(flushEvery)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				_ = wl.rec.w.Flush() // a failure sticks in the writer; Run reports it
			}
		}
	}()
	return func() { close(quit); <-done }
}

func (r *reader) run(ctx context.Context, stop <-chan struct{}) {
	for {
		c := r.plan.Next()
		if !sleep(ctx, stop, c.Wait) {
			return
		}
		switch c.Kind {
		case ReadRole:
			_, _ = r.cl.ReadRole(ctx, history.KindRead, RoleName(c.Role))
		case DescribeRole:
			if !r.proc.describe { // the plan stays the seed's; a transport without describe reads
				_, _ = r.cl.ReadRole(ctx, history.KindRead, RoleName(c.Role))
				break
			}
			_, _, _ = r.cl.Describe(ctx, RoleName(c.Role))
		case ReadWork:
			_, _ = r.cl.ReadWork(ctx, history.KindRead, r.workTopic, c.Partition)
		}
	}
}

// Stats returns a snapshot of the run's counters.
func (wl *Workload) Stats() Stats {
	s := wl.rec.stats.snapshot(wl.rec.now())
	held := map[string]bool{}
	for _, h := range wl.Holders() {
		held[h.Role] = true
		s.Believers++
	}
	s.RolesHeld = len(held)
	return s
}

// Holders lists the members that believe they hold their role now, in member order.
func (wl *Workload) Holders() []Holding {
	var out []Holding
	for _, m := range wl.members {
		if h, ok := m.holding(); ok {
			out = append(out, h)
		}
	}
	return out
}

// Acquiring reports whether a member of role has an acquire call in flight: a holder may be
// about to be deposed (a handoff is settling).
func (wl *Workload) Acquiring(role string) bool {
	for _, m := range wl.members {
		if m.role == role && m.acquiring.Load() {
			return true
		}
	}
	return false
}

// Start returns the run's time base (see WithStart): history times are nanoseconds since it.
func (wl *Workload) Start() time.Time { return wl.rec.start }

// Close stops the members if they still run, closes every transport (bounded by ctx) and
// flushes the history. It does not close the history writer, which belongs to the caller.
// Close is idempotent.
func (wl *Workload) Close(ctx context.Context) error {
	if !wl.closed.CompareAndSwap(false, true) {
		return nil
	}
	wl.stop()
	errs := make([]error, len(wl.procs))
	var wg sync.WaitGroup
	for i, p := range wl.procs {
		if p == nil || p.tr == nil {
			continue
		}
		wg.Go(func() { errs[i] = p.tr.Close(ctx) })
	}
	wg.Wait()
	if err := wl.rec.w.Flush(); !errors.Is(err, history.ErrClosed) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
