//go:build !kafka

package nemesis_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/nemesis"
)

func script(t *testing.T, lines ...string) nemesis.Schedule {
	t.Helper()
	var s nemesis.Schedule
	for _, l := range lines {
		st, err := nemesis.ParseStep(l)
		if err != nil {
			t.Fatal(err)
		}
		s.Script = append(s.Script, st)
	}
	return s
}

// member keeps a member of the zombie freezer reaching its pause point.
func member(t *testing.T, z *zombie) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			z.pausePoint()
			time.Sleep(20 * time.Millisecond)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
}

func TestRun(t *testing.T) {
	t.Run("script - run context cancelled mid-fault - every fault healed, every window closed", func(t *testing.T) {
		t.Parallel()
		z := &zombie{m: nemesis.Member{Process: 2, Role: "role-1", ID: "m7"}}
		member(t, z)
		f := newFixture(t, 1, func(e *nemesis.Env) { e.Freezer = z })
		sched := script(t,
			"at 0s partition p1 from all blackhole for 1m",
			"at 0s latency p2 from all with latency=100ms for 1m",
			"at 0s flapping p3 from b0,b1 with interval=200ms for 1m",
			"at 100ms limit-data p3 from b2 for 1m",
			"at 100ms pause b0 for 1m",
			"at 100ms kill b1 for 1m",
			"at 200ms freeze holder of role-1 for 1m",
			"at 200ms isolate b2 for 1m", // no peer links on kfake: skipped
		)
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan error, 1)
		go func() { ran <- f.n.Run(ctx, sched) }()

		deadline := time.Now().Add(20 * time.Second)
		for {
			act := f.n.Active()
			held := 0
			for _, a := range act {
				if a.TookHold {
					held++
				}
			}
			if held == 7 {
				t.Logf("active: %v", act)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("7 faults did not all take hold: %v", act)
			}
			time.Sleep(50 * time.Millisecond)
		}
		bs, _ := f.c.Brokers(context.Background(), cluster.RoleQuery{})
		if b0, _ := cluster.Find(bs, 0); b0.State != cluster.StatePaused {
			t.Fatalf("b0 is %v before the cancel, want paused", b0.State)
		}
		if !z.Frozen(z.m) {
			t.Fatal("member not frozen before the cancel")
		}

		cancel() // the harness's run context
		start := time.Now()
		select {
		case err := <-ran:
			if err != nil {
				t.Fatalf("Run: %v, want nil after healing", err)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("Run did not return after its context was cancelled")
		}
		t.Logf("Run healed and returned %v after the cancel", time.Since(start).Round(time.Millisecond))
		f.assertClean(t) // no toxic, no link down, no broker paused or killed, windows closed
		if z.Frozen(z.m) {
			t.Error("member still frozen")
		}
		ws := f.rec.windows(t)
		var kinds []string
		for _, w := range ws {
			kinds = append(kinds, string(w.Kind))
		}
		slices.Sort(kinds)
		if want := []string{"flapping", "kill", "latency", "limit-data", "member-pause", "partition", "pause"}; !slices.Equal(kinds, want) {
			t.Fatalf("windows of %v, want %v", kinds, want)
		}
		recovers(t, "p1 acquire", f.acquire(1, "role-2"))
	})

	t.Run("script - a step that cannot be set up - run stops, heals, returns the error", func(t *testing.T) {
		t.Parallel()
		z := &zombie{m: nemesis.Member{Process: 2, Role: "role-1", ID: "m7"}}
		f := newFixture(t, 1, func(e *nemesis.Env) { e.Freezer, e.Lease = z, 0 })
		sched := script(t,
			"at 0s partition p1 from all for 1m",
			"at 300ms freeze holder of role-1", // no For and no lease: cannot be set up
		)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := f.n.Run(ctx, sched)
		var se *nemesis.SpecError
		if !errors.As(err, &se) || se.Field != "for" {
			t.Fatalf("Run: %v, want the freeze step's SpecError for for", err)
		}
		if ctx.Err() != nil {
			t.Fatal("Run ran until its context ended; want it to stop at the error")
		}
		f.assertClean(t)
		if ws := f.rec.windows(t); len(ws) != 1 || ws[0].Kind != "partition" {
			t.Fatalf("windows %+v, want the partition's", ws)
		}
	})

	t.Run("random - one seed - the same faults and targets; never overlapping; stable gaps", func(t *testing.T) {
		t.Parallel()
		sched := nemesis.Schedule{Random: &nemesis.RandomSchedule{
			Interval: ms(300), Stable: ms(200), For: ms(150),
			Faults: []nemesis.Spec{
				{Fault: "partition"},
				{Fault: "partition", Params: nemesis.Params{Mode: nemesis.ModeBlackhole}},
				{Fault: "latency", Params: nemesis.Params{Latency: ms(50)}},
				{Fault: "reset-peer"},
				{Fault: "kill"},
				{Fault: "move-coordinator"},
				{Fault: "isolate"}, // unsupported on kfake: leaves the menu
			},
		}}
		// Each run lasts until four fault windows have closed, however long a loaded machine
		// takes to inject them (the minute only guards against a hang): a run cut at a fixed
		// time could end with fewer, or with a fault cancelled before it took hold.
		const want = 4
		closed := func(ws []history.Fault) int {
			return len(slices.DeleteFunc(slices.Clone(ws), func(w history.Fault) bool { return w.End == history.Never }))
		}
		runs := make([][]history.Fault, 2)
		var wg sync.WaitGroup
		for i := range runs {
			wg.Go(func() {
				f := newFixture(t, 42, func(e *nemesis.Env) { e.ProbeTimeout = 500 * time.Millisecond })
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				done := make(chan error, 1)
				go func() { done <- f.n.Run(ctx, sched) }()
				tick := time.NewTicker(20 * time.Millisecond)
				defer tick.Stop()
				for closed(f.rec.windows(t)) < want && ctx.Err() == nil {
					<-tick.C
				}
				cancel()
				if err := <-done; err != nil {
					t.Errorf("run %d: %v", i, err)
				}
				runs[i] = f.rec.windows(t)
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		desc := func(ws []history.Fault) (out []string) {
			for _, w := range ws {
				out = append(out, fmt.Sprintf("%s %s", w.Kind, strings.Join(w.Targets, ",")))
			}
			return out
		}
		a, b := desc(runs[0]), desc(runs[1])
		t.Logf("run 0: %q", a)
		t.Logf("run 1: %q", b)
		n := min(len(a), len(b))
		if n < want {
			t.Fatalf("%d and %d faults within a minute, want at least %d", len(a), len(b), want)
		}
		if !slices.Equal(a[:n], b[:n]) {
			t.Fatalf("the same seed picked different faults:\n%q\n%q", a[:n], b[:n])
		}
		for i, ws := range runs {
			for j, w := range ws {
				// Windows never overlap: only one after the first four can have been cut off,
				// unheld, by the run's end.
				if j < want && (!w.TookHold || w.End == history.Never) {
					t.Errorf("run %d window %d %+v: want closed and held", i, j, w)
				}
				if j > 0 {
					if gap := time.Duration(w.Start - ws[j-1].End); gap < 200*time.Millisecond {
						t.Errorf("run %d: window %d started %v after the previous ended, want ≥ the stable 200ms", i, j, gap)
					}
				}
				if w.Kind == "isolate" {
					t.Errorf("run %d: an isolate window on a cluster without peer links", i)
				}
			}
		}
	})

	t.Run("run twice at once - ErrRunning", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, 1, nil)
		ctx, cancel := context.WithCancel(context.Background())
		sched := nemesis.Schedule{Random: &nemesis.RandomSchedule{Interval: sec(60)}}
		done := make(chan error, 1)
		go func() { done <- f.n.Run(ctx, sched) }()
		time.Sleep(50 * time.Millisecond)
		if err := f.n.Run(ctx, sched); !errors.Is(err, nemesis.ErrRunning) {
			t.Errorf("second Run: %v, want ErrRunning", err)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("first Run: %v", err)
		}
	})
}
