package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckUnreadableHistory: `fencecheck check` on a history it cannot read is a harness
// error (255) that says why, and the run directory's results say so too.
func TestCheckUnreadableHistory(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	hist := `{"type":"header","time":0,"format":1,"meta":{"scenario":"unit","lease_ns":100}}` + "\n" + "not json\n"
	if err := os.WriteFile(filepath.Join(dir, "history.jsonl"), []byte(hist), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "check", dir).CombinedOutput()
	if code := exitCode(t, err); code != 255 {
		t.Fatalf("exit %d, want 255; output:\n%s", code, out)
	}
	if !strings.Contains(string(out), "line 2") {
		t.Errorf("output does not name line 2:\n%s", out)
	}
	res, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil || !strings.Contains(string(res), `"verdict": "error"`) || !strings.Contains(string(res), "line 2") {
		t.Errorf("results.json (%v) must hold the error verdict and name line 2:\n%s", err, res)
	}
}
