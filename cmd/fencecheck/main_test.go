package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/cluster/containers"
	"github.com/fencecheck/fencecheck/internal/testenv"
	"github.com/fencecheck/fencecheck/transport/mutant"
)

// buildBinary builds fencecheck once per test binary for the tests that run it as a user
// would (each building its own cost a few seconds apiece), and returns its path.
func buildBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "fencecheck-test-bin-")
		if err != nil {
			binErr = err
			return
		}
		binDir, binPath = dir, filepath.Join(dir, "fencecheck")
		if out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

var (
	binOnce         sync.Once
	binDir, binPath string
	binErr          error
)

// TestMain removes the binary buildBinary built.
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

func exitCode(t *testing.T, err error) int {
	t.Helper()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	t.Fatalf("run: %v", err)
	return -1
}

func TestUsageErrors(t *testing.T) {
	bin := buildBinary(t)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"run", "no-such-scenario"}, "no built-in scenario"},
		{[]string{"run", "--count", "0"}, "--count"},
		{[]string{"run", "--cluster", "cloud"}, "cluster.kind"},
		{[]string{"run", "--no-such-flag"}, "unknown flag"},
		{[]string{"run", "isolate-broker", "--cluster", "embedded"}, "local"},
		{[]string{"run", "--transport", "mutant:nope"}, "no such mutant"},
		{[]string{"run", "--cluster", "local", "--security", "kerberos"}, "cluster.security"},
		{[]string{"run", "--security", "sasl-ssl"}, "embedded cluster (kfake) has no TLS or SASL listener"},
		{[]string{"check"}, "takes 1 argument"},
		{[]string{"check", t.TempDir()}, "not a run directory"},
		{[]string{"shrink"}, "takes 1 argument"},
		{[]string{"shrink", t.TempDir()}, "cannot shrink"},
		{[]string{"selftest", "--parallel", "-1"}, "--parallel"},
		{[]string{"selftest", "--txn-version", "3"}, "cluster.transaction_version: 3"},
		{[]string{"probe"}, "--bootstrap: required"},
		{[]string{"rn"}, `unknown command "rn" for "fencecheck"; did you mean run?`},
		{[]string{"scenarios", "lst"}, `unknown command "lst" for "fencecheck scenarios"; did you mean list?`},
		{[]string{"run", "--seed", "-1"}, `--seed "-1": want a whole number, 0 or more`},
		{[]string{"run", "--duration", "5"}, `--duration "5": want a duration with a unit`},
		{[]string{"probe", "--cluster", "embedded", "--bootstrap", "127.0.0.1:9092"}, "--bootstrap: only an external cluster"},
		{[]string{"run", "steady", "--cluster", "external"}, "--cluster external needs --bootstrap HOST:PORT"},
		{[]string{"soak", "--cluster", "external", "--duration", "1s"}, "--cluster external needs --bootstrap HOST:PORT"},
		{[]string{"selftest", "--cluster", "external"}, "--cluster external needs --bootstrap HOST:PORT"},
	}
	for _, tc := range tests {
		out, err := exec.Command(bin, tc.args...).CombinedOutput()
		if code := exitCode(t, err); code != 254 {
			t.Errorf("%v: exit %d, want 254 (usage); output:\n%s", tc.args, code, out)
		}
		if !strings.Contains(string(out), tc.want) {
			t.Errorf("%v: output %q does not say %q", tc.args, out, tc.want)
		}
		if strings.Contains(string(out), "strconv.") {
			t.Errorf("%v: Go's parser reached the user:\n%s", tc.args, out)
		}
		if strings.Contains(string(out), "goroutine ") {
			t.Errorf("%v: a stack trace reached the user:\n%s", tc.args, out)
		}
	}
}

