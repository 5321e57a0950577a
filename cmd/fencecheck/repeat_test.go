//go:build !kafka

package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/workload"
)

// TestRepeatCommandWithoutSeed runs a scenario without --seed, takes the command its run.json
// stores, runs that again, and requires the second run to make the same choices as the first:
// the same fault windows on the same targets, and, for every reader and every member, the same
// sequence of looks (what it read or described). Timing is the cluster's, so only the order and
// the targets of the choices are compared, up to the shorter run's length.
func TestRepeatCommandWithoutSeed(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a scenario twice")
	}
	// Embedded runs mostly wait on lease timers: this one overlaps the others.
	t.Parallel()
	bin := buildBinary(t)
	run := func(args ...string) (dir string, info runJSON) {
		t.Helper()
		out := t.TempDir()
		b, err := exec.Command(bin, append(args, "--out", out)...).CombinedOutput()
		if code := exitCode(t, err); code >= 254 {
			t.Fatalf("%v: exit %d:\n%s", args, code, b)
		}
		dir, err = filepath.EvalSymlinks(filepath.Join(out, "latest"))
		if err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(filepath.Join(dir, "run.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &info); err != nil {
			t.Fatal(err)
		}
		return dir, info
	}

	// flapping picks its two target processes with the seed.
	firstDir, first := run("run", "flapping", "--duration", "8s")
	if first.Seed == 0 {
		t.Fatal("run.json stores seed 0")
	}
	argv := strings.Fields(first.Command)
	if len(argv) < 2 || argv[0] != "fencecheck" {
		t.Fatalf("stored command %q does not start with fencecheck", first.Command)
	}
	if i := slices.Index(argv, "--seed"); i < 0 || i+1 >= len(argv) || argv[i+1] != strconv.FormatUint(first.Seed, 10) {
		t.Fatalf("stored command %q does not repeat the run's seed %d", first.Command, first.Seed)
	}
	for _, f := range []string{"report.html", "junit.xml"} {
		b, err := os.ReadFile(filepath.Join(firstDir, f))
		if err != nil {
			t.Fatal(err)
		}
		if want := "--seed " + strconv.FormatUint(first.Seed, 10); !strings.Contains(string(b), want) {
			t.Errorf("%s does not show %q", f, want)
		}
	}
	secondDir, second := run(argv[1:]...)
	if second.Seed != first.Seed {
		t.Fatalf("the repeat ran with seed %d, the original with %d", second.Seed, first.Seed)
	}

	a, b := choices(t, firstDir), choices(t, secondDir)
	if len(a.faults) == 0 {
		t.Fatal("the original run injected no fault: nothing to compare")
	}
	if !slices.Equal(a.faults, b.faults) {
		t.Errorf("fault windows differ:\n original %q\n repeat   %q", a.faults, b.faults)
	}
	// How many looks a run makes depends on the machine's speed; which ones, in what order,
	// only on the seed. Every sequence is compared as far as both runs got, and every
	// reader (readers look all run long) must have got past its first two looks in both.
	compared := 0
	for who, seqA := range a.looks {
		seqB := b.looks[who]
		n := min(len(seqA), len(seqB))
		if !slices.Equal(seqA[:n], seqB[:n]) {
			t.Errorf("%s chose differently:\n original %q\n repeat   %q", who, seqA[:n], seqB[:n])
		}
		compared += n
	}
	t.Logf("seed %d: %d fault windows and %d looks of %d readers and members alike", first.Seed, len(a.faults), compared, len(a.looks))
	readers := 0
	for who := range union(a.looks, b.looks) {
		if !strings.HasSuffix(who, "/reader") {
			continue
		}
		readers++
		if n := min(len(a.looks[who]), len(b.looks[who])); n < 2 {
			t.Errorf("%s: %d looks compared, want at least 2 to show the same schedule", who, n)
		}
	}
	if readers == 0 {
		t.Error("no reader looked: nothing to compare")
	}
}

type runJSON struct {
	Seed      uint64 `json:"seed"`
	Command   string `json:"command"`
	Scenario  string `json:"scenario"`
	Transport string `json:"transport"`
	Processes int    `json:"processes"`
	Roles     int    `json:"roles"`
	Duration  int64  `json:"duration_ns"`
	dir       string // where it was read from
}

// schedule is what a run chose: its fault windows in order ("kind targets desc") and, per
// reader or member, the sequence of its looks ("read r2", "describe r1", "read work:3").
type schedule struct {
	faults []string
	looks  map[string][]string
}

