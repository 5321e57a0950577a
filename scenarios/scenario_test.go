//go:build !kafka

package scenarios_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/scenarios"
)

func TestCatalogueLoads(t *testing.T) {
	names := scenarios.Names()
	for _, want := range []string{"steady", "holder-partition", "coordinator-partition", "zombie-holder", "black-hole",
		"kill-coordinator", "kill-leader", "pause-broker", "isolate-broker", "slow-links", "flapping", "rolling-restart", "chaos"} {
		s, _, err := scenarios.Builtin(want)
		if err != nil {
			t.Errorf("built-in %s: %v", want, err)
			continue
		}
		if s.Name != want || s.Description == "" || s.Duration <= 0 {
			t.Errorf("built-in %s: name %q, description %q, duration %v", want, s.Name, s.Description, s.Duration)
		}
	}
	if len(names) < 13 {
		t.Errorf("catalogue has %d scenarios: %v", len(names), names)
	}
}

func TestParseRejects(t *testing.T) {
	base := "name: x\ndescription: d\nduration: 10s\n"
	tests := []struct {
		name, yaml string
		want       []string // substrings of the error
	}{
		{"unknown top-level field names it and its line", base + "durration: 5s\n", []string{"line 4", "durration"}},
		{"unknown workload field names it", base + "workload:\n  preset: low\n  procesess: 3\n", []string{"line 6", "procesess"}},
		{"unknown preset", base + "workload:\n  preset: extreme\n", []string{"workload.preset", "extreme"}},
		{"bad workload value names the field", base + "workload:\n  preset: low\n  processes: -1\n", []string{"processes"}},
		{"bad duration", "name: x\ndescription: d\nduration: soon\n", []string{"soon"}},
		{"missing duration", "name: x\ndescription: d\n", []string{"duration"}},
		// Workload and nemesis durations are one type with one rule: a bare number is refused.
		{"bare-number lease names the line and the unit", base + "workload:\n  lease: 2\n", []string{"line 5", "with a unit"}},
		{"bare-number fault interval names the line and the unit", base + "nemesis:\n  random:\n    interval: 8\n", []string{"line 6", "with a unit"}},
		{"unknown cluster kind", base + "cluster:\n  kind: cloud\n", []string{"cluster.kind", "cloud"}},
		{"unknown link mode", base + "cluster:\n  links: pipes\n", []string{"cluster.links", "pipes"}},
		{"conn links with a toxiproxy container", base + "cluster:\n  kind: containers\n  links: conn\n  toxiproxy_image: t:1\n", []string{"cluster.links", "toxiproxy_image"}},
		{"unknown fault in a script", base + "nemesis:\n  script:\n    - at 1s earthquake all for 2s\n", []string{"nemesis.script[0]", "earthquake"}},
		{"a script step without for", base + "nemesis:\n  script:\n    - at 1s partition p1 from all\n", []string{"for"}},
		{"unknown promise", base + "promises: [miracle]\n", []string{"promises[0]", "miracle"}},
		{"name with a slash", "name: a/b\ndescription: d\nduration: 10s\n", []string{"name"}},
		{"empty file", "", []string{"empty"}},
		{"unknown security mode", base + "cluster:\n  kind: local\n  security: kerberos\n", []string{"cluster.security", "kerberos"}},
		{"security on kfake", base + "cluster:\n  kind: embedded\n  security: tls\n", []string{"cluster.security", "embedded"}},
		{"unauthorized processes without SASL", base + "cluster:\n  kind: local\n  security: tls\n  unauthorized_processes: [2]\n", []string{"cluster.unauthorized_processes", "sasl"}},
		{"unauthorized processes on an external cluster", base + "cluster:\n  kind: external\n  bootstrap: h:1\n  security: sasl-ssl\n  unauthorized_processes: [2]\n", []string{"cluster.unauthorized_processes", "external"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := scenarios.Parse("test.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatal("parsed without error")
			}
			if !errors.Is(err, scenarios.ErrScenario) {
				t.Errorf("error %v does not wrap ErrScenario", err)
			}
			for _, w := range append(tc.want, "test.yaml") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestParseOverridesPreset(t *testing.T) {
	s, err := scenarios.Parse("t.yaml", []byte("name: x\ndescription: d\nduration: 10s\nworkload:\n  preset: high\n  processes: 7\n  load:\n    work_rate: 9\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Workload.Processes != 7 || s.Workload.Load.WorkRate != 9 {
		t.Errorf("overrides not applied: processes %d, work_rate %v", s.Workload.Processes, s.Workload.Load.WorkRate)
	}
	if s.Workload.Roles != 10 || s.Workload.Load.Contend == 0 {
		t.Errorf("preset not kept under the overrides: roles %d, contend %v", s.Workload.Roles, s.Workload.Load.Contend)
	}
}

func TestSupportsRefusesWithReason(t *testing.T) {
	s, _, err := scenarios.Builtin("isolate-broker")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Supports(scenarios.KindEmbedded); err == nil || !strings.Contains(err.Error(), "local") {
		t.Errorf("isolate-broker on embedded: %v, want a refusal naming the local cluster", err)
	}
	if err := s.Supports(scenarios.KindLocal); err != nil {
		t.Errorf("isolate-broker on local: %v", err)
	}
	k, _, _ := scenarios.Builtin("kill-coordinator")
	if err := k.Supports(scenarios.KindExternal); err == nil {
		t.Error("kill-coordinator on an external cluster was not refused")
	}
}

// TestPipelineScenarioShowsItsOwnFields: a pipeline scenario is shown, and kept in run.json,
// with its pipeline settings and their defaults, not the lease workload's fields; what is
// shown parses back to the same workload; a bad pipeline field is named; a lease promise is
// refused in a pipeline.
func TestPipelineScenarioShowsItsOwnFields(t *testing.T) {
	s, _, err := scenarios.Builtin("pipeline-zombie")
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, absent := range []string{"preset", "roles", "lease"} {
		if strings.Contains(string(b), absent+":") {
			t.Errorf("a pipeline shows the lease field %s:\n%s", absent, b)
		}
	}
	for _, present := range []string{"kind: pipeline", "session_timeout: 3s", "members: 4", "member: plain"} {
		if !strings.Contains(string(b), present) {
			t.Errorf("shown scenario lacks %q:\n%s", present, b)
		}
	}
	if ws := s.Warnings(); len(ws) != 0 {
		t.Errorf("pipeline-zombie warns: %q", ws)
	}
	long, err := scenarios.Parse("long.yaml", []byte("name: p\ndescription: d\nduration: 20s\nworkload:\n  kind: pipeline\nnemesis:\n  script:\n    - at 1s freeze holder of in0 for 9s\n"))
	if err != nil {
		t.Fatal(err)
	}
	if ws := long.Warnings(); len(ws) != 0 {
		t.Errorf("a 9 s pipeline freeze warns of a commit cap it does not have: %q", ws)
	}
	again, err := scenarios.Parse("shown.yaml", b)
	if err != nil {
		t.Fatalf("the shown scenario does not parse: %v\n%s", err, b)
	}
	if !again.Workload.IsPipeline() || again.Workload.Pipeline.Members != 4 || again.Workload.Pipeline.SessionTimeout.D() != 3*time.Second {
		t.Errorf("parsed back as %+v", again.Workload)
	}
	j, err := json.Marshal(scenarios.AsRan(s))
	if err != nil {
		t.Fatal(err)
	}
	var back scenarios.Scenario
	if err := json.Unmarshal(j, &back); err != nil || !back.Workload.IsPipeline() || back.Workload.Pipeline.Partitions != 4 || back.Validate() != nil {
		t.Errorf("run.json's form %s read back as %+v (%v, %v)", j, back.Workload, err, back.Validate())
	}
	for _, tc := range []struct{ yaml, want string }{
		{"workload:\n  kind: pipeline\n  pipeline:\n    members: -2\n", "members"},
		{"workload:\n  kind: pipeline\n  pipeline:\n    protocol: eager\n", "protocol"},
		{"workload:\n  kind: streams\n", "kind"},
		{"workload:\n  pipeline:\n    members: 2\n", "kind: pipeline"},
		{"workload:\n  kind: pipeline\npromises: [handoff]\n", "handoff"},
		{"workload:\n  kind: pipeline\nnemesis:\n  script:\n    - at 1s freeze holder of in0 with point=before-work for 2s\n", "point=before-work"},
	} {
		_, err := scenarios.Parse("p.yaml", []byte("name: p\ndescription: d\nduration: 5s\n"+tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error naming %s", tc.yaml, err, tc.want)
		}
	}
}
