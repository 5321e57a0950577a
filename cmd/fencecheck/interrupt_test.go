//go:build !kafka

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestInterruptMidFault sends SIGINT while a partition is injected: the run must still heal,
// read, check and report, exit 2 (inconclusive), and leave nothing running.
func TestInterruptMidFault(t *testing.T) {
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
