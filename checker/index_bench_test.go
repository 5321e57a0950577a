package checker

import (
	"math/rand/v2"
	"testing"

	"github.com/fencecheck/fencecheck/checker/checkertest"
	"github.com/fencecheck/fencecheck/checker/history"
)

// BenchmarkIndex measures building the index of the checker benchmarks' 1M-operation history
// (see bench_test.go) alone: the largest sequential part of a check.
func BenchmarkIndex(b *testing.B) {
	cfg := checkertest.Config{
		Roles: 1000, MembersPerRole: 5, Processes: 10, OpsPerRole: 1000, WorkPartitions: 16,
		TV: 2, Lease: 5_000_000, Indeterminate: 0.02, Slow: 0.005, ReadRate: 0.01, AcquireRate: 0.05, CandidatePause: 10_000_000,
		Faults: 10, Pauses: 10,
	}
	h := checkertest.Generate(cfg, rand.New(rand.NewPCG(1_000_000, 7)))
	c, err := Options{}.config(&history.Meta{LeaseDuration: h.Meta.LeaseDuration, TransactionVersion: h.Meta.TransactionVersion})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		newIndex(h, &c)
	}
}
