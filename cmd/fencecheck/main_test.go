package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// buildBinary builds fencecheck once per test binary for the tests that run it as a user
// would (each building its own cost a few seconds apiece), and returns its path.
func buildBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "fencecheck-test-bin-")
		if err != nil {
			binErr = err
			return
		}
		binDir, binPath = dir, filepath.Join(dir, "fencecheck")
		if out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

var (
	binOnce         sync.Once
	binDir, binPath string
	binErr          error
)

// TestMain removes the binary buildBinary built.
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

func exitCode(t *testing.T, err error) int {
	t.Helper()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	t.Fatalf("run: %v", err)
	return -1
}

// startInGroup starts cmd in a process group of its own and kills the whole group when the
// test ends, whatever happens: nothing a test starts survives it.
func startInGroup(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
}

// outputLines starts cmd as startInGroup does, its stdout and stderr together, and returns
// the lines of that output as they come; the channel closes when the output ends.
func outputLines(t *testing.T, cmd *exec.Cmd) <-chan string {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	startInGroup(t, cmd)
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	return lines
}

// interruptWhen reads cmd's output lines until one satisfies ready (what names it in a
// failure), then sends SIGINT and reads the rest; it fails t unless cmd then exits 2 (an
// interrupted command). It returns every line printed. guard bounds the wait for ready
// against a hang: it is not a speed.
func interruptWhen(t *testing.T, cmd *exec.Cmd, lines <-chan string, what string, guard time.Duration, ready func(string) bool) []string {
	t.Helper()
	var printed []string
	timeout := time.After(guard)
wait:
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("%s ended before %s (exit %d):\n%s", cmd.Args[1], what, exitCode(t, cmd.Wait()), strings.Join(printed, "\n"))
			}
			printed = append(printed, l)
			if ready(l) {
				break wait
			}
		case <-timeout:
			t.Fatalf("not %s within %v:\n%s", what, guard, strings.Join(printed, "\n"))
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
	return printed
}

func without(all, except []string) []string {
	var out []string
	for _, x := range all {
		if !slices.Contains(except, x) {
			out = append(out, x)
		}
	}
	return out
}
