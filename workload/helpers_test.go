package workload_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/cluster/embedded"
	"github.com/fencecheck/fencecheck/workload"
)

// testLogger logs warnings and errors into the test's output.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// startCluster starts a 3-broker embedded cluster for the test.
func startCluster(t testing.TB) *embedded.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := embedded.New(ctx, embedded.Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// preset returns a preset or fails the test.
func preset(t testing.TB, name string) workload.Config {
	t.Helper()
	cfg, err := workload.Preset(name)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// run is one workload run on the embedded cluster: New, Run for d (calling during, if set,
// while it runs, with the history file's path), FinalReads, Close; the history is read back
// from its file. FENCECHECK_KEEP=1 keeps a copy of the file in the temporary directory.
type run struct {
	path  string
	h     *history.History
	stats workload.Stats
}

func runWorkload(t testing.TB, cfg workload.Config, seed uint64, d time.Duration, during func(ctx context.Context, wl *workload.Workload, path string)) run {
	t.Helper()
	return runWorkloadOn(t, startCluster(t), cfg, seed, d, during)
}

// runWorkloadOn is runWorkload on c.
func runWorkloadOn(t testing.TB, c cluster.Cluster, cfg workload.Config, seed uint64, d time.Duration, during func(ctx context.Context, wl *workload.Workload, path string)) run {
	t.Helper()
	return runWorkloadFor(t, c, cfg, seed, d, false, during)
}

// runWorkloadUntil is runWorkload that ends when during returns, not at a fixed time: a
// test whose events (freezes, their settles) take what they take on a loaded machine. guard
// bounds the run only against a hang.
func runWorkloadUntil(t testing.TB, cfg workload.Config, seed uint64, guard time.Duration, during func(ctx context.Context, wl *workload.Workload, path string)) run {
	t.Helper()
	return runWorkloadFor(t, startCluster(t), cfg, seed, guard, true, during)
}

// runWorkloadFor runs the workload for d or, when untilDone, until during returns (d a guard).
func runWorkloadFor(t testing.TB, c cluster.Cluster, cfg workload.Config, seed uint64, d time.Duration, untilDone bool, during func(ctx context.Context, wl *workload.Workload, path string)) run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d+2*time.Minute)
	defer cancel()
	// runCtx ends the run early when during is done (untilDone); ctx stays for the final
	// reads and the history.
	runCtx, endRun := context.WithCancel(ctx)
	defer endRun()
	path := filepath.Join(t.TempDir(), "history.jsonl")
	meta := cfg.Meta(c.Info())
	meta.Seed = seed
	hw, err := history.Create(path, meta, history.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer hw.Close()
	wl, err := workload.New(ctx, cfg, c, hw, testLogger(t), seed)
	if err != nil {
		t.Fatal(err)
	}
	defer wl.Close(context.Background())
	done := make(chan struct{})
	if during != nil {
		go func() {
			defer close(done)
			during(ctx, wl, path)
			if untilDone {
				endRun()
			}
		}()
	} else {
		close(done)
	}
	if err := wl.Run(runCtx, d); err != nil && !(untilDone && errors.Is(err, context.Canceled) && ctx.Err() == nil) {
		t.Fatalf("run: %v", err)
	}
	if untilDone && runCtx.Err() == nil {
		t.Fatalf("the run reached its %v guard before the test's events were done", d)
	}
	<-done
	stats := wl.Stats()
	if err := wl.FinalReads(ctx); err != nil {
		t.Fatalf("final reads: %v", err)
	}
	// Close gets its own minute: the final reads of a large run can use up most of ctx,
	// and a Close given no time reports every process's producers still closing.
	cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
	defer ccancel()
	if err := wl.Close(cctx); err != nil {
		t.Errorf("close: %v", err)
	}
	if err := hw.Close(); err != nil {
		t.Fatal(err)
	}
	h, err := history.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("FENCECHECK_KEEP") != "" {
		keep := filepath.Join(os.TempDir(), "fencecheck-"+strings.ReplaceAll(t.Name(), "/", "_")+".jsonl")
		if b, err := os.ReadFile(path); err == nil && os.WriteFile(keep, b, 0o644) == nil {
			t.Logf("history kept at %s", keep)
		}
	}
	return run{path: path, h: h, stats: stats}
}

// check runs the checker on h and fails the test unless the verdict is valid.
func check(t testing.TB, h *history.History, promises ...string) *checker.Results {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := checker.Check(ctx, h, checker.Options{Promises: promises, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != checker.VerdictValid {
		for _, r := range append(res.Checks, res.Coverage...) {
			if r.Verdict != checker.VerdictValid {
				t.Errorf("%s: %s %v %v", r.Name, r.Verdict, r.Anomalies, r.Details)
			}
		}
		t.Fatalf("verdict %s, want valid", res.Verdict)
	}
	return res
}

// envDuration reads a duration from the environment, or returns def.
func envDuration(t testing.TB, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return d
}
