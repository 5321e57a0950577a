//go:build !kafka

package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSuiteEndToEnd runs a suite on embedded: steady on kfake with TV2 (a mutant transport
// that makes up its members' join sequences, invalid from the first registrations, so within
// any run) and TV1 (the real one), and isolate-broker,
// which kfake cannot run (skipped). The suite exits 1 and its index and JUnit point at the
// failing cell; both steady cells ran on a cluster shared per system. Then suite merge of that
// directory, with the directory itself as baseline, marks the cell still failing and writes
// the Markdown summary with the report's link.
func TestSuiteEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two short scenarios")
	}
	bin := buildBinary(t)
	bad := writeSuite(t, "name: bad\nbudget: 1h\nscenarios: [steady]\nsystems: [{cluster: embedded, transaction_version: 3}]\n")
	for _, args := range [][]string{{"suite", bad}, {"suite", "nightly", "--group", "nope"}, {"suite", "merge", "--out", t.TempDir()}} {
		b, err := exec.Command(bin, args...).CombinedOutput()
		if code := exitCode(t, err); code != 254 || strings.Contains(string(b), "goroutine") {
			t.Errorf("%v: exit %d, want 254 (usage); output:\n%s", args, code, b)
		}
	}
	file := writeSuite(t, `name: e2e
budget: 5m
duration: 4s
scenarios: [steady, isolate-broker]
systems:
  - {cluster: embedded, transaction_version: 2}
  - {cluster: embedded, transaction_version: 1}
cells:
  - {scenario: steady, system: kfake-tv2, transport: "mutant:local-join-seq"}
`)
	tmp := t.TempDir()
	out := filepath.Join(tmp, "suite")
	cmd := exec.Command(bin, "suite", file, "--out", out)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if code := exitCode(t, cmd.Run()); code != 1 {
		t.Fatalf("exit %d, want 1 (an invalid cell); stdout:\n%s\nstderr:\n%s", code, &stdout, &stderr)
	}
	for _, want := range []string{"[1/2] steady × kfake-tv2", "[2/2] steady × kfake-tv1", "isolate-broker × kfake-tv2 skipped"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("progress on stderr lacks %q:\n%s", want, &stderr)
		}
	}
	if !strings.Contains(stdout.String(), "steady on kfake-tv2: invalid; repeat: fencecheck run "+out) {
		t.Errorf("stdout does not name the failing cell:\n%s", &stdout)
	}
	checkFailingCell(t, out, "steady", "kfake-tv2")
	for _, c := range readSuite(t, out).Cells {
		switch {
		case c.Scenario == "steady" && c.Cluster != "shared "+c.System+"#1":
			t.Errorf("steady on %s ran on cluster %q, want the system's shared one", c.System, c.Cluster)
		case c.Scenario == "isolate-broker" && (c.Status != "skipped" || !strings.Contains(c.Note, "links")):
			t.Errorf("isolate-broker on %s: %s (%s), want skipped for want of peer links", c.System, c.Status, c.Note)
		}
	}

	merged := filepath.Join(tmp, "merged")
	summary := filepath.Join(tmp, "summary.md")
	b, err := exec.Command(bin, "suite", "merge", out, "--out", merged, "--baseline", out, "--summary", summary).CombinedOutput()
	if code := exitCode(t, err); code != 1 {
		t.Fatalf("merge: exit %d, want 1; output:\n%s", code, b)
	}
	checkFailingCell(t, merged, "steady", "kfake-tv2")
	if s := readSuite(t, merged); s.Cells[0].Mark != "still failing" {
		t.Errorf("against itself the failing cell is %q, want still failing", s.Cells[0].Mark)
	}
	md, err := os.ReadFile(summary)
	if err != nil {
		t.Fatal(err)
	}
	run := readSuite(t, merged).Cells[0].Runs[0].Dir
	if !strings.Contains(string(md), "[invalid]("+run+"/report.html) (still failing)") {
		t.Errorf("summary lacks the failing cell's link to %s:\n%s", run, md)
	}
}

