//go:build !kafka

package nemesis_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/internal/units"
	"github.com/fencecheck/fencecheck/nemesis"
)

func TestParseKafkaStep(t *testing.T) {
	sec := func(n int) units.Duration { return units.Duration(time.Duration(n) * time.Second) }
	for _, tc := range []struct {
		line string
		want nemesis.Spec
	}{
		{"at 5s hold produce of holder of r1 until endtxn for 10s", nemesis.Spec{Fault: "hold",
			Target: nemesis.Target{Processes: nemesis.HolderOf("r1")}, Params: nemesis.Params{API: "produce", Until: "endtxn"}, For: sec(10)}},
		{"at 5s drop-response EndTxn of p2 role r3 first 1 for 4s", nemesis.Spec{Fault: "drop-response",
			Target: nemesis.Target{Processes: nemesis.IDs(2), Role: "r3"}, Params: nemesis.Params{API: "EndTxn", Count: 1}, For: sec(4)}},
		{"at 5s delay fetch of all with delay=2s partition=3 for 6s", nemesis.Spec{Fault: "delay",
			Target: nemesis.Target{Processes: nemesis.All()}, Params: nemesis.Params{API: "fetch", Delay: sec(2), Partition: "3"}, For: sec(6)}},
		{"at 5s error-response initproducerid of random 2 with error=COORDINATOR_LOAD_IN_PROGRESS for 3s", nemesis.Spec{Fault: "error-response",
			Target: nemesis.Target{Processes: nemesis.Random(2)}, Params: nemesis.Params{API: "initproducerid", Error: "COORDINATOR_LOAD_IN_PROGRESS"}, For: sec(3)}},
		{"at 5s duplicate produce of holder of r2 until endtxn first 1 for 5s", nemesis.Spec{Fault: "duplicate",
			Target: nemesis.Target{Processes: nemesis.HolderOf("r2")}, Params: nemesis.Params{API: "produce", Until: "endtxn", Count: 1}, For: sec(5)}},
		{"at 5s drop for 1s", nemesis.Spec{Fault: "drop", For: sec(1)}},
		{"at 1s error-response add-offsets of p2 role in0 with error=TRANSACTION_ABORTABLE first 2 for 3s", nemesis.Spec{Fault: "error-response",
			Target: nemesis.Target{Processes: nemesis.IDs(2), Role: "in0"}, Params: nemesis.Params{API: "add-offsets", Error: "TRANSACTION_ABORTABLE", Count: 2}, For: sec(3)}},
	} {
		t.Run(tc.line, func(t *testing.T) {
			got, err := nemesis.ParseStep(tc.line)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Spec, tc.want) {
				t.Fatalf("ParseStep = %#v\nwant %#v", got.Spec, tc.want)
			}
			again, err := nemesis.ParseStep(got.String())
			if err != nil || !reflect.DeepEqual(again, got) {
				t.Fatalf("ParseStep(%q) = %#v, %v; want the same step back", got.String(), again, err)
			}
		})
	}
}

func TestParseKafkaStepErrors(t *testing.T) {
	for _, tc := range []struct{ line, field string }{
		{"at 5s hold gossip of p1 until endtxn for 2s", "params.api"},
		{"at 5s hold produce of p1 until add-offsets for 2s", "params.until"}, // a request class is no trigger
		{"at 5s hold produce of p1 until never for 2s", "params.until"},
		{"at 5s error-response endtxn of p1 with error=OOPS for 2s", "params.error"},
		{"at 5s drop produce of p1 with partition=x/y for 2s", "params.partition"},
		{"at 5s drop metadata of p1 role r1 for 2s", "target.role"},
		{"at 5s drop produce of p1 first 0 for 2s", "params.count"},
		{"at 5s drop produce of p1 until endtxn for 2s", "params.until"},
		{"at 5s delay produce of p1 with error=NOT_COORDINATOR for 2s", "params.error"},
		{"at 5s drop produce from b1 for 2s", ""},
		{"at 5s drop produce of b1 for 2s", ""},
	} {
		t.Run(tc.line, func(t *testing.T) {
			_, err := nemesis.ParseStep(tc.line)
			var se *nemesis.SpecError
			if !errors.As(err, &se) || se.Field != tc.field {
				t.Fatalf("ParseStep = %v, want a SpecError for %s", err, tc.field)
			}
		})
	}
}

