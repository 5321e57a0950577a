//go:build !kafka

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/scenarios/soak"
)

// soakJSONFile is what the tests read of soak.json.
type soakJSONFile struct {
	Commands []string      `json:"commands"`
	Stopped  string        `json:"stopped"`
	Rows     []soak.Row    `json:"rows"`
	Total    soak.Row      `json:"total"`
	Runs     []soak.Record `json:"runs"`
	// NotValid is compared with Runs, so it is read as its own type.
	NotValid []soak.Record `json:"not_valid"`
}

func readSoak(t *testing.T, dir string) soakJSONFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "soak.json"))
	if err != nil {
		t.Fatalf("soak.json: %v", err)
	}
	var s soakJSONFile
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("soak.json: %v", err)
	}
	return s
}

// dirVerdicts reads every run directory under root independently of the soak's table:
// scenario → verdict → count, and each directory's seed and verdict.
func dirVerdicts(t *testing.T, root string) (map[string]map[string]int, map[string]string, map[string]uint64) {
	t.Helper()
	counts := map[string]map[string]int{}
	verdicts, seeds := map[string]string{}, map[string]uint64{}
	results, _ := filepath.Glob(filepath.Join(root, "*", "*", "results.json"))
	for _, p := range results {
		var res struct {
			Verdict string `json:"verdict"`
		}
		var info struct {
			Scenario string `json:"scenario"`
			Seed     uint64 `json:"seed"`
		}
		dir := filepath.Dir(p)
		b, err := os.ReadFile(p)
		if err == nil {
			err = json.Unmarshal(b, &res)
		}
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if b, err = os.ReadFile(filepath.Join(dir, "run.json")); err == nil {
			err = json.Unmarshal(b, &info)
		}
		if err != nil {
			t.Fatalf("%s/run.json: %v", dir, err)
		}
		if counts[info.Scenario] == nil {
			counts[info.Scenario] = map[string]int{}
		}
		counts[info.Scenario][res.Verdict]++
		verdicts[dir], seeds[dir] = res.Verdict, info.Seed
	}
	return counts, verdicts, seeds
}

