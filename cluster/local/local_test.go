//go:build kafka

package local_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/cluster/clustertest"
	"github.com/fencecheck/fencecheck/cluster/local"
)

// EnvRequireKafka makes missing jars fail the tests instead of skipping them
// (CI sets it after `make kafka`).
const EnvRequireKafka = "FENCECHECK_REQUIRE_KAFKA"

var (
	missing string // why local tests skip, "" when the jars are there

	sharedOnce sync.Once
	shared     *local.Cluster
	sharedErr  error
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(child(mode))
	}
	if _, err := local.FindHome("", ""); err != nil {
		if os.Getenv(EnvRequireKafka) == "1" {
			fmt.Fprintf(os.Stderr, "%s=1 and the Kafka jars are missing: %v\n", EnvRequireKafka, err)
			os.Exit(1)
		}
		missing = err.Error()
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

// needKafka skips a test that needs the broker jars when they are missing,
// and under -short, which promises no Kafka JVMs.
func needKafka(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts Kafka JVMs (-short)")
	}
	if missing != "" {
		t.Skipf("local Kafka not installed (%s); set %s=1 to fail instead", missing, EnvRequireKafka)
	}
}

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return nil
}

// sharedCluster is the package's one 3-broker cluster, started on first use
// and closed by TestMain: a start costs tens of seconds on 2 cores.
func sharedCluster(t *testing.T) *local.Cluster {
	t.Helper()
	needKafka(t)
	sharedOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		began := time.Now()
		// FENCECHECK_TEST_KAFKA_DIR keeps the shared cluster's configs,
		// data and broker logs in that folder for a look afterwards.
		shared, sharedErr = local.New(ctx, local.Options{Dir: os.Getenv("FENCECHECK_TEST_KAFKA_DIR"), Logger: testLogger(t)})
		if sharedErr == nil {
			t.Logf("local cluster %s (TV%d) ready in %v; logs in %s", shared.Info().Version, shared.Info().TxnVersion, time.Since(began).Round(time.Millisecond), shared.Info().LogsDir)
			for _, p := range shared.Processes() {
				t.Logf("  b%d pid %d RSS %d MiB", p.ID, p.PID, p.RSSBytes>>20)
			}
		}
	})
	if sharedErr != nil {
		t.Fatalf("start local cluster: %v", sharedErr)
	}
	return shared
}

// processLinks returns the dial function of process n's links to c, failing t when they
// cannot be made within a minute.
func processLinks(t *testing.T, c *local.Cluster, n int) cluster.DialFunc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dial, err := c.Links(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	return dial
}

func TestLocal(t *testing.T) {
	c := sharedCluster(t)
	t.Run("transaction.version is pinned at format time", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		got, err := clustertest.FinalizedFeature(ctx, clustertest.Admin(t, c), "transaction.version")
		if err != nil {
			t.Fatal(err)
		}
		want := c.Info().TxnVersion
		if strings.HasPrefix(c.Info().Version, "3.") {
			want = 0 // 3.x does not finalize transaction.version; clients see TV1 behaviour
		}
		if int(got) != want {
			t.Fatalf("finalized transaction.version = %d, want %d", got, want)
		}
	})
	t.Run("link cut - p1 fails, p2 works, p1 recovers", func(t *testing.T) { clustertest.LinkCut(t, c) })
	t.Run("pause leader - produce fails, resume - succeeds", func(t *testing.T) { clustertest.PauseLeader(t, c) })
	t.Run("kill coordinator - new producer commits", func(t *testing.T) { clustertest.KillCoordinator(t, c) })
	t.Run("peer links cut around b1 - peers fence it, heal - it is back", func(t *testing.T) { isolate(t, c, 1) })
	for _, p := range c.Processes() {
		t.Logf("after the tests: b%d pid %d RSS %d MiB", p.ID, p.PID, p.RSSBytes>>20)
	}
}

var netDialer = net.Dialer{Timeout: time.Second}