// The random schedule's default menu holds every fault, the Kafka-aware ones too.
func TestKafkaFaultsInDefaultMenu(t *testing.T) {
	faults := nemesis.DefaultMenu()
	for _, name := range append(nemesis.KafkaFaultNames(), "partition") {
		if !slices.Contains(faults, name) {
			t.Errorf("default menu %v lacks %s", faults, name)
		}
	}
	if got := nemesis.KafkaFaultNames(); len(got) != 6 {
		t.Errorf("KafkaFaultNames() = %v, want the six actions", got)
	}
}

// TestRandomKafkaFaults runs a random schedule of Kafka-aware faults named without a request
// type while two processes acquire and write leases: every fault is drawn on a request the
// processes sent (never a group request, which a lease run does not send), with a retriable
// error, a hold a later request of the transaction delivers, and the one-line spec its window
// records replays as drawn.
func TestRandomKafkaFaults(t *testing.T) {
	f := newFixture(t, 7, func(e *nemesis.Env) { e.ProbeTimeout = 500 * time.Millisecond })
	var menu []nemesis.Spec
	for _, name := range nemesis.KafkaFaultNames() {
		menu = append(menu, nemesis.Spec{Fault: name})
	}
	sched := nemesis.Schedule{Random: &nemesis.RandomSchedule{Interval: ms(400), Stable: ms(200), For: ms(300), Faults: menu}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	work := make(chan struct{})
	go func() {
		defer close(work)
		for ctx.Err() == nil {
			for _, call := range []func(context.Context) error{f.acquireWrite(1, "r1"), f.acquireWrite(2, "r2")} {
				cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
				_ = call(cctx) // faults make calls fail; the draws are what is checked
				ccancel()
			}
		}
	}()
	done := make(chan error, 1)
	go func() { done <- f.n.Run(ctx, sched) }()
	// Await eight closed windows (the two minutes only guard against a hang).
	const want = 8
	closed := func() (n int) {
		for _, w := range f.rec.windows(t) {
			if w.End != history.Never {
				n++
			}
		}
		return n
	}
	for closed() < want && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	<-work
	sent := f.c.Network().SentAPIs(0)
	for _, api := range []string{"initproducerid", "produce", "endtxn"} {
		if !slices.Contains(sent, api) {
			t.Errorf("SentAPIs() = %v lacks %s", sent, api)
		}
	}
	held := 0
	ws := f.rec.windows(t)
	if len(ws) < want {
		t.Fatalf("%d windows, want %d", len(ws), want)
	}
	for _, w := range ws {
		st, err := nemesis.ParseStep("at 0s " + w.Spec)
		if err != nil {
			t.Errorf("window %q: its spec does not parse: %v", w.Spec, err)
			continue
		}
		p := st.Params
		switch {
		case !slices.Contains(nemesis.MixAPIs(), p.API) || !slices.Contains(sent, p.API):
			t.Errorf("window %q: drawn on %q, want a request of %v that was sent (%v)", w.Spec, p.API, nemesis.MixAPIs(), sent)
		case st.Fault == "error-response" && !slices.Contains([]string{"NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS", "CONCURRENT_TRANSACTIONS", "NOT_LEADER_FOR_PARTITION", "REQUEST_TIMED_OUT"}, p.Error):
			t.Errorf("window %q: error %q is not a retriable error of the transactional requests", w.Spec, p.Error)
		case st.Fault == "hold" && p.Until == "":
			t.Errorf("window %q: a hold without the request that delivers it", w.Spec)
		case st.Target.Processes.IsZero():
			t.Errorf("window %q: no target drawn", w.Spec)
		case st.Target.Processes.Kind == nemesis.SelectIDs && !slices.Contains(f.c.Network().SentAPIs(st.Target.Processes.IDs[0]), p.API):
			t.Errorf("window %q: aimed at a process that never sent %s", w.Spec, p.API)
		}
		if w.TookHold {
			held++
		}
	}
	if held == 0 {
		t.Errorf("none of %d windows took hold: %+v", len(ws), ws)
	}
}

// TestKafkaFaultsInject injects Kafka-aware faults through the nemesis on the embedded
// cluster: each takes hold only once a matching request was acted upon, names its targets,
// does what it says to the transport's calls, and heals.
func TestKafkaFaultsInject(t *testing.T) {
	// injectWhile injects line's spec while call runs again and again, as the workload would,
	// and returns the injection once it took hold and the call's first error.
	injectWhile := func(t *testing.T, f *fixture, line string, call func(context.Context) error) (*nemesis.Injection, error) {
		t.Helper()
		st, err := nemesis.ParseStep(line)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		var inj *nemesis.Injection
		var injErr error
		go func() { defer close(done); inj, injErr = f.n.Inject(context.Background(), st.Spec) }()
		var callErr error
		for {
			select {
			case <-done:
				if injErr != nil {
					if inj != nil {
						_ = inj.Heal(context.Background())
					}
					t.Fatalf("inject %s: %v", line, injErr)
				}
				return inj, callErr
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*reqTimeout)
			if err := call(ctx); err != nil && callErr == nil {
				callErr = err
			}
			cancel()
		}
	}

	t.Run("drop-response endtxn of p1 role role-1 - the lease write fails, heal restores", func(t *testing.T) {
		f := newFixture(t, 1, nil)
		recovers(t, "p1 acquire and write before", f.acquireWrite(1, "role-1"))
		inj, err := injectWhile(t, f, "at 0s drop-response endtxn of p1 role role-1 for 10s", f.acquireWrite(1, "role-1"))
		if got := inj.Window().Targets; !slices.Equal(got, []string{"p1:endtxn"}) {
			t.Fatalf("targets %v, want [p1:endtxn]", got)
		}
		if err == nil {
			t.Fatal("the lease write succeeded while its commit's response was dropped")
		}
		t.Logf("the transport saw: %v", err)
		recovers(t, "p2 acquire and write of role-2 meanwhile", f.acquireWrite(2, "role-2"))
		f.heal(inj)
		recovers(t, "p1 acquire and write after", f.acquireWrite(1, "role-1"))
	})

	t.Run("error-response endtxn of holder - the transport sees the error", func(t *testing.T) {
		f := newFixture(t, 2, nil)
		inj, err := injectWhile(t, f, "at 0s error-response endtxn of p3 role role-3 first 1 with error=INVALID_PRODUCER_EPOCH for 10s", f.acquireWrite(3, "role-3"))
		if err == nil {
			t.Fatal("the lease write succeeded; want the replaced error")
		}
		t.Logf("the transport saw: %v", err)
		f.heal(inj)
	})

	t.Run("hold produce until endtxn - delivered late, window took hold", func(t *testing.T) {
		f := newFixture(t, 3, nil)
		inj, _ := injectWhile(t, f, "at 0s hold produce of p2 role role-2 until endtxn first 1 for 10s", f.acquireWrite(2, "role-2"))
		if !strings.Contains(inj.Window().Desc, "until endtxn") {
			t.Fatalf("window %q does not say until endtxn", inj.Window().Desc)
		}
		active := f.c.Network().KafkaFaults()
		if len(active) != 1 || active[0].Acted() != 1 {
			t.Fatalf("active Kafka faults %v: want the hold, having acted once", active)
		}
		f.heal(inj)
		if left := f.c.Network().KafkaFaults(); len(left) > 0 {
			t.Fatalf("Kafka faults left after the heal: %v", left)
		}
		// The held produce reached the broker, after p2's next EndTxn or at the heal.
		if ds := active[0].Deliveries(); len(ds) != 1 || ds[0].Err != nil {
			t.Fatalf("deliveries %+v: want the held produce delivered", ds)
		} else {
			t.Logf("the held produce was delivered after %s; the broker answered error code %d", ds[0].Trigger, ds[0].ErrorCode)
		}
		recovers(t, "p2 acquire and write after", f.acquireWrite(2, "role-2"))
	})

	t.Run("no matching request - the fault does not take hold", func(t *testing.T) {
		f := newFixture(t, 4, func(e *nemesis.Env) { e.WaitTimeout = time.Second })
		st, _ := nemesis.ParseStep("at 0s drop describetransactions of p4 for 5s")
		inj, err := f.n.Inject(context.Background(), st.Spec)
		if !errors.Is(err, nemesis.ErrNotHeld) {
			t.Fatalf("inject = %v, want ErrNotHeld", err)
		}
		if inj != nil {
			_ = inj.Heal(context.Background())
		}
	})
}
