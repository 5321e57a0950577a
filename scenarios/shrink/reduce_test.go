//go:build !kafka

package shrink

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/internal/units"
	"github.com/fencecheck/fencecheck/nemesis"
	"github.com/fencecheck/fencecheck/reports"
	"github.com/fencecheck/fencecheck/scenarios"
)

func mustStep(t *testing.T, line string) nemesis.Step {
	t.Helper()
	st, err := nemesis.ParseStep(line)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestRemapSteps(t *testing.T) {
	steps := []step{
		mustStep(t, "at 1s partition p2,p6 from b0 for 2s"),
		mustStep(t, "at 2s freeze holder of r4 for 4s"),
		mustStep(t, "at 3s kill coordinator of r3 for 2s"),
	}
	got := remapSteps(steps, 4, 2)
	want := []string{
		"at 1s partition p2 from b0 for 2s", // p6 is p2 among 4 processes
		"at 2s freeze holder of r2 for 4s",
		"at 3s kill coordinator of r1 for 2s",
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("step %d: %q, want %q", i, got[i].String(), want[i])
		}
	}
	if steps[0].Target.Processes.IDs[1] != 6 {
		t.Error("remapSteps changed its input")
	}
}

// TestExplicitFromWindows: each window's recorded spec becomes a step at the window's start,
// counted from the first invocation and rounded to 100 ms; a window without a recorded spec
// (a history from before they were recorded) is an error naming it.
func TestExplicitFromWindows(t *testing.T) {
	s, _, err := scenarios.Builtin("chaos")
	if err != nil {
		t.Fatal(err)
	}
	h := &history.History{
		Faults: []history.Fault{
			{ID: 1, Kind: "limit-data", Targets: []string{"p3->b0", "p3->b1", "p3->b2"}, Start: 8_830e6, End: 12_900e6,
				Spec: "limit-data p3 from b0,b1,b2 with bytes=64 direction=downstream toxicity=1 for 4s"},
			{ID: 2, Kind: "isolate", Targets: []string{"b1", "b1->b0", "b1->b2"}, Start: 16_800e6, End: 21e9, Spec: "isolate b1 for 4s"},
			{ID: 3, Kind: history.KindMemberPause, Targets: []string{"p2/r3/m1"}, Role: "r3", Start: 24_810e6, End: 29e9, Spec: "freeze holder of r3 for 4s"},
			{ID: 4, Kind: "move-coordinator", Targets: []string{"txn:fencecheck.1-1.coordination/r2"}, Start: 32_800e6, End: 37e9, Spec: "move-coordinator of r2 for 4s"},
			{ID: 5, Kind: "restart", Targets: []string{"b2"}, Start: 40_800e6, End: 45e9, Spec: "restart b2"},
			{ID: 6, Kind: "hold", Targets: []string{"p3:produce"}, Start: 42_510e6, Spec: "hold produce of holder of r2 until endtxn for 1s"},
		},
	}
	h.Append(history.Op{ID: 1, Invoke: 900e6}, history.Op{ID: 2, Invoke: 800e6})
	steps, err := Explicit(s, h)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"at 8s limit-data p3 from b0,b1,b2 with direction=downstream bytes=64 toxicity=1 for 4s",
		"at 16s isolate b1 for 4s",
		"at 24s freeze holder of r3 for 4s",
		"at 32s move-coordinator of r2 for 4s",
		"at 40s restart b2",
		"at 41.7s hold produce of holder of r2 until endtxn for 1s",
	}
	if got := stepLines(steps); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("script:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	h.Faults = append(h.Faults, history.Fault{ID: 7, Kind: "kill", Targets: []string{"b1"}, Start: 44e9})
	if _, err := Explicit(s, h); err == nil || !strings.Contains(err.Error(), "fault window 7") || !strings.Contains(err.Error(), "run the scenario again") {
		t.Errorf("a window without its spec: %v, want an error naming the window and what to do", err)
	}
}

// TestLoadRefusesAValidRun: a run that broke no guarantee is a usage error naming why.
func TestLoadRefusesAValidRun(t *testing.T) {
	dir := t.TempDir()
	d := reports.Dir(dir)
	info := &reports.RunInfo{Scenario: "steady", Seed: 1, Expanded: []byte(`{"name":"steady","cluster":{"kind":"embedded"},"workload":{"preset":"high","processes":3,"roles":1,"members_per_role":3,"readers":0,"lease":"2s","request_timeout":"5s","topic_partitions":1,"load":{"look":"1s","work_payload":1,"backoff_min":"100ms","backoff_max":"1s","read_every":"1s"}},"duration":"5s"}`)}
	if err := d.WriteRunInfo(info); err != nil {
		t.Fatal(err)
	}
	res := &checker.Results{Format: checker.ResultsFormat, Verdict: checker.VerdictValid,
		Checks: []checker.Result{{Name: "fenced-stale-write", Verdict: checker.VerdictValid}}}
	if err := res.WriteFile(d.Results()); err != nil {
		t.Fatal(err)
	}
	_, err := Load(dir)
	if !errors.Is(err, ErrNotShrinkable) || !strings.Contains(err.Error(), "not invalid on any guarantee") {
		t.Fatalf("Load of a valid run: %v", err)
	}
	if _, err := Load(filepath.Join(dir, "missing")); !errors.Is(err, ErrNotShrinkable) {
		t.Fatalf("Load of a missing directory: %v", err)
	}
}

