//go:build !kafka

package pipeline_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/cluster/embedded"
	"github.com/fencecheck/fencecheck/internal/units"
	"github.com/fencecheck/fencecheck/transport"
	pipe "github.com/fencecheck/fencecheck/transport/pipeline"
	"github.com/fencecheck/fencecheck/workload/pipeline"
)

// run runs a pipeline workload for d on a fresh embedded cluster and returns its history,
// read back from the file.
func run(t *testing.T, cfg pipeline.Config, d time.Duration) (*history.History, pipeline.Stats) {
	t.Helper()
	return runWith(t, cfg, d, nil)
}

// runWith is run, calling beforeFinal (when not nil) between the run and the final reads.
func runWith(t *testing.T, cfg pipeline.Config, d time.Duration, beforeFinal func(context.Context, *embedded.Cluster, *pipeline.Workload, history.Meta)) (*history.History, pipeline.Stats) {
	t.Helper()
	return runOpts(t, cfg, pipeline.Options{}, d, beforeFinal)
}

// runOpts is runWith with the workload's options (its seed and logger are the test's).
func runOpts(t *testing.T, cfg pipeline.Config, opts pipeline.Options, d time.Duration, beforeFinal func(context.Context, *embedded.Cluster, *pipeline.Workload, history.Meta)) (*history.History, pipeline.Stats) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d+3*time.Minute)
	defer cancel()
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := embedded.New(ctx, embedded.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	path := filepath.Join(t.TempDir(), "history.jsonl")
	w, err := history.Open(path, history.WriterOptions{FlushInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	opts.Seed, opts.Logger = 1, log
	wl, err := pipeline.New(ctx, cfg, c, w, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer wl.Close()
	meta := history.Meta{Scenario: "test", Seed: 1}
	wl.Meta(&meta)
	if err := w.WriteHeader(meta); err != nil {
		t.Fatal(err)
	}
	if err := wl.Run(ctx, d); err != nil {
		t.Fatal(err)
	}
	if beforeFinal != nil {
		beforeFinal(ctx, c, wl, meta)
	}
	if err := wl.FinalReads(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	h, err := history.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return h, wl.Stats()
}

// TestPipelineRunIsExactlyOnce: members that leave and rejoin copy every input record exactly
// once, in order, and the checker finds it so from the history alone: valid, with partitions
// that changed hands (rebalance) and transactions committed.
func TestPipelineRunIsExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a pipeline for 8 s")
	}
	t.Parallel()
	for _, tc := range []struct {
		member   string
		stateful bool
		txnIDs   string
	}{{"plain", false, ""}, {"session", false, ""}, {"plain", true, ""}, {"plain", false, "partition"}} {
		name := tc.member
		if tc.stateful {
			name += "/stateful"
		}
		if tc.txnIDs != "" {
			name += "/txn-ids-" + tc.txnIDs
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg := pipeline.Config{Member: tc.member, Processes: 2, Members: 3, Partitions: 4, Restart: units.Duration(3 * time.Second), Stateful: tc.stateful, TxnIDs: tc.txnIDs}
			h, st := run(t, cfg, 8*time.Second)
			t.Logf("%+v", st)
			if h.Format != history.FormatPipeline || h.Meta.Workload != history.WorkloadPipeline {
				t.Fatalf("history format %d, workload %q", h.Format, h.Meta.Workload)
			}
			if st.Sent == 0 || st.Committed == 0 || st.Restarts == 0 {
				t.Fatalf("stats %+v: want records sent, transactions committed and members restarted", st)
			}
			h.Meta.Promises = []string{checker.CoverRebalance}
			res, err := checker.Check(context.Background(), h, checker.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Verdict != checker.VerdictValid {
				for _, r := range append(res.Checks, res.Coverage...) {
					t.Logf("%s: %s %v %v", r.Name, r.Verdict, r.Anomalies, r.Details)
				}
				t.Fatalf("verdict %s, want valid", res.Verdict)
			}
			// The final reads saw every record the run sent, copied: the committed offsets
			// reach the input's end once the members caught up.
			var outputs int
			for _, op := range h.All() {
				if op.Kind == history.KindFinalOutput && op.Type == history.TypeOK {
					outputs = len(op.Result.Pipe.Outputs)
				}
			}
			if outputs == 0 {
				t.Fatal("the final read found no output")
			}
			// A stateful run's aggregates were checked, each one right.
			if fold := checkOf(res, checker.EOSFold); tc.stateful && (fold.Verdict != checker.VerdictValid || fold.Details["outputs_wrong"] != 0) {
				t.Errorf("eos-fold %s %v, want valid with every aggregate right", fold.Verdict, fold.Details)
			}
		})
	}
}

// TestTerminationSeesAnOpenTransaction: a transaction left open on the input after the run,
// under a transactional id of the run's, is found by the final look: eos-termination is
// invalid, naming it and the partition it holds back, and the other guarantees still hold.
func TestTerminationSeesAnOpenTransaction(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a pipeline for 3 s")
	}
	t.Parallel()
	cfg := pipeline.Config{Processes: 1, Members: 1, Partitions: 2}
	var hang string
	h, _ := runWith(t, cfg, 3*time.Second, func(ctx context.Context, c *embedded.Cluster, wl *pipeline.Workload, meta history.Meta) {
		pipeline.SetLookBound(wl, 2*time.Second)
		hang = meta.Pipeline.Group + ".hang"
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...), kgo.TransactionalID(hang), kgo.TransactionTimeout(time.Minute),
			kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: meta.Pipeline.Input, Partition: 1, Value: []byte("open")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	})
	res, err := checker.Check(context.Background(), h, checker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Checks {
		want := checker.VerdictValid
		switch r.Name {
		case checker.EOSTermination:
			want = checker.VerdictInvalid
		case checker.EOSFold:
			want = checker.VerdictNotCovered // not a stateful run
		}
		if r.Verdict != want {
			t.Errorf("%s: %s %v %v, want %s", r.Name, r.Verdict, r.Anomalies, r.Details, want)
		}
	}
	r := checkOf(res, checker.EOSTermination)
	if len(r.Anomalies) != 2 || !strings.Contains(r.Anomalies[0].Explanation, hang+" ") || !strings.Contains(r.Anomalies[1].Explanation, "input[1] is") {
		t.Errorf("termination anomalies %+v, want the open transaction %s and input partition 1 held back", r.Anomalies, hang)
	}
}

func checkOf(res *checker.Results, name string) checker.Result {
	for _, r := range res.Checks {
		if r.Name == name {
			return r
		}
	}
	return checker.Result{}
}

// TestConfigErrorsNameTheField: a bad configuration is refused before anything starts, naming
// the field as a scenario file spells it.
func TestConfigErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct {
		cfg   pipeline.Config
		field string
	}{
		{pipeline.Config{Members: -1}, "members"},
		{pipeline.Config{Member: "kafka-streams"}, "member"},
		{pipeline.Config{Protocol: "eager"}, "protocol"},
		{pipeline.Config{TransactionTimeout: units.Duration(time.Second)}, "transaction_timeout"},
		{pipeline.Config{Rate: -2}, "rate"},
		{pipeline.Config{Rate: 1e12}, "rate"},
		{pipeline.Config{Member: "mutant:typo"}, "member"},
		{pipeline.Config{Member: "session", TxnIDs: "partition"}, "txn_ids"},
		{pipeline.Config{TxnIDs: "task"}, "txn_ids"},
		{pipeline.Config{InputPartitions: -1}, "input_partitions"},
		{pipeline.Config{Partitions: 4, InputPartitions: 5}, "input_partitions"},
	} {
		_, err := pipeline.New(context.Background(), tc.cfg, nil, nil, pipeline.Options{})
		if !errors.Is(err, pipeline.ErrConfig) || !containsWord(err.Error(), tc.field) {
			t.Errorf("%+v: %v, want a config error naming %s", tc.cfg, err, tc.field)
		}
	}
}

