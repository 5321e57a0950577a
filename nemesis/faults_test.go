//go:build !kafka

package nemesis_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/cluster/embedded"
	"github.com/fencecheck/fencecheck/cluster/links"
	"github.com/fencecheck/fencecheck/nemesis"
	"github.com/fencecheck/fencecheck/transport"
)

// Each test shows its fault take hold on the embedded cluster — a call that should fail
// fails within the request timeout — and healing restore service. Every fixture ends with
// HealAll and a check that no link is down, no toxic is left and every broker runs.

// TestLinkFaults runs every link fault with both kinds of process link: toxiproxy proxies
// (the reference) and toxiproxy's engine inside each process's connections.
func TestLinkFaults(t *testing.T) {
	for _, mode := range []links.LinkMode{links.LinkModeProxy, links.LinkModeConn} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			linkFaults(t, mode)
		})
	}
}

func linkFaults(t *testing.T, mode links.LinkMode) {
	newFixture := func(t *testing.T, seed uint64, edit func(*nemesis.Env)) *fixture {
		return newLinkFixture(t, mode, seed, edit)
	}
	t.Run("partition - p1 from all brokers, refused - p1 fails fast, p2 works, heal restores p1", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, 1, nil)
		recovers(t, "p1 acquire before", f.acquire(1, "role-1"))
		inj := f.inject(nemesis.Spec{Fault: "partition", Target: nemesis.Target{Processes: nemesis.IDs(1), Brokers: nemesis.All()}})
		if got := inj.Window().Targets; len(got) != 3 || !strings.HasPrefix(got[0], "p1->") {
			t.Fatalf("targets %v, want p1's three links", got)
		}
		failsFast(t, "p1 acquire while cut", f.acquire(1, "role-1"))
		recovers(t, "p2 acquire while p1 is cut", f.acquire(2, "role-2"))
		f.heal(inj)
		recovers(t, "p1 acquire", f.acquire(1, "role-1"))
	})

	t.Run("partition - p1 from the coordinator of a role - p1's acquire fails fast, p2's works", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, 1, nil)
		coord := f.coordinator("role-2")
		inj := f.inject(nemesis.Spec{Fault: "partition", Target: nemesis.Target{Processes: nemesis.IDs(1), Brokers: nemesis.CoordinatorOf("role-2")}})
		if got, want := inj.Window().Targets, []string{"p1->" + coord.Name()}; !slices.Equal(got, want) {
			t.Fatalf("targets %v, want %v", got, want)
		}
		failsFast(t, "p1 acquire (InitProducerId goes to the coordinator)", f.acquire(1, "role-2"))
		recovers(t, "p2 acquire", f.acquire(2, "role-2"))
		f.heal(inj)
		recovers(t, "p1 acquire", f.acquire(1, "role-2"))
	})

	t.Run("partition - p1 from the leader of a role, black hole - p1's register fails fast, heal restores", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, 1, nil)
		recovers(t, "p1 register before", f.register(1, "role-3", 8))
		leader := f.leader("role-3")
		inj := f.inject(nemesis.Spec{Fault: "partition", Target: nemesis.Target{Processes: nemesis.IDs(1), Brokers: nemesis.LeaderOf("role-3")},
			Params: nemesis.Params{Mode: nemesis.ModeBlackhole}})
		if got, want := inj.Window().Targets, []string{"p1->" + leader.Name()}; !slices.Equal(got, want) {
			t.Fatalf("targets %v, want %v", got, want)
		}
		failsFast(t, "p1 register (produce to the leader)", f.register(1, "role-3", 8))
		f.heal(inj)
		recovers(t, "p1 register", f.register(1, "role-3", 8))
	})

	t.Run("partition - random processes from random brokers - drawn from the seed, cut", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, 3, nil)
		inj := f.inject(nemesis.Spec{Fault: "partition", Target: nemesis.Target{Processes: nemesis.Subset(), Brokers: nemesis.Subset()}})
		targets := inj.Window().Targets
		if len(targets) == 0 {
			t.Fatal("no targets")
		}
		// Every drawn link refuses connections (the nemesis's own probe checked the same
		// through each process's dialer).
		for _, target := range targets {
			l := f.c.Network().Link(strings.Replace(target, "->", "-", 1))
			if l == nil {
				t.Fatalf("target %s is no link", target)
			}
			if err := dialLink(f, l); err == nil {
				t.Fatalf("link %s accepts connections while cut", target)
			}
		}
		t.Logf("cut %v", targets)
		f.heal(inj)
	})

	t.Run("latency - 2.5s on p1's responses - acquire times out, heal restores", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, 1, nil)
		recovers(t, "p1 acquire before", f.acquire(1, "role-1"))
		inj := f.inject(nemesis.Spec{Fault: "latency", Target: nemesis.Target{Processes: nemesis.IDs(1)},
			Params: nemesis.Params{Latency: ms(2500), Jitter: ms(100)}})
		failsFast(t, "p1 acquire with 2.5s latency", f.acquire(1, "role-1"))
		f.heal(inj)
		recovers(t, "p1 acquire", f.acquire(1, "role-1"))
	})

	t.Run("bandwidth - 1 KB/s on p1's requests - a 20 KB registration fails fast", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, 1, nil)
		recovers(t, "p1 register before", f.register(1, "role-1", 20000))
		inj := f.inject(nemesis.Spec{Fault: "bandwidth", Target: nemesis.Target{Processes: nemesis.IDs(1)},
			Params: nemesis.Params{Rate: 1, Direction: nemesis.DirUpstream}})
		failsFast(t, "p1 20 KB register at 1 KB/s", f.register(1, "role-1", 20000))
		f.heal(inj)
		recovers(t, "p1 register", f.register(1, "role-1", 20000))
	})

	t.Run("reset-peer - p1's connections reset at once - acquire fails fast", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, 1, nil)
		recovers(t, "p1 acquire before", f.acquire(1, "role-1"))
		inj := f.inject(nemesis.Spec{Fault: "reset-peer", Target: nemesis.Target{Processes: nemesis.IDs(1)}})
		failsFast(t, "p1 acquire with every connection reset", f.acquire(1, "role-1"))
		f.heal(inj)
		recovers(t, "p1 acquire", f.acquire(1, "role-1"))
	})

	t.Run("slicer - p1's responses in 2±1 byte slices 20ms apart - acquire fails fast", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, 1, nil)
		recovers(t, "p1 acquire before", f.acquire(1, "role-1"))
		inj := f.inject(nemesis.Spec{Fault: "slicer", Target: nemesis.Target{Processes: nemesis.IDs(1)},
			Params: nemesis.Params{SliceSize: 2, SliceVariation: 1, SliceDelay: ms(20)}})
		failsFast(t, "p1 acquire through a slicer", f.acquire(1, "role-1"))
		f.heal(inj)
		recovers(t, "p1 acquire", f.acquire(1, "role-1"))
	})

	t.Run("limit-data - p1's connections closed after 16 bytes - acquire fails fast", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, 1, nil)
		recovers(t, "p1 acquire before", f.acquire(1, "role-1"))
		inj := f.inject(nemesis.Spec{Fault: "limit-data", Target: nemesis.Target{Processes: nemesis.IDs(1)},
			Params: nemesis.Params{Bytes: 16}})
		failsFast(t, "p1 acquire with 16 bytes per connection", f.acquire(1, "role-1"))
		f.heal(inj)
		recovers(t, "p1 acquire", f.acquire(1, "role-1"))
	})

	t.Run("flapping - p1's links go down and up again and again - heal leaves them up", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, 1, nil)
		inj := f.inject(nemesis.Spec{Fault: "flapping", Target: nemesis.Target{Processes: nemesis.IDs(1), Brokers: nemesis.IDs(0)},
			Params: nemesis.Params{Interval: ms(300)}})
		l := f.c.Network().ProcessLink(1, 0)
		var seen []bool
		for end := time.Now().Add(2500 * time.Millisecond); time.Now().Before(end); time.Sleep(30 * time.Millisecond) {
			up, err := l.Enabled(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(seen) == 0 || seen[len(seen)-1] != up {
				seen = append(seen, up)
			}
		}
		if len(seen) < 4 || seen[0] {
			t.Fatalf("link states seen %v, want down first and at least 3 toggles in 2.5s", seen)
		}
		t.Logf("link p1->b0 went %v", seen)
		f.heal(inj)
		recovers(t, "p1 acquire", f.acquire(1, "role-1"))
	})
}

