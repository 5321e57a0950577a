//go:build kafka

package local_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/cluster/clustertest"
	"github.com/fencecheck/fencecheck/cluster/links"
	"github.com/fencecheck/fencecheck/cluster/local"
)

// fakeHome makes a folder that looks like an installed Kafka version; enough
// for option checks, which fail before any JVM runs.
func fakeHome(t *testing.T, version string) string {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "libs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "libs", "kafka_2.13-"+version+".jar"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestOptions(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  local.Options
		field string
	}{
		{"TV2 on Kafka 3.9 - refused naming TxnVersion", local.Options{Home: fakeHome(t, "3.9.1"), TxnVersion: 2}, "TxnVersion"},
		{"TV3 - refused naming TxnVersion", local.Options{Home: fakeHome(t, "4.1.2"), TxnVersion: 3}, "TxnVersion"},
		{"10 brokers - refused naming Brokers", local.Options{Home: fakeHome(t, "4.1.2"), Brokers: 10}, "Brokers"},
		{"external toxiproxy - refused naming Network.Toxiproxy", local.Options{Home: fakeHome(t, "4.1.2"), Network: links.NetworkOptions{Toxiproxy: "127.0.0.1:8474"}}, "Network.Toxiproxy"},
		{"missing java - refused naming Java", local.Options{Home: fakeHome(t, "4.1.2"), Java: "/nonexistent/java"}, "Java"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := local.New(context.Background(), tc.opts)
			var oe *cluster.OptionError
			if !errors.As(err, &oe) || oe.Field != tc.field {
				t.Fatalf("err = %v, want an OptionError for %s", err, tc.field)
			}
		})
	}
}

func TestMissingJars(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts local.Options
		want string
	}{
		{"empty home - names make kafka", local.Options{Home: t.TempDir()}, "make kafka"},
		{"uninstalled version - names make kafka with it", local.Options{Version: "4.0.99"}, "make kafka KAFKA_VERSION=4.0.99"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := local.New(context.Background(), tc.opts)
			if !errors.Is(err, local.ErrKafkaMissing) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrKafkaMissing naming %q", err, tc.want)
			}
		})
	}
}

func TestFindHomeVersionMismatch(t *testing.T) {
	if _, err := local.FindHome(fakeHome(t, "4.1.2"), "3.9.1"); err == nil {
		t.Fatal("FindHome with a 4.1.2 folder and version 3.9.1: no error")
	}
}

// TestKafka39 runs a 1-broker Kafka 3.9 cluster when its jars are installed
// (make kafka KAFKA_VERSION=3.9.1); CI fetches only the default version, so
// it skips there.
func TestKafka39(t *testing.T) {
	needKafka(t)
	if _, err := local.FindHome("", "3.9.1"); err != nil {
		t.Skipf("Kafka 3.9.1 not installed: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	began := time.Now()
	c, err := local.New(ctx, local.Options{Version: "3.9.1", Brokers: 1, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	t.Logf("Kafka %s ready in %v, TV%d", c.Info().Version, time.Since(began).Round(time.Millisecond), c.Info().TxnVersion)
	if c.Info().TxnVersion != 1 {
		t.Errorf("TxnVersion = %d, want 1", c.Info().TxnVersion)
	}
	got, err := clustertest.FinalizedFeature(ctx, clustertest.Admin(t, c), "transaction.version")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("finalized transaction.version on 3.9: %d", got)
	if got >= 2 {
		t.Errorf("finalized transaction.version = %d on 3.9, want below 2", got)
	}
	clustertest.CreateTopic(t, c, "fencecheck-39")
	if err := clustertest.CommitTxn(ctx, c, 1, "fencecheck-39", "fencecheck-39"); err != nil {
		t.Fatal(err)
	}
}
