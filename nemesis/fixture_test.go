package nemesis_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/cluster/embedded"
	"github.com/fencecheck/fencecheck/cluster/links"
	"github.com/fencecheck/fencecheck/internal/units"
	"github.com/fencecheck/fencecheck/nemesis"
	"github.com/fencecheck/fencecheck/transport"
)

const (
	reqTimeout = 2 * time.Second // the transports' RequestTimeout on the embedded cluster
	lease      = time.Second     // the transports' lease (transaction timeout)
	partitions = 3
	topic      = "nemesis.coordination"
	processes  = 4 // p4 creates the topic
)

// timing is how long a fixture's calls may take: short on the embedded cluster, a few
// seconds on real Kafka.
type timing struct {
	request time.Duration // the transports' RequestTimeout; failsFast allows twice it
	recover time.Duration // how long recovers retries a call
}

var embeddedTiming = timing{request: reqTimeout, recover: 20 * time.Second}

var roles = []string{"role-1", "role-2", "role-3"}

// fixture is a 3-broker cluster (embedded unless newFixtureOn was given another), a nemesis
// on it, and transports per process.
type fixture struct {
	t   *testing.T
	c   cluster.Cluster
	tm  timing
	rec *memRecorder
	n   *nemesis.Nemesis
	env nemesis.Env

	mu  sync.Mutex
	trs map[int]*transport.BrokerTransport
}

func testLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return nil
}

// newFixture starts an embedded cluster with 3 brokers and a nemesis; edit adjusts the env.
// When the test ends, HealAll must succeed and leave the cluster clean.
func newFixture(t *testing.T, seed uint64, edit func(*nemesis.Env)) *fixture {
	t.Helper()
	return newLinkFixture(t, links.LinkModeProxy, seed, edit)
}

// newLinkFixture is newFixture with process links built as mode says.
func newLinkFixture(t *testing.T, mode links.LinkMode, seed uint64, edit func(*nemesis.Env)) *fixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := embedded.New(ctx, embedded.Options{Network: links.NetworkOptions{ProcessLinks: mode}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return newFixtureOn(t, c, embeddedTiming, seed, edit)
}

// newFixtureOn puts a nemesis and transports (whose calls take tm) on c, a running cluster of
// 3 brokers that the caller closes; edit adjusts the env. When the test ends, HealAll must
// succeed and leave the cluster clean.
func newFixtureOn(t *testing.T, c cluster.Cluster, tm timing, seed uint64, edit func(*nemesis.Env)) *fixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var err error
	f := &fixture{t: t, c: c, tm: tm, rec: &memRecorder{}, trs: map[int]*transport.BrokerTransport{}}
	f.env = nemesis.Env{
		Cluster:   c,
		Processes: processes,
		Roles:     roles,
		Resolve: func(role string) (nemesis.RoleKeys, error) {
			return nemesis.RoleKeys{TransactionalID: transport.TransactionalID(topic, transport.Role(role)),
				Topic: topic, Partition: transport.PartitionFor(transport.Role(role), partitions)}, nil
		},
		Lease:        lease,
		ProbeTimeout: time.Second,
		WaitTimeout:  15 * time.Second,
		HealTimeout:  60 * time.Second,
	}
	if edit != nil {
		edit(&f.env)
	}
	if f.n, err = nemesis.New(f.env, f.rec, testLogger(), seed); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.n.HealAll(context.Background()); err != nil {
			t.Errorf("heal all at the end: %v", err)
		}
		f.assertClean(t)
	})
	if _, err := f.transport(processes).EnsureTopic(ctx, topic, partitions); err != nil {
		t.Fatal(err)
	}
	return f
}

// transport returns process p's transport (started on first use), dialing through p's links.
func (f *fixture) transport(p int) *transport.BrokerTransport {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if tr := f.trs[p]; tr != nil {
		return tr
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dial, err := f.c.Links(ctx, p)
	if err != nil {
		f.t.Fatal(err)
	}
	cfg := transport.NewConfig(strings.Join(f.c.Bootstrap(), ","), lease)
	cfg.Topic, cfg.TopicPartitions, cfg.TopicReplication = topic, partitions, 3
	cfg.RequestTimeout, cfg.Dial, cfg.ClientID = f.tm.request, dial, links.ProcessName(p)
	tr, err := transport.Start(ctx, cfg)
	if err != nil {
		f.t.Fatalf("start transport of p%d: %v", p, err)
	}
	f.t.Cleanup(func() { tr.Close(context.Background()) })
	f.trs[p] = tr
	return tr
}

// acquire is AcquireEpoch of role by process p, as a call for failsFast and recovers.
func (f *fixture) acquire(p int, role string) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := f.transport(p).AcquireEpoch(ctx, transport.Role(role))
		return err
	}
}

