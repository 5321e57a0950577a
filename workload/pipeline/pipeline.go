// Package pipeline is fencecheck's exactly-once pipeline workload: the harness writes numbered
// records to an input topic, outside the faults, while the members of one consumer group copy
// them to an output topic, each in transactions that also commit the input offsets with the
// group's metadata (transport/pipeline). Every record sent and every transaction is recorded
// in the history; after the run the final reads take the committed output and the group's
// committed offsets, against which the checker judges exactly-once (docs/pipelines.md).
package pipeline

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/cluster/links"
	"github.com/fencecheck/fencecheck/transport"
	"github.com/fencecheck/fencecheck/transport/pipeline"
)

// Process names of the harness's own actors in the history.
const (
	// SeederProcess writes the input records (send operations).
	SeederProcess = "seeder"
	// FinalProcess makes the final reads.
	FinalProcess = "final"
)

// Stats count what a run did: records sent (and written in aborted transactions),
// transactions by outcome, the input records the committed transactions copied, member
// restarts.
type Stats struct {
	Sent, SendsFailed, Aborted int64
	Committed, Failed, Unknown int64
	Copied                     int64
	Restarts                   int64
}

// Workload is one pipeline run on a cluster: New, Run, FinalReads, Close.
type Workload struct {
	cfg Config
	cl  cluster.Cluster
	log *slog.Logger
	w   *history.Writer

	group, input, output string

	start   time.Time
	lastOp  atomic.Int64
	errOnce sync.Once
	err     atomic.Pointer[error]

	seeder  *kgo.Client
	sendSeq atomic.Int64
	sends   sync.WaitGroup // sends whose completion is not yet recorded
	// lookFor bounds the final look at open transactions (finalTxns); 0: the transaction
	// timeout and 15 s. Tests shorten it.
	lookFor time.Duration
	// aborter writes the input records of Config.AbortedInput, one transaction each, which
	// it aborts; abortMu orders its transactions (and guards aborter, which a failure
	// replaces). abortRng, under rngMu, chooses the records; nil without AbortedInput.
	aborter  *kgo.Client
	abortMu  sync.Mutex
	abortRng *rand.Rand
	rngMu    sync.Mutex

	members []*member
	// obsTxns maps a self-driven member's transactions to their txn operations (observe.go).
	obsMu   sync.Mutex
	obsTxns map[obsKey]int64
	stats   struct{ sent, sendsFailed, aborted, committed, failed, unknown, copied, restarts atomic.Int64 }
	// newMember starts a member (Options.NewMember, or pipeline.New of Config.Member).
	newMember func(ctx context.Context, cfg pipeline.Config) (pipeline.Member, error)
	ran       atomic.Bool
}

// member is one member of the group and the loop that drives it.
type member struct {
	wl       *Workload
	name     string // m1, m2, ...
	process  string // p1, p2, ...
	processN int
	txnID    string
	dial     cluster.DialFunc // the process's links, through gate
	gate     *gate
	rng      *rand.Rand
	// agg are the running aggregates of the stateful variant per input partition, under mu
	// (state.go): a partition absent is restored before it is applied again.
	agg map[int32]aggregate
	// offsetsAt is when the transaction in flight went on past PointAfterProduce to send its
	// offsets (history time; 0 before). Set from the pause point, which an exec member's
	// gateway calls from its own goroutine.
	offsetsAt atomic.Int64
	// assignedAt is when the member in hand was first given partitions (unix nanoseconds; 0:
	// not yet): its first assignment's offset fetch. Config.Restart times its stay from it.
	assignedAt atomic.Int64
	// txnVersion is the transaction version of the last EndTxn the member sent in the
	// transaction in flight, as its gateway saw it (0: none seen).
	txnVersion atomic.Int64
	// started is the member New started before the run's clock, which run takes over (nil
	// once taken, or when its start failed: run starts one then); Close closes it otherwise.
	started pipeline.Member

	mu sync.Mutex
	// held is, per input partition, the history time the member last showed it held it
	// (Owner): a poll that returned records of it, or an assignment's fetch of its offsets.
	// The fetch counts so that a new owner that has not polled the partition yet is its
	// holder, not the member that polled it last and lost it since.
	held map[int32]int64
	// The freeze (freeze.go): armed until the member reaches its pause point, frozen while it
	// is stopped there; thaw ends it; froze and resumed are its span since Start.
	armed, frozen, thawClosed bool
	armAt                     string // the pause point armed
	armFor                    time.Duration
	thaw                      chan struct{}
	froze, resumed            time.Duration
}