func TestBrokerFaults(t *testing.T) {
	t.Run("kill - the coordinator of a role - a client of that broker alone fails fast, restart restores", func(t *testing.T) {
		t.Parallel()
		killCoordinator(t, newFixture(t, 1, nil), "role-1", nil)
	})

	t.Run("restart - every broker in turn (rolling) - open connections cut, service continues", func(t *testing.T) {
		t.Parallel()
		restartBrokers(t, newFixture(t, 1, nil), nemesis.All(), 3, nemesis.Params{Interval: ms(100)})
	})

	t.Run("pause - the leader of a role - register fails fast, resume restores", func(t *testing.T) {
		t.Parallel()
		pauseLeader(t, newFixture(t, 1, nil), "role-2", nil)
	})

	t.Run("pause - a random broker - drawn, silent", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, 5, nil)
		inj := f.inject(nemesis.Spec{Fault: "pause"})
		b := inj.Window().Targets[0]
		bs, _ := f.c.Brokers(context.Background(), cluster.RoleQuery{})
		for _, br := range bs {
			if br.Name() == b {
				failsFast(t, "metadata from "+b+" alone", listBrokers(br.Addr))
			}
		}
		f.heal(inj)
	})

	t.Run("isolate - the embedded cluster has no peer links - unsupported", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, 1, nil)
		_, err := f.n.Inject(context.Background(), nemesis.Spec{Fault: "isolate"})
		if !errors.Is(err, cluster.ErrUnsupported) {
			t.Fatalf("isolate: %v, want ErrUnsupported", err)
		}
		if ws := f.rec.windows(t); len(ws) != 0 {
			t.Fatalf("windows %+v, want none for a fault that never started", ws)
		}
	})

	t.Run("isolate - b0's peer links (made by hand) - its links refuse, others carry, heal restores", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, 1, nil)
		ctx := context.Background()
		bs, _ := f.c.Brokers(ctx, cluster.RoleQuery{})
		for _, from := range bs {
			for _, to := range bs {
				if from.ID == to.ID {
					continue
				}
				_, err := f.c.Network().AddLink(ctx, links.LinkSpec{Kind: links.LinkPeer, From: from.ID, Broker: to.ID,
					Proxies: []links.ProxySpec{{Suffix: "repl", Upstream: to.Addr}, {Suffix: "ctrl", Upstream: to.Addr}}})
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		isolateBroker(t, f, 0, nemesis.IDs(0), nil)
	})

	t.Run("move-coordinator - rehash on kfake - another broker coordinates, acquire works", func(t *testing.T) {
		t.Parallel()
		moveCoordinator(t, newFixture(t, 1, nil), "role-3")
	})
}

