//go:build !kafka

package scenarios_test

import (
	"testing"

	"github.com/fencecheck/fencecheck/scenarios"
)

// TestRandomMixesCanBreakEveryGuarantee: the random mixes' workloads give every guarantee
// something to break. chaos wrote one record a work write, so no fault could tear a
// transaction and the split-txn mutant was never caught by it (0 of 5 seeds in 10 minutes
// each, docs/measurements.md); pipeline-chaos-kafka wrote no aborted input, so
// eos-read-committed had nothing to judge and its read-uncommitted mutant was never caught
// either (0 of 5). Both are in docs/findings.md.
func TestRandomMixesCanBreakEveryGuarantee(t *testing.T) {
	for _, name := range []string{"chaos", "chaos-kafka"} {
		s, err := scenarios.Find(name)
		if err != nil {
			t.Fatal(err)
		}
		if r := s.Workload.Load.WorkRecords; r.Max < 2 {
			t.Errorf("%s: work writes of at most %d record: no-torn-txn has nothing a fault could tear", name, r.Max)
		}
	}
	for _, name := range []string{"pipeline-chaos-kafka"} {
		s, err := scenarios.Find(name)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := s.Workload.PipelineConfig()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.AbortedInput <= 0 {
			t.Errorf("%s: no aborted input: eos-read-committed has nothing to judge", name)
		}
	}
}
