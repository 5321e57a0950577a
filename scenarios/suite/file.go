// Package suite runs a nightly suite: scenarios crossed with systems (cluster kind, Kafka
// version, transaction version), with per-cell exceptions and repeats and a total time
// budget, and writes one suite directory: index.html (the grid), junit.xml (one testsuite per
// cell) and suite.json. It also merges suite directories that parts of one nightly wrote on
// several CI runners, and compares a suite with a previous night's (baseline marks).
//
// Runs on one system share one cluster (harness.Options.Cluster) unless their scenario
// acts on brokers (scenarios.SharesCluster); per-run topic and transactional id names keep
// them apart.
package suite

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/scenarios"
	"github.com/fencecheck/fencecheck/transport/pipeline"
	yaml "go.yaml.in/yaml/v3"
)

// ErrSuite marks a suite file that does not load or validate: a usage error.
var ErrSuite = errors.New("invalid suite")

// File is a suite file as data.
type File struct {
	// Name names the suite (and its default output folder).
	Name string `json:"name" yaml:"name"`
	// Description says what the suite covers.
	Description string `json:"description,omitempty" yaml:"description,omitempty"`
	// Budget bounds the whole suite: no run starts after it; cells left are "not run".
	Budget scenarios.Duration `json:"budget" yaml:"budget"`
	// Duration, when set, replaces every scenario's duration (short CI runs).
	Duration scenarios.Duration `json:"duration,omitempty" yaml:"duration,omitempty"`
	// Repeats is how many times each cell runs, each with a fresh seed. Default 1.
	Repeats int `json:"repeats,omitempty" yaml:"repeats,omitempty"`
	// Transport is the transport under test for every cell: real (default), mutant:NAME or
	// exec:COMMAND. A system's or a cell exception's transport replaces it.
	Transport string `json:"transport,omitempty" yaml:"transport,omitempty"`
	// ReuseClusters: runs on one system share a cluster unless their scenario acts on brokers.
	// Default true.
	ReuseClusters *bool `json:"reuse_clusters,omitempty" yaml:"reuse_clusters,omitempty"`
	// Scenarios is shorthand for one group named "all".
	Scenarios []string `json:"scenarios,omitempty" yaml:"scenarios,omitempty"`
	// Groups are named sets of scenarios (built-in names or files, relative to the suite
	// file), which a CI matrix can run as separate jobs (--group).
	Groups []Group `json:"groups,omitempty" yaml:"groups,omitempty"`
	// Systems are the clusters every scenario runs on.
	Systems []System `json:"systems" yaml:"systems"`
	// Cells are exceptions for some cells: skip them, repeat them, change their transport or
	// duration.
	Cells []Exception `json:"cells,omitempty" yaml:"cells,omitempty"`

	dir string // the suite file's folder: scenario files are relative to it
	// keep, when set, holds the only {group, system} pairs Plan expands (SelectRunner).
	keep map[[2]string]bool
}

// Group is a named set of scenarios.
type Group struct {
	Name      string   `json:"name" yaml:"name"`
	Scenarios []string `json:"scenarios" yaml:"scenarios"`
	// Systems, when given, are the only systems the group runs on (by name); its cells on the
	// others are skipped. For a sparse grid such as the regressions', where each bug has the
	// systems it shows on.
	Systems []string `json:"systems,omitempty" yaml:"systems,omitempty"`
}

// System is one cluster configuration the scenarios run on.
type System struct {
	// Name is the column's name in the grid, e.g. kafka-4.1.2-tv1. Default: derived from the
	// other fields.
	Name string `json:"name" yaml:"name"`
	// Cluster is the cluster kind: embedded, local or containers.
	Cluster string `json:"cluster" yaml:"cluster"`
	// KafkaVersion is the Apache Kafka release (local, containers); `make kafka
	// KAFKA_VERSION=...` fetches it.
	KafkaVersion string `json:"kafka_version,omitempty" yaml:"kafka_version,omitempty"`
	// TransactionVersion is the cluster's transaction.version, 1 or 2 (default: the
	// scenario's).
	TransactionVersion int `json:"transaction_version,omitempty" yaml:"transaction_version,omitempty"`
	// Brokers is the broker count (default: the scenario's).
	Brokers int `json:"brokers,omitempty" yaml:"brokers,omitempty"`
	// Transport is the transport under test on this system (default: the suite's), so one
	// cluster can appear twice in the grid, once per transport: exec:COMMAND puts an adapter
	// beside fencecheck's own transport (docs/exec-protocol.md).
	Transport string `json:"transport,omitempty" yaml:"transport,omitempty"`
	// GroupProtocol, when set, is the consumer-group protocol of every pipeline scenario on
	// this system (classic, or consumer: KIP-848, Kafka 4.0 and later), replacing the
	// scenario's workload.pipeline.protocol, so one scenario file runs under both protocols
	// without a variant file per protocol. Lease scenarios ignore it. A pipeline cell whose
	// adapter does not speak the protocol (internal/adapters: Sarama and KafkaJS are classic
	// only) is skipped with the reason.
	GroupProtocol string `json:"group_protocol,omitempty" yaml:"group_protocol,omitempty"`
}