// The broker fault bodies below run on any fixture: TestBrokerFaults runs them on the
// embedded cluster, TestBrokerFaultsLocalKafka on Apache Kafka JVMs. A during hook, when not
// nil, runs while the fault holds, for the checks that only real brokers pass.

// zombie is a MemberFreezer for one member whose loop calls pausePoint before each write.
type zombie struct {
	m nemesis.Member

	mu      sync.Mutex
	armed   bool
	frozen  bool
	bound   time.Duration
	release chan struct{}
}

func (z *zombie) Holder(role string) (nemesis.Member, bool) { return z.m, role == z.m.Role }

func (z *zombie) SettledHolder(role string) (nemesis.Member, bool) { return z.Holder(role) }

func (z *zombie) Freeze(_ context.Context, m nemesis.Member, _ string, d time.Duration) error {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.armed, z.bound, z.release = true, d, make(chan struct{})
	return nil
}

func (z *zombie) Frozen(nemesis.Member) bool {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.frozen
}

func (z *zombie) Thaw(context.Context, nemesis.Member) error {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.armed {
		z.armed = false
		close(z.release)
	}
	return nil
}

// pausePoint blocks while a freeze is armed, up to its bound.
func (z *zombie) pausePoint() {
	z.mu.Lock()
	if !z.armed {
		z.mu.Unlock()
		return
	}
	z.frozen = true
	rel, bound := z.release, z.bound
	z.mu.Unlock()
	select {
	case <-rel:
	case <-time.After(bound):
	}
	z.mu.Lock()
	z.frozen, z.armed = false, false
	z.mu.Unlock()
}

