//go:build kafka

package local_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/cluster/clustertest"
	"github.com/fencecheck/fencecheck/cluster/local"
)

// TestStartCache starts two one-broker clusters on one empty start cache: the first formats
// with the storage tool and its broker writes the class-data archive as Close stops it; the
// second formats from the cache (no tool JVM runs), with its own cluster id and the pinned
// transaction.version, and its broker maps the archive without a CDS complaint.
func TestStartCache(t *testing.T) {
	needKafka(t)
	cache := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	start := func() (*local.Cluster, []byte) {
		t.Helper()
		began := time.Now()
		c, err := local.New(ctx, local.Options{Brokers: 1, StartCache: cache, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("ready in %v", time.Since(began).Round(time.Millisecond))
		log, err := os.ReadFile(filepath.Join(c.Info().LogsDir, "b0.log"))
		if err != nil {
			t.Fatal(err)
		}
		return c, log
	}

	first, log := start()
	if !bytes.Contains(log, []byte("=== fencecheck: format b0")) {
		t.Fatalf("the first cluster did not run the storage tool:\n%s", log)
	}
	began := time.Now()
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}
	archives, _ := filepath.Glob(filepath.Join(cache, "cds", "*.jsa"))
	if len(archives) != 1 {
		t.Fatalf("class-data archives after the first Close: %v, want one", archives)
	}
	t.Logf("Close with the archive's dump took %v", time.Since(began).Round(time.Millisecond))

	second, log := start()
	defer second.Close(ctx)
	if bytes.Contains(log, []byte("=== fencecheck: format")) {
		t.Errorf("the second cluster ran the storage tool:\n%s", log)
	}
	if bytes.Contains(log, []byte("[cds]")) || bytes.Contains(log, []byte("shared archive")) {
		t.Errorf("the broker complains about the class-data archive:\n%s", log)
	}
	meta, err := os.ReadFile(filepath.Join(second.Dir(), "b0", "data", "meta.properties"))
	if err != nil || !strings.Contains(string(meta), "cluster.id="+second.Tag()+"\n") || second.Tag() == first.Tag() {
		t.Errorf("meta.properties (%v) does not name the second cluster %s (the first was %s):\n%s", err, second.Tag(), first.Tag(), meta)
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(second.Processes()[0].PID) + "/cmdline")
	if err != nil || !bytes.Contains(cmdline, []byte("-XX:SharedArchiveFile="+archives[0])) {
		t.Errorf("the broker's command line (%v) does not map %s: %q", err, archives[0], cmdline)
	}
	tv, err := clustertest.FinalizedFeature(ctx, clustertest.Admin(t, second), "transaction.version")
	if err != nil || int(tv) != second.Info().TxnVersion {
		t.Errorf("finalized transaction.version %d (%v), want %d", tv, err, second.Info().TxnVersion)
	}
}

// BenchmarkStart measures New of a 3-broker cluster to ready (formatted, started, healthy),
// Close not timed: warm with the start cache (the default one, trained first if empty), cold
// without it (the storage tool, no class-data archive). docs/measurements.md has the figures:
//
//	go test -tags kafka ./cluster/local -run '^$' -bench BenchmarkStart -benchtime 5x
func BenchmarkStart(b *testing.B) {
	if _, err := local.FindHome("", ""); err != nil {
		b.Skip(err)
	}
	for _, bc := range []struct {
		name string
		opts local.Options
	}{
		{"warm", local.Options{}},
		{"cold", local.Options{NoStartCache: true}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			if !bc.opts.NoStartCache { // one start and Close that fill the cache, untimed
				c, err := local.New(ctx, bc.opts)
				if err != nil {
					b.Fatal(err)
				}
				if err := c.Close(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for range b.N {
				c, err := local.New(ctx, bc.opts)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if err := c.Close(ctx); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}
