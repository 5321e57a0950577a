//go:build !kafka

package nemesis_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/internal/units"
	"github.com/fencecheck/fencecheck/nemesis"
)

func TestFaultsRegistry(t *testing.T) {
	faults := nemesis.Faults()
	want := []string{"bandwidth", "delay", "drop", "drop-response", "duplicate", "error-response", "flapping", "freeze",
		"hold", "isolate", "kill", "latency", "limit-data", "move-coordinator", "partition", "pause", "reset-peer", "restart", "slicer"}
	var got []string
	for _, f := range faults {
		got = append(got, f.Name)
		if f.Description == "" || strings.Contains(f.Description, "\n") {
			t.Errorf("%s: description %q, want one non-empty line", f.Name, f.Description)
		}
		// Every registered fault validates with its defaults.
		if err := (nemesis.Spec{Fault: f.Name}).Validate(); err != nil {
			t.Errorf("%s with defaults: %v", f.Name, err)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Faults() = %v, want %v (sorted)", got, want)
	}
}

func TestSpecValidate(t *testing.T) {
	ms := func(n int) units.Duration { return units.Duration(time.Duration(n) * time.Millisecond) }
	for _, tc := range []struct {
		name  string
		spec  nemesis.Spec
		field string // "" = valid
	}{
		{"partition - p1 from coordinator of a role - valid",
			nemesis.Spec{Fault: "partition", Target: nemesis.Target{Processes: nemesis.IDs(1), Brokers: nemesis.CoordinatorOf("r")}, For: ms(1000)}, ""},
		{"partition - black hole upstream - valid",
			nemesis.Spec{Fault: "partition", Params: nemesis.Params{Mode: nemesis.ModeBlackhole, Direction: nemesis.DirUpstream}}, ""},
		{"latency - jitter within latency - valid",
			nemesis.Spec{Fault: "latency", Params: nemesis.Params{Latency: ms(200), Jitter: ms(50)}}, ""},
		{"unknown fault - names fault", nemesis.Spec{Fault: "meteor"}, "fault"},
		{"kill - a latency - names params.latency", nemesis.Spec{Fault: "kill", Params: nemesis.Params{Latency: ms(1)}}, "params.latency"},
		{"kill - processes - names target.processes", nemesis.Spec{Fault: "kill", Target: nemesis.Target{Processes: nemesis.IDs(1)}}, "target.processes"},
		{"partition - a role - names target.role", nemesis.Spec{Fault: "partition", Target: nemesis.Target{Role: "r"}}, "target.role"},
		{"partition - processes by coordinator - names target.processes",
			nemesis.Spec{Fault: "partition", Target: nemesis.Target{Processes: nemesis.CoordinatorOf("r")}}, "target.processes"},
		{"partition - process p0 - names target.processes", nemesis.Spec{Fault: "partition", Target: nemesis.Target{Processes: nemesis.IDs(0)}}, "target.processes"},
		{"partition - mode sideways - names params.mode", nemesis.Spec{Fault: "partition", Params: nemesis.Params{Mode: "sideways"}}, "params.mode"},
		{"partition - refused with a direction - names params.direction",
			nemesis.Spec{Fault: "partition", Params: nemesis.Params{Direction: nemesis.DirUpstream}}, "params.direction"},
		{"latency - direction left - names params.direction", nemesis.Spec{Fault: "latency", Params: nemesis.Params{Direction: "left"}}, "params.direction"},
		{"latency - jitter above latency - names params.jitter",
			nemesis.Spec{Fault: "latency", Params: nemesis.Params{Latency: ms(10), Jitter: ms(20)}}, "params.jitter"},
		{"latency - negative latency - names params.latency", nemesis.Spec{Fault: "latency", Params: nemesis.Params{Latency: ms(-1)}}, "params.latency"},
		{"latency - toxicity 2 - names params.toxicity", nemesis.Spec{Fault: "latency", Params: nemesis.Params{Toxicity: 2}}, "params.toxicity"},
		{"slicer - variation not below size - names params.slice_variation",
			nemesis.Spec{Fault: "slicer", Params: nemesis.Params{SliceSize: 4, SliceVariation: 4}}, "params.slice_variation"},
		{"restart - a duration - names for", nemesis.Spec{Fault: "restart", For: ms(10)}, "for"},
		{"pause - negative duration - names for", nemesis.Spec{Fault: "pause", For: ms(-10)}, "for"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.spec.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var se *nemesis.SpecError
			if !errors.As(err, &se) || se.Field != tc.field || !errors.Is(err, nemesis.ErrInvalidSpec) {
				t.Fatalf("Validate() = %v, want a SpecError for %s", err, tc.field)
			}
		})
	}
}