func TestMemberFaults(t *testing.T) {
	t.Run("freeze - the holder past its lease - its writes stop, a newer holder fences it after the thaw", func(t *testing.T) {
		t.Parallel()
		z := &zombie{m: nemesis.Member{Process: 1, Role: "role-1", ID: "m1"}}
		f := newFixture(t, 1, func(e *nemesis.Env) { e.Freezer = z })
		tr := f.transport(1)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var tok transport.FencingToken
		recovers(t, "p1 acquire", func(ctx context.Context) (err error) {
			tok, err = tr.AcquireEpoch(ctx, "role-1")
			return err
		})
		var mu sync.Mutex
		writes, lastErr := 0, error(nil)
		done := make(chan struct{})
		go func() { // the holder: renew every 50ms until a write fails
			defer close(done)
			for seq := uint64(1); ctx.Err() == nil; seq++ {
				z.pausePoint()
				err := tr.WriteLease(ctx, "role-1", tok, transport.Lease{Holder: "m1", Seq: seq, Duration: lease, WrittenAt: time.Now()})
				mu.Lock()
				writes, lastErr = writes+1, err
				mu.Unlock()
				if err != nil {
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		}()
		count := func() (int, error) { mu.Lock(); defer mu.Unlock(); return writes, lastErr }
		for n, _ := count(); n < 2; n, _ = count() {
			time.Sleep(20 * time.Millisecond)
		}

		inj := f.inject(nemesis.Spec{Fault: "freeze", Target: nemesis.Target{Role: "role-1"}, Params: nemesis.Params{Point: "before-write"}})
		if s := inj.Spec(); s.For.D() != 2*lease {
			t.Fatalf("freeze lasts %v, want twice the lease", s.For)
		}
		// The holder may be inside a write when the freeze is armed: count from when it is
		// frozen at its next pause point, however long a loaded machine takes to get there.
		for guard := time.Now().Add(30 * time.Second); !z.Frozen(z.m); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(guard) {
				t.Fatal("the holder did not reach its pause point within 30 s")
			}
		}
		frozenAt, _ := count()
		time.Sleep(lease + 200*time.Millisecond) // past the lease
		if n, err := count(); n != frozenAt || err != nil {
			t.Fatalf("the frozen holder wrote: %d writes, was %d (%v)", n, frozenAt, err)
		}
		recovers(t, "p2 acquire while p1 is frozen", f.acquire(2, "role-1"))
		w := f.heal(inj)
		if w.Kind != "member-pause" || w.Process != "p1" || w.Role != "role-1" || w.Member != "m1" {
			t.Fatalf("window %+v, want a member-pause of p1/role-1/m1", w)
		}
		select {
		case <-done:
		case <-time.After(30 * time.Second): // a guard: the thawed holder writes at once
			t.Fatal("the thawed holder did not write within 30 s")
		}
		if _, err := count(); !errors.Is(err, transport.ErrFenced) {
			t.Fatalf("the thawed holder's write: %v, want ErrFenced", err)
		}
	})
}

// lateHolder is a zombie whose role has no holder until holdsAt: a step that comes during a
// handoff.
type lateHolder struct {
	*zombie
	holdsAt time.Time
}

func (l *lateHolder) Holder(role string) (nemesis.Member, bool) {
	if time.Now().Before(l.holdsAt) {
		return nemesis.Member{}, false
	}
	return l.zombie.Holder(role)
}

func (l *lateHolder) SettledHolder(role string) (nemesis.Member, bool) { return l.Holder(role) }

// TestFreezeWaitsForAHolder: a freeze of "the holder of r" when nobody holds r takes the next
// holder that comes within a lease, and gives up (no target) when none comes.
func TestFreezeWaitsForAHolder(t *testing.T) {
	m := nemesis.Member{Process: 1, Role: "role-1", ID: "m1"}
	spec := nemesis.Spec{Fault: "freeze", Target: nemesis.Target{Role: "role-1"}, Params: nemesis.Params{Point: "before-write"}}
	for _, tc := range []struct {
		name  string
		after time.Duration
		want  error
	}{{"a holder within the lease", lease / 2, nil}, {"no holder within the lease", 3 * lease, nemesis.ErrNoTarget}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			z := &lateHolder{zombie: &zombie{m: m}}
			f := newFixture(t, 1, func(e *nemesis.Env) { e.Freezer = z })
			// Timed from here, not before the fixture: its cluster's start must not eat
			// into the window, however long a loaded machine takes.
			z.holdsAt = time.Now().Add(tc.after)
			inj, err := f.n.Prepare(spec)
			if err != nil {
				t.Fatal(err)
			}
			began := time.Now()
			err = inj.Setup(context.Background())
			took := time.Since(began)
			if !errors.Is(err, tc.want) && !(tc.want == nil && err == nil) {
				t.Fatalf("setup after %v: %v, want %v", took, err, tc.want)
			}
			if tc.want == nil {
				if got := inj.Window().Targets; len(got) != 1 || got[0] != m.String() {
					t.Errorf("targets %v after %v, want [%s]", got, took, m)
				}
				inj.Cleanup(context.Background())
			}
		})
	}
}

