package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/fencecheck/fencecheck/internal/testenv"
)

// TestSelftestThroughTheExecProtocol runs selftest's check of the real transport on
// fencecheck's own transport behind the exec protocol (`fencecheck adapter`, one process per
// process of the run): it must be valid in every scenario the mutants use, and the stored
// repeat command must carry the quoted transport.
func TestSelftestThroughTheExecProtocol(t *testing.T) {
	testenv.Light(t)
	if testing.Short() {
		t.Skip("runs a scenario per mutant scenario")
	}
	bin := buildBinary(t)
	tr := "exec:" + bin + " adapter"
	out, err := exec.Command(bin, "selftest", "--transport", tr, "--no-mutants", "--duration", "8s", "--out", t.TempDir()).CombinedOutput()
	if code := exitCode(t, err); code != 0 {
		t.Fatalf("selftest exit %d:\n%s", code, out)
	}
	if n := strings.Count(string(out), "PASS  "+tr); n != 2 {
		t.Errorf("%d passing runs of %s, want 2 (steady, zombie-reads):\n%s", n, tr, out)
	}
	if strings.Contains(string(out), "mutant:") || !strings.Contains(string(out), "selftest passed: the "+tr+" transport valid in 2 scenario(s)") {
		t.Errorf("selftest output is not the exec transport's alone:\n%s", out)
	}
}
