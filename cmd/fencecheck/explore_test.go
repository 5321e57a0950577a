//go:build !kafka

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestExploreCtrlC runs a search as a user would and presses Ctrl-C (SIGINT) once its first
// run is kept: explore must stop within the run in progress (which heals, reads and checks),
// exit 2, and leave explore.json saying so, with the corpus so far.
func TestExploreCtrlC(t *testing.T) {
	if testing.Short() {
		t.Skip("runs scenarios")
	}
	t.Parallel()
	bin := buildBinary(t)
	out := filepath.Join(t.TempDir(), "explore")
	cmd := exec.Command(bin, "explore", "steady", "--runs", "50", "--duration", "5s", "--processes", "4",
		"--roles", "2", "--members", "2", "--seed", "3", "--out", out)
	lines := outputLines(t, cmd)
	var printed []string
	// A guard against a hang, not a speed: the first run is a few seconds of workload.
	timeout := time.After(5 * time.Minute)
wait:
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("explore ended before its first run (exit %d):\n%s", exitCode(t, cmd.Wait()), strings.Join(printed, "\n"))
			}
			printed = append(printed, l)
			if strings.HasPrefix(l, "run 0 ") {
				break wait
			}
		case <-timeout:
			t.Fatalf("no run within 5 minutes:\n%s", strings.Join(printed, "\n"))
		}
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	for l := range lines {
		printed = append(printed, l)
	}
	if code := exitCode(t, cmd.Wait()); code != 2 {
		t.Fatalf("exit %d after SIGINT, want 2; output:\n%s", code, strings.Join(printed, "\n"))
	}
	var res struct {
		Stopped string `json:"stopped"`
		Runs    []struct {
			N    int  `json:"n"`
			Kept bool `json:"kept"`
		} `json:"runs"`
	}
	b, err := os.ReadFile(filepath.Join(out, "explore.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if res.Stopped != "interrupted" || len(res.Runs) == 0 || !res.Runs[0].Kept {
		t.Errorf("explore.json: stopped %q, runs %+v: want interrupted, the first run kept", res.Stopped, res.Runs)
	}
	if _, err := os.Stat(filepath.Join(out, "corpus", "steady-e0.yaml")); err != nil {
		t.Errorf("the corpus so far: %v", err)
	}
	if !strings.Contains(strings.Join(printed, "\n"), "stopped: interrupted") {
		t.Errorf("explore does not say it was interrupted:\n%s", strings.Join(printed, "\n"))
	}
}