// settling is a zombie whose role is in a handoff until settleAt: until then m believes it
// holds (Holder) but an acquire is in flight, and the handoff settles on next.
type settling struct {
	*zombie
	next     nemesis.Member
	settleAt time.Time
}

func (s *settling) SettledHolder(role string) (nemesis.Member, bool) {
	if time.Now().Before(s.settleAt) || role != s.next.Role {
		return nemesis.Member{}, false
	}
	return s.next, true
}

// TestFreezeTakesTheSettledHolder: a freeze of "the holder of r" during a handoff (a
// scramble: the first member to return from its acquire is about to be deposed by an acquire
// in flight) takes the holder the handoff settles on, not the first believer, whose next
// write would fail before its pause point; when nothing settles within a lease it takes
// whoever holds then.
func TestFreezeTakesTheSettledHolder(t *testing.T) {
	old := nemesis.Member{Process: 1, Role: "role-1", ID: "m1"}
	next := nemesis.Member{Process: 2, Role: "role-1", ID: "m2"}
	spec := nemesis.Spec{Fault: "freeze", Target: nemesis.Target{Role: "role-1"}, Params: nemesis.Params{Point: "before-write"}}
	for _, tc := range []struct {
		name  string
		after time.Duration
		want  nemesis.Member
	}{{"settles within the lease", lease / 2, next}, {"never settles", 3 * lease, old}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			z := &settling{zombie: &zombie{m: old}, next: next}
			f := newFixture(t, 2, func(e *nemesis.Env) { e.Freezer = z })
			z.settleAt = time.Now().Add(tc.after) // after the fixture's start, as above
			inj, err := f.n.Prepare(spec)
			if err != nil {
				t.Fatal(err)
			}
			if err := inj.Setup(context.Background()); err != nil {
				t.Fatal(err)
			}
			defer inj.Cleanup(context.Background())
			if got := inj.Window().Targets; len(got) != 1 || got[0] != tc.want.String() {
				t.Fatalf("targets %v, want [%s]", got, tc.want)
			}
		})
	}
}

