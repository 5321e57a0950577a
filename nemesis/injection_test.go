//go:build !kafka

package nemesis_test

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/nemesis"
)

// fakeFault logs its calls and fails where told.
type fakeFault struct {
	targets []string
	calls   *[]string
	fail    map[string]error
}

func (f *fakeFault) call(name string) error {
	*f.calls = append(*f.calls, name)
	return f.fail[name]
}

func (f *fakeFault) Setup(context.Context) error            { return f.call("setup") }
func (f *fakeFault) Inject(context.Context) error           { return f.call("inject") }
func (f *fakeFault) WaitForInjected(context.Context) error  { return f.call("wait-injected") }
func (f *fakeFault) Recover(context.Context) error          { return f.call("recover") }
func (f *fakeFault) WaitForRecovered(context.Context) error { return f.call("wait-recovered") }
func (f *fakeFault) Cleanup(context.Context) error          { return f.call("cleanup") }
func (f *fakeFault) Window() nemesis.Window {
	return nemesis.Window{Kind: "fake", Targets: f.targets, Desc: "a fake fault"}
}

// stubCluster satisfies cluster.Cluster for tests that never reach the cluster.
type stubCluster struct{ cluster.Cluster }

func newStubNemesis(t *testing.T) (*nemesis.Nemesis, *memRecorder, *[]string) {
	calls := new([]string)
	rec := &memRecorder{log: calls}
	n, err := nemesis.New(nemesis.Env{Cluster: stubCluster{}}, rec, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	return n, rec, calls
}

func TestInjectionLifecycle(t *testing.T) {
	ctx := context.Background()
	t.Run("full lifecycle - window opens before inject, closes after recover, took hold", func(t *testing.T) {
		n, rec, calls := newStubNemesis(t)
		inj := n.Track("fake", &fakeFault{targets: []string{"p1->b1"}, calls: calls})
		for _, step := range []func(context.Context) error{inj.Setup, inj.Inject, inj.WaitForInjected} {
			if err := step(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if act := n.Active(); len(act) != 1 || act[0].State != nemesis.StateInjected || !act[0].TookHold || act[0].Window == 0 {
			t.Fatalf("Active() = %+v, want the injection, injected and held", act)
		}
		for _, step := range []func(context.Context) error{inj.Recover, inj.WaitForRecovered, inj.Cleanup} {
			if err := step(ctx); err != nil {
				t.Fatal(err)
			}
		}
		want := []string{"setup", "event fault-start", "inject", "wait-injected", "recover", "event fault-end", "wait-recovered", "cleanup"}
		if !reflect.DeepEqual(*calls, want) {
			t.Fatalf("calls %v, want %v", *calls, want)
		}
		ws := rec.windows(t)
		if len(ws) != 1 || ws[0].Kind != "fake" || !reflect.DeepEqual(ws[0].Targets, []string{"p1->b1"}) || !ws[0].TookHold || ws[0].End == history.Never {
			t.Fatalf("windows %+v, want one closed fake window on p1->b1 that took hold", ws)
		}
		if act := n.Active(); len(act) != 0 {
			t.Fatalf("Active() after cleanup = %+v, want none", act)
		}
	})

	t.Run("calls in the wrong state - refused with ErrWrongState, nothing called", func(t *testing.T) {
		n, _, calls := newStubNemesis(t)
		inj := n.Track("fake", &fakeFault{calls: calls})
		refused := func(what string, err error) {
			t.Helper()
			var se *nemesis.StateError
			if !errors.Is(err, nemesis.ErrWrongState) || !errors.As(err, &se) {
				t.Fatalf("%s: %v, want ErrWrongState", what, err)
			}
		}
		refused("inject before setup", inj.Inject(ctx))
		refused("recover before setup", inj.Recover(ctx))
		refused("wait for injected before setup", inj.WaitForInjected(ctx))
		if err := inj.Setup(ctx); err != nil {
			t.Fatal(err)
		}
		refused("setup twice", inj.Setup(ctx))
		refused("recover before inject", inj.Recover(ctx))
		refused("wait for recovered before recover", inj.WaitForRecovered(ctx))
		if err := inj.Inject(ctx); err != nil {
			t.Fatal(err)
		}
		refused("inject twice", inj.Inject(ctx))
		refused("wait for recovered while injected", inj.WaitForRecovered(ctx))
		if err := inj.Cleanup(ctx); err != nil {
			t.Fatal(err)
		}
		refused("cleanup twice", inj.Cleanup(ctx))
		refused("inject after cleanup", inj.Inject(ctx))
		if err := inj.Heal(ctx); err != nil {
			t.Fatalf("heal after cleanup: %v, want nil (idempotent)", err)
		}
		want := []string{"setup", "event fault-start", "inject", "recover", "event fault-end", "cleanup"}
		if !reflect.DeepEqual(*calls, want) {
			t.Fatalf("calls %v, want %v (cleanup of an injected fault recovers first)", *calls, want)
		}
	})

	t.Run("inject fails halfway - window recorded, heal recovers, took hold false", func(t *testing.T) {
		n, rec, calls := newStubNemesis(t)
		inj := n.Track("fake", &fakeFault{calls: calls, fail: map[string]error{"inject": errors.New("boom")}})
		if err := inj.Setup(ctx); err != nil {
			t.Fatal(err)
		}
		if err := inj.Inject(ctx); err == nil {
			t.Fatal("inject succeeded, want the fault's error")
		}
		if inj.State() != nemesis.StateInjected {
			t.Fatalf("state %v after a failed inject, want injected (recover must undo the half)", inj.State())
		}
		if err := inj.Heal(ctx); err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(*calls, "recover") {
			t.Fatalf("calls %v: heal did not recover", *calls)
		}
		if ws := rec.windows(t); len(ws) != 1 || ws[0].TookHold || ws[0].End == history.Never {
			t.Fatalf("windows %+v, want one closed window that did not take hold", ws)
		}
	})

	t.Run("overlapping targets - ErrTargetBusy until the first is cleaned up", func(t *testing.T) {
		n, _, calls := newStubNemesis(t)
		first := n.Track("fake", &fakeFault{targets: []string{"b1", "p1->b1"}, calls: calls})
		second := n.Track("fake", &fakeFault{targets: []string{"p1->b1"}, calls: calls})
		if err := first.Setup(ctx); err != nil {
			t.Fatal(err)
		}
		if err := second.Setup(ctx); !errors.Is(err, nemesis.ErrTargetBusy) {
			t.Fatalf("second setup: %v, want ErrTargetBusy", err)
		}
		if second.State() != nemesis.StateCleanedUp {
			t.Fatalf("refused injection is %v, want cleaned up", second.State())
		}
		if err := first.Cleanup(ctx); err != nil {
			t.Fatal(err)
		}
		third := n.Track("fake", &fakeFault{targets: []string{"p1->b1"}, calls: calls})
		if err := third.Setup(ctx); err != nil {
			t.Fatalf("setup after the first was cleaned up: %v", err)
		}
	})
}

func TestWindowsInAHistoryFile(t *testing.T) {
	var buf bytes.Buffer
	w := history.NewWriter(&buf, history.WriterOptions{})
	if err := w.WriteHeader(history.Meta{Scenario: "nemesis"}); err != nil {
		t.Fatal(err)
	}
	n, err := nemesis.New(nemesis.Env{Cluster: stubCluster{}}, w, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	inj := n.Track("fake", &fakeFault{targets: []string{"p1->b0", "p1->b1"}, calls: new([]string)})
	for _, step := range []func(context.Context) error{inj.Setup, inj.Inject, inj.WaitForInjected, inj.Heal} {
		if err := step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("history:\n%s", buf.String())
	h, err := history.Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Faults) != 1 {
		t.Fatalf("faults %+v, want one window", h.Faults)
	}
	f := h.Faults[0]
	if f.ID != 1 || f.Kind != "fake" || !slices.Equal(f.Targets, []string{"p1->b0", "p1->b1"}) || f.Desc != "a fake fault" ||
		!f.TookHold || f.End == history.Never || f.End < f.Start {
		t.Fatalf("window %+v, want fault 1, fake on p1->b0 p1->b1, held, closed", f)
	}
}