func containsWord(s, w string) bool {
	for i := 0; i+len(w) <= len(s); i++ {
		if s[i:i+len(w)] == w && (i+len(w) == len(s) || s[i+len(w)] == ':') {
			return true
		}
	}
	return false
}

// TestMembersStartBeforeTheRun: New starts every member before the run's clock (an exec
// adapter's member boots a runtime, seconds under load, which must not eat into a scenario's
// schedule), and the run takes them over rather than starting others; a member New started
// that no run took is closed by Close.
func TestMembersStartBeforeTheRun(t *testing.T) {
	ctx, log, c := newCluster(t)
	var started, closed atomic.Int64
	newMember := func(ctx context.Context, cfg pipe.Config) (pipe.Member, error) {
		m, err := pipe.New(ctx, pipe.KindPlain, cfg)
		if err != nil {
			return nil, err
		}
		started.Add(1)
		return closeCounter{m, &closed}, nil
	}
	cfg := pipeline.Config{Member: "plain", Processes: 2, Members: 3, Partitions: 2}
	for _, runs := range []bool{true, false} {
		started.Store(0)
		closed.Store(0)
		w, err := history.Open(filepath.Join(t.TempDir(), "history.jsonl"), history.WriterOptions{FlushInterval: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		wl, err := pipeline.New(ctx, cfg, c, w, pipeline.Options{Seed: 1, Logger: log, NewMember: newMember, Member: "plain"})
		if err != nil {
			t.Fatal(err)
		}
		wl.StartMembers(ctx)
		if n := started.Load(); n != 3 {
			t.Fatalf("%d members started when StartMembers returned, want all 3", n)
		}
		if runs {
			if err := wl.Run(ctx, time.Second); err != nil {
				t.Fatal(err)
			}
			if n := started.Load(); n != 3 {
				t.Errorf("%d members started after a run without restarts, want the 3 New started", n)
			}
		}
		wl.Close()
		_ = w.Close()
		if n := closed.Load(); n != 3 {
			t.Errorf("run %v: %d members closed, want 3", runs, n)
		}
	}
}

type closeCounter struct {
	pipe.Member
	closed *atomic.Int64
}

func (c closeCounter) Close() {
	c.closed.Add(1)
	c.Member.Close()
}

// TestRestartTimesAMemberFromItsStart: with Config.Restart, a new member's time in the group
// runs from its own start (from its first assignment, which comes after it:
// TestRestartTimesAMemberFromItsAssignment), not from its predecessor's leaving. A member that takes as long to
// start as its mean time in the group (an exec adapter's JVM under load) still polls before it
// leaves: timed from the leaving, every member after the first would leave before its first
// poll.
func TestRestartTimesAMemberFromItsStart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a pipeline for 6 s")
	}
	ctx, log, c := newCluster(t)
	var mu sync.Mutex
	var polls []*atomic.Int64 // per member started, its polls
	newMember := func(ctx context.Context, cfg pipe.Config) (pipe.Member, error) {
		time.Sleep(1500 * time.Millisecond) // a slow start, longer than any time in the group
		m, err := pipe.New(ctx, pipe.KindPlain, cfg)
		if err != nil {
			return nil, err
		}
		n := &atomic.Int64{}
		mu.Lock()
		polls = append(polls, n)
		mu.Unlock()
		return pollCounter{m, n}, nil
	}
	cfg := pipeline.Config{Member: "plain", Processes: 2, Members: 2, Partitions: 2, Restart: units.Duration(time.Second)}
	w, err := history.Open(filepath.Join(t.TempDir(), "history.jsonl"), history.WriterOptions{FlushInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	wl, err := pipeline.New(ctx, cfg, c, w, pipeline.Options{Seed: 1, Logger: log, NewMember: newMember, Member: "plain"})
	if err != nil {
		t.Fatal(err)
	}
	defer wl.Close()
	if err := wl.Run(ctx, 6*time.Second); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	never := 0
	for _, n := range polls {
		if n.Load() == 0 {
			never++
		}
	}
	// The run's end may close a member of each loop before its first poll.
	if len(polls) <= cfg.Members || never > cfg.Members {
		t.Errorf("%d members started, %d of them never polled; want members restarted, each polling before it left", len(polls), never)
	}
}

type pollCounter struct {
	pipe.Member
	n *atomic.Int64
}

func (p pollCounter) Poll(ctx context.Context) (pipe.Batch, error) {
	p.n.Add(1)
	return p.Member.Poll(ctx)
}

// TestNewWaitsForTheGroupCoordinator: New returns only once the run's group coordinator
// answers, so that a fresh cluster's creation and loading of __consumer_offsets is not spent
// inside the run (on Kafka 4.1.2 at a load average of 26 it took 7 s, and a freeze scheduled
// at 2 s found no owner of in0). Here the embedded cluster answers every OffsetFetch
// COORDINATOR_LOAD_IN_PROGRESS for its first 600 ms, as a loading coordinator does.
func TestNewWaitsForTheGroupCoordinator(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := embedded.New(ctx, embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	const loading = 600 * time.Millisecond
	kc := c.Kfake()
	var start atomic.Int64
	var refused, answered atomic.Int64
	kc.ControlKey(int16(kmsg.OffsetFetch), func(r kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		if s := start.Load(); s == 0 || time.Since(time.Unix(0, s)) >= loading {
			answered.Add(1)
			return nil, nil, false // kfake answers
		}
		refused.Add(1)
		req := r.(*kmsg.OffsetFetchRequest)
		resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
		resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
		for _, g := range req.Groups {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group, rg.ErrorCode = g.Group, kerr.CoordinatorLoadInProgress.Code
			resp.Groups = append(resp.Groups, rg)
		}
		return resp, nil, true
	})
	w, err := history.Open(filepath.Join(t.TempDir(), "history.jsonl"), history.WriterOptions{FlushInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	start.Store(time.Now().UnixNano())
	wl, err := pipeline.New(ctx, pipeline.Config{Member: "plain"}, c, w, pipeline.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer wl.Close()
	took := time.Since(time.Unix(0, start.Load()))
	if refused.Load() == 0 || answered.Load() == 0 || took < loading {
		t.Fatalf("New returned after %v: %d OffsetFetch answered loading, %d answered; want New to wait until the group's coordinator answers (%v)",
			took, refused.Load(), answered.Load(), loading)
	}
}

// TestFinalReadsOfAGroupThatNeverCommitted: a run whose members never commit (Kafka Streams
// members still in their first rebalance when a loaded run ended) leaves a group with no
// offsets, which kfake answers GROUP_ID_NOT_FOUND where Apache Kafka answers no offsets. The
// final reads record that nothing is committed, so the run is judged (inconclusive: nothing
// copied), not left unknown by a failed read.
func TestFinalReadsOfAGroupThatNeverCommitted(t *testing.T) {
	idle := func(context.Context, pipe.Config) (pipe.Member, error) { return idleMember{}, nil }
	h, _ := runOpts(t, pipeline.Config{Member: "plain", Processes: 1, Members: 1, Partitions: 2},
		pipeline.Options{NewMember: idle, Member: "idle"}, 500*time.Millisecond, nil)
	found := false
	for _, op := range h.All() {
		if op.Kind == history.KindFinalOffsets {
			found = true
			if op.Type != history.TypeOK || op.Result.Pipe == nil || len(op.Result.Pipe.Offsets) != 0 {
				t.Fatalf("final offsets %+v %+v, want ok with none committed", op, op.Result.Pipe)
			}
		}
	}
	if !found {
		t.Fatal("no final offsets in the history")
	}
}

// idleMember never returns a record: a member that never got going.
type idleMember struct{}

func (idleMember) Poll(ctx context.Context) (pipe.Batch, error) {
	<-ctx.Done()
	return pipe.Batch{}, ctx.Err()
}

func (idleMember) Transact(context.Context, pipe.Batch, []pipe.Output) pipe.Result {
	return pipe.Result{Err: errors.New("idle member: no transaction")}
}

func (idleMember) Close() {}

// TestStartMembersWaitsForSelfDrivenOwners: self-driven members (Kafka Streams) take their
// assignment on their own, which took a Streams group seconds to form: StartMembers returns
// only once every input partition has an owner (an assignment's fetch) and every member was
// assigned some, so that a scenario's first step finds the owner it will keep. Here the first
// member is given both partitions at 100 ms, and the second takes partition 1 at 300 ms.
func TestStartMembersWaitsForSelfDrivenOwners(t *testing.T) {
	ctx, log, c := newCluster(t)
	w, err := history.Open(filepath.Join(t.TempDir(), "history.jsonl"), history.WriterOptions{FlushInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var n atomic.Int32
	newMember := func(_ context.Context, cfg pipe.Config) (pipe.Member, error) {
		starts, after := map[int32]int64{0: 0, 1: 0}, 100*time.Millisecond
		if cfg.Label == "m2" {
			starts, after = map[int32]int64{1: 0}, 300*time.Millisecond
		}
		n.Add(1)
		time.AfterFunc(after, func() { cfg.Fetched(pipe.Fetch{Starts: starts, MemberID: cfg.Label, Generation: 1}) })
		return selfDrivenMember{}, nil
	}
	wl, err := pipeline.New(ctx, pipeline.Config{Member: "plain", Processes: 2, Members: 2, Partitions: 2}, c, w,
		pipeline.Options{Seed: 1, Logger: log, NewMember: newMember, Member: "exec:streams"})
	if err != nil {
		t.Fatal(err)
	}
	defer wl.Close()
	meta := history.Meta{Scenario: "test", Seed: 1}
	wl.Meta(&meta)
	if err := w.WriteHeader(meta); err != nil {
		t.Fatal(err)
	}
	wl.StartMembers(ctx)
	for role, want := range map[string]string{"in0": "m1", "in1": "m2"} {
		if o, ok := wl.Owner(role); !ok || o.Member != want {
			t.Errorf("%s: owner %+v (%v) when StartMembers returned, want %s", role, o, ok, want)
		}
	}
	if n.Load() != 2 {
		t.Errorf("%d members started, want 2", n.Load())
	}
}

// selfDrivenMember is a self-driven member that does nothing but say it is one.
type selfDrivenMember struct{ idleMember }

func (selfDrivenMember) SelfDriven() bool { return true }

func (selfDrivenMember) Observe(ctx context.Context) pipe.Observation {
	<-ctx.Done()
	return pipe.Observation{}
}

func (selfDrivenMember) Stop() pipe.Observation { return pipe.Observation{} }

// newCluster starts a kfake cluster for one test, closed when it ends, and returns it with a
// context of a minute and a logger of the test's warnings.
func newCluster(t *testing.T) (context.Context, *slog.Logger, *embedded.Cluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := embedded.New(ctx, embedded.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return ctx, log, c
}

// TestSelfDrivenTxnRecordsItsTransactionVersion: a self-driven member's transactions come
// after the fact, with no call to bracket them, but its gateway still tells the workload the
// version of each EndTxn it sends: the committed transaction it reports records the version
// of the last one, as a driven member's does its own.
func TestSelfDrivenTxnRecordsItsTransactionVersion(t *testing.T) {
	newMember := func(_ context.Context, cfg pipe.Config) (pipe.Member, error) {
		return &reportingMember{cfg: cfg}, nil
	}
	h, _ := runOpts(t, pipeline.Config{Member: "plain", Processes: 1, Members: 1, Partitions: 1},
		pipeline.Options{NewMember: newMember, Member: "exec:self-driven"}, 500*time.Millisecond, nil)
	var txns int
	for _, op := range h.All() {
		if op.Kind != history.KindTxn {
			continue
		}
		txns++
		if op.Type != history.TypeOK || op.Result.Pipe == nil || op.Result.Pipe.TxnVersion != 2 {
			t.Errorf("txn %+v, result %+v: want ok with transaction version 2", op, op.Result.Pipe)
		}
	}
	if txns != 1 {
		t.Fatalf("%d txn operations, want the one the member reported", txns)
	}
}

// reportingMember is a self-driven member whose client sent one EndTxn of transaction
// version 2 and reports one committed transaction of input offset 0, once.
type reportingMember struct {
	selfDrivenMember
	cfg  pipe.Config
	done bool
}

func (m *reportingMember) Observe(ctx context.Context) pipe.Observation {
	if m.done {
		<-ctx.Done()
		return pipe.Observation{}
	}
	m.done = true
	m.cfg.TxnVersion(2) // the gateway saw its EndTxn
	now := time.Now()
	return pipe.Observation{Events: []pipe.Event{{Txn: &pipe.ObservedTxn{Ref: "r", Number: 1,
		TransactionalID: m.cfg.TransactionalID, MemberID: "m", Generation: 1,
		Inputs: []pipe.Record{{Partition: 0, Offset: 0}}, Offsets: map[int32]int64{0: 1}, Outputs: 1,
		Began: now.Add(-time.Millisecond), Ended: now, Result: pipe.Result{Outcome: transport.OK}}}}}
}

// TestRestartTimesAMemberFromItsAssignment: with Config.Restart a member's time in the group
// runs from its first assignment, not from its start. A Kafka Streams member takes its
// assignment seconds after it starts (its group forms first), and pipeline-steady replaced
// each one before that, so no partition moved between members that had copied anything. Here
// each member is assigned its partition 1 s after it starts, and stays 100–300 ms on average
// (Restart 200 ms): every member the workload replaced must have had its assignment first.
func TestRestartTimesAMemberFromItsAssignment(t *testing.T) {
	const assignAfter = time.Second
	var mu sync.Mutex
	var members []*lateMember
	newMember := func(_ context.Context, cfg pipe.Config) (pipe.Member, error) {
		m := &lateMember{started: time.Now()}
		time.AfterFunc(assignAfter, func() {
			m.assigned.Store(time.Now().UnixNano())
			cfg.Fetched(pipe.Fetch{Starts: map[int32]int64{0: 0}, MemberID: cfg.Label, Generation: 1})
		})
		mu.Lock()
		members = append(members, m)
		mu.Unlock()
		return m, nil
	}
	_, stats := runOpts(t, pipeline.Config{Member: "plain", Processes: 1, Members: 1, Partitions: 1, Restart: units.Duration(200 * time.Millisecond)},
		pipeline.Options{NewMember: newMember, Member: "exec:late"}, 6*time.Second, nil)
	// Each member is replaced about 1.1–1.3 s after its start: 6 s leaves time for a
	// replacement even when the machine delays the assignment's timer by seconds.
	if stats.Restarts == 0 {
		t.Fatal("no member was replaced: the test shows nothing")
	}
	mu.Lock()
	defer mu.Unlock()
	for i, m := range members[:len(members)-1] { // the last one was stopped by the run's end
		if stopped := m.stopped.Load(); m.assigned.Load() == 0 || stopped < m.assigned.Load() {
			t.Errorf("member %d (of %d) was replaced %v after its start, before its assignment at %v", i+1, len(members),
				time.Duration(stopped-m.started.UnixNano()), assignAfter)
		}
	}
}

// lateMember is a self-driven member assigned its partitions some time after its start; it
// notes when it was assigned and when the workload stopped it.
type lateMember struct {
	selfDrivenMember
	started           time.Time
	assigned, stopped atomic.Int64 // unix nanoseconds; 0: not yet
}

func (m *lateMember) Stop() pipe.Observation {
	m.stopped.CompareAndSwap(0, time.Now().UnixNano())
	return pipe.Observation{}
}

// TestInputPartitionsLeaveTheOthersEmpty: with input_partitions the seeder writes to the first
// N input partitions only, the others stay empty (the window of
// regression/streams-revocation-commit), and the run is still judged valid.
func TestInputPartitionsLeaveTheOthersEmpty(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a pipeline for 3 s")
	}
	t.Parallel()
	h, st := run(t, pipeline.Config{Processes: 1, Members: 2, Partitions: 4, InputPartitions: 2, Preload: 8}, 3*time.Second)
	perPartition := map[int32]int{}
	for _, op := range h.All() {
		if op.Kind == history.KindSend && op.Type == history.TypeOK {
			perPartition[op.Result.Pipe.Sent.Partition]++
		}
	}
	if perPartition[0] == 0 || perPartition[1] == 0 || perPartition[2] != 0 || perPartition[3] != 0 {
		t.Fatalf("sends per input partition %v (stats %+v), want partitions 0 and 1 only", perPartition, st)
	}
	res, err := checker.Check(context.Background(), h, checker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != checker.VerdictValid {
		for _, r := range append(res.Checks, res.Coverage...) {
			t.Logf("%s: %s %v %v", r.Name, r.Verdict, r.Anomalies, r.Details)
		}
		t.Fatalf("verdict %s, want valid", res.Verdict)
	}
}