// handoff is a MemberFreezer for a role held by from until at, then by to: from, deposed,
// never reaches a pause point again; to reaches one as soon as a freeze is armed for it.
type handoff struct {
	from, to nemesis.Member
	at       time.Time

	mu    sync.Mutex
	armed map[nemesis.Member]bool
}

func (h *handoff) holder() nemesis.Member {
	if time.Now().Before(h.at) {
		return h.from
	}
	return h.to
}

func (h *handoff) Holder(string) (nemesis.Member, bool)        { return h.holder(), true }
func (h *handoff) SettledHolder(string) (nemesis.Member, bool) { return h.holder(), true }

func (h *handoff) Freeze(_ context.Context, m nemesis.Member, _ string, _ time.Duration) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.armed[m] = true
	return nil
}

func (h *handoff) Frozen(m nemesis.Member) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.armed[m] && m == h.to && !time.Now().Before(h.at)
}

func (h *handoff) Thaw(_ context.Context, m nemesis.Member) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.armed[m] = false
	return nil
}

// TestFreezeFollowsTheHolder: a freeze armed for the holder of r whose target is deposed
// before it reaches its pause point moves to the member the role settles on, disarms the old
// target, and records the new one in its window.
func TestFreezeFollowsTheHolder(t *testing.T) {
	from := nemesis.Member{Process: 1, Role: "role-1", ID: "m1"}
	to := nemesis.Member{Process: 2, Role: "role-1", ID: "m2"}
	h := &handoff{from: from, to: to, armed: map[nemesis.Member]bool{}}
	f := newFixture(t, 2, func(e *nemesis.Env) { e.Freezer = h })
	h.at = time.Now().Add(lease / 2) // after the fixture's start: setup must see the old holder
	inj, err := f.n.Prepare(nemesis.Spec{Fault: "freeze", Target: nemesis.Target{Role: "role-1"}, Params: nemesis.Params{Point: "before-write"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := inj.Setup(ctx); err != nil {
		t.Fatal(err)
	}
	defer inj.Cleanup(ctx)
	if got := inj.Window().Targets; len(got) != 1 || got[0] != from.String() {
		t.Fatalf("targets at setup %v, want [%s]", got, from)
	}
	if err := inj.Inject(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 3*lease)
	defer cancel()
	if err := inj.WaitForInjected(wctx); err != nil {
		t.Fatalf("the freeze did not take hold on the new holder: %v", err)
	}
	if got := inj.Window().Targets; len(got) != 1 || got[0] != to.String() {
		t.Fatalf("targets after the handoff %v, want [%s]", got, to)
	}
	h.mu.Lock()
	stale := h.armed[from]
	h.mu.Unlock()
	if stale {
		t.Fatal("the deposed target is still armed")
	}
	if err := inj.Recover(ctx); err != nil {
		t.Fatal(err)
	}
}

// opRecorder is a cluster that records the broker operations called on it before it passes
// them on.
type opRecorder struct {
	cluster.Cluster
	mu  sync.Mutex
	ops []cluster.BrokerOp
}

func (r *opRecorder) record(op cluster.BrokerOp) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !slices.Contains(r.ops, op) {
		r.ops = append(r.ops, op)
	}
}

func (r *opRecorder) Kill(ctx context.Context, b int32) error {
	r.record(cluster.OpKill)
	return r.Cluster.Kill(ctx, b)
}

func (r *opRecorder) Pause(ctx context.Context, b int32) error {
	r.record(cluster.OpPause)
	return r.Cluster.Pause(ctx, b)
}

func (r *opRecorder) Resume(ctx context.Context, b int32) error {
	r.record(cluster.OpResume)
	return r.Cluster.Resume(ctx, b)
}

func (r *opRecorder) Restart(ctx context.Context, b int32) error {
	r.record(cluster.OpRestart)
	return r.Cluster.Restart(ctx, b)
}

// TestBrokerOpsAreTheOnesCalled: the broker operations the registry says a fault needs
// (BrokerOps: what an external cluster must have commands for, and what keeps a run off a
// shared cluster) are the ones the fault and its heal call. isolate and move-coordinator call
// theirs only on clusters that the embedded one is not (no peer links: an Isolator; not kfake).
func TestBrokerOpsAreTheOnesCalled(t *testing.T) {
	for _, fault := range []string{"kill", "restart", "pause", "partition", "latency"} {
		t.Run(fault, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, err := embedded.New(ctx, embedded.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close(context.Background()) })
			rec := &opRecorder{Cluster: c}
			f := newFixtureOn(t, rec, embeddedTiming, 1, nil)
			f.heal(f.inject(nemesis.Spec{Fault: fault}))
			rec.mu.Lock()
			called := slices.Sorted(slices.Values(rec.ops))
			rec.mu.Unlock()
			if want := slices.Sorted(slices.Values(nemesis.BrokerOps(fault))); !slices.Equal(called, want) {
				t.Errorf("%s and its heal called %v; the registry says it needs %v", fault, called, want)
			}
		})
	}
}

