//go:build !kafka

package main

import (
	"bufio"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestClosedStdoutKeepsTheRun: a run whose stdout closes after its first line (fencecheck run
// | head -1) still heals, reads, checks and writes results.json and report.html. Go kills a
// program on a write to a closed stdout unless SIGPIPE is notified.
func TestClosedStdoutKeepsTheRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a scenario")
	}
	bin := buildBinary(t)
	out := t.TempDir()
	cmd := exec.Command(bin, "run", "steady", "--duration", "3s", "--seed", "1", "--out", out)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("first line: %v", err)
	}
	stdout.Close() // as head -1 does after its line
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok && !ee.Exited() {
		t.Fatalf("the run was killed by %v after its first line %q", ee.ProcessState, line)
	}
	for _, f := range []string{"results.json", "report.html"} {
		if m, _ := filepath.Glob(filepath.Join(out, "steady", "*", f)); len(m) != 1 {
			t.Errorf("%s: %d files after a run whose stdout closed (exit: %v)", f, len(m), err)
		}
	}
}
