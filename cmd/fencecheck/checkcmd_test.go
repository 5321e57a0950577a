//go:build !kafka

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckUnreadableHistory: `fencecheck check` on a history it cannot read is a usage error
// (254: the directory is not a run fencecheck can check) that names the line, and it writes
// nothing into the directory.
func TestCheckUnreadableHistory(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	hist := `{"type":"header","time":0,"format":1,"meta":{"scenario":"unit","lease_ns":100}}` + "\n" + "not json\n"
	if err := os.WriteFile(filepath.Join(dir, "history.jsonl"), []byte(hist), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "check", dir).CombinedOutput()
	if code := exitCode(t, err); code != 254 {
		t.Fatalf("exit %d, want 254; output:\n%s", code, out)
	}
	if !strings.Contains(string(out), "line 2") || !strings.Contains(string(out), "nothing was written") {
		t.Errorf("output does not name line 2 and say nothing was written:\n%s", out)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		t.Errorf("the directory holds %d entries (%v), want only history.jsonl", len(entries), err)
	}
}

// TestReportOfAMissingDirectory: report on a directory that does not exist says it is not a
// run directory (not "run check first").
func TestReportOfAMissingDirectory(t *testing.T) {
	bin := buildBinary(t)
	missing := filepath.Join(t.TempDir(), "nope")
	out, err := exec.Command(bin, "report", missing).CombinedOutput()
	if code := exitCode(t, err); code != 254 || !strings.Contains(string(out), "is not a run directory") || strings.Contains(string(out), "fencecheck check") {
		t.Fatalf("exit %d, output %q; want 254 saying it is not a run directory", code, out)
	}
}
