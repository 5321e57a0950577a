package checker_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

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

func BenchmarkCheck(b *testing.B) {
	type variant struct {
		name      string
		plant     bool
		violation checkertest.Violation
		want      checker.Verdict
	}
	variants := []variant{{name: "valid", want: checker.VerdictValid}}
	for _, v := range checkertest.Violations {
		variants = append(variants, variant{name: v.String(), plant: true, violation: v, want: checker.VerdictInvalid})
	}
	for _, v := range variants {
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