func TestParseStep(t *testing.T) {
	sec := func(n int) units.Duration { return units.Duration(time.Duration(n) * time.Second) }
	for _, tc := range []struct {
		line string
		want nemesis.Step
	}{
		{"at 5s partition p1 from coordinator of role-3 for 12s", nemesis.Step{At: sec(5), Spec: nemesis.Spec{Fault: "partition",
			Target: nemesis.Target{Processes: nemesis.IDs(1), Brokers: nemesis.CoordinatorOf("role-3")}, For: sec(12)}}},
		{"at 0s partition random 2 from subset blackhole for 3s", nemesis.Step{Spec: nemesis.Spec{Fault: "partition",
			Target: nemesis.Target{Processes: nemesis.Random(2), Brokers: nemesis.Subset()}, Params: nemesis.Params{Mode: nemesis.ModeBlackhole}, For: sec(3)}}},
		{"at 20s latency p2,p3 from all with latency=200ms jitter=50ms for 10s", nemesis.Step{At: sec(20), Spec: nemesis.Spec{Fault: "latency",
			Target: nemesis.Target{Processes: nemesis.IDs(2, 3), Brokers: nemesis.All()},
			Params: nemesis.Params{Latency: units.Duration(200 * time.Millisecond), Jitter: units.Duration(50 * time.Millisecond)}, For: sec(10)}}},
		{"at 40s kill leader of role-1 for 15s", nemesis.Step{At: sec(40), Spec: nemesis.Spec{Fault: "kill",
			Target: nemesis.Target{Brokers: nemesis.LeaderOf("role-1")}, For: sec(15)}}},
		{"at 50s kill group-coordinator of in0 for 5s", nemesis.Step{At: sec(50), Spec: nemesis.Spec{Fault: "kill",
			Target: nemesis.Target{Brokers: nemesis.GroupCoordinatorOf("in0")}, For: sec(5)}}},
		{"at 60s restart all with interval=5s", nemesis.Step{At: sec(60), Spec: nemesis.Spec{Fault: "restart",
			Target: nemesis.Target{Brokers: nemesis.All()}, Params: nemesis.Params{Interval: sec(5)}}}},
		{"at 70s freeze holder of role-2 with point=before-write for 8s", nemesis.Step{At: sec(70), Spec: nemesis.Spec{Fault: "freeze",
			Target: nemesis.Target{Role: "role-2"}, Params: nemesis.Params{Point: "before-write"}, For: sec(8)}}},
		{"at 80s move-coordinator of role-3", nemesis.Step{At: sec(80), Spec: nemesis.Spec{Fault: "move-coordinator",
			Target: nemesis.Target{Role: "role-3"}}}},
		{"at 90s isolate b1 with mode=blackhole for 5s", nemesis.Step{At: sec(90), Spec: nemesis.Spec{Fault: "isolate",
			Target: nemesis.Target{Brokers: nemesis.IDs(1)}, Params: nemesis.Params{Mode: nemesis.ModeBlackhole}, For: sec(5)}}},
	} {
		t.Run(tc.line, func(t *testing.T) {
			got, err := nemesis.ParseStep(tc.line)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParseStep = %#v\nwant %#v", got, tc.want)
			}
			// String writes what ParseStep reads.
			again, err := nemesis.ParseStep(got.String())
			if err != nil || !reflect.DeepEqual(again, got) {
				t.Fatalf("ParseStep(%q) = %#v, %v; want the same step back", got.String(), again, err)
			}
		})
	}
}

