// Package scenarios holds fencecheck's scenarios as data: a built-in catalogue of YAML files,
// the regressions, and users' own files, parsed and validated with errors that name the file,
// line and field. Loading a scenario starts nothing; package harness runs one.
package scenarios

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/cluster/external"
	"github.com/fencecheck/fencecheck/internal/units"
	"github.com/fencecheck/fencecheck/nemesis"
	"github.com/fencecheck/fencecheck/workload"
	"github.com/fencecheck/fencecheck/workload/pipeline"
	yaml "go.yaml.in/yaml/v3"
)

// ErrScenario marks a scenario that does not load or validate: a usage error.
var ErrScenario = errors.New("invalid scenario")

// Scenario is one run's plan as data. Load validates it; the runner fills in nothing else.
type Scenario struct {
	// Name is the scenario's name, also the folder of its runs.
	Name string `json:"name" yaml:"name"`
	// Description is one paragraph: what the scenario does and what it shows.
	Description string `json:"description" yaml:"description"`
	// Cluster is the cluster to run against.
	Cluster ClusterSpec `json:"cluster" yaml:"cluster"`
	// Workload is the load: a preset (low, medium, high) and overrides of its fields.
	Workload WorkloadSpec `json:"workload" yaml:"workload"`
	// Nemesis is the fault schedule; empty means no faults.
	Nemesis NemesisSpec `json:"nemesis" yaml:"nemesis"`
	// Duration is how long the workload (and the nemesis) runs.
	Duration units.Duration `json:"duration" yaml:"duration"`
	// Promises are the coverage the scenario promises (see checker.Promises): a run that
	// does not deliver them is inconclusive, not valid.
	Promises []string `json:"promises,omitempty" yaml:"promises,omitempty"`
	// Requires names what the cluster must support beyond the default: "peer-links" (a
	// broker can be cut from its peers: the local and containers clusters, or an external
	// cluster with isolate commands) or "broker-faults" (kill, pause, restart: every kind but
	// an external cluster without broker commands); a cluster without it is refused.
	Requires []string `json:"requires,omitempty" yaml:"requires,omitempty"`
	// OnKafka replaces the duration and the script when the cluster runs Apache Kafka
	// brokers (every kind but embedded; see UseCluster): a Kafka broker takes seconds to
	// rejoin after a kill or a restart where the embedded cluster takes milliseconds, so a
	// timeline sized for the embedded cluster (CI runs every scenario there) may not fit.
	OnKafka *Timing `json:"on_kafka,omitempty" yaml:"on_kafka,omitempty"`

	// usedCluster is the cluster kind UseCluster last applied (Run applies the scenario's
	// own kind when nobody did).
	usedCluster string
}

// Timing is what a scenario changes for a slower cluster; zero fields keep the scenario's.
type Timing struct {
	// Duration replaces the scenario's duration.
	Duration units.Duration `json:"duration,omitempty" yaml:"duration,omitempty"`
	// Script replaces the scenario's nemesis script (a scripted scenario only).
	Script []string `json:"script,omitempty" yaml:"script,omitempty"`
}

// UseCluster sets the cluster kind and applies the timing meant for it: OnKafka on every kind
// but embedded. Call it before other overrides (a --duration flag), which then win.
func (s *Scenario) UseCluster(kind string) {
	s.Cluster.Kind = kind
	s.usedCluster = kind
	if kind == KindEmbedded || kind == "" || s.OnKafka == nil {
		return
	}
	if s.OnKafka.Duration > 0 {
		s.Duration = s.OnKafka.Duration
	}
	if len(s.OnKafka.Script) > 0 {
		s.Nemesis.Script = slices.Clone(s.OnKafka.Script)
	}
}

// ApplyTiming applies the timing of the scenario's cluster kind, as UseCluster does, unless
// UseCluster already did for that kind: the harness calls it before a run, so a scenario whose
// kind was set directly still runs with its on_kafka timing, and one set by UseCluster does not
// get it twice.
func (s *Scenario) ApplyTiming() {
	if s.usedCluster != s.Cluster.Kind {
		s.UseCluster(s.Cluster.Kind)
	}
}

