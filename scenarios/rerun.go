package scenarios

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/fencecheck/fencecheck/internal/atomicfile"
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
	s = *asRan(&s) // a run.json written before asRan existed may still hold on_kafka
	if err := s.Validate(); err != nil {
		if !errors.Is(err, ErrScenario) {
			err = fmt.Errorf("%w: %w", ErrScenario, err)
		}
		return nil, nil, fmt.Errorf("%s: run.json: %w", dir, err)
	}
	return &s, info, nil
}

// asRan is s as a run keeps it (run.json, scenario.yaml): on a Kafka cluster its on_kafka
// timing is applied already (UseCluster), so it is dropped, as applied a second time it would
// undo a --duration or a shorter script given on the command line. An embedded run keeps it,
// so its scenario still runs with the Kafka timing on --cluster local.
func asRan(s *Scenario) *Scenario {
	if s.Cluster.Kind == KindEmbedded || s.Cluster.Kind == "" || s.OnKafka == nil {
		return s
	}
	c := *s
	c.OnKafka = nil
	return &c
}

// writeScenario writes the run directory's scenario.yaml: the scenario as this run ran it,
// every default filled in, for a user to read, edit and run (the repeat command runs run.json's
// copy, which editing this file does not change). It is what run.json holds, re-encoded: JSON
// and YAML share the field names, and the file must load as it is written.
func (r *runner) writeScenario() error {
	js, err := json.Marshal(asRan(r.s))
	if err != nil {
		return err
	}
	var doc any
	if err := json.Unmarshal(js, &doc); err != nil {
		return err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# The scenario %s as run %s ran it (seed %d, transport %s), every default filled in.\n",
		r.s.Name, r.dir, r.opts.Seed, r.opts.Transport)
	fmt.Fprintf(&b, "# Repeat that run: %s\n", r.command)
	again := "fencecheck run " + ShellQuote(r.dir.Scenario()) + " --seed " + strconv.FormatUint(r.opts.Seed, 10)
	if r.opts.Transport != "real" {
		again += " --transport " + ShellQuote(r.opts.Transport)
	}
	fmt.Fprintf(&b, "# Run this file, edited or not: %s\n", again)
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return err
	}
	if err := enc.Close(); err != nil {
		return err
	}
	if _, err := Parse(r.dir.Scenario(), b.Bytes()); err != nil {
		return fmt.Errorf("scenario.yaml does not load: %w", err)
	}
	return atomicfile.Write(r.dir.Scenario(), b.Bytes())
}