func choices(t *testing.T, dir string) schedule {
	t.Helper()
	h, err := history.ReadFile(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	s := schedule{looks: map[string][]string{}}
	// The final reads, and the settled reads each process makes after them, are not choices:
	// they read every log once the workload has stopped. Only looks invoked before the first
	// final read are the run's own.
	end := int64(math.MaxInt64)
	for _, op := range h.All() {
		if op.Process == workload.FinalProcess {
			end = min(end, op.Invoke)
		}
	}
	for _, f := range h.Faults {
		s.faults = append(s.faults, fmt.Sprintf("%s %v %s", f.Kind, f.Targets, f.Desc))
	}
	for _, op := range h.All() {
		if op.Kind != history.KindRead && op.Kind != history.KindDescribe || op.Invoke >= end {
			continue
		}
		who := op.Process + "/" + op.Role + "/" + op.Member
		if op.Member == "" { // a reader: one per process, any role
			who = op.Process + "/reader"
		}
		what := string(op.Kind) + " " + op.Role
		if op.Args.Log.Work {
			what = string(op.Kind) + " " + op.Args.Log.String()
		}
		s.looks[who] = append(s.looks[who], what)
	}
	return s
}

// TestRepeatRunsOneScheduleAndCountRunsOthers: --repeat N runs the same seed N times (one
// picked at random when --seed is not given); --count N with --seed S runs seeds S, S+1.
func TestRepeatRunsOneScheduleAndCountRunsOthers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a scenario four times")
	}
	t.Parallel()
	bin := buildBinary(t)
	seeds := func(args ...string) []string {
		t.Helper()
		out := t.TempDir()
		b, err := exec.Command(bin, append(append([]string{"run", "steady", "--duration", "3s", "--processes", "3", "--roles", "1"}, args...), "--out", out)...).CombinedOutput()
		// The seeds are the point: a 3 s run may miss steady's promises (inconclusive, 2).
		if code := exitCode(t, err); code >= 254 {
			t.Fatalf("%v: exit %d:\n%s", args, code, b)
		}
		dirs, _ := filepath.Glob(filepath.Join(out, "steady", "*-*"))
		var got []string
		for _, d := range dirs {
			got = append(got, d[strings.LastIndex(d, "-")+1:])
		}
		return got
	}
	if got := seeds("--repeat", "2"); len(got) != 2 || got[0] != got[1] || got[0] == "0" {
		t.Errorf("--repeat 2 ran seeds %v, want one seed twice", got)
	}
	if got := seeds("--count", "2", "--seed", "5"); !slices.Equal(got, []string{"5", "6"}) {
		t.Errorf("--count 2 --seed 5 ran seeds %v, want 5 and 6", got)
	}
}

// TestRunOfARunDirectoryRepeatsIt: `fencecheck run DIR` runs the scenario DIR ran, as its
// run.json keeps it (the flags' overrides included), with its seed and transport; --seed
// given wins.
func TestRunOfARunDirectoryRepeatsIt(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a scenario three times")
	}
	t.Parallel()
	bin := buildBinary(t)
	run := func(args ...string) runJSON {
		t.Helper()
		out := t.TempDir()
		b, err := exec.Command(bin, append(append([]string{"run"}, args...), "--out", out)...).CombinedOutput()
		if code := exitCode(t, err); code >= 254 {
			t.Fatalf("%v: exit %d:\n%s", args, code, b)
		}
		dir, err := filepath.EvalSymlinks(filepath.Join(out, "latest"))
		if err != nil {
			t.Fatal(err)
		}
		var info runJSON
		raw, err := os.ReadFile(filepath.Join(dir, "run.json"))
		if err != nil || json.Unmarshal(raw, &info) != nil {
			t.Fatalf("run.json of %s: %v", dir, err)
		}
		info.dir = dir
		return info
	}
	first := run("steady", "--duration", "3s", "--processes", "3", "--roles", "1", "--seed", "11", "--transport", "mutant:ack-fenced")
	again := run(first.dir)
	if again.Seed != 11 || again.Transport != "mutant:ack-fenced" || again.Scenario != "steady" ||
		again.Processes != 3 || again.Roles != 1 || again.Duration != first.Duration {
		t.Errorf("run of the run directory: seed %d, transport %q, %s, %d processes × %d roles, %v; want seed 11, mutant:ack-fenced, steady, 3 × 1, %v",
			again.Seed, again.Transport, again.Scenario, again.Processes, again.Roles, again.Duration, first.Duration)
	}
	if other := run(first.dir, "--seed", "12"); other.Seed != 12 || other.Transport != "mutant:ack-fenced" {
		t.Errorf("--seed 12 on the run directory ran seed %d with %q", other.Seed, other.Transport)
	}
}

// union is the union of a's and b's keys, with a's values where both have one.
func union[V any](a, b map[string]V) map[string]V {
	u := maps.Clone(b)
	maps.Copy(u, a)
	return u
}