// TestRecordedSpecReplaysTheFault: the spec a fault-start event records (history.Fault.Spec)
// parses, and injected again it acts on the same targets, for faults whose spec picks at
// random (links, brokers, a Kafka fault's processes) or by a role (the coordinator of a role,
// which the record names by id; every process, which it keeps): fencecheck shrink
// replays a run's faults from it. Whether each fault holds is the other tests' business:
// these are injected and healed without waiting for them to take hold.
func TestRecordedSpecReplaysTheFault(t *testing.T) {
	for _, spec := range []nemesis.Spec{
		{Fault: "partition", Target: nemesis.Target{Processes: nemesis.Random(2), Brokers: nemesis.Random(2)}, For: ms(500)},
		{Fault: "latency", For: ms(500)},
		{Fault: "kill", Target: nemesis.Target{Brokers: nemesis.CoordinatorOf("role-1")}, For: ms(500)},
		{Fault: "pause", For: ms(500)},
		{Fault: "restart", Target: nemesis.Target{Brokers: nemesis.Random(2)}, Params: nemesis.Params{Interval: ms(100)}},
		{Fault: "drop", Target: nemesis.Target{Processes: nemesis.Random(2)}, For: ms(500)},
		{Fault: "delay", Target: nemesis.Target{Processes: nemesis.All()}, Params: nemesis.Params{API: "fetch", Delay: ms(100)}, For: ms(500)},
	} {
		t.Run(spec.Fault, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, 7, nil)
			ctx := context.Background()
			inject := func(s nemesis.Spec) []string {
				t.Helper()
				inj, err := f.n.Prepare(s)
				if err == nil {
					err = inj.Setup(ctx)
				}
				if err == nil {
					err = inj.Inject(ctx)
				}
				if err != nil {
					t.Fatalf("inject %s: %v", s, err)
				}
				targets := inj.Window().Targets
				if err := inj.Heal(ctx); err != nil {
					t.Fatalf("heal %s: %v", s, err)
				}
				return targets
			}
			first := inject(spec)
			ws := f.rec.windows(t)
			if len(ws) != 1 || ws[0].Spec == "" {
				t.Fatalf("windows %+v: want one, with its spec", ws)
			}
			again, err := nemesis.ParseSpec(ws[0].Spec)
			if err != nil {
				t.Fatalf("the recorded spec %q does not parse: %v", ws[0].Spec, err)
			}
			if again.For != spec.For || again.Fault != spec.Fault {
				t.Errorf("recorded %q: fault %s for %v, injected %s for %v", ws[0].Spec, again.Fault, again.For, spec.Fault, spec.For)
			}
			if second := inject(again); !slices.Equal(first, second) {
				t.Errorf("recorded %q: the replay acts on %v, the fault acted on %v", ws[0].Spec, second, first)
			}
		})
	}
}

