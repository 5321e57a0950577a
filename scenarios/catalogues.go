package scenarios

import (
	"slices"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/cluster/links"
	"github.com/fencecheck/fencecheck/internal/units"
	"github.com/fencecheck/fencecheck/nemesis"
	"github.com/fencecheck/fencecheck/transport/mutant"
	"github.com/fencecheck/fencecheck/transport/pipeline"
)

// What the command line shows of the packages a run is composed of. The CLI only wires flags
// to scenarios: it reaches the nemesis, the mutants, the cluster and the workload through
// these names, never directly.

// Faults lists every fault the nemesis can inject, sorted by name, with a one-line
// description each.
func Faults() []nemesis.FaultInfo { return nemesis.Faults() }

// Mutants lists the deliberately broken transports a run can test instead of the real one
// (Options.Transport "mutant:NAME"), with the guarantees each must be caught breaking: the
// lease transport's, then the pipeline's mutant members that a catalogue scenario catches.
func Mutants() []mutant.Description {
	out := mutant.List()
	for _, m := range pipeline.Mutants {
		if c, ok := pipelineMutantChecks[m.Name]; ok {
			out = append(out, mutant.Description{Name: m.Name, Summary: m.Summary, Guarantees: c.guarantees, Scenario: c.scenario})
		}
	}
	return out
}

// IsPipelineMutant reports whether name is a pipeline mutant of Mutants.
func IsPipelineMutant(name string) bool {
	_, ok := pipelineMutantChecks[name]
	return ok && slices.ContainsFunc(pipeline.Mutants, func(m pipeline.Mutant) bool { return m.Name == name })
}

// pipelineMutantChecks are, for the pipeline's mutant members that selftest runs, the
// scenario that shows the flaw and the guarantees it must be caught breaking.
var pipelineMutantChecks = map[string]struct {
	scenario   string
	guarantees []string
}{
	"group-id-only":       {"pipeline-zombie", []string{checker.EOSGenerationFencing, checker.EOSNoDuplicate}},
	"offsets-outside-txn": {"pipeline-zombie", []string{checker.EOSGenerationFencing, checker.EOSNoDuplicate, checker.EOSOffsetsMatchOutput}},
	"read-uncommitted":    {"pipeline-steady", []string{checker.EOSReadCommitted}},
	"unstable-fetch":      {"pipeline-zombie-commit", []string{checker.EOSStableFetch, checker.EOSFold, checker.EOSNoDuplicate}},
	"no-rewind":           {"pipeline-txn-faults", []string{checker.EOSNoLoss}},
	"off-by-one":          {"pipeline-steady", []string{checker.EOSOffsetsMatchOutput, checker.EOSNoDuplicate, checker.EOSStableFetch}},
}

// RegressionMutants are the mutants made for regressions (selftest does not run them).
func RegressionMutants() []mutant.Description { return mutant.RegressionList() }

// MutantScenario returns the scenario file made for a mutant that the catalogue's scenarios
// do not catch (transport/mutant/scenarios), and whether there is one named name.
func MutantScenario(name string) ([]byte, bool) { return mutant.Scenario(name) }

// ProcessName is the name of process n (1-based) in links, logs and histories: "p3".
func ProcessName(n int) string { return links.ProcessName(n) }

// Duration is how scenario files write durations ("40s", "250ms").
type Duration = units.Duration
