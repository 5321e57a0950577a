//go:build kafka

package local_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/cluster/clustertest"
	"github.com/fencecheck/fencecheck/cluster/local"
)

// jvms returns the pids of processes whose command line contains marker
// (the cluster's -Dfencecheck.cluster tag, or a path inside its Dir).
func jvms(t *testing.T, marker string) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if bytes.Contains(b, []byte(marker)) && bytes.Contains(b, []byte("java")) {
			out = append(out, pid)
		}
	}
	return out
}

// waitNoJVM fails the test if processes matching marker outlive d.
func waitNoJVM(t *testing.T, marker string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		left := jvms(t, marker)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("JVMs left behind: pids %v", left)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestCloseLeavesNoJVM(t *testing.T) {
	needKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	began := time.Now()
	c, err := local.New(ctx, local.Options{Brokers: 1, TxnVersion: 1, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("1-broker cluster ready in %v", time.Since(began).Round(time.Millisecond))
	tag, dir, adminAddr := c.Tag(), c.Dir(), c.Bootstrap()[0]

	// TV1 on 4.x is pinned at format time (the storage tool's -f).
	got, err := clustertest.FinalizedFeature(ctx, clustertest.Admin(t, c), "transaction.version")
	if err != nil {
		t.Fatal(err)
	}
	if got != 1 {
		t.Errorf("finalized transaction.version = %d, want 1", got)
	}
	if n := len(jvms(t, tag)); n != 1 {
		t.Fatalf("%d JVMs with tag %s before Close, want 1", n, tag)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if left := jvms(t, tag); len(left) != 0 {
		t.Fatalf("JVMs left behind by Close: pids %v", left)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Close left its temporary folder %s (stat: %v)", dir, err)
	}
	if conn, err := (&netDialer).DialContext(ctx, "tcp", adminAddr); err == nil {
		conn.Close()
		t.Errorf("admin link %s still accepts connections after Close", adminAddr)
	}
	if err := c.Kill(ctx, 0); !errors.Is(err, cluster.ErrClosed) {
		t.Errorf("Kill after Close = %v, want ErrClosed", err)
	}
}

func TestFailedStartLeavesNoJVM(t *testing.T) {
	needKafka(t)
	dir := t.TempDir()
	// Cancel the start once a broker JVM (not the storage tool) is up: a
	// start that fails half-way, as with Ctrl-C during `cluster up`.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			for _, pid := range jvms(t, dir) {
				if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); bytes.Contains(b, []byte("kafka.Kafka")) {
					cancel()
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	_, err := local.New(ctx, local.Options{Brokers: 1, Dir: dir, Logger: testLogger(t)})
	if err == nil {
		t.Fatal("New succeeded although its context was canceled with a broker running")
	}
	t.Logf("New failed as intended: %.300s", err)
	if left := jvms(t, dir); len(left) != 0 {
		t.Fatalf("JVMs left behind by a failed start: pids %v", left)
	}
}

const childEnv = "FENCECHECK_LOCAL_TEST_CHILD"

// child runs in a subprocess: it starts a 1-broker cluster, prints
// "READY <tag> <dir>", and then dies the way mode says, without Close.
func child(mode string) int {
	if mode == "linger" {
		// A stand-in for a JVM that outlived its owner (orphans_test.go):
		// it runs until killed, with a child of its own in its group.
		sleep := exec.Command("sleep", "3600")
		if err := sleep.Start(); err != nil {
			fmt.Println("ERROR", err)
			return 1
		}
		fmt.Println("READY", sleep.Process.Pid)
		sleep.Wait()
		return 3
	}
	ctx := context.Background()
	c, err := local.New(ctx, local.Options{Brokers: 1})
	if err != nil {
		fmt.Println("ERROR", err)
		return 1
	}
	fmt.Printf("READY %s %s\n", c.Tag(), c.Dir())
	switch mode {
	case "panic":
		// Only once the parent has counted the JVM (a line on stdin): a crash at once could
		// take the JVM down before the count.
		go func() {
			_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
			panic("fencecheck test: panic with a local cluster running")
		}()
	case "sigint":
		// Go's default SIGINT handling ends the process, no deferred
		// call runs: what Ctrl-C does to a harness without a handler.
	}
	time.Sleep(time.Minute)
	return 3
}

func TestCrashLeavesNoJVM(t *testing.T) {
	needKafka(t)
	for _, mode := range []string{"panic", "sigint"} {
		t.Run(mode, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), childEnv+"="+mode)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			in, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			var tag, dir string
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if f := strings.Fields(sc.Text()); len(f) == 3 && f[0] == "READY" {
					tag, dir = f[1], f[2]
					break
				}
				t.Log("child:", sc.Text())
			}
			if tag == "" {
				cmd.Wait()
				t.Fatalf("child never became ready; stderr:\n%s", stderr.String())
			}
			defer os.RemoveAll(dir) // a crash leaves the data folder, not processes
			if n := len(jvms(t, tag)); n != 1 {
				t.Fatalf("%d JVMs with tag %s in the child, want 1", n, tag)
			}
			switch mode {
			case "panic":
				if _, err := io.WriteString(in, "crash\n"); err != nil {
					t.Fatal(err)
				}
			case "sigint":
				if err := cmd.Process.Signal(os.Interrupt); err != nil {
					t.Fatal(err)
				}
			}
			err = cmd.Wait()
			t.Logf("child exited: %v", err)
			if err == nil {
				t.Fatalf("child exited cleanly, want a crash")
			}
			waitNoJVM(t, tag, time.Minute) // a guard: the JVM sees its parent gone within a second when idle
		})
	}
}