// TestReductions checks what the time reductions propose for a 40 s run with a 2 s lease.
func TestReductions(t *testing.T) {
	s, _, err := scenarios.Builtin("holder-partition")
	if err != nil {
		t.Fatal(err)
	}
	s.Duration = 40e9
	p := plan{s: *s, steps: []step{mustStep(t, "at 8s partition p1 from all for 6s"), mustStep(t, "at 30s restart b1")}}
	whats := func(cs []cand) []string {
		var out []string
		for _, c := range cs {
			sc, err := c.p.scenario()
			if err != nil {
				t.Errorf("%s: %v", c.what, err)
				continue
			}
			out = append(out, c.what+": "+strings.Join(sc.Nemesis.Script, "; ")+" / "+sc.Duration.D().String())
		}
		return out
	}
	check := func(name string, got, want []string) {
		t.Helper()
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s:\n%s\nwant:\n%s", name, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	check("shortenRun", whats(shortenRun(p)), []string{
		"run for 10s: at 8s partition p1 from all for 6s / 10s",
		"run for 20s: at 8s partition p1 from all for 6s / 20s",
		"run for 30s: at 8s partition p1 from all for 6s / 30s", // the restart at 30 s would not run
	})
	check("shortenFaults", whats(shortenFaults(p)), []string{
		"fault 1 (partition) for 3s: at 8s partition p1 from all for 3s; at 30s restart b1 / 40s",
	})
	check("earlierFaults", whats(earlierFaults(p)), []string{
		"every fault 4s earlier: at 4s partition p1 from all for 6s; at 26s restart b1 / 36s",
		"fault 1 (partition) at 4s: at 4s partition p1 from all for 6s; at 30s restart b1 / 40s",
		"fault 2 (restart) at 15s: at 8s partition p1 from all for 6s; at 15s restart b1 / 40s",
	})
	check("dropFaults", whats(dropFaults(p)), []string{
		"drop every fault:  / 40s",
		"drop fault 2 (restart): at 8s partition p1 from all for 6s / 40s",
		"drop fault 1 (partition): at 30s restart b1 / 40s",
	})
	p.s.Duration = 7e9 // below four leases: a quarter, a half and three quarters are all under three
	check("shortenRun at 7s", whats(shortenRun(p)), nil)
}