// Options are a run's own settings.
type Options struct {
	// Tag makes the run's topic and group names its own ("fencecheck.TAG.input", ...): a
	// cluster that a suite reuses keeps the last run's. Default: the time of New.
	Tag string
	// Start is the history's time base. Default: the time of New.
	Start time.Time
	// Seed seeds the members' random choices (Config.Restart).
	Seed   uint64
	Logger *slog.Logger
	// NewMember, when set, starts each member instead of pipeline.New with Config.Member:
	// a member served by an exec adapter (lineproto.StartMember). Member names it in the
	// history's header.
	NewMember func(ctx context.Context, cfg pipeline.Config) (pipeline.Member, error)
	Member    string
}

// New creates the topics and the seeder's client, and records nothing: the caller writes the
// history's header (with Meta) after New, and Run writes the preload, then starts the
// members.
func New(ctx context.Context, cfg Config, cl cluster.Cluster, w *history.Writer, opts Options) (*Workload, error) {
	cfg, err := cfg.WithDefaults()
	if err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tag := opts.Tag
	if tag == "" {
		tag = fmt.Sprintf("%x", time.Now().UnixNano())
	}
	start := opts.Start
	if start.IsZero() {
		start = time.Now()
	}
	seed := opts.Seed
	if opts.NewMember != nil {
		cfg.Member = opts.Member
	}
	newMember := opts.NewMember
	if newMember == nil {
		newMember = func(ctx context.Context, c pipeline.Config) (pipeline.Member, error) {
			return pipeline.New(ctx, cfg.Member, c)
		}
	}
	wl := &Workload{
		cfg: cfg, cl: cl, log: log, w: w, start: start, newMember: newMember,
		group: "fencecheck." + tag + ".group", input: "fencecheck." + tag + ".input", output: "fencecheck." + tag + ".output",
	}
	if err := wl.createTopics(ctx); err != nil {
		return nil, err
	}
	wl.warmGroupCoordinator(ctx)
	seeder, err := wl.seederClient(kgo.ClientID("fencecheck-seeder"))
	if err != nil {
		return nil, fmt.Errorf("seeder: %w", err)
	}
	wl.seeder = seeder
	if cfg.AbortedInput > 0 {
		wl.abortRng = rand.New(rand.NewPCG(seed, 0))
		if wl.aborter, err = wl.newAborter(); err != nil {
			seeder.Close()
			return nil, err
		}
	}
	for i := range cfg.Members {
		n := i%cfg.Processes + 1
		dial, err := cl.Links(ctx, n)
		if err != nil {
			seeder.Close()
			return nil, fmt.Errorf("links of %s: %w", links.ProcessName(n), err)
		}
		g := &gate{}
		wl.members = append(wl.members, &member{
			wl: wl, name: fmt.Sprintf("m%d", i+1), process: links.ProcessName(n), processN: n,
			txnID: wl.txnID(i), dial: g.dial(dial), gate: g,
			rng: rand.New(rand.NewPCG(seed, uint64(i+1))), held: map[int32]int64{}, agg: map[int32]aggregate{},
		})
	}
	return wl, nil
}

// StartMembers starts every member before the run's clock, as the lease workload opens its
// transports: an exec adapter's member boots a runtime (a JVM took 4 to 15 s under load),
// which must not eat into a scenario's schedule. Call it after the history's header is
// written and before Run: a member's client may join the group and fetch its offsets at once,
// and that fetch is recorded. One that fails to start is started again by its loop, which
// judges the error.
func (wl *Workload) StartMembers(ctx context.Context) {
	var wg sync.WaitGroup
	for _, m := range wl.members {
		wg.Go(func() {
			mb, err := wl.newMember(ctx, wl.memberConfig(m))
			if err != nil {
				wl.log.Debug("start member before the run", "member", m.name, "err", err)
				return
			}
			m.started = mb
		})
	}
	wg.Wait()
	wl.awaitSelfDrivenOwners(ctx)
}

// ownersFor bounds awaitSelfDrivenOwners.
const ownersFor = time.Minute

