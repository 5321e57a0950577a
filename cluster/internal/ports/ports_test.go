package ports

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// The child side of the cross-process tests: when envChild is set, this test
// binary is "another fencecheck process" that runs one Free or Claim on the
// range it is given and prints the outcome.
const (
	envChild = "FENCECHECK_PORTS_TEST_CHILD" // "free LOW HIGH" or "claim PORT"
	envDir   = "FENCECHECK_PORTS_TEST_DIR"
)

func TestMain(m *testing.M) {
	if d := os.Getenv(envDir); d != "" {
		ClaimDir = d
	}
	if cmd := os.Getenv(envChild); cmd != "" {
		f := strings.Fields(cmd)
		switch f[0] {
		case "free":
			lo, _ := strconv.Atoi(f[1])
			hi, _ := strconv.Atoi(f[2])
			p, err := Free(Range{lo, hi})
			if err != nil {
				fmt.Println("error")
			} else {
				fmt.Println(p)
			}
		case "claim":
			p, _ := strconv.Atoi(f[1])
			fmt.Println(Claim(p)) // and exit without Release: a crashed owner
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// child runs this test binary as another process with the given command.
func child(t *testing.T, dir, cmd string) string {
	t.Helper()
	c := exec.Command(os.Args[0], "-test.run=^$")
	c.Env = append(os.Environ(), envChild+"="+cmd, envDir+"="+dir)
	out, err := c.Output()
	if err != nil {
		t.Fatalf("child %q: %v", cmd, err)
	}
	return strings.TrimSpace(string(out))
}

// onePort returns a one-port range that is free now.
func onePort(t *testing.T) Range {
	t.Helper()
	p, err := Free(Default())
	if err != nil {
		t.Fatal(err)
	}
	Release(p)
	return Range{p, p + 1}
}

// A port this process picked stays ours while it is unbound (a link that is
// down): another process looking for a free port in the same range must not
// get it, and gets it once released. Without claims, the other process's
// bind check finds the port free and takes it (the CI failure: a heal could
// not re-bind a link's port).
func TestFreeSkipsPortsClaimedByAnotherProcess(t *testing.T) {
	dir := t.TempDir()
	ClaimDir = dir
	r := onePort(t)
	p, err := Free(r)
	if err != nil {
		t.Fatal(err)
	}
	if got := child(t, dir, fmt.Sprintf("free %d %d", r.Low, r.High)); got != "error" {
		t.Fatalf("another process got port %s, claimed (unbound) by this one", got)
	}
	Release(p)
	if got := child(t, dir, fmt.Sprintf("free %d %d", r.Low, r.High)); got != strconv.Itoa(p) {
		t.Fatalf("after Release, another process got %q, want %d", got, p)
	}
}

func TestClaimOnceInAProcess(t *testing.T) {
	ClaimDir = t.TempDir()
	p := onePort(t).Low
	if !Claim(p) {
		t.Fatal("first claim refused")
	}
	if Claim(p) {
		t.Fatal("second claim of a port this process holds granted")
	}
	if _, err := Free(Range{p, p + 1}); err == nil {
		t.Fatal("Free handed out a port this process holds")
	}
	Release(p)
	if !Claim(p) {
		t.Fatal("claim after Release refused")
	}
	Release(p)
}

// A claim whose process exited without releasing (killed, crashed) is taken
// over; a claim of a live process is not released by another.
func TestStaleClaimTakenOver(t *testing.T) {
	dir := t.TempDir()
	ClaimDir = dir
	p := onePort(t).Low
	if got := child(t, dir, fmt.Sprintf("claim %d", p)); got != "true" {
		t.Fatalf("child claim: %q", got)
	}
	if !Claim(p) {
		t.Fatal("a dead process's claim was not taken over")
	}
	if got := child(t, dir, fmt.Sprintf("claim %d", p)); got != "false" {
		t.Fatalf("another process took a live process's claim: %q", got)
	}
	Release(p)
}
