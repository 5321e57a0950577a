//go:build !kafka

package shrink

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/internal/units"
	"github.com/fencecheck/fencecheck/scenarios"
	"github.com/fencecheck/fencecheck/scenarios/harness"
)

// TestShrinkPipelineMutant shrinks a pipeline run that a mutant member failed
// (mutant:group-id-only, whose zombie commits after the new owner fetched): the shrink takes a
// pipeline run, searches the pipeline's own shape (processes, members, partitions), keeps a
// smaller one that still breaks eos-generation-fencing, and writes it as a pipeline scenario
// that loads. It is bounded by candidates, not time.
func TestShrinkPipelineMutant(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a pipeline several times")
	}
	t.Parallel() // beside the other shrinks: see TestShrinkMutantChaos
	s, err := scenarios.Find("pipeline-zombie")
	if err != nil {
		t.Fatal(err)
	}
	s.Duration = units.Duration(10 * time.Second)
	root := t.TempDir()
	var dir string
	for seed := uint64(1); seed <= 3 && dir == ""; seed++ {
		out, err := harness.Run(context.Background(), s, harness.Options{Root: root, Seed: seed, Transport: "mutant:group-id-only"})
		if err != nil {
			t.Fatal(err)
		}
		if out.Results.Verdict == checker.VerdictInvalid {
			dir = string(out.Dir)
		}
	}
	if dir == "" {
		t.Fatal("the mutant's pipeline-zombie runs never came out invalid in 3 seeds")
	}
	o, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	var progress strings.Builder
	res, err := Run(context.Background(), o, Options{Out: out, Budget: 15 * time.Minute, Candidates: 4, Tries: 1, MinFails: 1, Confirm: 3,
		Guarantees: []string{checker.EOSGenerationFencing}, Progress: &progress})
	t.Logf("progress:\n%s", progress.String())
	if err != nil {
		t.Fatal(err)
	}
	if res.Before.Partitions != 4 || res.Before.Members != 4 {
		t.Fatalf("before: %s, want the pipeline's shape (4 members, 4 partitions)", res.Before)
	}
	if res.After.Faults != 1 || res.After.Processes+res.After.Members+res.After.Partitions >= res.Before.Processes+res.Before.Members+res.Before.Partitions {
		t.Errorf("after %s (before %s): want the freeze kept and a smaller shape", res.After, res.Before)
	}
	written, err := scenarios.Find(filepath.Join(out, ScenarioFile))
	if err != nil {
		t.Fatalf("the written scenario does not load: %v", err)
	}
	c, err := written.Workload.PipelineConfig()
	if err != nil || !written.Workload.IsPipeline() || c.Processes != res.After.Processes || c.Members != res.After.Members || int(c.Partitions) != res.After.Partitions {
		text, _ := os.ReadFile(filepath.Join(out, ScenarioFile))
		t.Errorf("scenario.yaml is not the result %s (%v):\n%s", res.After, err, text)
	}
}
