//go:build !kafka

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSelftestThroughTheExecProtocol runs selftest's check of the real transport on
// fencecheck's own transport behind the exec protocol (`fencecheck adapter`, one process per
// process of the run): it must be valid in every scenario the mutants use, and the stored
// repeat command must carry the quoted transport.
func TestSelftestThroughTheExecProtocol(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a scenario per mutant scenario")
	}
	bin := buildBinary(t)
	tr := "exec:" + bin + " adapter"
	root := t.TempDir()
	out, err := exec.Command(bin, "selftest", "--transport", tr, "--no-mutants", "--duration", "8s", "--tries", "3", "--out", root).CombinedOutput()
	if code := exitCode(t, err); code != 0 {
		logRunsNotValid(t, root)
		t.Fatalf("selftest exit %d:\n%s", code, out)
	}
	// The adapter serves pipelines too: the pipeline mutants' scenarios run through it.
	const want = 8 // steady, zombie-reads, lost-commit, split-work; pipeline-zombie, -steady, -zombie-commit, -txn-faults
	if n := strings.Count(string(out), "PASS  "+tr); n != want {
		t.Errorf("%d passing runs of %s, want %d:\n%s", n, tr, want, out)
	}
	if strings.Contains(string(out), "mutant:") || !strings.Contains(string(out), fmt.Sprintf("selftest passed: the %s transport valid in %d scenario(s)", tr, want)) {
		t.Errorf("selftest output is not the exec transport's alone:\n%s", out)
	}
}

// logRunsNotValid logs the results and the harness log's last lines of every run under root
// that did not come out valid: the test's directory is gone once it fails.
func logRunsNotValid(t *testing.T, root string) {
	t.Helper()
	results, _ := filepath.Glob(filepath.Join(root, "*", "*", "results.json"))
	for _, r := range results {
		b, err := os.ReadFile(r)
		var res struct{ Verdict string }
		if err == nil && json.Unmarshal(b, &res) == nil && res.Verdict == "valid" {
			continue
		}
		t.Logf("%s:\n%s", r, b)
		logs, _ := os.ReadFile(filepath.Join(filepath.Dir(r), "logs", "harness.log"))
		lines := strings.Split(strings.TrimSpace(string(logs)), "\n")
		t.Logf("harness.log, last lines:\n%s", strings.Join(lines[max(0, len(lines)-30):], "\n"))
	}
}
