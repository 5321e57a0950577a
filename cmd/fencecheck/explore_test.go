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
	printed := interruptWhen(t, cmd, outputLines(t, cmd), "its first run", 5*time.Minute,
		func(l string) bool { return strings.HasPrefix(l, "run 0 ") })
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
