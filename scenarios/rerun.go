package scenarios

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/fencecheck/fencecheck/reports"
)

// IsRunDir reports whether arg names a run directory (one holding run.json) rather than a
// scenario.
func IsRunDir(arg string) bool {
	st, err := os.Stat(reports.Dir(arg).RunJSON())
	return err == nil && !st.IsDir()
}

// FromRun returns the scenario a stored run ran, fully expanded as run.json keeps it, and the
// run's run.json (its seed and transport): `fencecheck run DIR` repeats the run with them,
// whatever became of the scenario file since.
func FromRun(dir string) (*Scenario, *reports.RunInfo, error) {
	info, err := reports.Dir(dir).ReadRunInfo()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %v", ErrScenario, dir, err)
	}
	if len(info.Expanded) == 0 {
		return nil, nil, fmt.Errorf("%w: %s: run.json has no expanded_scenario", ErrScenario, dir)
	}
	var s Scenario
	if err := json.Unmarshal(info.Expanded, &s); err != nil {
		return nil, nil, fmt.Errorf("%w: %s: run.json: expanded_scenario: %v", ErrScenario, dir, err)
	}
	s = *AsRan(&s) // a run.json written before asRan existed may still hold on_kafka
	if err := s.Validate(); err != nil {
		if !errors.Is(err, ErrScenario) {
			err = fmt.Errorf("%w: %w", ErrScenario, err)
		}
		return nil, nil, fmt.Errorf("%s: run.json: %w", dir, err)
	}
	return &s, info, nil
}

// AsRan is s as a run keeps it (run.json, scenario.yaml): on a Kafka cluster its on_kafka
// timing is applied already (UseCluster), so it is dropped, as applied a second time it would
// undo a --duration or a shorter script given on the command line. An embedded run keeps it,
// so its scenario still runs with the Kafka timing on --cluster local.
//
// A pipeline keeps its pipeline settings with their defaults filled in, and not the lease
// workload's, which it does not use.
func AsRan(s *Scenario) *Scenario {
	c := *s
	if s.Workload.IsPipeline() {
		c.Workload = s.Workload.pipelineOnly()
	}
	if s.Cluster.Kind != KindEmbedded && s.Cluster.Kind != "" {
		c.OnKafka = nil
	}
	return &c
}