// TestSuiteInterrupt: SIGINT during the second of three cells stops the suite: the first
// cell's run is kept, the second is healed, checked and listed as interrupted, the third is
// not run, and index.html and junit.xml say so; exit 2.
func TestSuiteInterrupt(t *testing.T) {
	if testing.Short() {
		t.Skip("runs scenarios")
	}
	bin := buildBinary(t)
	file := writeSuite(t, `name: stop
budget: 5m
duration: 4s
scenarios: [steady, holder-partition, slow-links]
systems: [{cluster: embedded}]
cells:
  # Long, so the signal surely comes while it runs; it costs nothing, the signal ends it.
  - {scenario: holder-partition, duration: 60s}
`)
	out := filepath.Join(t.TempDir(), "suite")
	cmd := exec.Command(bin, "suite", file, "--out", out)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if strings.HasPrefix(sc.Text(), "[2/3] holder-partition") {
			break
		}
	}
	rest := make(chan string, 1)
	go func() {
		var b strings.Builder
		for sc.Scan() {
			b.WriteString(sc.Text() + "\n")
		}
		rest <- b.String()
	}()
	// Signal once the run's workload is under way (its history holds operations): a signal
	// while its cluster comes up is a harness error of that run, as it is for fencecheck run.
	deadline := time.Now().Add(time.Minute)
	for {
		h, _ := filepath.Glob(filepath.Join(out, "runs", "holder-partition", "*", "history.jsonl"))
		if len(h) == 1 {
			if b, _ := os.ReadFile(h[0]); strings.Count(string(b), "\n") > 2 {
				break
			}
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			t.Fatalf("holder-partition's history never appeared:\n%s", &log)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition: operations appear as the workload runs
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		t.Fatalf("the suite did not stop after SIGINT:\n%s", &log)
	}
	log.WriteString(<-rest)
	if code := exitCode(t, err); code != 2 {
		t.Fatalf("exit %d, want 2:\n%s", code, &log)
	}
	s := readSuite(t, out)
	got := map[string]string{}
	for _, c := range s.Cells {
		got[c.Scenario] = c.Status
		switch c.Scenario {
		case "steady":
			if c.Status != "ran" || len(c.Runs) != 1 || c.Runs[0].Interrupted {
				t.Errorf("steady, finished before the signal: %+v", c)
			}
		case "holder-partition":
			if c.Status != "ran" || len(c.Runs) != 1 || !c.Runs[0].Interrupted || c.Verdict == "valid" {
				t.Errorf("holder-partition, interrupted: %+v", c)
			}
		case "slow-links":
			if c.Status != "not run" || c.Note != "interrupted" {
				t.Errorf("slow-links, never started: %+v", c)
			}
		}
	}
	if len(got) != 3 || s.Stopped != "interrupted" || s.ExitCode != 2 {
		t.Errorf("suite.json: cells %v, stopped %q, exit %d", got, s.Stopped, s.ExitCode)
	}
	index, _ := os.ReadFile(filepath.Join(out, "index.html"))
	if !strings.Contains(string(index), "Stopped early: interrupted") || !strings.Contains(string(index), `data-scenario="slow-links"`) {
		t.Errorf("index.html does not show the interrupted suite")
	}
	if j := readJUnit(t, filepath.Join(out, "junit.xml")); len(j.Suites) != 3 {
		t.Errorf("junit.xml has %d testsuites, want 3", len(j.Suites))
	}
}

// TestSuitePlan: plan runs nothing and prints every share of the matrix, the one-machine
// estimate against the budget and the runners' wall time; bad flags are usage errors naming
// the flag.
func TestSuitePlan(t *testing.T) {
	bin := buildBinary(t)
	out, err := exec.Command(bin, "suite", "plan", "matrix", "--runners", "8").CombinedOutput()
	if code := exitCode(t, err); code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for _, want := range []string{"links/kafka-4.4.0", "brokers/kfake-kafkajs", "pipelines/kafka-4.4.0", "links/kafka-4.4.0-krabka", "brokers/kafka-4.1.2-tv1-krabka", "suite matrix: 95 shares", "budget 8h00m: fits", "on 8 runners", "runner 8 ("} {
		if !strings.Contains(string(out), want) {
			t.Errorf("plan lacks %q:\n%s", want, out)
		}
	}
	out, err = exec.Command(bin, "suite", "plan", "nightly", "--budget", "1m", "--runners", "0").CombinedOutput()
	if code := exitCode(t, err); code != 0 || !strings.Contains(string(out), "does not fit") || strings.Contains(string(out), "runners") {
		t.Errorf("a 1m budget: exit %d, want 0, a plan that does not fit and no runners:\n%s", code, out)
	}
	for _, args := range [][]string{{"--runners", "-1"}, {"--baseline", t.TempDir()}} {
		out, err := exec.Command(bin, append([]string{"suite", "plan", "nightly"}, args...)...).CombinedOutput()
		if code := exitCode(t, err); code != 254 || !strings.Contains(string(out), args[0]) {
			t.Errorf("%v: exit %d, want 254 naming %s:\n%s", args, code, args[0], out)
		}
	}
}