// Exception changes the cells it matches: those of Scenario (any, when empty) on System
// (any, when empty).
type Exception struct {
	Scenario string `json:"scenario,omitempty" yaml:"scenario,omitempty"`
	System   string `json:"system,omitempty" yaml:"system,omitempty"`
	// Skip, when set, is why the cell does not run.
	Skip string `json:"skip,omitempty" yaml:"skip,omitempty"`
	// Repeats replaces the suite's repeats.
	Repeats int `json:"repeats,omitempty" yaml:"repeats,omitempty"`
	// Transport replaces the suite's transport.
	Transport string `json:"transport,omitempty" yaml:"transport,omitempty"`
	// Duration replaces the run's duration.
	Duration scenarios.Duration `json:"duration,omitempty" yaml:"duration,omitempty"`
	// Expect is the verdict each run of the cell must give (default valid): invalid for a
	// regression that must show its bug again, such as a mutant that switches a workaround
	// off. A run that gives it passes; an expected violation that did not show is
	// inconclusive.
	Expect checker.Verdict `json:"expect,omitempty" yaml:"expect,omitempty"`
	// Seed, when set, is the seed of every run of the cell: one schedule, tried Repeats times.
	Seed uint64 `json:"seed,omitempty" yaml:"seed,omitempty"`
}

//go:embed builtin/*.yaml
var builtin embed.FS

// Names lists the built-in suites.
func Names() []string {
	entries, _ := fs.ReadDir(builtin, "builtin")
	var out []string
	for _, e := range entries {
		out = append(out, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	sort.Strings(out)
	return out
}

// Find loads arg: a built-in suite's name, or a suite file's path.
func Find(arg string) (*File, error) {
	if !strings.ContainsAny(arg, "/.") {
		b, err := builtin.ReadFile(path.Join("builtin", arg+".yaml"))
		if err != nil {
			return nil, fmt.Errorf("%w: no built-in suite %q (built-in: %s)", ErrSuite, arg, strings.Join(Names(), ", "))
		}
		return Parse(arg+".yaml", "", b)
	}
	b, err := os.ReadFile(arg)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSuite, err)
	}
	return Parse(arg, filepath.Dir(arg), b)
}

// Parse decodes and validates a suite file; dir is the folder scenario files are relative
// to. Unknown fields, wrong types and bad values are errors naming the file and the field.
func Parse(file, dir string, b []byte) (*File, error) {
	fail := func(err error) (*File, error) {
		return nil, fmt.Errorf("%w: %s: %s", ErrSuite, file, strings.ReplaceAll(err.Error(), "yaml: unmarshal errors:\n  ", ""))
	}
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return fail(errors.New("empty file"))
		}
		return fail(err)
	}
	f.dir = dir
	if err := f.validate(); err != nil {
		return fail(err)
	}
	return &f, nil
}