// WorkloadSpec is the run's workload. Kind chooses it: the lease workload (the default), a
// preset plus overrides, where every field of workload.Config may be set next to preset and
// wins over the preset's value; or an exactly-once pipeline, configured by Pipeline.
type WorkloadSpec struct {
	// Kind is KindLease ("" in a file means it) or KindPipeline.
	Kind string `json:"kind,omitempty" yaml:"kind,omitempty"`
	// Pipeline configures a pipeline workload; nil takes every default.
	Pipeline        *pipeline.Config `json:"pipeline,omitempty" yaml:"pipeline,omitempty"`
	Preset          string           `json:"preset" yaml:"preset"`
	workload.Config `yaml:",inline"`
}

// The workload kinds of WorkloadSpec.Kind.
const (
	KindLease    = "lease"
	KindPipeline = "pipeline"
)

// ShapePipeline sets a pipeline's processes and members (a zero leaves one as it is), in a
// copy of Pipeline: a scenario's Pipeline may be shared with the catalogue's.
func (w *WorkloadSpec) ShapePipeline(processes, members int) {
	var cfg pipeline.Config
	if w.Pipeline != nil {
		cfg = *w.Pipeline
	}
	if processes != 0 {
		cfg.Processes = processes
	}
	if members != 0 {
		cfg.Members = members
	}
	w.Pipeline = &cfg
}

// pipelineOnly is a pipeline workload as it runs: its pipeline settings with their defaults,
// without the lease workload's preset and fields.
func (w *WorkloadSpec) pipelineOnly() WorkloadSpec {
	cfg, err := w.PipelineConfig()
	if err != nil && w.Pipeline != nil { // Validate reports it; show what the file says
		cfg = *w.Pipeline
	}
	return WorkloadSpec{Kind: KindPipeline, Pipeline: &cfg}
}

// PipelineConfig is the pipeline's configuration with its defaults filled in (Pipeline nil
// takes every default), or the error that names its first bad field.
func (w *WorkloadSpec) PipelineConfig() (pipeline.Config, error) {
	var cfg pipeline.Config
	if w.Pipeline != nil {
		cfg = *w.Pipeline
	}
	return cfg.WithDefaults()
}

// MarshalYAML writes a pipeline workload as its kind and pipeline settings alone: the lease
// workload's fields mean nothing to it.
func (w WorkloadSpec) MarshalYAML() (any, error) {
	if !w.IsPipeline() {
		type lease WorkloadSpec // without this method
		return lease(w), nil
	}
	return pipelineOnlySpec{w.Kind, w.Pipeline}, nil
}

// MarshalJSON is MarshalYAML's JSON (run.json's expanded scenario).
func (w WorkloadSpec) MarshalJSON() ([]byte, error) {
	if !w.IsPipeline() {
		type lease WorkloadSpec
		return json.Marshal(lease(w))
	}
	return json.Marshal(pipelineOnlySpec{w.Kind, w.Pipeline})
}

// pipelineOnlySpec is how a pipeline workload is written.
type pipelineOnlySpec struct {
	Kind     string           `json:"kind" yaml:"kind"`
	Pipeline *pipeline.Config `json:"pipeline,omitempty" yaml:"pipeline,omitempty"`
}

// IsPipeline reports whether the workload is an exactly-once pipeline.
func (w *WorkloadSpec) IsPipeline() bool { return w.Kind == KindPipeline }

// Validate checks the workload of its kind, naming the first bad field.
func (w *WorkloadSpec) Validate() error {
	switch w.Kind {
	case "", KindLease:
		if w.Pipeline != nil {
			return errors.New("pipeline: set only with kind: pipeline")
		}
		return w.Config.Validate()
	case KindPipeline:
		if _, err := w.PipelineConfig(); err != nil {
			return fmt.Errorf("pipeline: %w", err)
		}
		return nil
	}
	return fmt.Errorf("kind: %q, want %s or %s", w.Kind, KindLease, KindPipeline)
}

