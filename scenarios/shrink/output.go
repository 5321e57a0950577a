package shrink

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"github.com/fencecheck/fencecheck/internal/atomicfile"
	"github.com/fencecheck/fencecheck/scenarios"
	"github.com/fencecheck/fencecheck/workload"
	yaml "go.yaml.in/yaml/v3"
)

// Files of the output folder.
const (
	ScenarioFile = "scenario.yaml"
	ResultFile   = "shrink.json"
	// RunLink is a symbolic link to the smallest failing run's directory.
	RunLink = "smallest-failing-run"
)

// write writes the best plan so far: the scenario file, shrink.json and the link to the
// smallest failing run. The files are replaced atomically.
func (sh *shrinker) write() error {
	if err := os.MkdirAll(sh.opts.Out, 0o755); err != nil {
		return fmt.Errorf("shrink output: %w", err)
	}
	r := sh.res
	r.After = sh.best.shape()
	r.File = filepath.Join(sh.opts.Out, ScenarioFile)
	r.Script = nil
	for _, st := range sh.best.steps {
		r.Script = append(r.Script, st.String())
	}
	r.FailingSeeds = sh.bestSeeds
	r.SearchFails, r.SearchTries = sh.bestFails, sh.bestTries
	r.Report = sh.bestReport
	r.Took = Duration(time.Since(sh.began))
	b, err := sh.scenarioFile()
	if err != nil {
		return err
	}
	if _, err := scenarios.Parse(r.File, b); err != nil { // what we write must load
		return fmt.Errorf("shrink output: the minimal scenario does not load: %w", err)
	}
	if err := writeAtomic(r.File, b); err != nil {
		return err
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := writeAtomic(filepath.Join(sh.opts.Out, ResultFile), append(js, '\n')); err != nil {
		return err
	}
	link := filepath.Join(sh.opts.Out, RunLink)
	_ = os.Remove(link)
	if target, err := filepath.Rel(sh.opts.Out, filepath.Dir(r.Report)); err == nil {
		_ = os.Symlink(target, link)
	}
	return nil
}

// scenarioFile renders the best plan as a short scenario file: a comment on where it came
// from, and only the workload fields that differ from its preset.
func (sh *shrinker) scenarioFile() ([]byte, error) {
	r, s := sh.res, sh.best.s
	var c strings.Builder
	fmt.Fprintf(&c, "# Shrunk by `fencecheck shrink` on %s from the failing run\n", time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(&c, "#   %s\n", r.Origin)
	fmt.Fprintf(&c, "# (scenario %s, seed %d, transport %s, %s cluster): %s.\n", r.Scenario, r.Seed, r.Transport, r.Cluster, r.Before)
	fmt.Fprintf(&c, "# This scenario breaks %s: %s.\n", strings.Join(r.Guarantees, " or "), r.After)
	if r.Tries > 0 {
		fmt.Fprintf(&c, "# Reproduced %s on fresh seeds", r.rate())
	} else if r.Asked > 0 {
		fmt.Fprintf(&c, "# Failed %d/%d tries in the search (none of the %d fresh tries asked ended within the budget)", sh.bestFails, sh.bestTries, r.Asked)
	} else {
		fmt.Fprintf(&c, "# Failed %d/%d tries in the search (no fresh tries yet)", sh.bestFails, sh.bestTries)
	}
	fmt.Fprintf(&c, "; seeds that failed: %s.\n", seedList(r.FailingSeeds))
	fmt.Fprintf(&c, "# Smallest failing run: %s\n", r.Report)
	fmt.Fprintf(&c, "# Repeat: %s --seed SEED\n", repeatCommand(r.File, r.Transport))

	wl, err := overrides(s.Workload)
	if err != nil {
		return nil, err
	}
	doc := struct {
		Name        string                `yaml:"name"`
		Description string                `yaml:"description"`
		Cluster     scenarios.ClusterSpec `yaml:"cluster"`
		Workload    yaml.Node             `yaml:"workload"`
		Nemesis     *struct {
			Script []string `yaml:"script"`
		} `yaml:"nemesis,omitempty"`
		Duration string   `yaml:"duration"`
		Requires []string `yaml:"requires,omitempty"`
	}{Name: s.Name, Cluster: s.Cluster, Workload: wl, Duration: s.Duration.D().String(), Requires: s.Requires,
		Description: fmt.Sprintf("The smallest scenario found that still breaks %s, shrunk from a run of %s.",
			strings.Join(r.Guarantees, " or "), r.Scenario)}
	if len(r.Script) > 0 {
		doc.Nemesis = &struct {
			Script []string `yaml:"script"`
		}{Script: r.Script}
	}
	var buf bytes.Buffer
	buf.WriteString(c.String())
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return buf.Bytes(), enc.Close()
}

// repeatCommand is the command line that runs the scenario file with the transport, without
// the seed; both are quoted for a shell (an exec transport's command line has blanks).
func repeatCommand(file, transport string) string {
	if transport == "" {
		transport = "real"
	}
	return "fencecheck run " + scenarios.ShellQuote(file) + " --transport " + scenarios.ShellQuote(transport)
}

// overrides renders ws as a YAML mapping of its preset and the fields that differ from it; a
// pipeline workload as its kind and pipeline settings (it has no preset).
func overrides(ws scenarios.WorkloadSpec) (yaml.Node, error) {
	var out yaml.Node
	if ws.IsPipeline() {
		return out, out.Encode(ws)
	}
	base, err := workload.Preset(ws.Preset)
	if err != nil {
		return out, err
	}
	var have, want yaml.Node
	if err := have.Encode(ws.Config); err != nil {
		return out, err
	}
	if err := want.Encode(base); err != nil {
		return out, err
	}
	out = yaml.Node{Kind: yaml.MappingNode}
	out.Content = append(out.Content, scalar("preset"), scalar(ws.Preset))
	out.Content = append(out.Content, diff(&have, &want)...)
	return out, nil
}

func scalar(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: s} }

// diff returns the key/value pairs of mapping have that differ from want's (nested mappings
// are diffed in turn).
func diff(have, want *yaml.Node) []*yaml.Node {
	var out []*yaml.Node
	for i := 0; i+1 < len(have.Content); i += 2 {
		k, v := have.Content[i], have.Content[i+1]
		var w *yaml.Node
		for j := 0; j+1 < len(want.Content); j += 2 {
			if want.Content[j].Value == k.Value {
				w = want.Content[j+1]
			}
		}
		switch {
		case w == nil:
			out = append(out, k, v)
		case v.Kind == yaml.MappingNode && w.Kind == yaml.MappingNode:
			if sub := diff(v, w); len(sub) > 0 {
				out = append(out, k, &yaml.Node{Kind: yaml.MappingNode, Content: sub})
			}
		case !sameNode(v, w):
			out = append(out, k, v)
		}
	}
	return out
}

func sameNode(a, b *yaml.Node) bool {
	var x, y any
	_ = a.Decode(&x)
	_ = b.Decode(&y)
	return reflect.DeepEqual(x, y)
}

func seedList(seeds []uint64) string {
	if len(seeds) == 0 {
		return "none"
	}
	parts := make([]string, len(seeds))
	for i, s := range seeds {
		parts[i] = fmt.Sprint(s)
	}
	return strings.Join(parts, ", ")
}

func writeAtomic(path string, b []byte) error {
	if err := atomicfile.Write(path, b); err != nil {
		return fmt.Errorf("shrink output: %w", err)
	}
	return nil
}
