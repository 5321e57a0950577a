//go:build kafka

package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/cluster/containers"
	"github.com/fencecheck/fencecheck/internal/testenv"
)

// TestClusterUpContainersInterrupt brings a containers cluster up as a user would, interrupts
// it with Ctrl-C (SIGINT), and requires a clean exit with none of its containers left.
func TestClusterUpContainersInterrupt(t *testing.T) {
	testenv.NeedDocker(t, "starts a Kafka container")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	before, err := containers.Leftovers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bin := buildBinary(t)
	cmd := exec.CommandContext(ctx, bin, "cluster", "up", "--kind", "containers", "--brokers", "1", "--logs", t.TempDir())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	sc := bufio.NewScanner(stdout)
	var printed []string
	for sc.Scan() && !strings.HasPrefix(sc.Text(), "up; Ctrl-C") {
		printed = append(printed, sc.Text())
	}
	during, err := containers.Leftovers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(during) != len(before)+1 {
		t.Fatalf("containers while up: %v (before: %v), want one broker more; output:\n%s\n%s", during, before, strings.Join(printed, "\n"), stderr.String())
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
		printed = append(printed, sc.Text())
	}
	if code := exitCode(t, cmd.Wait()); code != 0 {
		t.Fatalf("exit %d after SIGINT, want 0; output:\n%s\n%s", code, strings.Join(printed, "\n"), stderr.String())
	}
	after, err := containers.Leftovers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Fatalf("containers after Ctrl-C: %v, before: %v", after, before)
	}
	if !slices.Contains(printed, "cluster stopped") {
		t.Errorf("no \"cluster stopped\" line; output:\n%s", strings.Join(printed, "\n"))
	}
}