// TestSuiteRunners: two jobs of a 2-runner matrix, each given --runner K/2, run the shares
// suite plan --runners 2 lists for them, and their merged directories hold every cell of the
// suite, each run once; a third runner of three has nothing to run, says so and exits 0
// without a directory; bad K/N values are usage errors naming the flag.
func TestSuiteRunners(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two short scenarios")
	}
	bin := buildBinary(t)
	file := writeSuite(t, `name: fanout
budget: 5m
duration: 2s
scenarios: [steady]
systems:
  - {cluster: embedded, transaction_version: 2}
  - {cluster: embedded, transaction_version: 1}
`)
	plan, err := exec.Command(bin, "suite", "plan", file, "--runners", "2").CombinedOutput()
	if code := exitCode(t, err); code != 0 {
		t.Fatalf("plan: exit %d:\n%s", code, plan)
	}
	tmp := t.TempDir()
	var dirs []string
	for k := 1; k <= 2; k++ {
		out := filepath.Join(tmp, "runner-"+strconv.Itoa(k))
		b, err := exec.Command(bin, "suite", file, "--runner", strconv.Itoa(k)+"/2", "--out", out).CombinedOutput()
		// 2 is an inconclusive cell (a 2 s run on a starved machine may miss its promised
		// handoff): it still ran its share, which is what this test judges, not the verdict.
		if code := exitCode(t, err); code != 0 && code != 2 {
			t.Fatalf("runner %d/2: exit %d:\n%s", k, code, b)
		}
		// The plan's line "  runner K (12s): all/kfake-tv2" names what the job says it runs.
		var share string
		for _, l := range strings.Split(string(plan), "\n") {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(l), "runner "+strconv.Itoa(k)+" ("); ok {
				_, share, _ = strings.Cut(rest, "): ")
			}
		}
		if share == "" || !strings.Contains(string(b), "runner "+strconv.Itoa(k)+" of 2: "+share+"\n") {
			t.Errorf("runner %d/2 does not run the share the plan gives it (%q):\n%s\nplan:\n%s", k, share, b, plan)
		}
		if s := readSuite(t, out); len(s.Cells) != 1 || s.Cells[0].Status != "ran" {
			t.Errorf("runner %d/2 ran %+v, want its one cell", k, s.Cells)
		}
		dirs = append(dirs, out)
	}
	merged := filepath.Join(tmp, "merged")
	if b, err := exec.Command(bin, append([]string{"suite", "merge", "--out", merged}, dirs...)...).CombinedOutput(); exitCode(t, err) != 0 {
		t.Fatalf("merge: %s", b)
	}
	s := readSuite(t, merged)
	var systems []string
	for _, c := range s.Cells {
		if c.Status == "ran" && len(c.Runs) == 1 {
			systems = append(systems, c.System)
		}
	}
	if slices.Sort(systems); !slices.Equal(systems, []string{"kfake-tv1", "kfake-tv2"}) {
		t.Errorf("merged cells %+v, want steady on kfake-tv1 and kfake-tv2, each run once", s.Cells)
	}

	idle := filepath.Join(tmp, "idle")
	b, err := exec.Command(bin, "suite", file, "--runner", "3/3", "--out", idle).CombinedOutput()
	if code := exitCode(t, err); code != 0 || !strings.Contains(string(b), "nothing to run") {
		t.Errorf("runner 3/3 of a 2-share suite: exit %d, want 0 and nothing to run:\n%s", code, b)
	}
	if _, err := os.Stat(idle); !os.IsNotExist(err) {
		t.Errorf("runner 3/3 wrote %s (%v), want nothing", idle, err)
	}
	for _, v := range []string{"0/2", "3/2", "1", "a/b", "1/0"} {
		b, err := exec.Command(bin, "suite", file, "--runner", v).CombinedOutput()
		if code := exitCode(t, err); code != 254 || !strings.Contains(string(b), "--runner "+v) {
			t.Errorf("--runner %s: exit %d, want 254 naming the flag:\n%s", v, code, b)
		}
	}
}