// awaitSelfDrivenOwners waits, when the members are self-driven (Kafka Streams), until every
// input partition has an owner (a member's fetch of its offsets on an assignment) and, when
// there are no more members than partitions, every member was assigned some, at most
// ownersFor. A self-driven member joins its group and takes its assignment on its own as soon
// as it starts, but a group of Streams instances took 15 s and more to form on a loaded
// machine: a scenario's step at 2 s ("freeze holder of in0") found no owner and never took
// hold. A driven member joins on its first poll, in the run, and is not waited for.
func (wl *Workload) awaitSelfDrivenOwners(ctx context.Context) {
	self := false
	for _, m := range wl.members {
		if m.started != nil {
			if _, ok := selfDriven(m.started); ok {
				self = true
			}
		}
	}
	if !self {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, ownersFor)
	defer cancel()
	start := time.Now()
	for {
		missing := 0
		for _, role := range wl.Roles() {
			if _, ok := wl.Owner(role); !ok {
				missing++
			}
		}
		if len(wl.members) <= int(wl.cfg.Partitions) {
			// Every member assigned something too: the group has formed with all of them,
			// not only its first member, whose partitions the others' joins would move.
			for _, m := range wl.members {
				m.mu.Lock()
				if len(m.held) == 0 {
					missing++
				}
				m.mu.Unlock()
			}
		}
		if missing == 0 {
			wl.log.Info("self-driven members own every input partition", "took", time.Since(start))
			return
		}
		select {
		case <-ctx.Done():
			wl.log.Warn("self-driven members: input partitions without an owner before the run", "missing", missing, "waited", time.Since(start))
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// txnID is member i's transactional id; with a transactional id per input partition, the
// prefix every member shares (pipeline.PartitionTransactionalID).
func (wl *Workload) txnID(i int) string {
	if wl.cfg.TxnIDs == TxnIDsPartition {
		return wl.group + "-in"
	}
	return fmt.Sprintf("%s-m%d", wl.group, i+1)
}

// Meta fills in the history header's description of the run.
func (wl *Workload) Meta(m *history.Meta) {
	m.Workload = history.WorkloadPipeline
	m.Pipeline = &history.PipelineMeta{
		Group: wl.group, Input: wl.input, Output: wl.output, Partitions: wl.cfg.Partitions,
		Member: wl.cfg.Member, Protocol: wl.cfg.Protocol, SessionTimeout: int64(wl.cfg.SessionTimeout.D()),
		Stateful: wl.cfg.Stateful, TxnIDs: wl.cfg.TxnIDs,
	}
}

// Start is the history's time base.
func (wl *Workload) Start() time.Time { return wl.start }

// Stats returns what the run did so far.
func (wl *Workload) Stats() Stats {
	s := &wl.stats
	return Stats{Sent: s.sent.Load(), SendsFailed: s.sendsFailed.Load(), Aborted: s.aborted.Load(), Committed: s.committed.Load(),
		Failed: s.failed.Load(), Unknown: s.unknown.Load(), Copied: s.copied.Load(), Restarts: s.restarts.Load()}
}

func (wl *Workload) createTopics(ctx context.Context) error {
	admin, err := cluster.AdminClient(wl.cl, wl.log)
	if err != nil {
		return err
	}
	defer admin.Close()
	adm := kadm.NewClient(admin)
	replication := int16(min(3, max(1, wl.cl.Info().Brokers)))
	for _, topic := range []string{wl.input, wl.output} {
		resp, err := adm.CreateTopic(ctx, wl.cfg.Partitions, replication, nil, topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			return fmt.Errorf("create topic %s: %w", topic, err)
		}
	}
	return nil
}

// warmGroupCoordinator asks for the run's group's committed offsets until its coordinator
// answers, before the run's clock. On a fresh Kafka cluster the first FindCoordinator of any
// group creates __consumer_offsets, and its coordinators then load it: at a load average of
// 26 on 2 cores that took 7 s, so the members' group formed 8 s into the run and a freeze
// scheduled at 2 s found no owner of in0 (pipeline-zombie inconclusive on Kafka 4.1.2 through
// the Java and the Sarama adapters alike). A cluster that serves the group already answers at
// once. A coordinator that does not answer within warmGroupFor is left to the members.
func (wl *Workload) warmGroupCoordinator(ctx context.Context) {
	admin, err := cluster.AdminClient(wl.cl, wl.log)
	if err != nil {
		wl.log.Warn("warm the group coordinator", "err", err)
		return
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(ctx, warmGroupFor)
	defer cancel()
	adm := kadm.NewClient(admin)
	start := time.Now()
	for {
		_, err := adm.FetchOffsets(ctx, wl.group)
		// Any answer but a retriable coordinator error (loading, not available, not the
		// coordinator) is the coordinator's: kfake answers a group it does not know yet
		// GROUP_ID_NOT_FOUND.
		var ke *kerr.Error
		if err == nil || errors.As(err, &ke) && !ke.Retriable {
			wl.log.Debug("group coordinator ready", "group", wl.group, "took", time.Since(start), "answer", err)
			return
		}
		select {
		case <-ctx.Done():
			wl.log.Warn("warm the group coordinator: no answer before the run", "group", wl.group, "err", err)
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// warmGroupFor bounds warmGroupCoordinator.
const warmGroupFor = time.Minute

// now is the history time.
func (wl *Workload) now() int64 { return int64(time.Since(wl.start)) }

// append writes e, keeping the first error: a history that cannot be written makes the run
// worthless.
func (wl *Workload) append(e history.Event) {
	if err := wl.w.Append(e); err != nil {
		wl.fail(fmt.Errorf("history: %w", err))
	}
}

// fail keeps err if it is the run's first error; Run and FinalReads return it.
func (wl *Workload) fail(err error) {
	wl.errOnce.Do(func() { wl.err.Store(&err) })
}

func (wl *Workload) failed() error {
	if p := wl.err.Load(); p != nil {
		return *p
	}
	return nil
}

// seederClient returns a client that writes input records straight to the cluster, outside
// the faults, each to the partition it names, with opts added. The records are not compressed:
// not every client reads franz-go's default snappy (krabka-compression 0.7.0 reads only
// xerial-framed snappy; docs/findings.md).
func (wl *Workload) seederClient(opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append(cluster.ClientSecurity(wl.cl).KgoOpts(), append([]kgo.Opt{
		kgo.SeedBrokers(wl.cl.Bootstrap()...),
		kgo.DefaultProduceTopic(wl.input),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerLinger(0),
		kgo.DisableClientMetrics()}, opts...)...)...)
}

// newAborter returns the client of the aborted input: a transactional seeder.
func (wl *Workload) newAborter() (*kgo.Client, error) {
	cl, err := wl.seederClient(kgo.ClientID("fencecheck-seeder-aborted"), kgo.TransactionalID(wl.group+".aborted-input"))
	if err != nil {
		return nil, fmt.Errorf("seeder of the aborted input: %w", err)
	}
	return cl, nil
}

// send writes the next input record, asynchronously; its completion is recorded when the
// broker answers. The records go round the partitions in turn (the first
// Config.InputPartitions of them, when set). With Config.AbortedInput,
// some are written in a transaction the seeder aborts (sendAborted).
func (wl *Workload) send(ctx context.Context) {
	seq := wl.sendSeq.Add(1) - 1
	id := fmt.Sprintf("i%d", seq)
	op := wl.lastOp.Add(1)
	wl.append(history.Event{Type: history.TypeInvoke, ID: op, Time: wl.now(), Process: SeederProcess, Kind: history.KindSend,
		Args: history.Args{Pipe: &history.PipeArgs{ID: id}}})
	wl.sends.Add(1)
	written := int64(wl.cfg.Partitions)
	if wl.cfg.InputPartitions > 0 {
		written = int64(wl.cfg.InputPartitions)
	}
	r := &kgo.Record{Partition: int32(seq % written), Key: []byte(id), Value: []byte(id)}
	if wl.abortNext() {
		go wl.sendAborted(ctx, op, r)
		return
	}
	wl.seeder.Produce(ctx, r, func(r *kgo.Record, err error) {
		defer wl.sends.Done()
		if err != nil {
			// The idempotent producer gave up: the record may or may not be there.
			wl.stats.sendsFailed.Add(1)
			wl.append(history.Event{Type: history.TypeInfo, ID: op, Time: wl.now(), Error: "send", Message: err.Error()})
			return
		}
		wl.stats.sent.Add(1)
		wl.append(history.Event{Type: history.TypeOK, ID: op, Time: wl.now(),
			Result: history.Result{Pipe: &history.PipeResult{Sent: &history.PipeOffset{Partition: r.Partition, Offset: r.Offset}}}})
	})
}

// abortNext reports whether the next input record goes to an aborted transaction. It does
// not wait for the aborted transaction in flight: only the choice is locked.
func (wl *Workload) abortNext() bool {
	if wl.abortRng == nil {
		return false
	}
	wl.rngMu.Lock()
	defer wl.rngMu.Unlock()
	return wl.abortRng.Float64() < wl.cfg.AbortedInput
}

// sendAborted writes r in a transaction of its own and aborts it, and records the send as
// failed: a transaction that was never asked to commit never commits, whatever its abort
// did. An aborter that failed is replaced for the next record; one that cannot be made
// again fails the run, whose aborted input would otherwise be recorded but not written.
func (wl *Workload) sendAborted(ctx context.Context, op int64, r *kgo.Record) {
	defer wl.sends.Done()
	wl.abortMu.Lock()
	defer wl.abortMu.Unlock()
	at := "nowhere"
	var err error
	if wl.aborter == nil {
		if wl.aborter, err = wl.newAborter(); err != nil {
			wl.fail(err)
		}
	}
	if err == nil {
		err = wl.aborter.BeginTransaction()
	}
	if err == nil {
		if err = wl.aborter.ProduceSync(ctx, r).FirstErr(); err == nil {
			at = history.PipeOffset{Partition: r.Partition, Offset: r.Offset}.String()
		}
		if aerr := wl.aborter.EndTransaction(ctx, kgo.TryAbort); aerr != nil {
			err = errors.Join(err, aerr)
		}
	}
	if err != nil && wl.aborter != nil {
		wl.log.Warn("aborted input", "err", err)
		wl.aborter.Close()
		wl.aborter = nil
	}
	wl.stats.aborted.Add(1)
	wl.append(history.Event{Type: history.TypeFail, ID: op, Time: wl.now(), Error: history.ErrorAborted,
		Message: "written at " + at + " in a transaction the seeder aborted"})
}

// Run runs the members and the seeder for d (or until ctx ends), then stops them: members
// close (aborting an open transaction), and every send is answered. It returns ctx's error
// when ctx ended first, and the history's error if it could not be written. Run runs once.
func (wl *Workload) Run(ctx context.Context, d time.Duration) error {
	if !wl.ran.CompareAndSwap(false, true) {
		return errors.New("pipeline workload: Run called twice")
	}
	for range wl.cfg.Preload {
		wl.send(context.WithoutCancel(ctx))
	}
	wl.sends.Wait()
	runCtx, stop := context.WithTimeout(ctx, d)
	defer stop()
	var wg sync.WaitGroup
	for _, m := range wl.members {
		wg.Go(func() { m.run(runCtx) })
	}
	wg.Go(func() {
		every := time.Duration(float64(time.Second) / wl.cfg.Rate)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-runCtx.Done():
				return
			case <-t.C:
				wl.send(context.WithoutCancel(runCtx))
			}
		}
	})
	wg.Wait()
	wl.sends.Wait()
	s := wl.Stats()
	wl.log.Info("pipeline stopped", "sent", s.Sent, "committed", s.Committed, "failed", s.Failed, "unknown", s.Unknown, "restarts", s.Restarts)
	if ctx.Err() != nil {
		return errors.Join(wl.failed(), ctx.Err())
	}
	return wl.failed()
}

// memberConfig is the configuration of member m's client.
func (wl *Workload) memberConfig(m *member) pipeline.Config {
	conn := transport.NewConfig(strings.Join(wl.cl.Bootstrap(), ","), wl.cfg.TransactionTimeout.D())
	conn.ClientID = "fencecheck-" + m.process + "-" + m.name
	conn.RequestTimeout = wl.cfg.RequestTimeout.D()
	conn.Dial = m.dial
	conn.Logger = wl.log.With("process", m.process, "member", m.name)
	if s := cluster.ClientSecurity(wl.cl); s.Enabled() {
		// The links speak TLS themselves (links.Network.SetTLS); the member adds SASL only.
		s = s.SASLOnly()
		if s.Enabled() {
			conn.Security = &transport.ClientSecurity{TLS: s.TLS, SASLMechanism: s.SASLMechanism, Username: s.Username, Password: s.Password}
		}
	}
	return pipeline.Config{
		Conn: conn, Group: wl.group, Input: wl.input, Output: wl.output, TransactionalID: m.txnID,
		TxnIDPerPartition: wl.cfg.TxnIDs == TxnIDsPartition,
		SessionTimeout:    wl.cfg.SessionTimeout.D(), MaxPoll: wl.cfg.MaxPoll, Protocol: wl.cfg.Protocol,
		Pause: m.pause, Fetched: m.fetched, TxnVersion: func(v int) { m.txnVersion.Store(int64(v)) },
		Label: m.name, Stateful: wl.cfg.Stateful,
	}
}

// pause is the member's pause point: a freeze armed there (pausePoint), and, after
// PointAfterProduce, the time the member goes on to send its transaction's offsets.
func (m *member) pause(ctx context.Context, point string) {
	m.pausePoint(ctx, point)
	if point == pipeline.PointAfterProduce {
		m.offsetsAt.Store(m.wl.now())
	}
}

// fetched records where the member starts after fetching its group's offsets: a fetch
// operation, invoked when the fetch began (when the member says) and completed now.
func (m *member) fetched(f pipeline.Fetch) {
	wl := m.wl
	op := wl.lastOp.Add(1)
	now := wl.now()
	began := now
	if !f.Began.IsZero() {
		began = min(now, int64(f.Began.Sub(wl.start)))
	}
	starts := make([]history.PipeOffset, 0, len(f.Starts))
	for p, o := range f.Starts {
		starts = append(starts, history.PipeOffset{Partition: p, Offset: o})
	}
	sortOffsets(starts)
	if !f.Rewind {
		// A rewind fetches what the member thought it held; an assignment's fetch is what
		// the group just gave it.
		if len(starts) > 0 {
			m.assignedAt.CompareAndSwap(0, time.Now().UnixNano())
		}
		m.mu.Lock()
		for _, s := range starts {
			m.held[s.Partition] = now
		}
		m.mu.Unlock()
	}
	if wl.cfg.Stateful {
		for _, s := range starts {
			m.markStale(s.Partition)
		}
	}
	wl.append(history.Event{Type: history.TypeInvoke, ID: op, Time: began, Process: m.process, Member: m.name, Kind: history.KindFetch,
		Args: history.Args{Pipe: &history.PipeArgs{Group: wl.group, MemberID: f.MemberID, Generation: f.Generation, Rewind: f.Rewind}}})
	wl.append(history.Event{Type: history.TypeOK, ID: op, Time: now, Result: history.Result{Pipe: &history.PipeResult{Offsets: starts}}})
}

// run drives m until ctx ends: poll, copy in a transaction, and start over with a new
// member when the old one cannot go on (or, with Config.Restart, at random).
func (m *member) run(ctx context.Context) {
	wl := m.wl
	mb := m.started
	m.started = nil
	defer func() {
		if mb != nil {
			m.stop(mb)
		}
	}()
	// With Config.Restart a member's time in the group runs from its first assignment (the
	// first fetch of offsets the group gave it), not from its start: a Kafka Streams member
	// takes its assignment seconds after it starts, once its group has formed, and one timed
	// from its start left before it had copied anything, so no partition ever moved between
	// members that had. A member with no assignment assignWait after its start is timed from
	// then. The member New started is timed from the run's start at the earliest.
	var restartAt time.Time // zero: not timed yet
	started := time.Now()   // the member in hand's start
	leaving := false        // the member left with Config.Restart
	for ctx.Err() == nil {
		if mb == nil {
			var err error
			if mb, err = wl.newMember(ctx, wl.memberConfig(m)); err != nil {
				if errors.Is(err, transport.ErrInvalidConfig) {
					// It will not start on a second try either: the run is broken, not quiet.
					wl.fail(fmt.Errorf("member %s: %w", m.name, err))
					return
				}
				wl.log.Warn("start member", "member", m.name, "err", err)
				sleep(ctx, time.Second)
				continue
			}
			if leaving {
				// Its time in the group runs from its own assignment, not from the last
				// member's leaving: an exec adapter's member boots a runtime first (a JVM
				// took seconds).
				leaving, restartAt, started = false, time.Time{}, time.Now()
			}
		}
		if wl.cfg.Restart > 0 && restartAt.IsZero() {
			if at := m.assignedAt.Load(); at != 0 {
				from := time.Unix(0, at)
				if from.Before(started) {
					from = started // assigned before the run's clock: timed from the run's start
				}
				restartAt = m.nextRestart(from)
			} else if waited := time.Since(started); waited >= assignWait {
				restartAt = m.nextRestart(started.Add(assignWait))
			}
		}
		if !restartAt.IsZero() && time.Now().After(restartAt) {
			m.assignedAt.Store(0) // the next member's own assignment times it
			m.stop(mb)
			mb, leaving = nil, true
			wl.stats.restarts.Add(1)
			continue
		}
		if obs, ok := selfDriven(mb); ok {
			pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			o := obs.Observe(pctx)
			cancel()
			if m.record(ctx, o) {
				m.stop(mb)
				mb = nil
				wl.stats.restarts.Add(1)
			}
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		b, err := mb.Poll(pctx)
		cancel()
		if len(b.Records) == 0 {
			if err != nil && ctx.Err() == nil && pctx.Err() == nil {
				wl.log.Debug("poll", "member", m.name, "err", err)
				sleep(ctx, 100*time.Millisecond)
			}
			continue
		}
		m.mu.Lock()
		for _, r := range b.Records {
			m.held[r.Partition] = wl.now()
		}
		m.mu.Unlock()
		m.pausePoint(ctx, PointAfterPoll)
		for _, sub := range wl.transactions(b) {
			if res := m.transact(ctx, mb, sub); res.Restart {
				m.stop(mb)
				mb = nil
				wl.stats.restarts.Add(1)
				break
			}
		}
	}
}

// assignWait bounds how long a member's time in the group (Config.Restart) waits for its
// first assignment before it runs anyway: a member the group gives nothing (more members than
// partitions, a group that never settles) still leaves now and then.
const assignWait = 30 * time.Second

// nextRestart is when m leaves the group with Config.Restart, having been in it since from:
// half to one and a half mean intervals later.
func (m *member) nextRestart(from time.Time) time.Time {
	mean := m.wl.cfg.Restart.D()
	return from.Add(mean/2 + time.Duration(m.rng.Int64N(int64(mean))))
}

// transactions returns the batches b is copied in, one transaction each: b itself, or with a
// transactional id per input partition one per partition, in b's order of first appearance.
func (wl *Workload) transactions(b pipeline.Batch) []pipeline.Batch {
	if wl.cfg.TxnIDs != TxnIDsPartition {
		return []pipeline.Batch{b}
	}
	var out []pipeline.Batch
	at := map[int32]int{}
	for _, r := range b.Records {
		i, ok := at[r.Partition]
		if !ok {
			i = len(out)
			at[r.Partition] = i
			out = append(out, pipeline.Batch{MemberID: b.MemberID, Generation: b.Generation})
		}
		out[i].Records = append(out[i].Records, r)
	}
	return out
}

// transact copies b in one transaction and records it.
func (m *member) transact(ctx context.Context, mb pipeline.Member, b pipeline.Batch) pipeline.Result {
	wl := m.wl
	op := wl.lastOp.Add(1)
	txnID := m.txnID
	if wl.cfg.TxnIDs == TxnIDsPartition {
		txnID = pipeline.PartitionTransactionalID(m.txnID, b.Records[0].Partition)
	}
	args := &history.PipeArgs{Group: wl.group, MemberID: b.MemberID, Generation: b.Generation, TransactionalID: txnID,
		Inputs: ranges(b.Records)}
	for p, o := range b.Offsets() {
		args.Offsets = append(args.Offsets, history.PipeOffset{Partition: p, Offset: o})
	}
	sortOffsets(args.Offsets)
	var aggs []aggregate
	if wl.cfg.Stateful {
		ids, parts := make([]string, len(b.Records)), make([]int32, len(b.Records))
		for i, r := range b.Records {
			ids[i], parts[i] = string(r.Value), r.Partition
		}
		var err error
		if aggs, err = m.apply(ctx, ids, parts); err != nil {
			// Without its state the batch cannot be made: a new member starts at the
			// committed offsets and restores again.
			wl.log.Warn("pipeline member: cannot restore its state", "member", m.name, "err", err)
			m.markStale(parts...)
			return pipeline.Result{Outcome: transport.Fail, Err: err, Restart: true}
		}
	}
	outs := make([]pipeline.Output, len(b.Records))
	for i, r := range b.Records {
		o := history.PipeOutput{In: history.PipeOffset{Partition: r.Partition, Offset: r.Offset}, ID: string(r.Value),
			Txn: op, Member: m.name, Generation: b.Generation}
		if aggs != nil {
			o.Count, o.Sum = aggs[i].count, aggs[i].sum
		}
		v, _ := json.Marshal(o)
		outs[i] = pipeline.Output{Partition: r.Partition, Key: r.Key, Value: v}
	}
	wl.append(history.Event{Type: history.TypeInvoke, ID: op, Time: wl.now(), Process: m.process, Member: m.name, Kind: history.KindTxn,
		Args: history.Args{Pipe: args}})
	// The transaction is not cut by the run's end: stopping lets it finish, so the history
	// does not end with a burst of unknown outcomes. Its own requests are bounded.
	m.offsetsAt.Store(0)
	m.txnVersion.Store(0)
	res := mb.Transact(context.WithoutCancel(ctx), b, outs)
	wl.completeTxn(history.Event{ID: op, Time: wl.now()}, res, len(b.Records), func(r *history.PipeResult) {
		r.OffsetsAt, r.TxnVersion = m.offsetsAt.Load(), int(m.txnVersion.Load())
	})
	if res.Outcome != transport.OK && wl.cfg.Stateful {
		// The aggregates went on with the batch; what was committed is what counts.
		for _, r := range b.Records {
			m.markStale(r.Partition)
		}
	}
	return res
}

// errorClass is the history's error class of a transaction that did not commit.
func errorClass(err error) string {
	switch {
	case errors.Is(err, pipeline.ErrFenced):
		return history.ErrorFenced
	case errors.Is(err, context.DeadlineExceeded):
		return history.ErrorTimeout
	case err == nil:
		return ""
	}
	return "error"
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// ranges returns the input ranges of records: one per run of consecutive offsets of a
// partition (read committed skips no offset of a non-transactional input, so one per
// partition as a rule).
func ranges(records []pipeline.Record) []history.PipeRange {
	var out []history.PipeRange
	for _, r := range records {
		i := slices.IndexFunc(out, func(g history.PipeRange) bool { return g.Partition == r.Partition && g.To == r.Offset })
		if i < 0 {
			out = append(out, history.PipeRange{Partition: r.Partition, From: r.Offset, To: r.Offset})
			i = len(out) - 1
		}
		out[i].To++
	}
	return out
}

func sortOffsets(o []history.PipeOffset) {
	slices.SortStableFunc(o, func(a, b history.PipeOffset) int { return cmp.Compare(a.Partition, b.Partition) })
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// Close closes the seeder. The members closed when Run returned.
func (wl *Workload) Close() {
	for _, m := range wl.members {
		if m.started != nil { // Run never took it
			m.started.Close()
			m.started = nil
		}
	}
	if wl.seeder != nil {
		wl.seeder.Close()
	}
	if wl.aborter != nil {
		wl.aborter.Close()
	}
}

// completeTxn records e, the completion of a txn operation, from the member's result: ok with
// its token (and what withResult, when not nil, adds) when it committed, counting the copied input records;
// fail or info (unknown) with the error's class otherwise.
func (wl *Workload) completeTxn(e history.Event, res pipeline.Result, copied int, withResult func(*history.PipeResult)) {
	switch res.Outcome {
	case transport.OK:
		wl.stats.committed.Add(1)
		wl.stats.copied.Add(int64(copied))
		tok := history.Token{ProducerID: res.Token.ProducerID, Epoch: res.Token.Epoch}
		r := &history.PipeResult{Token: &tok}
		if withResult != nil {
			withResult(r)
		}
		e.Type, e.Result = history.TypeOK, history.Result{Pipe: r}
	case transport.Fail:
		wl.stats.failed.Add(1)
		e.Type, e.Error, e.Message = history.TypeFail, errorClass(res.Err), errText(res.Err)
	default:
		wl.stats.unknown.Add(1)
		e.Type, e.Error, e.Message = history.TypeInfo, errorClass(res.Err), errText(res.Err)
	}
	wl.append(e)
}