// TestSoakTable soaks steady and a scenario that must come out inconclusive (it promises a
// handoff with one member per role) twice each: the table's counts must be those of the run
// directories' results.json, and each inconclusive run must be listed with its seed and
// directory, in soak.json and soak.md. Repeating the command continues the soak, which is
// complete, so it runs nothing more.
func TestSoakTable(t *testing.T) {
	if testing.Short() {
		t.Skip("runs four short scenarios")
	}
	// Embedded runs mostly wait on lease timers: this one overlaps the others.
	t.Parallel()
	bin := buildBinary(t)
	tmp := t.TempDir()
	noHandoff := filepath.Join(tmp, "no-handoff.yaml")
	err := os.WriteFile(noHandoff, []byte(`name: no-handoff
description: One member per role, so no role can change hands; the handoff promise cannot be kept.
workload:
  preset: low
  processes: 2
  roles: 2
  members_per_role: 1
duration: 3s
promises: [handoff]
`), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(tmp, "soak")
	args := []string{"soak", "steady", noHandoff, "--duration", "3s", "--runs", "2", "--out", out}
	b, err := exec.Command(bin, args...).CombinedOutput()
	if code := exitCode(t, err); code != 2 {
		t.Fatalf("exit %d, want 2 (inconclusive runs); output:\n%s", code, b)
	}
	for _, want := range []string{"[1/4] steady on embedded", "[4/4] no-handoff on embedded", "so far: 4 runs"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("progress lacks %q:\n%s", want, b)
		}
	}
	s := readSoak(t, out)
	counts, verdicts, seeds := dirVerdicts(t, filepath.Join(out, "runs"))
	if len(verdicts) != 4 || len(s.Runs) != 4 {
		t.Fatalf("%d run directories, %d runs in soak.json; want 4 of each:\n%s", len(verdicts), len(s.Runs), b)
	}
	if counts["no-handoff"]["inconclusive"] != 2 {
		t.Fatalf("run directories: %v; want both no-handoff runs inconclusive", counts)
	}
	if len(s.Rows) != 2 {
		t.Fatalf("rows %+v, want one per scenario", s.Rows)
	}
	for _, r := range s.Rows {
		c := counts[r.Scenario]
		if r.Cluster != "embedded" || r.Runs != 2 || r.Valid != c["valid"] || r.Invalid != c["invalid"] ||
			r.Inconclusive != c["inconclusive"] || r.Unknown != c["unknown"] || r.Error != c["error"] {
			t.Errorf("row %+v does not match the run directories' verdicts %v", r, c)
		}
	}
	if s.Total.Runs != 4 || s.Total.Inconclusive < 2 {
		t.Errorf("total %+v", s.Total)
	}
	md, err := os.ReadFile(filepath.Join(out, "soak.md"))
	if err != nil {
		t.Fatal(err)
	}
	notValid := 0
	for dir, v := range verdicts {
		if v == "valid" {
			continue
		}
		notValid++
		found := false
		for _, r := range s.NotValid {
			found = found || (r.Dir == dir && r.Seed == seeds[dir] && string(r.Verdict) == v)
		}
		if !found {
			t.Errorf("%s run %s (seed %d) is not listed in not_valid: %+v", v, dir, seeds[dir], s.NotValid)
		}
		seed := strconv.FormatUint(seeds[dir], 10)
		repeat := false // the run's own directory, and its seed
		for _, line := range strings.Split(string(md), "\n") {
			repeat = repeat || strings.TrimSpace(line) == "fencecheck run "+dir+" --seed "+seed
		}
		if !strings.Contains(string(md), "| "+seed+" | "+v+" |") || !strings.Contains(string(md), dir) || !repeat {
			t.Errorf("soak.md does not list the %s run with seed %s, its directory and repeat command:\n%s", v, seed, md)
		}
	}
	if len(s.NotValid) != notValid {
		t.Errorf("not_valid lists %d runs, the directories hold %d that are not valid", len(s.NotValid), notValid)
	}
	if !strings.Contains(string(md), "    fencecheck soak steady "+noHandoff) {
		t.Errorf("soak.md does not give the soak's command:\n%s", md)
	}
	if !strings.Contains(string(md), "| no-handoff | embedded | 2 | 0 | 0 | 2 | 0 | 0 |") {
		t.Errorf("soak.md lacks the no-handoff row:\n%s", md)
	}

	b, err = exec.Command(bin, args...).CombinedOutput()
	if code := exitCode(t, err); code != 2 {
		t.Fatalf("repeat: exit %d, want 2; output:\n%s", code, b)
	}
	if !strings.Contains(string(b), "continuing the soak") || !strings.Contains(string(b), "0 to go") {
		t.Errorf("repeating a complete soak's command should continue it with nothing to do:\n%s", b)
	}
	if again := readSoak(t, out); len(again.Runs) != 4 {
		t.Errorf("the repeat ran %d more runs", len(again.Runs)-4)
	}
}

// TestSoakInterrupt soaks a broken transport (every run invalid: local-join-seq makes up its
// members' join sequences, wrong from the first registrations, where ack-fenced's violation
// comes seconds into a run and a loaded machine could miss it in 4 s) and sends SIGINT during
// the second run: the soak must stop, exit 1, and leave a table that lists the first run (counted,
// invalid, with its seed and directory) and the interrupted one (not counted).
func TestSoakInterrupt(t *testing.T) {
	if testing.Short() {
		t.Skip("runs scenarios")
	}
	// Embedded runs mostly wait on lease timers: this one overlaps the others.
	t.Parallel()
	bin := buildBinary(t)
	out := filepath.Join(t.TempDir(), "soak")
	cmd := exec.Command(bin, "soak", "steady", "--transport", "mutant:local-join-seq", "--duration", "4s",
		"--runs", "5", "--out", out)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // whatever happens, nothing survives the test
	// Wait until the first run is in the table and the second has started.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		b, _ := os.ReadFile(filepath.Join(out, "soak.json"))
		dirs, _ := filepath.Glob(filepath.Join(out, "runs", "steady", "*"))
		if strings.Contains(string(b), `"runs": [`) && len(dirs) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no second run within 2 minutes:\n%s", log.String())
		}
		time.Sleep(50 * time.Millisecond) // polling files another process writes
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code := exitCode(t, cmd.Wait()); code != 1 {
		t.Fatalf("exit %d after SIGINT, want 1 (an invalid run was counted); output:\n%s", code, log.String())
	}
	s := readSoak(t, out)
	if !strings.Contains(s.Stopped, "interrupted") {
		t.Errorf("stopped = %q, want interrupted", s.Stopped)
	}
	if len(s.Runs) != 2 || s.Runs[0].Interrupted || !s.Runs[1].Interrupted {
		t.Fatalf("runs %+v: want the first counted and the second interrupted", s.Runs)
	}
	if s.Total.Runs != 1 || s.Total.Invalid != 1 {
		t.Errorf("total %+v: want the one completed run, invalid", s.Total)
	}
	_, verdicts, seeds := dirVerdicts(t, filepath.Join(out, "runs"))
	first := s.Runs[0]
	if verdicts[first.Dir] != "invalid" || seeds[first.Dir] != first.Seed {
		t.Errorf("first run %+v; its directory says %s, seed %d", first, verdicts[first.Dir], seeds[first.Dir])
	}
	md, _ := os.ReadFile(filepath.Join(out, "soak.md"))
	for _, want := range []string{
		"| " + strconv.FormatUint(first.Seed, 10) + " | invalid |", first.Dir, "(interrupted, not counted)",
		"stopped: interrupted", "| steady | embedded | 1 | 0 | 1 | 0 | 0 | 0 |",
	} {
		if !strings.Contains(string(md), want) {
			t.Errorf("soak.md lacks %q:\n%s", want, md)
		}
	}
}

