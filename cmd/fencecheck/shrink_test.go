//go:build !kafka

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestShrinkCtrlC shrinks a mutant's failing run as a user would and presses Ctrl-C (SIGINT)
// once the search has kept a first, smaller candidate: shrink must stop, exit 2, and leave
// that candidate as scenario.yaml, loadable, with shrink.json saying it was interrupted. The
// mutant runs behind the exec protocol (`fencecheck adapter --mutant`), so the tries must use
// the run's exec transport, and the commands that repeat them must quote it.
func TestShrinkCtrlC(t *testing.T) {
	if testing.Short() {
		t.Skip("runs scenarios")
	}
	// Embedded runs mostly wait on lease timers: this one overlaps the others.
	t.Parallel()
	bin := buildBinary(t)
	runs := t.TempDir()
	tr := "exec:" + bin + " adapter --mutant lease-outside-txn"
	// A failing run to shrink: 8 s, so that the search's first candidate is a 6 s run (three
	// leases, its floor). The mutant fails most such runs; a seed that passes is skipped.
	var origin string
	seed := 0
	for s := 1; s <= 4 && origin == ""; s++ {
		run := exec.Command(bin, "run", "steady", "--transport", tr, "--duration", "8s",
			"--processes", "4", "--roles", "2", "--members", "3", "--seed", strconv.Itoa(s), "--out", runs)
		out, err := run.CombinedOutput()
		switch code := exitCode(t, err); code {
		case 0: // valid: try the next seed
		case 1:
			dirs, _ := filepath.Glob(filepath.Join(runs, "steady", "*-"+strconv.Itoa(s)))
			if len(dirs) != 1 {
				t.Fatalf("run directories of seed %d: %v, want one", s, dirs)
			}
			origin, seed = dirs[0], s
		default:
			t.Fatalf("the mutant's run of seed %d: exit %d:\n%s", s, code, out)
		}
	}
	if origin == "" {
		t.Fatal("the mutant's steady runs of seeds 1 to 4 were all valid")
	}

	out := filepath.Join(t.TempDir(), "shrink")
	// Bounded by candidates, not time: a budget in time keeps half of itself for the fresh
	// tries, and on a loaded machine might leave none for a candidate. The budget and the wait
	// below only guard against a hang.
	cmd := exec.Command(bin, "shrink", origin, "--candidates", "20", "--budget", "30m", "--tries", "1", "--out", out)
	printed := interruptWhen(t, cmd, outputLines(t, cmd), "a kept candidate", 10*time.Minute,
		func(l string) bool { return strings.Contains(l, "FAILS, kept") })
	if !strings.Contains(strings.Join(printed, "\n"), "interrupted: keeping the best so far") {
		t.Errorf("shrink does not say it kept the best so far:\n%s", strings.Join(printed, "\n"))
	}

	type shape struct {
		Faults, Processes, Roles, Members int
		Duration                          int64 `json:"duration_ns"`
	}
	var res struct {
		Interrupted   bool `json:"interrupted"`
		Before, After shape
		Candidates    []struct {
			What  string `json:"what"`
			Shape shape  `json:"shape"`
			Kept  bool   `json:"kept"`
		} `json:"candidates"`
	}
	b, err := os.ReadFile(filepath.Join(out, "shrink.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	// The kept candidate need not differ in shape: "no readers" or a lower rate is a smaller
	// run of the same shape. What must hold is that the result is the last candidate kept.
	last := -1
	for i, c := range res.Candidates {
		if c.Kept {
			last = i
		}
	}
	if last < 0 {
		t.Fatalf("shrink.json records no kept candidate:\n%s", b)
	}
	before, after, kept := res.Before, res.After, res.Candidates[last]
	if !res.Interrupted || after != kept.Shape || after.Processes > before.Processes || after.Roles > before.Roles ||
		after.Members > before.Members || after.Duration > before.Duration {
		t.Errorf("shrink.json: interrupted %v, %+v → %+v, last kept candidate %q %+v: want interrupted and the kept candidate",
			res.Interrupted, before, after, kept.What, kept.Shape)
	}
	// The kept candidate's failing try (the smallest failing run) ran with the exec transport
	// and stores the command that repeats it: its own run directory (which keeps the transport)
	// and its seed, once.
	var info struct {
		Command   string `json:"command"`
		Transport string `json:"transport"`
	}
	if b, err := os.ReadFile(filepath.Join(out, "smallest-failing-run", "run.json")); err != nil || json.Unmarshal(b, &info) != nil {
		t.Fatalf("the smallest failing run's run.json: %v", err)
	}
	if info.Transport != tr {
		t.Errorf("the try ran with transport %q, want %q", info.Transport, tr)
	}
	tryDir, err := filepath.EvalSymlinks(filepath.Join(out, "smallest-failing-run"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "fencecheck run " + tryDir + " --seed " + strconv.Itoa(seed); info.Command != want {
		t.Errorf("the try's command is %q, want %q", info.Command, want)
	}
	show, err := exec.Command(bin, "scenarios", "show", filepath.Join(out, "scenario.yaml")).CombinedOutput()
	if err != nil {
		t.Fatalf("the kept scenario.yaml does not load: %v\n%s", err, show)
	}
	if want := "duration: " + time.Duration(after.Duration).String(); !strings.Contains(string(show), want) {
		t.Errorf("scenario.yaml is not the kept candidate (%s):\n%s", want, show)
	}
}
