//go:build kafka

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/cluster/containers"
	"github.com/fencecheck/fencecheck/cluster/local"
	"github.com/fencecheck/fencecheck/internal/testenv"
)

// killNineScenario is the run the crash tests kill: one broker and a light fault-free load, so
// the cost is one broker's start; the duration is far longer than the test waits.
const killNineScenario = `name: kill-nine
description: one broker, light load, no faults; killed with SIGKILL mid-run by the crash tests
cluster:
  kind: %s
  brokers: 1
%s
workload:
  preset: low
  processes: 2
  roles: 1
  members_per_role: 2
duration: 5m
`

// TestKillNineLocal: kill -9 of `fencecheck run` on local Kafka leaves a history that
// `fencecheck check` judges, and what the run left (its cluster folder, any JVM) is removed by
// ReapOrphans, which the next local cluster start runs first.
func TestKillNineLocal(t *testing.T) {
	testenv.NeedKafka(t, "starts a Kafka JVM")
	killNine(t, "local", "", func(ctx context.Context) ([]string, error) { return local.ReapOrphans(ctx) })
}

// TestKillNineContainers: the same on Kafka in containers, with the links' toxiproxy in a
// container too, so the reaper must remove the broker's and the proxy's containers.
func TestKillNineContainers(t *testing.T) {
	proxy := containers.ToxiproxyImageRepo + ":" + containers.ToxiproxyVersion
	testenv.NeedDocker(t, "starts Kafka and toxiproxy containers", containers.KafkaImageRepo+":"+containers.DefaultVersion, proxy)
	killNine(t, "containers", "  toxiproxy_image: "+proxy, containers.ReapOrphans)
}

// killNine runs the kill-nine scenario on kind, SIGKILLs fencecheck once the history shows
// operations completing, checks the run directory, then reaps and requires that nothing of the
// run is left: no process or folder under the run's TMPDIR, no container more than before.
func killNine(t *testing.T, kind, clusterExtra string, reap func(context.Context) ([]string, error)) {
	began := time.Now()
	bin := buildBinary(t)
	// The run's temporary folders (its cluster's) go to a TMPDIR of its own, where they are easy
	// to find; this process reaps there too.
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	out := t.TempDir()
	file := filepath.Join(t.TempDir(), "kill-nine.yaml")
	if err := os.WriteFile(file, fmt.Appendf(nil, killNineScenario, kind, clusterExtra), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var before []string
	if kind == "containers" {
		var err error
		if before, err = containers.Leftovers(ctx); err != nil {
			t.Fatal(err)
		}
	}

	cmd := exec.Command(bin, "run", file, "--seed", "9", "--out", out)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// Whatever happens, nothing the test started survives it (the reaper is what is under test;
	// this is only the safety net if the test fails first).
	defer syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)

	// Kill once operations complete: the workload runs and the history (flushed every second)
	// holds some of them.
	hist := awaitOps(t, ctx, filepath.Join(out, "kill-nine", "*", "history.jsonl"), exited, &output)
	running := time.Since(began)
	dirs, _ := filepath.Glob(filepath.Join(tmp, "fencecheck-kafka-*"))
	if len(dirs) != 1 {
		t.Fatalf("cluster folders under TMPDIR while running: %v, want one", dirs)
	}
	if jvms := processesNaming(tmp); len(jvms) == 0 {
		t.Fatalf("no broker JVM names %s while the run is going", tmp)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	t.Logf("%s: fencecheck killed %v after start (history: %s)", kind, running.Round(100*time.Millisecond), hist)

	// The history the killed run left is judged: a verdict, not a harness error.
	chk, err := exec.CommandContext(ctx, bin, "check", filepath.Dir(hist)).CombinedOutput()
	code := exitCode(t, err)
	if code != 0 && code != 1 && code != 2 {
		t.Errorf("fencecheck check of the killed run: exit %d, want 0, 1 or 2; output:\n%s", code, chk)
	}
	if strings.Contains(string(chk), "goroutine ") {
		t.Errorf("a stack trace in the check's output:\n%s", chk)
	}
	t.Logf("check: exit %d:\n%s", code, chk)
	for _, f := range []string{"results.json", "report.html", "junit.xml"} {
		if _, err := os.Stat(filepath.Join(filepath.Dir(hist), f)); err != nil {
			t.Errorf("check wrote no %s: %v", f, err)
		}
	}

	// What the killed run left, then what the next start's reaper leaves.
	left, _ := filepath.Glob(filepath.Join(tmp, "fencecheck-kafka-*"))
	t.Logf("left by the killed run: folders %v, processes %v", left, processesNaming(tmp))
	reaped, err := reap(ctx)
	if err != nil {
		t.Fatalf("reap: %v", err)
	}
	t.Logf("reaped %v", reaped)
	if left, _ := filepath.Glob(filepath.Join(tmp, "fencecheck-kafka-*")); len(left) != 0 {
		t.Errorf("cluster folders left after the reap: %v", left)
	}
	if pids := processesNaming(tmp); len(pids) != 0 {
		t.Errorf("processes of the killed run still running after the reap: %v", pids)
	}
	if kind == "containers" {
		after, err := containers.Leftovers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if extra := without(after, before); len(extra) != 0 {
			t.Errorf("containers left after the reap: %v", extra)
		}
	}
	t.Logf("%s kill -9 test took %v", kind, time.Since(began).Round(100*time.Millisecond))
}

// awaitOps waits until a file matching pattern holds completed operations and returns its path;
// it fails the test if the run exits first.
func awaitOps(t *testing.T, ctx context.Context, pattern string, exited <-chan error, output *bytes.Buffer) string {
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond) // polling a file another process writes
	defer tick.Stop()
	for {
		if m, _ := filepath.Glob(pattern); len(m) == 1 {
			if b, _ := os.ReadFile(m[0]); bytes.Count(b, []byte(`"type":"ok"`)) >= 3 {
				return m[0]
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("fencecheck run exited (%v) before its history showed operations; output:\n%s", err, output)
		case <-ctx.Done():
			t.Fatalf("no completed operations in %s in time; output:\n%s", pattern, output)
		case <-tick.C:
		}
	}
}

// processesNaming returns the pids of live processes (not zombies) whose command line contains s.
func processesNaming(s string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmd, []byte(s)) {
			continue
		}
		if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil {
			if i := bytes.LastIndexByte(st, ')'); i >= 0 && bytes.HasPrefix(st[i:], []byte(") Z")) {
				continue
			}
		}
		pids = append(pids, pid)
	}
	return pids
}
