package harness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/fencecheck/fencecheck/internal/atomicfile"
	"github.com/fencecheck/fencecheck/scenarios"
	"go.yaml.in/yaml/v3"
)

// writeScenario writes the run directory's scenario.yaml: the scenario as this run ran it,
// every default filled in, for a user to read, edit and run (the repeat command runs run.json's
// copy, which editing this file does not change). It is what run.json holds, re-encoded: JSON
// and YAML share the field names, and the file must load as it is written.
func (r *runner) writeScenario() error {
	js, err := json.Marshal(scenarios.AsRan(r.s))
	if err != nil {
		return err
	}
	var doc any
	if err := json.Unmarshal(js, &doc); err != nil {
		return err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# The scenario %s as the run in %s ran it (seed %d, transport %s), every default filled in.\n",
		r.s.Name, r.dir, r.opts.Seed, r.opts.Transport)
	fmt.Fprintf(&b, "# Repeat that run: %s\n", r.command)
	again := "fencecheck run " + scenarios.ShellQuote(r.dir.Scenario()) + " --seed " + strconv.FormatUint(r.opts.Seed, 10)
	if r.opts.Transport != "real" {
		again += " --transport " + scenarios.ShellQuote(r.opts.Transport)
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
	if _, err := scenarios.Parse(r.dir.Scenario(), b.Bytes()); err != nil {
		return fmt.Errorf("scenario.yaml does not load: %w", err)
	}
	return atomicfile.Write(r.dir.Scenario(), b.Bytes())
}
