//go:build !kafka

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestKeyFaultThatNeverHappensIsInconclusive: zombie-holder freezes the holder of r1 before its
// lease commit, but this mutant writes leases outside transactions and sends no commit, so the
// freeze never engages. The run must not pass: it is inconclusive (exit 2) and names the step.
func TestKeyFaultThatNeverHappensIsInconclusive(t *testing.T) {
	if testing.Short() {
		t.Skip("runs zombie-holder for 22s")
	}
	// Embedded runs mostly wait on lease timers: this one overlaps the others.
	t.Parallel()
	bin := buildBinary(t)
	cmd := exec.Command(bin, "run", "zombie-holder", "--transport", "mutant:lease-outside-txn", "--seed", "5", "--out", t.TempDir())
	out, err := cmd.CombinedOutput()
	if code := exitCode(t, err); code != 2 {
		t.Fatalf("exit %d, want 2 (inconclusive):\n%s", code, out)
	}
	for _, want := range []string{"fault-took-hold: inconclusive",
		`missed step 1 "at 4s freeze holder of r1 with point=before-lease-commit for 4s"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output does not say %q:\n%s", want, out)
		}
	}
}

// TestCappedFreezeIsWarnedBeforeTheRun: a duration the harness will cap is said when the
// scenario is loaded, naming the step and the cap, before anything runs.
func TestCappedFreezeIsWarnedBeforeTheRun(t *testing.T) {
	bin := buildBinary(t)
	file := filepath.Join(t.TempDir(), "capped.yaml")
	if err := os.WriteFile(file, []byte(`name: capped
description: a freeze longer than a commit can be held
workload:
  preset: low
nemesis:
  script:
    - at 4s freeze holder of r1 with point=before-lease-commit for 8s
duration: 20s
`), 0o644); err != nil {
		t.Fatal(err)
	}
	want := `warning: capped: nemesis.script[0] "at 4s freeze holder of r1 with point=before-lease-commit for 8s": a commit is held back at most 4.5s`
	out, err := exec.Command(bin, "scenarios", "show", file).CombinedOutput()
	if err != nil || !strings.Contains(string(out), want) {
		t.Fatalf("scenarios show: %v, output does not say %q:\n%s", err, want, out)
	}
	// run warns while validating the flags, before the cluster starts: a bad flag after it
	// stops the run there.
	out, err = exec.Command(bin, "run", file, "--transport", "mutant:nope").CombinedOutput()
	if exitCode(t, err) != 254 || !strings.Contains(string(out), want) {
		t.Fatalf("run: %v, want a usage error after the warning:\n%s", err, out)
	}
}
