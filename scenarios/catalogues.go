package scenarios

import (
	"github.com/fencecheck/fencecheck/cluster/links"
	"github.com/fencecheck/fencecheck/internal/units"
	"github.com/fencecheck/fencecheck/nemesis"
	"github.com/fencecheck/fencecheck/transport/mutant"
)

// What the command line shows of the packages a run is composed of. The CLI only wires flags
// to scenarios: it reaches the nemesis, the mutants, the cluster and the workload through
// these names, never directly.

// Faults lists every fault the nemesis can inject, sorted by name, with a one-line
// description each.
func Faults() []nemesis.FaultInfo { return nemesis.Faults() }

// Mutants lists the deliberately broken transports a run can test instead of the real one
// (Options.Transport "mutant:NAME"), with the guarantees each must be caught breaking.
func Mutants() []mutant.Description { return mutant.List() }

// RegressionMutants are the mutants made for regressions (selftest does not run them).
func RegressionMutants() []mutant.Description { return mutant.RegressionList() }

// MutantScenario returns the scenario file made for a mutant that the catalogue's scenarios
// do not catch (transport/mutant/scenarios), and whether there is one named name.
func MutantScenario(name string) ([]byte, bool) { return mutant.Scenario(name) }

// ProcessName is the name of process n (1-based) in links, logs and histories: "p3".
func ProcessName(n int) string { return links.ProcessName(n) }

// Duration is how scenario files write durations ("40s", "250ms").
type Duration = units.Duration
