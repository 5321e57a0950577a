//go:build !kafka

package nemesis_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/nemesis"
)

// cappedZombie is a MemberFreezer and FreezeSpanner for one member, which (like the workload's
// before-lease-commit freezes) holds a freeze at most capAt, whatever it was asked, and
// reports when it froze and resumed.
type cappedZombie struct {
	m     nemesis.Member
	start time.Time // the env's start: the zero of history times
	capAt time.Duration

	mu              sync.Mutex
	armed           bool
	bound           time.Duration
	release         chan struct{}
	froze, resumed  time.Duration
	frozen, didStop bool
}

func (z *cappedZombie) Holder(role string) (nemesis.Member, bool) { return z.m, role == z.m.Role }

func (z *cappedZombie) SettledHolder(role string) (nemesis.Member, bool) { return z.Holder(role) }

func (z *cappedZombie) Freeze(_ context.Context, _ nemesis.Member, _ string, d time.Duration) error {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.armed, z.bound, z.release, z.didStop = true, min(d, z.capAt), make(chan struct{}), false
	return nil
}

func (z *cappedZombie) Frozen(nemesis.Member) bool {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.frozen
}

func (z *cappedZombie) Thaw(context.Context, nemesis.Member) error {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.armed {
		z.armed = false
		close(z.release)
	}
	return nil
}

func (z *cappedZombie) LastFreeze(nemesis.Member) (froze, resumed time.Duration, ok bool) {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.froze, z.resumed, z.didStop
}

// pausePoint blocks while a freeze is armed, up to its capped bound, recording the span.
func (z *cappedZombie) pausePoint() {
	z.mu.Lock()
	if !z.armed {
		z.mu.Unlock()
		return
	}
	z.frozen, z.didStop, z.froze, z.resumed = true, true, time.Since(z.start), 0
	rel, bound := z.release, z.bound
	z.mu.Unlock()
	select {
	case <-rel:
	case <-time.After(bound):
	}
	z.mu.Lock()
	z.frozen, z.armed, z.resumed = false, false, time.Since(z.start)
	z.mu.Unlock()
}

