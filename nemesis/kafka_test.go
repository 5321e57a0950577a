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

// The Kafka-aware faults stay out of the random schedule's default menu: a random run picks
// them only when its menu names them.
func TestKafkaFaultsNotInDefaultMenu(t *testing.T) {
	faults := nemesis.DefaultMenu()
	for _, name := range []string{"drop", "drop-response", "delay", "hold", "duplicate", "error-response"} {
		if slices.Contains(faults, name) {
			t.Errorf("default menu %v holds %s", faults, name)
		}
	}
	if !slices.Contains(faults, "partition") {
		t.Errorf("default menu %v lacks partition", faults)
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