// TestSoakUsageErrors: bad soak arguments are usage errors (254) that name the flag or the
// scenario, and start no run.
func TestSoakUsageErrors(t *testing.T) {
	bin := buildBinary(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"soak", "--runs", "0"}, "--runs 0"},
		{[]string{"soak", "--for", "-1s"}, "--for -1s"},
		{[]string{"soak", "no-such-scenario"}, "no built-in scenario"},
		{[]string{"soak", "isolate-broker", "--cluster", "embedded"}, "local"},
		{[]string{"soak", "--transport", "mutant:nope"}, "no such mutant"},
	} {
		out := filepath.Join(t.TempDir(), "soak")
		b, err := exec.Command(bin, append(tc.args, "--out", out)...).CombinedOutput()
		if code := exitCode(t, err); code != 254 {
			t.Errorf("%v: exit %d, want 254; output:\n%s", tc.args, code, b)
		}
		if !strings.Contains(string(b), tc.want) || strings.Contains(string(b), "goroutine ") {
			t.Errorf("%v: output does not say %q (or has a stack trace):\n%s", tc.args, tc.want, b)
		}
		if _, err := os.Stat(filepath.Join(out, "runs")); err == nil {
			t.Errorf("%v: a run was started", tc.args)
		}
	}
}

// TestCheckKeepsInterruptedInconclusive: re-checking a run that was interrupted (run.json says
// so) must give what the run gave, inconclusive (exit 2), not valid. The soak found this:
// interrupted runs re-checked offline came out valid.
func TestCheckKeepsInterruptedInconclusive(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a scenario")
	}
	// Embedded runs mostly wait on lease timers: this one overlaps the others.
	t.Parallel()
	bin := buildBinary(t)
	out := t.TempDir()
	// The re-check must turn a valid run inconclusive, so the run must be valid: a 2 s run on
	// a starved machine may miss its promised handoff (exit 2) and is then run again, at most
	// twice. An invalid run or a harness error fails at once.
	b, err := exec.Command(bin, "run", "steady", "--duration", "2s", "--out", out).CombinedOutput()
	code := exitCode(t, err)
	for try := 1; code == 2 && try <= 2; try++ {
		t.Logf("run %d inconclusive, running it again:\n%s", try, b)
		b, err = exec.Command(bin, "run", "steady", "--duration", "2s", "--out", out).CombinedOutput()
		code = exitCode(t, err)
	}
	if code != 0 {
		t.Fatalf("run: exit %d:\n%s", code, b)
	}
	dir := filepath.Join(out, "latest")
	// Mark the run interrupted, as a Ctrl-C would have.
	info := map[string]any{}
	b, err = os.ReadFile(filepath.Join(dir, "run.json"))
	if err == nil {
		err = json.Unmarshal(b, &info)
	}
	if err != nil {
		t.Fatal(err)
	}
	info["interrupted"] = true
	if b, err = json.Marshal(info); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "run.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	b, err = exec.Command(bin, "check", dir).CombinedOutput()
	if code := exitCode(t, err); code != 2 {
		t.Fatalf("check of an interrupted run: exit %d, want 2:\n%s", code, b)
	}
	var res struct {
		Verdict  string `json:"verdict"`
		ExitCode int    `json:"exit_code"`
		Error    string `json:"error"`
	}
	b, err = os.ReadFile(filepath.Join(dir, "results.json"))
	if err == nil {
		err = json.Unmarshal(b, &res)
	}
	if err != nil || res.Verdict != "inconclusive" || res.ExitCode != 2 || !strings.Contains(res.Error, "interrupted") {
		t.Errorf("results.json %+v (%v): want inconclusive, exit 2, saying interrupted", res, err)
	}
}