// TestWorkloadReductions checks what the workload reductions propose for 8 processes × 4 roles
// × 3 members with readers: fewer processes (never fewer than a role's members), roles and
// members, no readers, a lower rate, and no faults at all; a step naming a process or a role
// that is cut wraps round to one that is left.
func TestWorkloadReductions(t *testing.T) {
	s, _, err := scenarios.Builtin("holder-partition")
	if err != nil {
		t.Fatal(err)
	}
	w := &s.Workload
	w.Processes, w.Roles, w.MembersPerRole, w.Readers = 8, 4, 3, 2
	w.Load.WorkRate, w.Load.Contend, w.Load.Look = 3, units.Duration(2*time.Second), units.Duration(500*time.Millisecond)
	s.Duration = 40e9
	p := plan{s: *s, steps: []step{mustStep(t, "at 8s partition p6 from all for 6s"), mustStep(t, "at 20s freeze holder of r4 for 4s")}}
	whats := func(cs []cand) []string {
		var out []string
		for _, c := range cs {
			sc, err := c.p.scenario()
			if err != nil {
				t.Errorf("%s: %v", c.what, err)
				continue
			}
			w := sc.Workload
			out = append(out, fmt.Sprintf("%s: %d×%d×%d, %d readers, work %g/s, contend %v, look %v / %s", c.what,
				w.Processes, w.Roles, w.MembersPerRole, w.Readers, w.Load.WorkRate, w.Load.Contend.D(), w.Load.Look.D(),
				strings.Join(sc.Nemesis.Script, "; ")))
		}
		return out
	}
	check := func(name string, got, want []string) {
		t.Helper()
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s:\n%s\nwant:\n%s", name, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	const rest = "2 readers, work 3/s, contend 2s, look 500ms"
	check("cutProcesses", whats(cutProcesses(p)), []string{
		"3 processes: 3×4×3, " + rest + " / at 8s partition p3 from all for 6s; at 20s freeze holder of r4 for 4s",
		"4 processes: 4×4×3, " + rest + " / at 8s partition p2 from all for 6s; at 20s freeze holder of r4 for 4s",
		"7 processes: 7×4×3, " + rest + " / at 8s partition p6 from all for 6s; at 20s freeze holder of r4 for 4s",
	})
	check("cutRoles", whats(cutRoles(p)), []string{
		"1 roles: 8×1×3, " + rest + " / at 8s partition p6 from all for 6s; at 20s freeze holder of r1 for 4s",
		"2 roles: 8×2×3, " + rest + " / at 8s partition p6 from all for 6s; at 20s freeze holder of r2 for 4s",
		"3 roles: 8×3×3, " + rest + " / at 8s partition p6 from all for 6s; at 20s freeze holder of r1 for 4s",
	})
	script := " / at 8s partition p6 from all for 6s; at 20s freeze holder of r4 for 4s"
	check("cutMembers", whats(cutMembers(p)), []string{
		"1 members per role: 8×4×1, " + rest + script,
		"2 members per role: 8×4×2, " + rest + script,
	})
	check("cutReaders", whats(cutReaders(p)), []string{
		"no readers: 8×4×3, 0 readers, work 3/s, contend 2s, look 500ms" + script,
	})
	check("lowerRate", whats(lowerRate(p)), []string{
		"work rate 1.5/s: 8×4×3, 2 readers, work 1.5/s, contend 2s, look 500ms" + script,
		"contend every 4s: 8×4×3, 2 readers, work 3/s, contend 4s, look 500ms" + script,
		"look every 1s: 8×4×3, 2 readers, work 3/s, contend 2s, look 1s" + script,
	})
	check("dropFaults", whats(dropFaults(p)), []string{
		"drop every fault: 8×4×3, " + rest + " / ",
		"drop fault 2 (freeze): 8×4×3, " + rest + " / at 8s partition p6 from all for 6s",
		"drop fault 1 (partition): 8×4×3, " + rest + " / at 20s freeze holder of r4 for 4s",
	})

	// At the floors nothing is proposed: processes as few as a role's members, one role, one
	// member, no readers, no work and intervals as long as the lease (look) or the run (contend).
	q := p.clone()
	q.steps = q.steps[:1]
	w = &q.s.Workload
	w.Processes, w.Roles, w.MembersPerRole, w.Readers = 1, 1, 1, 0
	w.Load.WorkRate, w.Load.Contend, w.Load.Look = 0, q.s.Duration, w.Lease
	for name, r := range map[string]reduction{"cutProcesses": cutProcesses, "cutRoles": cutRoles, "cutMembers": cutMembers,
		"cutReaders": cutReaders, "lowerRate": lowerRate} {
		if got := whats(r(q)); len(got) > 0 {
			t.Errorf("%s at the floor proposes %q", name, got)
		}
	}
}

// kafkaChaos is a random schedule of Kafka-aware faults: a held Produce of a role's holder, a
// dropped EndTxn response of a random process, and a delayed Produce of every process.
const kafkaChaos = `
name: kafka-chaos
cluster: {kind: embedded}
workload:
  preset: high
  processes: 4
  roles: 2
  members_per_role: 2
nemesis:
  random:
    interval: 1500ms
    for: 1s
    faults:
      - {fault: hold, target: {processes: holder}, params: {api: produce, until: endtxn}}
      - {fault: drop-response, target: {processes: random}, params: {api: endtxn, count: 1}}
      - {fault: delay, params: {api: produce, delay: 300ms}, for: 800ms}
      - {fault: delay, params: {api: endtxn}}
duration: 8s
`

// TestLoadKafkaRunKeepsItsTiming: a run on Apache Kafka stores its scenario with the on_kafka
// timing applied and still listed; the runner applies it to every scenario it runs on Kafka.
// A candidate with fewer steps or a shorter run must keep them: the origin drops on_kafka.
func TestLoadKafkaRunKeepsItsTiming(t *testing.T) {
	s, _, err := scenarios.Builtin("kill-coordinator")
	if err != nil {
		t.Fatal(err)
	}
	if s.OnKafka == nil {
		t.Fatal("kill-coordinator has no on_kafka timing any more: pick a scenario that has")
	}
	s.UseCluster(scenarios.KindExternal)
	s.Cluster.Bootstrap = "127.0.0.1:9092"
	js, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	d := reports.Dir(dir)
	if err := d.WriteRunInfo(&reports.RunInfo{Scenario: s.Name, Seed: 1, Expanded: js}); err != nil {
		t.Fatal(err)
	}
	res := &checker.Results{Format: checker.ResultsFormat, Verdict: checker.VerdictInvalid,
		Checks: []checker.Result{{Name: "fenced-stale-write", Verdict: checker.VerdictInvalid}}}
	if err := res.WriteFile(d.Results()); err != nil {
		t.Fatal(err)
	}
	o, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Steps) == 0 {
		t.Fatal("the origin has no steps")
	}
	p := plan{s: *o.Scenario}
	p.s.Duration = units.Duration(o.Scenario.Duration.D() / 2)
	c, err := p.scenario()
	if err != nil {
		t.Fatal(err)
	}
	c.UseCluster(c.Cluster.Kind) // what harness.Run does first
	if len(c.Nemesis.Script) != 0 || c.Duration != p.s.Duration {
		t.Errorf("a candidate without faults for %v runs %q for %v on %s", p.s.Duration, c.Nemesis.Script, c.Duration, c.Cluster.Kind)
	}
}