func TestParseStepErrors(t *testing.T) {
	for _, tc := range []struct{ line, field string }{
		{"at 5s partition p1 from all with latency=1s for 2s", "params.latency"},
		{"at 5s partition p1 from all with speed=1 for 2s", "params.speed"},
		{"at 5 partition p1 for 2s", "at"},
		{"at 5s kill p1 from b1 for 2s", ""},
		{"at 5s kill p1 for 2s", ""},
		{"at 5s partition b1 from p2 for 2s", ""},
		{"at 5s meteor", "fault"},
		{"at 5s latency p1 with latency=fast", "params.latency"},
		{"at 5s kill b1 for soon", "for"},
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

func TestScheduleValidate(t *testing.T) {
	step := func(line string) nemesis.Step {
		s, err := nemesis.ParseStep(line)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, tc := range []struct {
		name  string
		sched nemesis.Schedule
		field string
	}{
		{"random with defaults - valid", nemesis.Schedule{Random: &nemesis.RandomSchedule{}}, ""},
		{"script - valid", nemesis.Schedule{Script: []nemesis.Step{step("at 1s kill b1 for 2s"), step("at 2s restart all")}}, ""},
		{"empty - names schedule", nemesis.Schedule{}, "schedule"},
		{"random and script - names schedule",
			nemesis.Schedule{Random: &nemesis.RandomSchedule{}, Script: []nemesis.Step{step("at 1s restart all")}}, "schedule"},
		{"script - a kill without for - names script[1].for",
			nemesis.Schedule{Script: []nemesis.Step{step("at 1s restart all"), {Spec: nemesis.Spec{Fault: "kill"}}}}, "script[1].for"},
		{"random - a bad fault in the menu - names random.faults[0].fault",
			nemesis.Schedule{Random: &nemesis.RandomSchedule{Faults: []nemesis.Spec{{Fault: "meteor"}}}}, "random.faults[0].fault"},
		{"random - negative interval - names random.interval",
			nemesis.Schedule{Random: &nemesis.RandomSchedule{Interval: -1}}, "random.interval"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.sched.Validate()
			var se *nemesis.SpecError
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tc.field != "" && (!errors.As(err, &se) || se.Field != tc.field):
				t.Fatalf("Validate() = %v, want a SpecError for %s", err, tc.field)
			}
		})
	}
}

func TestSpecJSON(t *testing.T) {
	in := `{"fault":"partition","target":{"processes":"p1,p2","brokers":"coordinator of role-3"},"params":{"mode":"blackhole","direction":"upstream"},"for":"12s"}`
	var s nemesis.Spec
	if err := json.Unmarshal([]byte(in), &s); err != nil {
		t.Fatal(err)
	}
	want := nemesis.Spec{Fault: "partition",
		Target: nemesis.Target{Processes: nemesis.IDs(1, 2), Brokers: nemesis.CoordinatorOf("role-3")},
		Params: nemesis.Params{Mode: nemesis.ModeBlackhole, Direction: nemesis.DirUpstream},
		For:    units.Duration(12 * time.Second)}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("decoded %#v, want %#v", s, want)
	}
	out, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `"processes":"p1,p2"`) {
		t.Errorf("encoded %s, want the processes written as p1,p2", out)
	}
	var back nemesis.Spec
	if err := json.Unmarshal(out, &back); err != nil || !reflect.DeepEqual(back, s) {
		t.Fatalf("round trip through %s: %#v, %v", out, back, err)
	}
	if out, _ := json.Marshal(nemesis.Spec{Fault: "kill"}); string(out) != `{"fault":"kill"}` {
		t.Errorf("defaults are written as %s, want them left out", out)
	}
	var d units.Duration
	if err := json.Unmarshal([]byte(`5`), &d); err == nil {
		t.Errorf("a bare number decoded as a units.Duration (%v); want an error", d)
	}
}

// TestParseStepSelectorErrors: a bad selector says which selectors the position takes (a
// process position offers holder of ROLE, a broker position coordinator and leader), suggests
// the keyword it is a typo of, and refuses a selector of the other kind, all without the
// parser's field names.
func TestParseStepSelectorErrors(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{"at 1s partition holdr of r1 for 2s", `selector "holdr": did you mean holder? processes here are all, random [N], subset, holder of ROLE or a list like p1,p2`},
		{"at 1s partition p1 from holder of r1 for 2s", `selector "holder of r1" picks a process, not brokers; brokers are all, random [N], subset, coordinator of ROLE, leader of ROLE, group-coordinator of ROLE or a list like b0,b1`},
		{"at 1s partition group-coordinator of in0 for 2s", `selector "group-coordinator of in0" picks a broker, not processes`},
		{"at 1s kill group-cordinator of in0 for 2s", `did you mean group-coordinator?`},
		{"at 1s partition coordinator of r1 for 2s", `selector "coordinator of r1" picks a broker, not processes`},
		{"at 1s kill cordinator of r1 for 2s", `did you mean coordinator? brokers here are all, random [N], subset, coordinator of ROLE, leader of ROLE`},
		{"at 1s pause al for 2s", `did you mean all?`},
	} {
		t.Run(tc.line, func(t *testing.T) {
			_, err := nemesis.ParseStep(tc.line)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ParseStep = %v, want it to say %q", err, tc.want)
			}
			for _, internal := range []string{"spec=", "spec ", "target.brokers="} {
				if strings.Contains(err.Error(), internal) {
					t.Errorf("%q shows the parser's %q", err, internal)
				}
			}
		})
	}
}