// validate fills in defaults and names the first bad field.
func (f *File) validate() error {
	if f.Name == "" || strings.ContainsAny(f.Name, "/\\ ") {
		return fmt.Errorf("name: %q must be a non-empty word (it names the suite's folder)", f.Name)
	}
	if f.Budget <= 0 {
		return fmt.Errorf("budget: %v, want a positive duration such as 2h", f.Budget)
	}
	if f.Duration < 0 {
		return fmt.Errorf("duration: %v must not be negative", f.Duration)
	}
	if f.Repeats == 0 {
		f.Repeats = 1
	}
	if f.Repeats < 1 {
		return fmt.Errorf("repeats: %d, want 1 or more", f.Repeats)
	}
	if err := checkTransport(f.Transport); err != nil {
		return fmt.Errorf("transport: %w", err)
	}
	switch {
	case len(f.Scenarios) > 0 && len(f.Groups) > 0:
		return errors.New("scenarios, groups: give one of them (scenarios is one group named all)")
	case len(f.Scenarios) > 0:
		f.Groups = []Group{{Name: "all", Scenarios: f.Scenarios}}
		f.Scenarios = nil
	case len(f.Groups) == 0:
		return errors.New("scenarios: the suite names no scenario (give scenarios or groups)")
	}
	seen := map[string]string{}
	groups := map[string]bool{}
	for i, g := range f.Groups {
		if g.Name == "" || strings.ContainsAny(g.Name, "/\\ ") {
			return fmt.Errorf("groups[%d].name: %q must be a non-empty word", i, g.Name)
		}
		if groups[g.Name] {
			return fmt.Errorf("groups[%d].name: %q appears twice", i, g.Name)
		}
		groups[g.Name] = true
		if len(g.Scenarios) == 0 {
			return fmt.Errorf("groups[%d].scenarios: group %s names no scenario", i, g.Name)
		}
		for j, arg := range g.Scenarios {
			field := fmt.Sprintf("groups[%d].scenarios[%d]", i, j)
			if f.Groups[i].Name == "all" && len(f.Groups) == 1 {
				field = fmt.Sprintf("scenarios[%d]", j)
			}
			s, err := f.scenario(arg)
			if err != nil {
				return fmt.Errorf("%s: %w", field, err)
			}
			if other, dup := seen[s.Name]; dup {
				return fmt.Errorf("%s: scenario %s is already in group %s", field, s.Name, other)
			}
			seen[s.Name] = g.Name
		}
	}
	if len(f.Systems) == 0 {
		return errors.New("systems: the suite names no system")
	}
	names := map[string]bool{}
	for i := range f.Systems {
		sys := &f.Systems[i]
		field := fmt.Sprintf("systems[%d]", i)
		switch sys.Cluster {
		case scenarios.KindEmbedded, scenarios.KindLocal, scenarios.KindContainers:
		case scenarios.KindExternal:
			return fmt.Errorf("%s.cluster: external clusters are not run by suites (use fencecheck run --cluster external)", field)
		default:
			return fmt.Errorf("%s.cluster: %q is not one of embedded, local, containers", field, sys.Cluster)
		}
		if sys.TransactionVersion != 0 && sys.TransactionVersion != 1 && sys.TransactionVersion != 2 {
			return fmt.Errorf("%s.transaction_version: %d, want 1 or 2", field, sys.TransactionVersion)
		}
		if sys.KafkaVersion != "" && sys.Cluster == scenarios.KindEmbedded {
			return fmt.Errorf("%s.kafka_version: the embedded cluster is kfake, it has no Kafka version", field)
		}
		if strings.HasPrefix(sys.KafkaVersion, "3.") && sys.TransactionVersion == 2 {
			return fmt.Errorf("%s.transaction_version: Kafka %s has no transaction.version 2", field, sys.KafkaVersion)
		}
		if sys.Brokers < 0 || sys.Brokers > 9 {
			return fmt.Errorf("%s.brokers: %d, want 1 to 9", field, sys.Brokers)
		}
		if err := checkTransport(sys.Transport); err != nil {
			return fmt.Errorf("%s.transport: %w", field, err)
		}
		switch sys.GroupProtocol {
		case "", pipeline.ProtocolClassic:
		case pipeline.ProtocolConsumer:
			// KIP-848's protocol is generally available from 4.0; 3.x brokers serve it only
			// as a preview, behind settings the local backend does not set.
			if strings.HasPrefix(sys.KafkaVersion, "3.") {
				return fmt.Errorf("%s.group_protocol: Kafka %s has no consumer group protocol (KIP-848 needs 4.0 or later)", field, sys.KafkaVersion)
			}
		default:
			return fmt.Errorf("%s.group_protocol: %q, want %s or %s", field, sys.GroupProtocol, pipeline.ProtocolClassic, pipeline.ProtocolConsumer)
		}
		if sys.Name == "" {
			sys.Name = sys.defaultName()
		}
		if strings.ContainsAny(sys.Name, "/\\ ") {
			return fmt.Errorf("%s.name: %q must be a word", field, sys.Name)
		}
		if names[sys.Name] {
			return fmt.Errorf("%s.name: %q appears twice (give the systems distinct names)", field, sys.Name)
		}
		names[sys.Name] = true
	}
	for i, g := range f.Groups {
		for j, name := range g.Systems {
			if !names[name] {
				return fmt.Errorf("groups[%d].systems[%d]: %q is not a system of the suite", i, j, name)
			}
		}
	}
	for i, e := range f.Cells {
		field := fmt.Sprintf("cells[%d]", i)
		if e.Scenario == "" && e.System == "" {
			return fmt.Errorf("%s: give scenario, system or both (an exception for every cell belongs at the top level)", field)
		}
		if e.Scenario != "" {
			if _, ok := seen[e.Scenario]; !ok {
				return fmt.Errorf("%s.scenario: %q is not a scenario of the suite (by its name)", field, e.Scenario)
			}
		}
		if e.System != "" && !names[e.System] {
			return fmt.Errorf("%s.system: %q is not a system of the suite", field, e.System)
		}
		if e.Repeats < 0 {
			return fmt.Errorf("%s.repeats: %d, want 1 or more", field, e.Repeats)
		}
		if e.Duration < 0 {
			return fmt.Errorf("%s.duration: %v must not be negative", field, e.Duration)
		}
		if err := checkTransport(e.Transport); err != nil {
			return fmt.Errorf("%s.transport: %w", field, err)
		}
		switch e.Expect {
		case "", checker.VerdictValid, checker.VerdictInvalid, checker.VerdictInconclusive:
		default:
			return fmt.Errorf("%s.expect: %q, want valid, invalid or inconclusive", field, e.Expect)
		}
	}
	return nil
}