// NemesisSpec is the fault schedule: random (faults picked with the run's seed every
// interval) or script (a timeline of one-line steps such as
// "at 5s partition p1 from all for 12s", see nemesis.ParseStep). Neither means no faults.
type NemesisSpec struct {
	Random *nemesis.RandomSchedule `json:"random,omitempty" yaml:"random,omitempty"`
	Script []string                `json:"script,omitempty" yaml:"script,omitempty"`
}

// Schedule returns the nemesis schedule, or ok=false when the scenario has no faults.
func (n NemesisSpec) Schedule() (sched nemesis.Schedule, ok bool, err error) {
	if n.Random == nil && len(n.Script) == 0 {
		return nemesis.Schedule{}, false, nil
	}
	sched.Random = n.Random
	for i, line := range n.Script {
		st, err := nemesis.ParseStep(line)
		if err != nil {
			return sched, false, fmt.Errorf("nemesis.script[%d]: %w", i, err)
		}
		sched.Script = append(sched.Script, st)
	}
	if err := sched.Validate(); err != nil {
		return sched, false, fmt.Errorf("nemesis: %w", err)
	}
	return sched, true, nil
}

// Faults returns the names of the faults the schedule can inject.
func (n NemesisSpec) Faults() []string {
	var out []string
	if n.Random != nil {
		if len(n.Random.Faults) == 0 {
			out = append(out, nemesis.DefaultMenu()...)
		}
		for _, f := range n.Random.Faults {
			out = append(out, f.Fault)
		}
	}
	for _, line := range n.Script {
		if st, err := nemesis.ParseStep(line); err == nil {
			out = append(out, st.Fault)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Validate checks every part and names the first bad field.
func (s *Scenario) Validate() error {
	bad := func(err error) error { return fmt.Errorf("%w: %s: %w", ErrScenario, s.Name, err) }
	if s.Name == "" || strings.ContainsAny(s.Name, "/\\ ") {
		return fmt.Errorf("%w: name: %q must be a non-empty word (it names the runs' folder)", ErrScenario, s.Name)
	}
	if err := s.Cluster.Validate(); err != nil {
		return bad(err)
	}
	if err := s.Workload.Validate(); err != nil {
		return bad(fmt.Errorf("workload: %w", err))
	}
	sched, _, err := s.Nemesis.Schedule()
	if err != nil {
		return bad(err)
	}
	if s.Workload.IsPipeline() {
		// A pipeline member has its own pause points: say so when the file is read, not mid-run.
		cfg, err := s.Workload.PipelineConfig()
		if err != nil {
			return bad(fmt.Errorf("workload: %w", err))
		}
		for i, st := range sched.Script {
			if st.Spec.Fault != "freeze" {
				continue
			}
			if err := pipeline.CheckPoint(cfg.Member, st.Spec.Params.Point); err != nil {
				return bad(fmt.Errorf("nemesis.script[%d]: %w", i, err))
			}
		}
	}
	if s.Duration <= 0 {
		return bad(fmt.Errorf("duration: %v, want a positive duration such as 30s", s.Duration))
	}
	if k := s.OnKafka; k != nil {
		if k.Duration < 0 {
			return bad(fmt.Errorf("on_kafka.duration: %v must not be negative", k.Duration))
		}
		if len(k.Script) > 0 && s.Nemesis.Random != nil {
			return bad(errors.New("on_kafka.script: the scenario's schedule is random; a script cannot replace it"))
		}
		for i, line := range k.Script {
			if _, err := nemesis.ParseStep(line); err != nil {
				return bad(fmt.Errorf("on_kafka.script[%d]: %w", i, err))
			}
		}
	}
	known := checker.Promises()
	if s.Workload.IsPipeline() {
		known = checker.PipelinePromises()
	}
	for i, p := range s.Promises {
		if !slices.Contains(known, p) {
			return bad(fmt.Errorf("promises[%d]: %q is not one of %s", i, p, strings.Join(known, ", ")))
		}
	}
	for i, r := range s.Requires {
		if !slices.Contains(requirements, r) {
			return bad(fmt.Errorf("requires[%d]: %q is not one of %s", i, r, strings.Join(requirements, ", ")))
		}
	}
	return nil
}

// requirements a scenario may name, and the cluster kinds that meet them.
var requirements = []string{"peer-links", "broker-faults", "leader-epochs"}

// Supports reports why a cluster kind cannot run s, or nil.
func (s *Scenario) Supports(kind string) error {
	for _, r := range s.Requires {
		switch {
		case r == "peer-links" && kind == KindExternal && s.Cluster.BrokerCommands == "":
			// With a commands file, CheckFault below names the isolate commands it lacks.
			return fmt.Errorf("scenario %s isolates brokers from their peers, which an external cluster does only with the isolate and unisolate commands of --broker-commands (cluster.broker_commands)", s.Name)
		case r == "peer-links" && kind != KindLocal && kind != KindContainers && kind != KindExternal:
			return fmt.Errorf("scenario %s needs inter-broker links behind proxies, which only the local and containers clusters have, or an external cluster's isolate command (not %s)", s.Name, kind)
		case r == "leader-epochs" && kind == KindEmbedded:
			return fmt.Errorf("scenario %s changes partition leaders while group members consume, and kfake forgets where a leader epoch ended until the next one is written: franz-go's consumer then takes the log for truncated and starts the partition over (docs/findings.md); run it on a Kafka cluster (--cluster local)", s.Name)
		case r == "broker-faults" && kind == KindExternal && s.Cluster.BrokerCommands == "":
			return fmt.Errorf("scenario %s kills or pauses brokers, which an external cluster does only with --broker-commands (cluster.broker_commands)", s.Name)
		}
	}
	if kind == KindExternal && s.Cluster.BrokerCommands != "" {
		cmds, err := external.LoadCommands(s.Cluster.BrokerCommands)
		if err != nil {
			return fmt.Errorf("cluster.broker_commands: %w", err)
		}
		// Faults the scenario names (script steps, a random menu it lists); a
		// default random menu only loses the faults the cluster refuses.
		named := s.Nemesis.Faults()
		if s.Nemesis.Random != nil && len(s.Nemesis.Random.Faults) == 0 {
			named = nil
			for _, line := range s.Nemesis.Script {
				if st, err := nemesis.ParseStep(line); err == nil {
					named = append(named, st.Fault)
				}
			}
		}
		for _, f := range named {
			if err := cmds.CheckFault(f, nemesis.BrokerOps(f)); err != nil {
				return fmt.Errorf("scenario %s: %w", s.Name, err)
			}
		}
	}
	return nil
}

//go:embed catalogue/*.yaml
var catalogue embed.FS

// Names lists the built-in scenarios.
func Names() []string {
	entries, _ := fs.ReadDir(catalogue, "catalogue")
	var out []string
	for _, e := range entries {
		out = append(out, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	sort.Strings(out)
	return out
}

// Builtin returns the built-in scenario name, and its YAML text.
func Builtin(name string) (*Scenario, []byte, error) {
	b, err := catalogue.ReadFile(path.Join("catalogue", name+".yaml"))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: no built-in scenario %q (built-in: %s)", ErrScenario, name, strings.Join(Names(), ", "))
	}
	s, err := Parse(name+".yaml", b)
	return s, b, err
}

//go:embed regressions/*.yaml
var regressions embed.FS

// RegressionPrefix starts the name of a regression scenario: "regression/NAME" loads
// regressions/NAME.yaml, embedded in the binary. Each shows one fencing bug of a system
// fencecheck runs against, and says in its comments which systems it affects and the verdict
// expected on each (docs/regressions.md).
const RegressionPrefix = "regression/"

// RegressionNames lists the regression scenarios, each with RegressionPrefix.
func RegressionNames() []string {
	entries, _ := fs.ReadDir(regressions, "regressions")
	var out []string
	for _, e := range entries {
		out = append(out, RegressionPrefix+strings.TrimSuffix(e.Name(), ".yaml"))
	}
	sort.Strings(out)
	return out
}

// Regression returns the regression scenario name ("regression/NAME"), and its YAML text.
func Regression(name string) (*Scenario, []byte, error) {
	base, ok := strings.CutPrefix(name, RegressionPrefix)
	var b []byte
	err := fs.ErrNotExist
	if ok && !strings.ContainsAny(base, "/.") {
		b, err = regressions.ReadFile(path.Join("regressions", base+".yaml"))
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%w: no regression %q (regressions: %s)", ErrScenario, name, strings.Join(RegressionNames(), ", "))
	}
	s, err := Parse(name+".yaml", b)
	return s, b, err
}

// Find loads arg: a built-in scenario's name, a regression's ("regression/NAME"), a YAML
// file's path, or a run directory's (the scenario it ran, see FromRun). An existing file wins
// over a regression of the same name.
func Find(arg string) (*Scenario, error) {
	if IsRunDir(arg) {
		s, _, err := FromRun(arg)
		return s, err
	}
	if strings.HasPrefix(arg, RegressionPrefix) && !strings.HasSuffix(arg, ".yaml") {
		if _, err := os.Stat(arg); err != nil {
			s, _, err := Regression(arg)
			return s, err
		}
	}
	if !strings.ContainsAny(arg, "/.") {
		s, _, err := Builtin(arg)
		return s, err
	}
	b, err := os.ReadFile(arg)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrScenario, err)
	}
	return Parse(arg, b)
}

// Parse decodes and validates a scenario file. Unknown fields are errors naming the file, the
// line and the field; so are wrong types and invalid values.
func Parse(file string, b []byte) (*Scenario, error) {
	fail := func(err error) (*Scenario, error) {
		return nil, fmt.Errorf("%w: %s: %s", ErrScenario, file, strings.ReplaceAll(explainYAML(err).Error(), "yaml: unmarshal errors:\n  ", ""))
	}
	var s Scenario
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil {
		if errors.Is(err, io.EOF) {
			return fail(errors.New("empty file"))
		}
		return fail(err)
	}
	// Decode again on top of the preset, so the file's workload fields override it.
	if s.Workload.Preset == "" {
		s.Workload.Preset = workload.PresetMedium
	}
	base, err := workload.Preset(s.Workload.Preset)
	if err != nil {
		return fail(fmt.Errorf("workload.preset: %w", err))
	}
	var doc struct {
		Workload yaml.Node `yaml:"workload"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return fail(err)
	}
	if load := mapValue(&doc.Workload, "load"); load != nil && mapValue(load, "read_mix") != nil {
		// A mix is one choice: the weights the file names, and 0 for those it leaves out, not
		// the preset's (read_mix: {describe: 1} means describes only).
		base.Load.ReadMix = workload.Mix{}
	}
	ws := WorkloadSpec{Preset: s.Workload.Preset, Config: base}
	if doc.Workload.Kind != 0 {
		if err := doc.Workload.Decode(&ws); err != nil {
			return fail(err)
		}
	}
	s.Workload = ws
	if err := s.Validate(); err != nil {
		// Say where in the file: the line of the field the error names first.
		if line := errorLine(b, err); line > 0 {
			return nil, fmt.Errorf("%s: line %d: %w", file, line, err)
		}
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return &s, nil
}

// Marshal renders s as YAML (the fully expanded scenario, as `scenarios show` prints it).
func (s *Scenario) Marshal() ([]byte, error) {
	if s.Workload.IsPipeline() {
		c := *s
		c.Workload = s.Workload.pipelineOnly()
		return yaml.Marshal(&c)
	}
	return yaml.Marshal(s)
}
