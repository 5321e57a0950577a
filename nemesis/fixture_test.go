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
	"github.com/fencecheck/fencecheck/nemesis"
	"github.com/fencecheck/fencecheck/transport"
)

const (
	reqTimeout = 2 * time.Second // the transports' RequestTimeout
	lease      = time.Second     // the transports' lease (transaction timeout)
	partitions = 3
	topic      = "nemesis.coordination"
	processes  = 4 // p4 creates the topic
)

var roles = []string{"role-1", "role-2", "role-3"}

// fixture is one embedded cluster, a nemesis on it, and transports per process.
type fixture struct {
	t   *testing.T
	c   cluster.Cluster
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
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := embedded.New(ctx, embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	f := &fixture{t: t, c: c, rec: &memRecorder{}, trs: map[int]*transport.BrokerTransport{}}
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
	cfg.RequestTimeout, cfg.Dial, cfg.ClientID = reqTimeout, dial, cluster.ProcessName(p)
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

// failsFast runs call and checks that it fails within the request timeout (plus slack).
func failsFast(t *testing.T, what string, call func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*reqTimeout)
	defer cancel()
	start := time.Now()
	err := call(ctx)
	took := time.Since(start)
	if err == nil {
		t.Fatalf("%s: succeeded, want an error", what)
	}
	if took > reqTimeout+time.Second {
		t.Fatalf("%s: failed after %v, want within the request timeout %v: %v", what, took, reqTimeout, err)
	}
	t.Logf("%s: failed after %v: %v", what, took.Round(time.Millisecond), err)
}

// recovers retries call until it succeeds (20s at most): service is there, or came back.
func recovers(t *testing.T, what string, call func(context.Context) error) {
	t.Helper()
	start := time.Now()
	var err error
	for time.Since(start) < 20*time.Second {
		ctx, cancel := context.WithTimeout(context.Background(), 2*reqTimeout)
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
		cluster.Role{Kind: cluster.RoleTxnCoordinator, Key: transport.TransactionalID(topic, transport.Role(role))})
}

// leader returns the leader of role's partition.
func (f *fixture) leader(role string) cluster.Broker {
	p := transport.PartitionFor(transport.Role(role), partitions)
	return f.brokerWith(cluster.RoleQuery{Partitions: []cluster.TopicPartition{{Topic: topic, Partition: p}}},
		cluster.Role{Kind: cluster.RoleLeader, Topic: topic, Partition: p})
}

func (f *fixture) brokerWith(q cluster.RoleQuery, r cluster.Role) cluster.Broker {
	f.t.Helper()
	bs, err := f.c.Brokers(context.Background(), q)
	for _, b := range bs {
		if b.Has(r) {
			return b
		}
	}
	f.t.Fatalf("no broker is %v: %v", r, errors.Join(err, fmt.Errorf("brokers %+v", bs)))
	return cluster.Broker{}
}

func ms(n int) nemesis.Duration  { return nemesis.Duration(time.Duration(n) * time.Millisecond) }
func sec(n int) nemesis.Duration { return nemesis.Duration(time.Duration(n) * time.Second) }