// TestKillGroupCoordinator: "group-coordinator of ROLE" kills the broker the cluster names as
// the coordinator of the role's consumer group (a pipeline run's roles have one); a role
// without a group is refused as no target.
func TestKillGroupCoordinator(t *testing.T) {
	const group = "fencecheck-test-group"
	f := newFixture(t, 1, func(e *nemesis.Env) {
		resolve := e.Resolve
		e.Resolve = func(role string) (nemesis.RoleKeys, error) {
			k, err := resolve(role)
			if role == "role-1" {
				k.Group = group
			}
			return k, err
		}
	})
	bs, err := f.c.Brokers(context.Background(), cluster.RoleQuery{Groups: []string{group}})
	if err != nil {
		t.Fatal(err)
	}
	var coord cluster.Broker
	for _, b := range bs {
		if b.Has(cluster.BrokerRole{Kind: cluster.RoleGroupCoordinator, Key: group}) {
			coord = b
		}
	}
	if coord.Addr == "" {
		t.Fatalf("no coordinator of group %s among %v", group, bs)
	}
	inj := f.inject(nemesis.Spec{Fault: "kill", Target: nemesis.Target{Brokers: nemesis.GroupCoordinatorOf("role-1")}})
	if got := inj.Window().Targets; !slices.Equal(got, []string{coord.Name()}) {
		t.Fatalf("targets %v, want %s (the coordinator of group %s)", got, coord.Name(), group)
	}
	f.failsFast(t, "metadata from "+coord.Name()+" alone", f.listBrokers(coord.Addr))
	f.heal(inj)
	f.recovers(t, "metadata from "+coord.Name()+" alone", f.listBrokers(coord.Addr))

	_, err = f.n.Inject(context.Background(), nemesis.Spec{Fault: "kill", Target: nemesis.Target{Brokers: nemesis.GroupCoordinatorOf("role-2")}})
	if !errors.Is(err, nemesis.ErrNoTarget) || !strings.Contains(err.Error(), "no consumer group") {
		t.Errorf("kill group-coordinator of a role without a group: %v, want ErrNoTarget saying it has no consumer group", err)
	}
}

// TestCoordinatorOfWaitsForAnOwner: a step aimed at the coordinator of a role that has no
// transactional id yet (a pipeline's input partition before any member owns it, on a cold
// cluster) waits for one and then takes hold, on the coordinator of the id it got.
func TestCoordinatorOfWaitsForAnOwner(t *testing.T) {
	var owned atomic.Bool
	var asked atomic.Int64
	f := newFixture(t, 1, func(e *nemesis.Env) {
		resolve := e.Resolve
		e.Resolve = func(role string) (nemesis.RoleKeys, error) {
			k, err := resolve(role)
			if role == "role-1" && !owned.Load() {
				asked.Add(1)
				k.TransactionalID = ""
			}
			return k, err
		}
	})
	txnID := transport.TransactionalID(topic, transport.Role("role-1"))
	bs, err := f.c.Brokers(context.Background(), cluster.RoleQuery{TransactionalIDs: []string{txnID}})
	if err != nil {
		t.Fatal(err)
	}
	var coord string
	for _, b := range bs {
		if b.Has(cluster.BrokerRole{Kind: cluster.RoleTxnCoordinator, Key: txnID}) {
			coord = b.Name()
		}
	}
	time.AfterFunc(time.Second, func() { owned.Store(true) })
	inj := f.inject(nemesis.Spec{Fault: "kill", Target: nemesis.Target{Brokers: nemesis.CoordinatorOf("role-1")}})
	if asked.Load() < 2 {
		t.Errorf("the role was resolved %d times before it had an owner, want the step to wait and ask again", asked.Load())
	}
	if got := inj.Window().Targets; coord == "" || !slices.Equal(got, []string{coord}) {
		t.Errorf("targets %v, want the coordinator of %s (%s)", got, txnID, coord)
	}
	f.heal(inj)
}