func TestFreezeWindowIsWhatHappened(t *testing.T) {
	t.Run("capped freeze - the window is the member's real freeze, not the time asked for", func(t *testing.T) {
		t.Parallel()
		start := time.Now()
		z := &cappedZombie{m: nemesis.Member{Process: 2, Role: "role-1", ID: "m7"}, start: start, capAt: 300 * time.Millisecond}
		f := newFixture(t, 1, func(e *nemesis.Env) { e.Freezer, e.Start = z, start })
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { // the member passes its pause point every 50 ms until it has frozen there once
			for ctx.Err() == nil {
				z.pausePoint()
				if _, _, froze := z.LastFreeze(z.m); froze {
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
		ws := runOneWindow(t, f, ctx, cancel, &wg, "at 200ms freeze holder of role-1 for 1500ms")
		if len(ws) != 1 {
			t.Fatalf("windows %+v, want one", ws)
		}
		w := ws[0]
		froze, resumed, _ := z.LastFreeze(z.m)
		if !w.TookHold || w.Kind != history.KindMemberPause || w.Step != 1 {
			t.Fatalf("window %+v: want a held member pause of step 1", w)
		}
		if w.Start != froze.Nanoseconds() || w.End != resumed.Nanoseconds() {
			t.Fatalf("window %v–%v, want the member's freeze %v–%v", time.Duration(w.Start), time.Duration(w.End), froze, resumed)
		}
		if got := time.Duration(w.End - w.Start); got < 300*time.Millisecond || got >= 1500*time.Millisecond {
			t.Fatalf("window lasts %v, want the 300ms cap, not the 1.5s asked for", got)
		}
	})

	t.Run("a freeze the member never reaches - a window from arming to the end of its time, not held", func(t *testing.T) {
		t.Parallel()
		start := time.Now()
		z := &cappedZombie{m: nemesis.Member{Process: 2, Role: "role-1", ID: "m7"}, start: start, capAt: time.Second}
		f := newFixture(t, 1, func(e *nemesis.Env) { e.Freezer, e.Start = z, start }) // WaitTimeout 15s
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
		defer cancel()
		if err := f.n.Run(ctx, script(t, "at 100ms freeze holder of role-1 for 400ms")); err != nil {
			t.Fatal(err)
		}
		ws := f.rec.windows(t)
		if len(ws) != 1 || ws[0].TookHold || ws[0].Step != 1 || ws[0].End == history.Never {
			t.Fatalf("windows %+v, want one closed window of step 1 that did not take hold", ws)
		}
		// Armed for its 400ms and no longer: not for the nemesis's 15s wait, nor until the run
		// ends 8 s in. The upper bound, ten times the 400 ms, is slack for a loaded machine.
		if d := time.Duration(ws[0].End - ws[0].Start); d < 400*time.Millisecond || d > 4*time.Second {
			t.Fatalf("window lasts %v, want from arming to the end of the freeze's 400ms", d)
		}
	})
}

// TestLateFreezeLastsItsTime: a member that reaches its pause point well after the step armed
// the freeze is still frozen for the step's whole time, counted from when it froze. Before,
// the thaw came at the arming plus that time, so a slow client (KafkaJS on a loaded machine,
// 2.2 s to its pause point) was frozen 2.5 s of a 4.5 s step, less than the 3 s session
// timeout the step must outlast, and pipeline-zombie came out inconclusive.
func TestLateFreezeLastsItsTime(t *testing.T) {
	t.Parallel()
	start := time.Now()
	z := &cappedZombie{m: nemesis.Member{Process: 2, Role: "role-1", ID: "m7"}, start: start, capAt: time.Minute}
	f := newFixture(t, 1, func(e *nemesis.Env) { e.Freezer, e.Start = z, start })
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil { // the member notices the armed freeze only after its slow poll
			z.mu.Lock()
			armed := z.armed
			z.mu.Unlock()
			if armed {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(700 * time.Millisecond): // the poll in progress
		}
		z.pausePoint()
	})
	ws := runOneWindow(t, f, ctx, cancel, &wg, "at 100ms freeze holder of role-1 for 1000ms")
	if len(ws) != 1 || !ws[0].TookHold {
		t.Fatalf("windows %+v, want one that took hold", ws)
	}
	if got := time.Duration(ws[0].End - ws[0].Start); got < time.Second {
		t.Fatalf("the member was frozen %v, want the step's 1s from when it froze", got)
	}
}

func TestScriptedWindowsNameTheirSteps(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	// The steps in the file's order; the second runs first.
	if err := f.n.Run(ctx, script(t, "at 600ms latency p2 from all with latency=50ms for 300ms", "at 0s partition p1 from all for 300ms")); err != nil {
		t.Fatal(err)
	}
	ws := f.rec.windows(t)
	if len(ws) != 2 || ws[0].Kind != "partition" || ws[0].Step != 2 || ws[1].Kind != "latency" || ws[1].Step != 1 {
		t.Fatalf("windows %+v: want partition as step 2, then latency as step 1", ws)
	}
}

// runOneWindow runs f's nemesis on the one-line script line until its window is closed,
// whenever a loaded machine gets there (30 s guard), then stops it (cancel), waits for the
// test's member goroutines (wg) and returns the windows recorded.
func runOneWindow(t *testing.T, f *fixture, ctx context.Context, cancel context.CancelFunc, wg *sync.WaitGroup, line string) []history.Fault {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f.n.Run(ctx, script(t, line)) }()
	for guard := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if ws := f.rec.windows(t); len(ws) == 1 && ws[0].End != history.Never {
			break
		}
		if time.Now().After(guard) {
			t.Fatal("the freeze's window was not closed within 30 s")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	return f.rec.windows(t)
}