// register is Register of role by process p with a member id of size random letters (so
// that compression does not shrink the request).
func (f *fixture) register(p int, role string, size int) func(context.Context) error {
	rng := rand.New(rand.NewPCG(uint64(size), 1))
	id := make([]byte, size)
	for i := range id {
		id[i] = byte('a' + rng.IntN(26))
	}
	return func(ctx context.Context) error {
		_, err := f.transport(p).Register(ctx, transport.Role(role), transport.MemberID(id))
		return err
	}
}

// acquireWrite is AcquireEpoch of role by process p followed by a lease written (and
// committed) with the new token: a holder's whole path, coordinator and partition leader.
func (f *fixture) acquireWrite(p int, role string) func(context.Context) error {
	return func(ctx context.Context) error {
		tr := f.transport(p)
		tok, err := tr.AcquireEpoch(ctx, transport.Role(role))
		if err != nil {
			return err
		}
		return tr.WriteLease(ctx, transport.Role(role), tok,
			transport.Lease{Holder: transport.MemberID(links.ProcessName(p)), Seq: 1, Duration: lease, WrittenAt: time.Now()})
	}
}

// inject injects spec and fails the test unless it took hold.
func (f *fixture) inject(spec nemesis.Spec) *nemesis.Injection {
	f.t.Helper()
	inj, err := f.n.Inject(context.Background(), spec)
	if err != nil {
		if inj != nil {
			inj.Heal(context.Background())
		}
		f.t.Fatalf("inject %s: %v", spec, err)
	}
	f.t.Logf("injected %s: %s", spec, inj.Window().Desc)
	return inj
}

// heal heals inj and checks its window: closed, took hold, of kind.
func (f *fixture) heal(inj *nemesis.Injection) history.Fault {
	f.t.Helper()
	if err := inj.Heal(context.Background()); err != nil {
		f.t.Fatalf("heal: %v", err)
	}
	ws := f.rec.windows(f.t)
	if len(ws) == 0 {
		f.t.Fatal("no fault window recorded")
	}
	w := ws[len(ws)-1]
	if w.End == history.Never || !w.TookHold || w.Kind != inj.Window().Kind {
		f.t.Fatalf("window %+v: want closed, took hold, kind %s", w, inj.Window().Kind)
	}
	return w
}

// failsFast runs call and checks that it fails by its own bound (within twice the request timeout).
func failsFast(t *testing.T, what string, call func(context.Context) error) {
	t.Helper()
	failsWithin(t, reqTimeout, what, call)
}

// failsFast is failsFast with the fixture's request timeout.
func (f *fixture) failsFast(t *testing.T, what string, call func(context.Context) error) {
	t.Helper()
	failsWithin(t, f.tm.request, what, call)
}

// failsWithin runs call and checks that it fails within twice timeout, before its 4× guard.
func failsWithin(t *testing.T, timeout time.Duration, what string, call func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*timeout)
	defer cancel()
	start := time.Now()
	err := call(ctx)
	took := time.Since(start)
	if err == nil {
		t.Fatalf("%s: succeeded, want an error", what)
	}
	// The call must end by its own bound, not by this guard: a bound of twice the request
	// timeout leaves a loaded machine a full timeout of slack, while a call that waited out
	// a retry of its own (or the guard) still fails the test.
	if took > 2*timeout || ctx.Err() != nil {
		t.Fatalf("%s: failed after %v, want within twice the request timeout %v: %v", what, took, timeout, err)
	}
	t.Logf("%s: failed after %v: %v", what, took.Round(time.Millisecond), err)
}

// recovers retries call until it succeeds (20s at most): service is there, or came back.
func recovers(t *testing.T, what string, call func(context.Context) error) {
	t.Helper()
	recoversWithin(t, embeddedTiming, what, call)
}

// recovers is recovers with the fixture's timing.
func (f *fixture) recovers(t *testing.T, what string, call func(context.Context) error) {
	t.Helper()
	recoversWithin(t, f.tm, what, call)
}

