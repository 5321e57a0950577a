//go:build kafka

package containers_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/cluster/clustertest"
	"github.com/fencecheck/fencecheck/cluster/containers"
	"github.com/fencecheck/fencecheck/transport/transporttest"
)

// EnvRequireDocker makes a missing engine or image fail the tests instead of
// skipping them (make test sets it after `make docker-engine images`).
const EnvRequireDocker = "FENCECHECK_REQUIRE_DOCKER"

var (
	sharedOnce sync.Once
	shared     *containers.Cluster
	sharedErr  error
)

// childEnv makes the test binary a fencecheck process that starts a
// cluster, prints "READY <session> <dir>" and waits to be killed.
const childEnv = "FENCECHECK_CONTAINERS_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		c, err := containers.New(context.Background(), containers.Options{Brokers: 1})
		if err != nil {
			fmt.Println("ERROR", err)
			os.Exit(1)
		}
		fmt.Println("READY", c.Session(), c.Dir())
		select {}
	}
	code := m.Run()
	if shared != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := shared.Close(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "close shared cluster:", err)
			code = 1
		}
		cancel()
	}
	os.Exit(code)
}

func testLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return nil
}

// start starts a cluster, skipping the test when no engine or image is
// there (failing instead under FENCECHECK_REQUIRE_DOCKER=1).
func start(t *testing.T, opts containers.Options) *containers.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if opts.Logger == nil {
		opts.Logger = testLogger()
	}
	began := time.Now()
	c, err := containers.New(ctx, opts)
	if errors.Is(err, containers.ErrNoEngine) || errors.Is(err, containers.ErrImageMissing) {
		if os.Getenv(EnvRequireDocker) == "1" {
			t.Fatalf("%s=1: %v", EnvRequireDocker, err)
		}
		t.Skipf("%v; set %s=1 to fail instead", err, EnvRequireDocker)
	}
	if err != nil {
		t.Fatalf("start containers cluster: %v", err)
	}
	t.Logf("containers cluster %s (TV%d, %d brokers) ready in %v", c.Info().Version, c.Info().TxnVersion, c.Info().Brokers, time.Since(began).Round(time.Millisecond))
	for _, p := range c.Processes() {
		t.Logf("  b%d pid %d RSS %d MiB", p.ID, p.PID, p.RSSBytes>>20)
	}
	return c
}

// sharedCluster is the package's one 3-broker TV2 cluster, closed by
// TestMain: a start costs tens of seconds on 2 cores.
func sharedCluster(t *testing.T) *containers.Cluster {
	t.Helper()
	sharedOnce.Do(func() {
		defer func() {
			if shared == nil && sharedErr == nil {
				sharedErr = errors.New("skipped") // start skipped: skip the rest too
			}
		}()
		shared = start(t, containers.Options{})
	})
	if sharedErr != nil {
		t.Skip("shared cluster did not start:", sharedErr)
	}
	return shared
}

func TestContainers(t *testing.T) {
	c := sharedCluster(t)
	if c.Info().Kind != containers.Kind {
		t.Fatalf("Info().Kind = %q", c.Info().Kind)
	}
	t.Run("one container per broker, JVMs seen as host processes", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ids, err := c.Containers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) != 3 {
			t.Fatalf("%d containers, want 3 (one per broker): %v", len(ids), ids)
		}
		for _, p := range c.Processes() {
			cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.PID))
			if err != nil || !strings.Contains(string(cmd), "kafka.Kafka") {
				t.Errorf("b%d: pid %d is not the broker JVM (%q, %v)", p.ID, p.PID, cmd, err)
			}
		}
	})
	t.Run("transaction.version is pinned at format time", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		got, err := clustertest.FinalizedFeature(ctx, clustertest.Admin(t, c), "transaction.version")
		if err != nil {
			t.Fatal(err)
		}
		if int(got) != c.Info().TxnVersion {
			t.Fatalf("finalized transaction.version = %d, want %d", got, c.Info().TxnVersion)
		}
	})
	t.Run("link cut - p1 fails, p2 works, p1 recovers", func(t *testing.T) { clustertest.LinkCut(t, c) })
	t.Run("docker pause leader - produce fails, unpause - succeeds", func(t *testing.T) { clustertest.PauseLeader(t, c) })
	t.Run("docker kill coordinator - new producer commits", func(t *testing.T) { clustertest.KillCoordinator(t, c) })
	t.Run("restart a paused broker - it serves again", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		const id = 2
		if err := c.Pause(ctx, id); err != nil {
			t.Fatal(err)
		}
		if err := c.Restart(ctx, id); err != nil {
			t.Fatalf("restart of a paused broker: %v", err)
		}
		bs, err := c.Brokers(ctx, cluster.RoleQuery{})
		if err != nil {
			t.Fatal(err)
		}
		if bs[id].State != cluster.StateRunning {
			t.Fatalf("b%d is %s after the restart", id, bs[id].State)
		}
		if err := cluster.WaitHealthy(ctx, c, nil); err != nil {
			t.Fatalf("cluster not healthy after restarting b%d: %v", id, err)
		}
	})
}

