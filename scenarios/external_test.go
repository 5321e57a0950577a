//go:build !kafka

package scenarios_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/fencecheck/fencecheck/scenarios"
)

// TestExternalSupportsFollowsCommands: on an external cluster, a broker-fault scenario (and
// isolate-broker) runs only with the commands its faults need, and the refusal names the
// missing command and the option.
func TestExternalSupportsFollowsCommands(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "cmds.yaml")
	if err := os.WriteFile(file, []byte("kill: k {id}\nrestart: r {id}\npause: p {id}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	load := func(name, commands string) *scenarios.Scenario {
		s, _, err := scenarios.Builtin(name)
		if err != nil {
			t.Fatal(err)
		}
		s.Cluster.Kind, s.Cluster.Bootstrap, s.Cluster.BrokerCommands = scenarios.KindExternal, "127.0.0.1:9092", commands
		return s
	}
	if err := load("pause-broker", "").Supports(scenarios.KindExternal); err == nil || !strings.Contains(err.Error(), "--broker-commands") {
		t.Errorf("pause-broker without commands: %v, want a refusal naming --broker-commands", err)
	}
	if err := load("kill-coordinator", file).Supports(scenarios.KindExternal); err != nil {
		t.Errorf("kill-coordinator with kill and restart: %v", err)
	}
	if err := load("holder-partition", file).Supports(scenarios.KindExternal); err != nil {
		t.Errorf("holder-partition needs no command: %v", err)
	}
	err := load("pause-broker", file).Supports(scenarios.KindExternal)
	if err == nil || !strings.Contains(err.Error(), "resume command") || !strings.Contains(err.Error(), "--broker-commands") {
		t.Errorf("pause-broker without resume: %v, want a refusal naming the resume command", err)
	}
	if err := load("pause-broker", filepath.Join(dir, "missing.yaml")).Supports(scenarios.KindExternal); err == nil || !strings.Contains(err.Error(), "cluster.broker_commands") {
		t.Errorf("a missing commands file: %v", err)
	}
	if err := load("isolate-broker", "").Supports(scenarios.KindExternal); err == nil || !strings.Contains(err.Error(), "isolate and unisolate commands of --broker-commands") {
		t.Errorf("isolate-broker without commands: %v, want a refusal naming the isolate commands and --broker-commands", err)
	}
	err = load("isolate-broker", file).Supports(scenarios.KindExternal)
	if err == nil || !strings.Contains(err.Error(), "isolate needs the external cluster's isolate and unisolate commands") || !strings.Contains(err.Error(), "fields isolate, unisolate") {
		t.Errorf("isolate-broker without isolate commands: %v, want a refusal naming them", err)
	}
	isolating := filepath.Join(dir, "isolating.yaml")
	if err := os.WriteFile(isolating, []byte("isolate: i {id}\nunisolate: u {id}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := load("isolate-broker", isolating).Supports(scenarios.KindExternal); err != nil {
		t.Errorf("isolate-broker with isolate and unisolate: %v", err)
	}
	if err := load("isolate-broker", "").Supports(scenarios.KindEmbedded); err == nil || !strings.Contains(err.Error(), "not embedded") {
		t.Errorf("isolate-broker on embedded: %v", err)
	}
	s := load("holder-partition", file)
	s.Cluster.Kind = scenarios.KindLocal
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "cluster.broker_commands") {
		t.Errorf("broker commands on a local cluster: %v", err)
	}
}

// TestManagedKafkaScenarios: the lists of built-in scenarios that docs/external.md says a
// managed Kafka service (an external cluster without broker commands) runs and refuses are
// exactly those Supports lets run and refuses.
func TestManagedKafkaScenarios(t *testing.T) {
	data, err := os.ReadFile("../docs/external.md")
	if err != nil {
		t.Fatal(err)
	}
	const lead = "Of the built-in scenarios that leaves"
	text := string(data)
	i := strings.Index(text, lead)
	if i < 0 {
		t.Fatalf("docs/external.md has no paragraph starting %q", lead)
	}
	para, _, _ := strings.Cut(text[i:], "\n\n")
	runs, refused, ok := strings.Cut(para, "Refused:")
	if !ok {
		t.Fatalf("the paragraph has no \"Refused:\" list: %q", para)
	}
	refused, _, _ = strings.Cut(refused, ".") // the list is one sentence

	names := func(s string) []string {
		var out []string
		for _, w := range regexp.MustCompile("`([a-z-]+)`").FindAllStringSubmatch(s, -1) {
			if slices.Contains(scenarios.Names(), w[1]) {
				out = append(out, w[1])
			}
		}
		slices.Sort(out)
		return out
	}
	var wantRuns, wantRefused []string
	for _, name := range scenarios.Names() {
		s, _, err := scenarios.Builtin(name)
		if err != nil {
			t.Fatal(err)
		}
		s.Cluster.Kind, s.Cluster.Bootstrap = scenarios.KindExternal, "broker.example:9092"
		if s.Supports(scenarios.KindExternal) == nil {
			wantRuns = append(wantRuns, name)
		} else {
			wantRefused = append(wantRefused, name)
		}
	}
	if got := names(runs); !slices.Equal(got, wantRuns) {
		t.Errorf("docs/external.md says a managed service runs %v; without broker commands fencecheck runs %v", got, wantRuns)
	}
	if got := names(refused); !slices.Equal(got, wantRefused) {
		t.Errorf("docs/external.md says a managed service refuses %v; without broker commands fencecheck refuses %v", got, wantRefused)
	}
}