// TestInterruptMidFault sends SIGINT while a partition is injected: the run must still heal,
// read, check and report, exit 2 (inconclusive), and leave nothing running.
func TestInterruptMidFault(t *testing.T) {
	testenv.Light(t)
	if testing.Short() {
		t.Skip("runs a scenario")
	}
	// Embedded runs mostly wait on lease timers: this one overlaps the others.
	t.Parallel()
	bin := buildBinary(t)
	out := t.TempDir()
	cmd := exec.Command(bin, "run", "holder-partition", "--seed", "4", "--out", out)
	lines := outputLines(t, cmd)

	// Wait until the history records a fault window that took hold... by watching the file.
	var hist string
	deadline := time.Now().Add(60 * time.Second)
	for {
		matches, _ := filepath.Glob(filepath.Join(out, "holder-partition", "*", "history.jsonl"))
		if len(matches) == 1 {
			hist = matches[0]
			if b, _ := os.ReadFile(hist); strings.Contains(string(b), `"fault-start"`) {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no fault started within 60s")
		}
		time.Sleep(100 * time.Millisecond) // polling a file another process writes
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	var printed []string
	for l := range lines {
		printed = append(printed, l)
	}
	code := exitCode(t, cmd.Wait())
	if code != 2 {
		t.Fatalf("exit %d after SIGINT, want 2; output:\n%s", code, strings.Join(printed, "\n"))
	}
	dir := filepath.Dir(hist)
	var res struct {
		Verdict string `json:"verdict"`
		Error   string `json:"error"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatalf("no results.json after the interrupt: %v", err)
	}
	if err := json.Unmarshal(b, &res); err != nil || res.Verdict != "inconclusive" || !strings.Contains(res.Error, "interrupted") {
		t.Fatalf("results %+v (%v), want inconclusive and interrupted", res, err)
	}
	var info struct {
		Interrupted bool `json:"interrupted"`
	}
	b, _ = os.ReadFile(filepath.Join(dir, "run.json"))
	if json.Unmarshal(b, &info); !info.Interrupted {
		t.Error("run.json does not say the run was interrupted")
	}
	for _, f := range []string{"report.html", "junit.xml"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s missing after the interrupt: %v", f, err)
		}
	}
	hb, _ := os.ReadFile(hist)
	if starts, ends := strings.Count(string(hb), `"fault-start"`), strings.Count(string(hb), `"fault-end"`); starts == 0 || starts != ends {
		t.Errorf("history has %d fault starts and %d ends: every fault must be healed and closed", starts, ends)
	}
	if !strings.Contains(string(hb), `"final-read"`) {
		t.Error("no final read after the interrupt")
	}
	// The process group is gone: nothing the run started is still running.
	if err := syscall.Kill(-cmd.Process.Pid, 0); err == nil {
		t.Error("processes of the run are still running after it exited")
	}
}

// TestSelftest runs `fencecheck selftest` on the embedded cluster: it passes only if every
// mutant transport is judged invalid on a guarantee it breaks and the real one valid.
func TestSelftest(t *testing.T) {
	testenv.Light(t)
	if testing.Short() {
		t.Skip("runs a scenario per transport")
	}
	// Embedded runs mostly wait on lease timers: this one overlaps the others.
	t.Parallel()
	bin := buildBinary(t)
	out, err := exec.Command(bin, "selftest", "--duration", "8s", "--out", t.TempDir()).CombinedOutput()
	if code := exitCode(t, err); code != 0 {
		t.Fatalf("selftest exit %d:\n%s", code, out)
	}
	// On the embedded cluster the runs go side by side by default.
	want := []string{"PASS  real", "selftest passed", "at a time"}
	for _, m := range mutant.List() {
		want = append(want, "PASS  mutant:"+m.Name)
	}
	if len(want) < 2+10 {
		t.Errorf("%d mutants, want at least 10", len(want)-2)
	}
	for _, w := range want {
		if !strings.Contains(string(out), w) {
			t.Errorf("selftest output lacks %q:\n%s", w, out)
		}
	}
	// The table has a row per mutant, caught on its one seed with a time to detect.
	rows := 0
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) < 5 || !slices.ContainsFunc(mutant.List(), func(m mutant.Description) bool { return m.Name == f[0] }) {
			continue
		}
		rows++
		if n := len(f); f[n-3] != "1" || f[n-2] != "1" {
			t.Errorf("row %q: want 1 seed tried and 1 caught", line)
		} else if d, err := time.ParseDuration(f[n-1]); err != nil || d <= 0 {
			t.Errorf("row %q: no time to detect (%v)", line, err)
		}
	}
	if rows != len(mutant.List()) {
		t.Errorf("%d table rows, want one per mutant (%d):\n%s", rows, len(mutant.List()), out)
	}
}

// TestHarnessErrorWhenClusterCannotStart: a cluster that cannot start is a harness error
// (255), not a verdict on the transport, and the run directory still says why.
func TestHarnessErrorWhenClusterCannotStart(t *testing.T) {
	bin := buildBinary(t)
	out := t.TempDir()
	b, err := exec.Command(bin, "run", "steady", "--cluster", "local", "--kafka-version", "9.9.9", "--out", out).CombinedOutput()
	if code := exitCode(t, err); code != 255 {
		t.Fatalf("exit %d, want 255; output:\n%s", code, b)
	}
	if !strings.Contains(string(b), "make kafka KAFKA_VERSION=9.9.9") {
		t.Errorf("output does not say how to install the missing version:\n%s", b)
	}
	res, err := os.ReadFile(filepath.Join(out, "latest", "results.json"))
	if err != nil || !strings.Contains(string(res), `"verdict": "error"`) || strings.Contains(string(res), "history.jsonl") {
		t.Errorf("results.json (%v) must hold the error verdict and only the cluster's reason:\n%s", err, res)
	}
}

// TestClusterUpContainersInterrupt brings a containers cluster up as a user would, interrupts
// it with Ctrl-C (SIGINT), and requires a clean exit with none of its containers left.
func TestClusterUpContainersInterrupt(t *testing.T) {
	testenv.NeedDocker(t, "starts a Kafka container")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	before, err := containers.Leftovers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bin := buildBinary(t)
	cmd := exec.CommandContext(ctx, bin, "cluster", "up", "--kind", "containers", "--brokers", "1", "--logs", t.TempDir())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	sc := bufio.NewScanner(stdout)
	var printed []string
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "up; Ctrl-C") {
		printed = append(printed, sc.Text())
	}
	during, err := containers.Leftovers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(during) != len(before)+1 {
		t.Fatalf("containers while up: %v (before: %v), want one broker more; output:\n%s\n%s", during, before, strings.Join(printed, "\n"), stderr.String())
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
		printed = append(printed, sc.Text())
	}
	if code := exitCode(t, cmd.Wait()); code != 0 {
		t.Fatalf("exit %d after SIGINT, want 0; output:\n%s\n%s", code, strings.Join(printed, "\n"), stderr.String())
	}
	after, err := containers.Leftovers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Fatalf("containers after Ctrl-C: %v, before: %v", after, before)
	}
	if !slices.Contains(printed, "cluster stopped") {
		t.Errorf("no \"cluster stopped\" line; output:\n%s", strings.Join(printed, "\n"))
	}
}

// startInGroup starts cmd in a process group of its own and kills the whole group when the
// test ends, whatever happens: nothing a test starts survives it.
func startInGroup(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
}

// outputLines starts cmd as startInGroup does, its stdout and stderr together, and returns
// the lines of that output as they come; the channel closes when the output ends.
func outputLines(t *testing.T, cmd *exec.Cmd) <-chan string {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	startInGroup(t, cmd)
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	return lines
}