// TestTransportConformance runs the transport's conformance suite against
// Kafka in containers: TV2 on the shared cluster through one process's
// links, and TV1 on a one-node cluster whose links' toxiproxy server runs in
// a container too.
func TestTransportConformance(t *testing.T) {
	c := sharedCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dial, err := c.Links(ctx, 90)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("TV2 cluster", func(t *testing.T) {
		transporttest.Run(t, transporttest.Env{Bootstrap: strings.Join(c.Bootstrap(), ","), Dial: dial,
			TransactionVersion: 2, PinTransactionVersion: true, New: transporttest.Start})
	})
	t.Run("TV1 cluster, toxiproxy in a container", func(t *testing.T) {
		tv1 := start(t, containers.Options{Brokers: 1, TxnVersion: 1,
			ToxiproxyImage: containers.ToxiproxyImageRepo + ":" + containers.ToxiproxyVersion})
		defer tv1.Close(context.Background())
		if !tv1.Network().External() {
			t.Fatal("links are served in-process, want the toxiproxy container's API")
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		dial, err := tv1.Links(ctx, 91)
		if err != nil {
			t.Fatal(err)
		}
		transporttest.Run(t, transporttest.Env{Bootstrap: strings.Join(tv1.Bootstrap(), ","), Dial: dial,
			TransactionVersion: 1, Replication: 1, New: transporttest.Start})
	})
}

// TestCloseRemovesEverything shows that Close leaves no container, no JVM
// and no folder, and that a cluster whose owner died is reaped by the next
// New.
func TestCloseRemovesEverything(t *testing.T) {
	c := start(t, containers.Options{Brokers: 1})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ids, err := c.Containers(ctx)
	if err != nil || len(ids) != 1 {
		t.Fatalf("containers before Close: %v, %v", ids, err)
	}
	pid := c.Processes()[0].PID
	dir, session := c.Dir(), c.Session()
	if err := c.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("cluster folder %s still exists (%v)", dir, err)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); !os.IsNotExist(err) {
		t.Errorf("broker JVM pid %d still exists", pid)
	}
	left, err := containers.Leftovers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range left {
		if strings.Contains(name, session) {
			t.Errorf("container %s left after Close", name)
		}
	}
}

// TestToxiproxyVersionMatchesGoMod keeps the image tag the backend asks for
// equal to the toxiproxy module `make images` builds.
// TestKilledOwnerIsReaped kills (SIGKILL) a process that runs a cluster, so
// nothing of its own cleans up, and shows that ReapOrphans (which every New
// runs) removes its containers and its folder. Another test process on the
// same engine could reap the orphan first; make test runs packages one at a
// time (-p 1).
func TestKilledOwnerIsReaped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := containers.Available(ctx); err != nil {
		if os.Getenv(EnvRequireDocker) == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	f := strings.Fields(line)
	if err != nil || len(f) != 3 || f[0] != "READY" {
		_ = cmd.Process.Kill()
		t.Fatalf("child: %q, %v", line, err)
	}
	session, dir := f[1], f[2]
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	left, err := containers.Leftovers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(left, func(n string) bool { return strings.Contains(n, session) }) {
		t.Fatalf("the killed owner's broker container is not running before the reap (containers: %v)", left)
	}
	reaped, err := containers.ReapOrphans(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("reaped %v", reaped)
	if left, err = containers.Leftovers(ctx); err != nil {
		t.Fatal(err)
	}
	for _, n := range left {
		if strings.Contains(n, session) {
			t.Errorf("container %s of the killed owner is still there", n)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the killed owner's folder %s is still there (%v)", dir, err)
	}
}

func TestToxiproxyVersionMatchesGoMod(t *testing.T) {
	data, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	want := "github.com/Shopify/toxiproxy/v2 v" + containers.ToxiproxyVersion
	if !strings.Contains(string(data), want) {
		t.Fatalf("go.mod has no line %q: update containers.ToxiproxyVersion", want)
	}
}

var _ cluster.Cluster = (*containers.Cluster)(nil)
