//go:build !kafka

package scenarios_test

import (
	"strings"
	"testing"

	"github.com/fencecheck/fencecheck/scenarios"
)

// TestParseErrorsSpeakTheFile: every error of a bad scenario file names the line, the field
// as the file spells it and what it takes, and none shows Go's type names or the parser's
// internal field prefixes.
func TestParseErrorsSpeakTheFile(t *testing.T) {
	const head = "name: t\ndescription: d\n"
	for _, tc := range []struct {
		name, file string
		want       []string
	}{
		{"unknown workload field", head + "workload:\n  preset: low\n  procesess: 3\nduration: 5s\n",
			[]string{"line 5", `workload has no field "procesess"`, "did you mean processes?", "members_per_role"}},
		{"unknown top-level field", head + "durtion: 5s\n",
			[]string{"line 3", `the scenario has no field "durtion"`, "did you mean duration?", "on_kafka"}},
		{"unknown load field", head + "workload:\n  load:\n    work_rat: 1\nduration: 5s\n",
			[]string{"line 5", `workload.load has no field "work_rat"`, "did you mean work_rate?"}},
		{"a bool for the random schedule", head + "nemesis:\n  random: true\nduration: 5s\n",
			[]string{"line 4", "nemesis.random wants a mapping of interval", "not the bool true"}},
		{"a number for a list", head + "promises: 3\nduration: 5s\n",
			[]string{"line 3", "want a list, not the number 3"}},
		{"a typo in a step's selector", head + "nemesis:\n  script:\n    - at 1s kill b0 for 1s\n    - at 2s partition holdr of r1 for 2s\nduration: 5s\n",
			[]string{"line 6", "nemesis.script[1]", `selector "holdr": did you mean holder?`, "holder of ROLE"}},
		{"a process selector among brokers", head + "nemesis:\n  script:\n    - at 1s partition p1 from holder of r1 for 2s\nduration: 5s\n",
			[]string{"line 5", `"holder of r1" picks a process, not brokers`, "coordinator of ROLE"}},
		{"a bad parameter", head + "nemesis:\n  script:\n    - at 1s latency p1 with latency=fast for 2s\nduration: 5s\n",
			[]string{"line 5", `params.latency "fast"`}},
		{"a workload value out of range", head + "workload:\n  preset: low\n  processes: 0\nduration: 5s\n",
			[]string{"line 5", "processes: must be at least 1"}},
		{"an unknown promise", head + "promises: [fault-took-hld]\nduration: 5s\n",
			[]string{"line 3", "fault-took-hld"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := scenarios.Parse("bad.yaml", []byte(tc.file))
			if err == nil {
				t.Fatal("parsed")
			}
			msg := err.Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not say %q", msg, w)
				}
			}
			for _, internal := range []string{"scenarios.", "nemesis.RandomSchedule", "!!", "spec=", "target.brokers=", "not found in type"} {
				if strings.Contains(msg, internal) {
					t.Errorf("error %q shows %q", msg, internal)
				}
			}
		})
	}
}

// TestReadMixReplacesThePresets: a read_mix in the file is the whole mix (weights it leaves out
// are 0); without one the preset's mix stays.
func TestReadMixReplacesThePresets(t *testing.T) {
	const head = "name: t\ndescription: d\nduration: 5s\n"
	s, err := scenarios.Parse("t.yaml", []byte(head+"workload:\n  preset: low\n  load:\n    read_mix: {describe: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if m := s.Workload.Load.ReadMix; m.Read != 0 || m.Describe != 1 || m.ReadWork != 0 {
		t.Errorf("read_mix {describe: 1} gave %+v, want describes only", m)
	}
	s, err = scenarios.Parse("t.yaml", []byte(head+"workload:\n  preset: low\n  load:\n    read_every: 1s\n"))
	if err != nil {
		t.Fatal(err)
	}
	if m := s.Workload.Load.ReadMix; m.Read != 3 || m.Describe != 2 || m.ReadWork != 1 {
		t.Errorf("no read_mix gave %+v, want the preset's 3/2/1", m)
	}
}