// defaultName is kfake-tv2, kafka-4.1.2-tv1, containers-kafka-4.1.2 and the like.
func (s System) defaultName() string {
	name := "kafka"
	switch s.Cluster {
	case scenarios.KindEmbedded:
		name = "kfake"
	case scenarios.KindContainers:
		name = "containers-kafka"
	}
	if s.KafkaVersion != "" {
		name += "-" + s.KafkaVersion
	}
	if s.TransactionVersion != 0 {
		name += fmt.Sprintf("-tv%d", s.TransactionVersion)
	}
	if s.GroupProtocol != "" {
		name += "-" + s.GroupProtocol
	}
	return name
}

func checkTransport(t string) error {
	if t == "" || t == "real" {
		return nil
	}
	if command, ok := strings.CutPrefix(t, "exec:"); ok {
		if strings.TrimSpace(command) == "" {
			return fmt.Errorf("%q: exec: needs the adapter's command, e.g. exec:'fencecheck adapter'", t)
		}
		return nil
	}
	name, ok := strings.CutPrefix(t, "mutant:")
	if ok {
		for _, m := range slices.Concat(scenarios.Mutants(), scenarios.RegressionMutants()) {
			if m.Name == name {
				return nil
			}
		}
	}
	return fmt.Errorf("%q: want real, mutant:NAME (see fencecheck selftest --list) or exec:COMMAND", t)
}

// scenario loads arg: a built-in name, or a file relative to the suite file.
func (f *File) scenario(arg string) (*scenarios.Scenario, error) {
	return scenarios.Find(f.scenarioArg(arg))
}

// scenarioArg is how `fencecheck run` names arg from the working directory.
func (f *File) scenarioArg(arg string) string {
	if strings.ContainsAny(arg, "/.") && !filepath.IsAbs(arg) && f.dir != "" {
		return filepath.Join(f.dir, arg)
	}
	return arg
}

// exception merges every exception matching the cell, later ones winning.
func (f *File) exception(scenario, system string) Exception {
	out := Exception{Scenario: scenario, System: system}
	for _, e := range f.Cells {
		if (e.Scenario != "" && e.Scenario != scenario) || (e.System != "" && e.System != system) {
			continue
		}
		if e.Skip != "" {
			out.Skip = e.Skip
		}
		if e.Repeats > 0 {
			out.Repeats = e.Repeats
		}
		if e.Transport != "" {
			out.Transport = e.Transport
		}
		if e.Duration > 0 {
			out.Duration = e.Duration
		}
		if e.Expect != "" {
			out.Expect = e.Expect
		}
		if e.Seed != 0 {
			out.Seed = e.Seed
		}
	}
	return out
}

// GroupNames lists the suite's groups in order.
func (f *File) GroupNames() []string {
	var out []string
	for _, g := range f.Groups {
		out = append(out, g.Name)
	}
	return out
}

// SystemNames lists the suite's systems in order.
func (f *File) SystemNames() []string {
	var out []string
	for _, s := range f.Systems {
		out = append(out, s.Name)
	}
	return out
}

// Select keeps only the named groups and systems (none named: all of them), so that a CI
// matrix job can run its share. An unknown name is an error naming the flag.
func (f *File) Select(groups, systems []string) error {
	for _, g := range groups {
		if !slices.Contains(f.GroupNames(), g) {
			return fmt.Errorf("--group %s: suite %s has the groups %s", g, f.Name, strings.Join(f.GroupNames(), ", "))
		}
	}
	for _, s := range systems {
		if !slices.Contains(f.SystemNames(), s) {
			return fmt.Errorf("--system %s: suite %s has the systems %s", s, f.Name, strings.Join(f.SystemNames(), ", "))
		}
	}
	if len(groups) > 0 {
		f.Groups = slices.DeleteFunc(f.Groups, func(g Group) bool { return !slices.Contains(groups, g.Name) })
	}
	if len(systems) > 0 {
		f.Systems = slices.DeleteFunc(f.Systems, func(s System) bool { return !slices.Contains(systems, s.Name) })
	}
	return nil
}

// Duration is how suite files write durations ("2h", "20s").
type Duration = scenarios.Duration

// Marshal renders f as YAML, its defaults filled in.
func (f *File) Marshal() ([]byte, error) { return yaml.Marshal(f) }