// recoversWithin retries call, each try bounded by twice tm.request, until it succeeds
// (tm.recover at most).
func recoversWithin(t *testing.T, tm timing, what string, call func(context.Context) error) {
	t.Helper()
	start := time.Now()
	var err error
	for time.Since(start) < tm.recover {
		ctx, cancel := context.WithTimeout(context.Background(), 2*tm.request)
		err = call(ctx)
		cancel()
		if err == nil {
			t.Logf("%s: ok after %v", what, time.Since(start).Round(time.Millisecond))
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: still failing %v after healing: %v", what, time.Since(start).Round(time.Millisecond), err)
}

// assertClean checks that no fault is left: every link up without toxics, every broker
// running, nothing active.
func (f *fixture) assertClean(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, l := range f.c.Network().Links() {
		if up, err := l.Enabled(ctx); err != nil || !up {
			t.Errorf("link %s is down (%v)", l, err)
		}
		if ts, err := l.Toxics(ctx); err != nil || len(ts) > 0 {
			t.Errorf("link %s has toxics %+v (%v)", l, ts, err)
		}
	}
	bs, err := f.c.Brokers(ctx, cluster.RoleQuery{})
	if err != nil {
		t.Error(err)
	}
	for _, b := range bs {
		if b.State != cluster.StateRunning {
			t.Errorf("broker %s is %v", b.Name(), b.State)
		}
	}
	if act := f.n.Active(); len(act) > 0 {
		t.Errorf("active faults left: %v", act)
	}
	for _, w := range f.rec.windows(t) {
		if w.End == history.Never {
			t.Errorf("window %d (%s %v) never closed", w.ID, w.Kind, w.Targets)
		}
	}
}

// coordinator returns the broker coordinating role's transactional id.
func (f *fixture) coordinator(role string) cluster.Broker {
	return f.brokerWith(cluster.RoleQuery{TransactionalIDs: []string{transport.TransactionalID(topic, transport.Role(role))}},
		cluster.BrokerRole{Kind: cluster.RoleTxnCoordinator, Key: transport.TransactionalID(topic, transport.Role(role))})
}

// leader returns the leader of role's partition.
func (f *fixture) leader(role string) cluster.Broker {
	p := transport.PartitionFor(transport.Role(role), partitions)
	return f.brokerWith(cluster.RoleQuery{Partitions: []cluster.TopicPartition{{Topic: topic, Partition: p}}},
		cluster.BrokerRole{Kind: cluster.RoleLeader, Topic: topic, Partition: p})
}

func (f *fixture) brokerWith(q cluster.RoleQuery, r cluster.BrokerRole) cluster.Broker {
	f.t.Helper()
	b, err := f.findBroker(context.Background(), q, r)
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

// findBroker returns the broker that has r, by the cluster's answer to q.
func (f *fixture) findBroker(ctx context.Context, q cluster.RoleQuery, r cluster.BrokerRole) (cluster.Broker, error) {
	bs, err := f.c.Brokers(ctx, q)
	for _, b := range bs {
		if b.Has(r) {
			return b, nil
		}
	}
	return cluster.Broker{}, fmt.Errorf("no broker is %v: %w", r, errors.Join(err, fmt.Errorf("brokers %+v", bs)))
}

// findCoordinator returns the broker coordinating role's transactional id, or an error
// while none does.
func (f *fixture) findCoordinator(ctx context.Context, role string) (cluster.Broker, error) {
	id := transport.TransactionalID(topic, transport.Role(role))
	return f.findBroker(ctx, cluster.RoleQuery{TransactionalIDs: []string{id}}, cluster.BrokerRole{Kind: cluster.RoleTxnCoordinator, Key: id})
}

// peerLinks returns the cluster's peer links by (from, to) broker id.
func (f *fixture) peerLinks() map[[2]int32]*links.Link {
	peer := map[[2]int32]*links.Link{}
	for _, l := range f.c.Network().Links() {
		if l.Kind() == links.LinkPeer {
			peer[[2]int32{l.From(), l.Broker()}] = l
		}
	}
	return peer
}

func ms(n int) units.Duration  { return units.Duration(time.Duration(n) * time.Millisecond) }
func sec(n int) units.Duration { return units.Duration(time.Duration(n) * time.Second) }

// memRecorder keeps the events the nemesis records.
type memRecorder struct {
	mu     sync.Mutex
	events []history.Event
	log    *[]string // when set, "event <type>" is appended, to order events among calls
}

func (r *memRecorder) Append(e history.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
	if r.log != nil {
		*r.log = append(*r.log, "event "+e.Type.String())
	}
	return nil
}

// windows joins the recorded events as a history reader would, failing the test on a
// malformed sequence (a window ended twice, ended before it started, ...).
func (r *memRecorder) windows(t testing.TB) []history.Fault {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	b := history.NewBuilder(0)
	if err := b.Add(&history.Event{Type: history.TypeHeader, Format: 1}); err != nil {
		t.Fatal(err)
	}
	for i := range r.events {
		e := r.events[i]
		if err := b.Add(&e); err != nil {
			t.Fatalf("event %d %+v: %v", i, e, err)
		}
	}
	return b.History().Faults
}
