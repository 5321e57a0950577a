package checker_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/checker/checkertest"
	"github.com/fencecheck/fencecheck/checker/history"
)

// benchConfig is the synthetic history of the benchmarks: ops/1000 roles of 5 members, 1,000
// operations a role, 2% of outcomes unknown, TV2, 1% reads, 16 shared work partitions; a
// member holding nothing tries to acquire one time in 20 (else it describes).
func benchConfig(ops int) checkertest.Config {
	return checkertest.Config{
		Roles: ops / 1000, MembersPerRole: 5, Processes: 10, OpsPerRole: 1000, WorkPartitions: 16,
		TV: 2, Lease: 5_000_000, Indeterminate: 0.02, Slow: 0.005, ReadRate: 0.01, AcquireRate: 0.05, CandidatePause: 10_000_000,
		Faults: 10, Pauses: 10,
	}
}

var benchSizes = []int{10_000, 100_000, 1_000_000}

var benchHistories sync.Map // "ops/violation" → *history.History

// benchHistory generates (once per process) the history of ops operations with violation
// planted (or none when violation < 0).
func benchHistory(b *testing.B, ops int, violation checkertest.Violation, plant bool) *history.History {
	key := fmt.Sprint(ops, violation, plant)
	if h, ok := benchHistories.Load(key); ok {
		return h.(*history.History)
	}
	rng := rand.New(rand.NewPCG(uint64(ops), 7))
	h := checkertest.Generate(benchConfig(ops), rng)
	if plant && !checkertest.Plant(h, violation, rng) {
		b.Fatalf("no room for %s", violation)
	}
	benchHistories.Store(key, h)
	return h
}

// benchVariant is a history the benchmarks check: valid, or with one violation planted.
type benchVariant struct {
	name      string
	plant     bool
	violation checkertest.Violation
	want      checker.Verdict
}

func benchVariants() []benchVariant {
	variants := []benchVariant{{name: "valid", want: checker.VerdictValid}}
	for _, v := range checkertest.Violations {
		variants = append(variants, benchVariant{name: v.String(), plant: true, violation: v, want: checker.VerdictInvalid})
	}
	return variants
}

func BenchmarkCheck(b *testing.B) {
	for _, v := range benchVariants() {
		for _, n := range benchSizes {
			b.Run(fmt.Sprintf("%s/ops=%d", v.name, n), func(b *testing.B) {
				h := benchHistory(b, n, v.violation, v.plant)
				b.ResetTimer()
				var res *checker.Results
				for b.Loop() {
					var err error
					res, err = checker.Check(context.Background(), h, checker.Options{})
					if err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				if res.Verdict != v.want {
					b.Fatalf("verdict %s, want %s", res.Verdict, v.want)
				}
				b.ReportMetric(float64(res.Timings.Index)/1e6, "index-ms")
				b.ReportMetric(float64(res.Timings.Linear)/1e6, "linear-ms")
				b.ReportMetric(float64(res.Timings.Porcupine)/1e6, "porcupine-ms")
				b.ReportMetric(float64(res.Timings.Explain)/1e6, "explain-ms")
			})
		}
	}
}

// benchDir holds the history files of BenchmarkReadCheck; TestMain removes it.
var benchDir string

func TestMain(m *testing.M) {
	code := m.Run()
	if benchDir != "" {
		os.RemoveAll(benchDir)
	}
	os.Exit(code)
}

var benchFiles sync.Map // "ops/violation" → path

// benchFile writes (once per process) the history of ops operations with violation planted
// (or none when !plant) to a file and returns its path. The history is generated afresh, not
// taken from benchHistories, so that a large one does not stay in memory while it is read.
func benchFile(b *testing.B, ops int, violation checkertest.Violation, plant bool) string {
	key := fmt.Sprint(ops, violation, plant)
	if p, ok := benchFiles.Load(key); ok {
		return p.(string)
	}
	if benchDir == "" {
		dir, err := os.MkdirTemp("", "fencecheck-bench-")
		if err != nil {
			b.Fatal(err)
		}
		benchDir = dir
	}
	rng := rand.New(rand.NewPCG(uint64(ops), 7))
	h := checkertest.Generate(benchConfig(ops), rng)
	if plant && !checkertest.Plant(h, violation, rng) {
		b.Fatalf("no room for %s", violation)
	}
	path := filepath.Join(benchDir, fmt.Sprintf("%d-%s-%t.jsonl", ops, violation, plant))
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	if err := history.Encode(w, h); err != nil {
		b.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	h = nil
	runtime.GC() // the generated history is garbage: do not let the benchmark pay for it
	benchFiles.Store(key, path)
	return path
}

// BenchmarkReadCheck measures what `fencecheck check` does with a run's history file: decode
// it, then check it (issue 30 budgets this: 1M operations in 1 s and 500 MB, 10M in 10 s and
// 4 GiB). The 10M-operation cases need a 4.6 GB file and several GiB of memory, so they run
// only with FENCECHECK_BENCH_10M=1.
func BenchmarkReadCheck(b *testing.B) {
	sizes := []int{1_000_000}
	if os.Getenv("FENCECHECK_BENCH_10M") != "" {
		sizes = append(sizes, 10_000_000)
	}
	for _, v := range benchVariants() {
		for _, n := range sizes {
			b.Run(fmt.Sprintf("%s/ops=%d", v.name, n), func(b *testing.B) {
				path := benchFile(b, n, v.violation, v.plant)
				var res *checker.Results
				var read time.Duration
				for b.Loop() {
					start := time.Now()
					h, err := history.ReadFile(path)
					if err != nil {
						b.Fatal(err)
					}
					read += time.Since(start)
					if res, err = checker.Check(context.Background(), h, checker.Options{}); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				if res.Verdict != v.want {
					b.Fatalf("verdict %s, want %s", res.Verdict, v.want)
				}
				b.ReportMetric(float64(read.Milliseconds())/float64(b.N), "read-ms")
				b.ReportMetric(float64(res.Timings.Total)/1e6, "check-ms")
			})
		}
	}
}
