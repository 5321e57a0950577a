package suite

import (
	"context"
	"encoding/xml"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/internal/adapters"
	"github.com/fencecheck/fencecheck/reports"
	yaml "go.yaml.in/yaml/v3"
)

// TestBadSuiteFiles: every bad suite file is an ErrSuite naming the field.
func TestBadSuiteFiles(t *testing.T) {
	const systems = "systems: [{cluster: embedded}]\n"
	for _, tc := range []struct{ file, want string }{
		{"", "empty file"},
		{"name: x\nbudget: 1h\nscenarios: [steady]\n" + systems + "bogus: 1\n", "field bogus not found"},
		{"name: x\nscenarios: [steady]\n" + systems, "budget:"},
		{"name: x\nbudget: 1h\nscenarios: [nope]\n" + systems, "scenarios[0]: "},
		{"name: x\nbudget: 1h\nscenarios: [steady]\n", "systems: the suite names no system"},
		{"name: x\nbudget: 1h\nscenarios: [steady]\nsystems: [{cluster: moon}]\n", "systems[0].cluster"},
		{"name: x\nbudget: 1h\nscenarios: [steady]\nsystems: [{cluster: local, kafka_version: 3.9.1, transaction_version: 2}]\n", "systems[0].transaction_version"},
		{"name: x\nbudget: 1h\nscenarios: [steady]\nsystems: [{cluster: embedded}, {cluster: embedded}]\n", "systems[1].name"},
		{"name: x\nbudget: 1h\nscenarios: [steady]\n" + systems + "cells: [{scenario: chaos, skip: no}]\n", "cells[0].scenario"},
		{"name: x\nbudget: 1h\nscenarios: [steady]\n" + systems + "cells: [{system: kfake-tv9}]\n", "cells[0].system"},
		{"name: x\nbudget: 1h\nscenarios: [steady]\n" + systems + "cells: [{system: kfake, transport: 'mutant:nope'}]\n", "cells[0].transport"},
		{"name: x\nbudget: 1h\nscenarios: [steady]\nsystems: [{cluster: embedded, transport: 'exec: '}]\n", "systems[0].transport"},
		{"name: x\nbudget: 1h\nscenarios: [steady]\nsystems: [{cluster: embedded, transport: fast}]\n", "systems[0].transport"},
		{"name: x\nbudget: 1h\nrepeats: -1\nscenarios: [steady]\n" + systems, "repeats:"},
		{"name: x\nbudget: 1h\ngroups: [{name: a, scenarios: [steady]}, {name: b, scenarios: [steady]}]\n" + systems, "groups[1].scenarios[0]: scenario steady is already in group a"},
		{"name: x\nbudget: soon\nscenarios: [steady]\n" + systems, "soon"},
		{"name: x\nbudget: 1h\nscenarios: [steady]\nsystems: [{cluster: embedded, group_protocol: eager}]\n", "systems[0].group_protocol"},
		{"name: x\nbudget: 1h\nscenarios: [steady]\nsystems: [{cluster: local, kafka_version: 3.9.2, group_protocol: consumer}]\n", "systems[0].group_protocol: Kafka 3.9.2"},
	} {
		_, err := Parse("s.yaml", "", []byte(tc.file))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "s.yaml") {
			t.Errorf("%q: error %v, want one naming s.yaml and %q", tc.file, err, tc.want)
		}
	}
}

// TestNightlyPlan: the built-in nightly loads; its plan shares a cluster per system for the
// link scenarios and the pipelines that fault no broker, gives the others their own, and
// skips isolate-broker and the pipeline's broker kills on kfake with the reason.
// TestMatrixSkipsPipelinesOnAdapters: the matrix's pipelines run on its cluster columns and
// on the columns of an adapter that serves them (internal/adapters: Java, Sarama), and are
// skipped, with the reason, on the columns of an adapter that serves leases only.
func TestMatrixSkipsPipelinesOnAdapters(t *testing.T) {
	f, err := Find("matrix")
	if err != nil {
		t.Fatal(err)
	}
	cells, err := f.Plan(false)
	if err != nil {
		t.Fatal(err)
	}
	ran, ranExec, skipped := 0, 0, 0
	for _, c := range cells {
		if c.Group != "pipelines" {
			continue
		}
		command, exec := strings.CutPrefix(c.transport, "exec:")
		leasesOnly := false
		if exec {
			a, known := adapters.ByProgram(strings.Fields(command)[0])
			leasesOnly = known && !a.Pipelines
		}
		if skip := c.Status == StatusSkipped && strings.Contains(c.Note, "serves leases only"); skip != leasesOnly {
			t.Errorf("%s on %s (transport %q): status %s (%s)", c.Scenario, c.System, c.transport, c.Status, c.Note)
		}
		switch {
		case c.Status == StatusSkipped:
			skipped++
		case exec:
			ranExec++
			ran++
		default:
			ran++
		}
	}
	if ran == 0 || ranExec == 0 || skipped == 0 {
		t.Errorf("pipeline cells of the matrix: %d run (%d through an adapter), %d skipped; want some of each", ran, ranExec, skipped)
	}
}

// TestGroupProtocolPerSystem: a system's group_protocol sets the protocol of the pipeline
// scenarios on it (and leaves the catalogue's own scenario as it was), names the column by
// default, leaves lease scenarios alone, and skips, with the reason, a pipeline cell whose
// adapter's client lacks the protocol.
func TestGroupProtocolPerSystem(t *testing.T) {
	file := `name: x
budget: 1h
scenarios: [steady, pipeline-zombie]
systems:
  - {cluster: embedded, group_protocol: consumer}
  - {cluster: embedded, transaction_version: 1}
  - {name: sarama-consumer, cluster: embedded, group_protocol: consumer, transport: 'exec:adapters/sarama/fencecheck-sarama-adapter'}
  - {name: sarama-classic, cluster: embedded, group_protocol: classic, transport: 'exec:adapters/sarama/fencecheck-sarama-adapter'}
  - {name: java-consumer, cluster: embedded, group_protocol: consumer, transport: 'exec:adapters/java/fencecheck-java-adapter'}
`
	f, err := Parse("s.yaml", "", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.SystemNames(); got[0] != "kfake-consumer" || got[1] != "kfake-tv1" {
		t.Errorf("default names %v, want kfake-consumer and kfake-tv1 first", got)
	}
	cells, err := f.Plan(false)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{ // the pipeline's protocol per system; "skip" when skipped
		"kfake-consumer": "consumer", "kfake-tv1": "classic", "sarama-consumer": "skip",
		"sarama-classic": "classic", "java-consumer": "consumer",
	}
	seen := 0
	for _, c := range cells {
		if !c.s.Workload.IsPipeline() {
			if c.s.Workload.Pipeline != nil || c.Status == StatusSkipped {
				t.Errorf("%s on %s: a lease scenario got pipeline settings %+v or was skipped (%s)", c.Scenario, c.System, c.s.Workload.Pipeline, c.Note)
			}
			continue
		}
		seen++
		got := groupProtocol(c.s)
		if c.Status == StatusSkipped {
			if !strings.Contains(c.Note, "no consumer group protocol") {
				t.Errorf("%s on %s skipped for %q, want the protocol named", c.Scenario, c.System, c.Note)
			}
			got = "skip"
		}
		if got != want[c.System] {
			t.Errorf("%s on %s: protocol %q, want %q", c.Scenario, c.System, got, want[c.System])
		}
	}
	if seen != len(want) {
		t.Errorf("%d pipeline cells, want %d", seen, len(want))
	}
	again, err := Parse("s.yaml", "", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	if cells, err = again.Plan(false); err != nil {
		t.Fatal(err)
	}
	for _, c := range cells {
		if c.System == "kfake-tv1" && c.s.Workload.IsPipeline() && groupProtocol(c.s) != "classic" {
			t.Errorf("the catalogue's %s came back with protocol %q: a system's protocol leaked into it", c.Scenario, groupProtocol(c.s))
		}
	}
}

// TestPipelineGridPlan: the built-in pipeline-grid crosses every client that serves pipelines
// with Kafka 4.4.0 and 4.1.2 (TV2, TV1) and 3.9.2 (TV1), under each group protocol its client
// has (the consumer protocol on 4.x only); every column runs the zombies group, and the
// zombies of clients that send offsets by group id alone are expected invalid.
func TestPipelineGridPlan(t *testing.T) {
	f, err := Find("pipeline-grid")
	if err != nil {
		t.Fatal(err)
	}
	cells, err := f.Plan(false)
	if err != nil {
		t.Fatal(err)
	}
	columns := map[string]bool{}
	for _, c := range cells {
		columns[c.System] = true
		if c.Status == StatusSkipped {
			t.Errorf("%s on %s skipped: %s", c.Scenario, c.System, c.Note)
		}
		if !c.s.Workload.IsPipeline() || !c.shared {
			t.Errorf("%s on %s: pipeline %v, shared %v; want a pipeline on the column's shared cluster", c.Scenario, c.System, c.s.Workload.IsPipeline(), c.shared)
		}
		client, rest, _ := strings.Cut(c.System, "-4.")
		if strings.Contains(c.System, "-3.9.2-") {
			client, rest, _ = strings.Cut(c.System, "-3.9.2-")
		}
		if !strings.HasSuffix(rest, "-"+groupProtocol(c.s)) {
			t.Errorf("%s on %s runs under %s", c.Scenario, c.System, groupProtocol(c.s))
		}
		groupIDOnly := client == "kafkajs" && c.Group == "zombies" || client == "sarama-group-id" && c.Scenario == "pipeline-zombie"
		if (c.Expect == checker.VerdictInvalid) != groupIDOnly {
			t.Errorf("%s on %s expects %q", c.Scenario, c.System, c.Expect)
		}
	}
	perClient := map[string]int{}
	for name := range columns {
		for _, client := range []string{"java", "librdkafka", "sarama-group-id", "sarama", "kafkajs", "streams", "krabka"} {
			if strings.HasPrefix(name, client+"-") && (client != "sarama" || !strings.HasPrefix(name, "sarama-group-id")) {
				perClient[client]++
				break
			}
		}
	}
	// Both protocols on four 4.x clusters and classic on 3.9.2; classic only on five.
	want := map[string]int{"java": 9, "librdkafka": 9, "sarama": 5, "sarama-group-id": 5, "kafkajs": 5, "streams": 5, "krabka": 5}
	for client, n := range want {
		if perClient[client] != n {
			t.Errorf("%s has %d columns, want %d (%v)", client, perClient[client], n, perClient)
		}
	}
}

func TestNightlyPlan(t *testing.T) {
	f, err := Find("nightly")
	if err != nil {
		t.Fatal(err)
	}
	cells, err := f.Plan(false)
	if err != nil {
		t.Fatal(err)
	}
	if len(cells) != 23*4 {
		t.Fatalf("%d cells, want 92", len(cells))
	}
	for _, c := range cells {
		kills := strings.HasPrefix(c.Scenario, "pipeline-kill-")
		wantShared := c.Group == "links" || c.Group == "pipelines" && !kills
		if c.shared != wantShared {
			t.Errorf("%s on %s: shared %v, want %v", c.Scenario, c.System, c.shared, wantShared)
		}
		onKfake := strings.HasPrefix(c.System, "kfake")
		if skipped := c.Status == StatusSkipped; skipped != ((c.Scenario == "isolate-broker" || kills) && onKfake) {
			t.Errorf("%s on %s: status %s (%s)", c.Scenario, c.System, c.Status, c.Note)
		}
		if why := map[bool]string{false: "links", true: "leader epoch"}[kills]; c.Status == StatusSkipped && !strings.Contains(c.Note, why) {
			t.Errorf("%s on %s skipped without the reason (%s): %q", c.Scenario, c.System, why, c.Note)
		}
	}
	if err := f.Select([]string{"links"}, []string{"kfake-tv1", "kafka-4.1.2"}); err != nil {
		t.Fatal(err)
	}
	if cells, _ = f.Plan(false); len(cells) != 9*2 {
		t.Errorf("a share of links on two systems has %d cells, want 18", len(cells))
	}
	if err := f.Select([]string{"nope"}, nil); err == nil || !strings.Contains(err.Error(), "--group nope") {
		t.Errorf("unknown group: %v", err)
	}
}

// TestBuiltinSuitesLoad: every built-in suite loads and plans.
func TestBuiltinSuitesLoad(t *testing.T) {
	for _, name := range Names() {
		f, err := Find(name)
		if err == nil {
			_, err = f.Plan(false)
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if len(Names()) < 2 {
		t.Errorf("built-in suites: %v", Names())
	}
}

// fakeSuite writes a suite directory whose cells have the given verdicts per run (one run
// directory with a junit.xml each), as Run would, and returns it.
func fakeSuite(t *testing.T, dir string, cells map[[2]string][]checker.Verdict) *Report {
	t.Helper()
	rep := &Report{Suite: "fake", Systems: []System{{Name: "kfake-tv2", Cluster: "embedded"}, {Name: "kfake-tv1", Cluster: "embedded"}}}
	n := 0
	for _, key := range sortedKeys(cells) {
		c := Cell{Group: "all", Scenario: key[0], System: key[1], Status: StatusNotRun}
		for _, v := range cells[key] {
			n++
			run := filepath.ToSlash(filepath.Join(RunsDir, key[0], strings.Repeat("x", n)))
			if err := os.MkdirAll(filepath.Join(dir, run), 0o755); err != nil {
				t.Fatal(err)
			}
			failures, body := 0, ""
			if v == checker.VerdictInvalid {
				failures, body = 1, `<failure type="invalid" message="no-lost-write: 1 anomalies">lost</failure>`
			}
			junit := `<testsuites><testsuite name="fencecheck.` + key[0] + `" tests="1" failures="` + string(rune('0'+failures)) +
				`"><testcase name="no-lost-write" classname="fencecheck.` + key[0] + `.guarantee">` + body + `</testcase></testsuite></testsuites>`
			if err := os.WriteFile(filepath.Join(dir, run, JUnitFile), []byte(junit), 0o644); err != nil {
				t.Fatal(err)
			}
			c.Runs = append(c.Runs, CellRun{Dir: run, Seed: uint64(n), Verdict: v, Command: "fencecheck run " + key[0]})
		}
		c.finish()
		rep.Cells = append(rep.Cells, c)
	}
	rep.summarize()
	if err := Write(dir, rep); err != nil {
		t.Fatal(err)
	}
	return rep
}

func sortedKeys(m map[[2]string][]checker.Verdict) [][2]string {
	var out [][2]string
	for k := range m {
		out = append(out, k)
	}
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j][0]+out[j][1] < out[i][0]+out[i][1] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

const (
	valid   = checker.VerdictValid
	invalid = checker.VerdictInvalid
)

// TestMarks: against a baseline, each cell is a new failure, fixed, still failing or
// unmarked; repeats that disagree make a cell flaky; the marks reach suite.json, the index,
// the JUnit properties and the summary.
func TestMarks(t *testing.T) {
	tmp := t.TempDir()
	base := filepath.Join(tmp, "last")
	fakeSuite(t, base, map[[2]string][]checker.Verdict{
		{"steady", "kfake-tv2"}:     {valid},
		{"chaos", "kfake-tv2"}:      {invalid},
		{"flapping", "kfake-tv2"}:   {invalid},
		{"slow-links", "kfake-tv2"}: {valid},
	})
	now := filepath.Join(tmp, "now")
	fakeSuite(t, now, map[[2]string][]checker.Verdict{
		{"steady", "kfake-tv2"}:     {invalid},        // new failure
		{"chaos", "kfake-tv2"}:      {valid},          // fixed
		{"flapping", "kfake-tv2"}:   {invalid},        // still failing
		{"slow-links", "kfake-tv2"}: {valid, invalid}, // new failure, flaky
		{"black-hole", "kfake-tv1"}: {invalid},        // not in the baseline: new failure
		{"steady", "kfake-tv1"}:     {valid},          // not in the baseline, passes: no mark
	})
	rep, err := Merge([]string{now}, MergeOptions{Out: filepath.Join(tmp, "merged"), Baseline: base})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"steady/kfake-tv2": MarkNewFailure, "chaos/kfake-tv2": MarkFixed, "flapping/kfake-tv2": MarkStillFailing,
		"slow-links/kfake-tv2": MarkNewFailure, "black-hole/kfake-tv1": MarkNewFailure, "steady/kfake-tv1": "",
	}
	for _, c := range rep.Cells {
		k := c.Scenario + "/" + c.System
		if c.Mark != want[k] {
			t.Errorf("%s: mark %q, want %q", k, c.Mark, want[k])
		}
		if c.Flaky != (k == "slow-links/kfake-tv2") {
			t.Errorf("%s: flaky %v", k, c.Flaky)
		}
	}
	if rep.Verdict != invalid || rep.ExitCode != 1 {
		t.Errorf("merged verdict %s exit %d", rep.Verdict, rep.ExitCode)
	}
	again, err := Load(filepath.Join(tmp, "merged"))
	if err != nil || len(again.Cells) != 6 || again.Baseline != "../last" {
		t.Fatalf("suite.json: %v, %+v", err, again)
	}
	index, _ := os.ReadFile(filepath.Join(tmp, "merged", IndexFile))
	summary, _ := os.ReadFile(filepath.Join(tmp, "merged", SummaryFile))
	for _, m := range []string{MarkNewFailure, MarkFixed, MarkStillFailing, "flaky"} {
		if !strings.Contains(string(index), `<span class="mark">`+m+`</span>`) {
			t.Errorf("index lacks the mark %q", m)
		}
		if !strings.Contains(string(summary), m) {
			t.Errorf("summary lacks the mark %q:\n%s", m, summary)
		}
	}
	var ju reports.JUnitSuites
	b, _ := os.ReadFile(filepath.Join(tmp, "merged", JUnitFile))
	if err := xml.Unmarshal(b, &ju); err != nil {
		t.Fatal(err)
	}
	marks := map[string]string{}
	for _, s := range ju.Suites {
		for _, p := range s.Props {
			if p.Name == "mark" {
				marks[s.Name] = p.Value
			}
		}
	}
	if marks["chaos on kfake-tv2"] != MarkFixed || marks["steady on kfake-tv2"] != MarkNewFailure {
		t.Errorf("junit marks %v", marks)
	}
}

// TestMerge: two shares of one nightly (different systems, and one cell run in both) merge
// into one grid: one testsuite per cell in junit.xml, every report link resolving from the
// merged directory, the shared cell's runs joined (and flaky when they disagree), and the
// summary linking each failure's report.
func TestMerge(t *testing.T) {
	tmp := t.TempDir()
	a, b := filepath.Join(tmp, "parts", "a"), filepath.Join(tmp, "parts", "b")
	fakeSuite(t, a, map[[2]string][]checker.Verdict{
		{"steady", "kfake-tv2"}: {valid},
		{"chaos", "kfake-tv2"}:  {valid},
	})
	fakeSuite(t, b, map[[2]string][]checker.Verdict{
		{"steady", "kfake-tv1"}: {invalid},
		{"chaos", "kfake-tv2"}:  {invalid},
	})
	out := filepath.Join(tmp, "nightly")
	rep, err := Merge([]string{a, b}, MergeOptions{Out: out})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Cells) != 3 || rep.ExitCode != 1 {
		t.Fatalf("%d cells, exit %d; want 3 cells, exit 1", len(rep.Cells), rep.ExitCode)
	}
	for _, c := range rep.Cells {
		if c.Scenario == "chaos" && (len(c.Runs) != 2 || !c.Flaky || c.Verdict != invalid) {
			t.Errorf("chaos on kfake-tv2 in both shares: %+v", c)
		}
		for _, r := range c.Runs {
			if _, err := os.Stat(filepath.Join(out, r.Dir, JUnitFile)); err != nil {
				t.Errorf("%s on %s: run %s does not resolve from the merged directory: %v", c.Scenario, c.System, r.Dir, err)
			}
		}
	}
	var ju reports.JUnitSuites
	x, _ := os.ReadFile(filepath.Join(out, JUnitFile))
	if err := xml.Unmarshal(x, &ju); err != nil {
		t.Fatal(err)
	}
	if len(ju.Suites) != 3 {
		t.Fatalf("%d testsuites, want one per cell (3)", len(ju.Suites))
	}
	first := ju.Suites[0]
	if first.Failures != 1 || !strings.Contains(first.Name, "kfake") {
		t.Errorf("first testsuite %s has %d failures; failures come first", first.Name, first.Failures)
	}
	summary := string(Summary(rep, "https://ci.example/nightly"))
	for _, c := range rep.Cells {
		if c.Verdict != invalid {
			continue
		}
		for _, r := range c.Runs {
			if r.Verdict == invalid && !strings.Contains(summary, "(https://ci.example/nightly/"+r.Dir+"/report.html)") {
				t.Errorf("summary does not link %s on %s's report %s:\n%s", c.Scenario, c.System, r.Dir, summary)
			}
		}
	}
	if _, err := Merge([]string{filepath.Join(tmp, "nope")}, MergeOptions{Out: out}); err == nil || !strings.Contains(err.Error(), "not a suite directory") {
		t.Errorf("merging a folder that is no suite: %v", err)
	}
}

// workflow is what the tests read of a CI workflow: each job's matrix and steps.
type workflow struct {
	Jobs map[string]struct {
		Strategy struct {
			Matrix map[string][]string `yaml:"matrix"`
		} `yaml:"strategy"`
		Steps []struct {
			Run string `yaml:"run"`
		} `yaml:"steps"`
	} `yaml:"jobs"`
}

// readWorkflow parses .github/workflows/name and returns it with every step's script joined.
func readWorkflow(t *testing.T, name string) (wf workflow, runs string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", ".github", "workflows", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &wf); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	for _, j := range wf.Jobs {
		for _, s := range j.Steps {
			runs += s.Run + "\n"
		}
	}
	return wf, runs
}

// TestWorkflowMatchesNightly: the nightly workflow's matrix is the nightly suite's groups ×
// systems, so every cell runs in exactly one job, and its jobs call the commands the tests
// exercise (suite with --group, --system and --out; suite merge with --out and --summary).
func TestWorkflowMatchesNightly(t *testing.T) {
	wf, runs := readWorkflow(t, "nightly.yml")
	f, err := Find("nightly")
	if err != nil {
		t.Fatal(err)
	}
	m := wf.Jobs["suite"].Strategy.Matrix
	if !slices.Equal(m["group"], f.GroupNames()) || !slices.Equal(m["system"], f.SystemNames()) {
		t.Errorf("workflow matrix %v × %v, nightly suite %v × %v", m["group"], m["system"], f.GroupNames(), f.SystemNames())
	}
	for _, want := range []string{`fencecheck suite nightly --group "$GROUP" --system "$SYSTEM" --out `,
		`fencecheck suite merge parts/* --out nightly $baseline --summary "$GITHUB_STEP_SUMMARY"`} {
		if !strings.Contains(runs, want) {
			t.Errorf("the workflow no longer runs %q", want)
		}
	}
}

// TestWorkflowMatrixRunners: the matrix workflow's runner jobs are runners 1 to N, each
// running --runner K/N with that N, so that between them they run every share (see
// TestSelectRunner), and its plan job prints the plan for the same N runners.
func TestWorkflowMatrixRunners(t *testing.T) {
	wf, runs := readWorkflow(t, "matrix.yml")
	runners := wf.Jobs["runner"].Strategy.Matrix["runner"]
	for i, r := range runners {
		if r != strconv.Itoa(i+1) {
			t.Fatalf("the runner matrix is %v, want 1 to N", runners)
		}
	}
	n := strconv.Itoa(len(runners))
	for _, want := range []string{
		"fencecheck suite plan matrix --runners " + n + ";",
		`fencecheck suite matrix --runner "$RUNNER/` + n + `" --out "suite-runner-$RUNNER"`,
		`fencecheck suite merge parts/* --out matrix --summary "$GITHUB_STEP_SUMMARY"`,
	} {
		if !strings.Contains(runs, want) {
			t.Errorf("the matrix workflow (%s runners) does not run %q", n, want)
		}
	}
}

// TestWorkflowMatrixBuildsItsAdapters: every adapter a column of the matrix runs through is
// built by the matrix workflow: by make adapters (the ones make test builds too), or by its own
// make target (an optional one, such as krabka's long Rust build). Without it, that column's
// every cell fails "not built" each week.
func TestWorkflowMatrixBuildsItsAdapters(t *testing.T) {
	_, runs := readWorkflow(t, "matrix.yml")
	f, err := Find("matrix")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, s := range f.Systems {
		argv := strings.Fields(strings.TrimPrefix(s.Transport, "exec:"))
		if !strings.HasPrefix(s.Transport, "exec:") || len(argv) == 0 {
			continue
		}
		c, ok := adapters.ByProgram(argv[0])
		if !ok || seen[c.Name] {
			continue
		}
		seen[c.Name] = true
		own := regexp.MustCompile(`make [^\n]*\b` + regexp.QuoteMeta(c.Make()) + `\b`).MatchString(runs)
		all := !c.Optional && regexp.MustCompile(`make [^\n]*\badapters\b`).MatchString(runs)
		if !own && !all {
			t.Errorf("system %s runs the %s adapter, which the matrix workflow never builds (make %s)", s.Name, c.Name, c.Make())
		}
	}
	if len(seen) == 0 {
		t.Fatal("the matrix has no adapter column")
	}
}

// TestMissingKafkaVersion: a system whose Kafka jars are not installed fails each of its cells,
// the shared one and the one with its own cluster alike, with the command that fetches them
// (the shared cluster's cell has no run directory, so no repeat command; the other's run
// directory repeats it); the suite goes on to the next cell and exits as a harness error.
func TestMissingKafkaVersion(t *testing.T) {
	f, err := Parse("s.yaml", "", []byte(`name: missing
budget: 1m
duration: 3s
scenarios: [steady, kill-leader]
systems: [{cluster: local, kafka_version: 9.9.9, transaction_version: 1}]
`))
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("FENCECHECK_KAFKA_HOME", "")
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	out := t.TempDir()
	rep, err := Run(context.Background(), f, Options{Out: out})
	if err != nil {
		t.Fatal(err)
	}
	if rep.ExitCode != checker.ExitHarness || len(rep.Cells) != 2 {
		t.Fatalf("exit %d, %d cells", rep.ExitCode, len(rep.Cells))
	}
	for _, c := range rep.Cells {
		if c.Status != StatusRan || c.Verdict != checker.VerdictError || len(c.Runs) != 1 ||
			!strings.Contains(strings.Join(c.Runs[0].Why, " "), "make kafka KAFKA_VERSION=9.9.9") ||
			(c.Repeat == "") != (c.Runs[0].Dir == "") {
			t.Errorf("%s (%s cluster): %+v", c.Scenario, c.Cluster, c)
		}
	}
}

// TestBudgetSpent: no run starts once the budget is spent; the cells are "not run" with the
// reason, and the suite is inconclusive (exit 2), its index written.
func TestBudgetSpent(t *testing.T) {
	f, err := Parse("s.yaml", "", []byte("name: short\nbudget: 1ns\nscenarios: [steady]\nsystems: [{cluster: embedded}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	rep, err := Run(context.Background(), f, Options{Out: out})
	if err != nil {
		t.Fatal(err)
	}
	if rep.ExitCode != 2 || rep.Stopped != "budget 1ns spent" || rep.Cells[0].Status != StatusNotRun || rep.Cells[0].Note != rep.Stopped {
		t.Errorf("exit %d, stopped %q, cell %+v", rep.ExitCode, rep.Stopped, rep.Cells[0])
	}
	if b, err := os.ReadFile(filepath.Join(out, IndexFile)); err != nil || !strings.Contains(string(b), "Stopped early: budget 1ns spent") {
		t.Errorf("index.html: %v", err)
	}
}

// TestSystemTransport: a system's transport is the one its cells run. One cluster kind appears
// three times in the grid: with fencecheck's transport (valid), with a mutant (invalid), and with
// an adapter that is not built, whose cell fails saying what builds it (no run, so no repeat
// command) while the suite goes on.
func TestSystemTransport(t *testing.T) {
	f, err := Parse("s.yaml", "", []byte(`name: columns
budget: 5m
duration: 6s
scenarios: [steady]
systems:
  - {name: go, cluster: embedded}
  - {name: broken, cluster: embedded, transport: 'mutant:cached-producer'}
  - {name: missing, cluster: embedded, transport: 'exec:./no-such-adapter --flag'}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]checker.Verdict{"go": checker.VerdictValid, "broken": checker.VerdictInvalid, "missing": checker.VerdictError}
	// A cell's run on a loaded machine may miss for want of time (a fence the real transport
	// promised, the mutant's race not run into): the suite runs again, fresh seeds, at most
	// twice, while only such misses stand. Any other wrong verdict fails at once.
	var rep *Report
	for try := 1; ; try++ {
		rep, err = Run(context.Background(), f, Options{Out: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		missed, wrong := false, false
		for _, c := range rep.Cells {
			switch {
			case c.Verdict == want[c.System]:
			case c.System == "go" && c.Verdict == checker.VerdictInconclusive,
				c.System == "broken" && (c.Verdict == checker.VerdictValid || c.Verdict == checker.VerdictInconclusive):
				missed = true
				t.Logf("try %d: %s %s (%v)", try, c.System, c.Verdict, c.Runs)
			default:
				wrong = true
			}
		}
		if wrong || !missed || try == 3 {
			break
		}
	}
	for _, c := range rep.Cells {
		if c.Verdict != want[c.System] {
			t.Errorf("%s: verdict %s, want %s (%v)", c.System, c.Verdict, want[c.System], c.Runs)
		}
	}
	missing := rep.Cells[len(rep.Cells)-1]
	if missing.System != "missing" || len(missing.Runs) != 1 ||
		!strings.Contains(strings.Join(missing.Runs[0].Why, " "), "no-such-adapter") ||
		!strings.Contains(strings.Join(missing.Runs[0].Why, " "), "make NAME-adapter") ||
		missing.Repeat != "" {
		t.Errorf("missing adapter's cell: %+v", missing)
	}
	if rep.ExitCode != checker.ExitCode(checker.VerdictInvalid) {
		t.Errorf("exit %d, want %d (invalid outranks a harness error)", rep.ExitCode, checker.ExitCode(checker.VerdictInvalid))
	}
}

// TestExpectedVerdicts: a cell that must come out invalid (a regression's mutant) passes when
// it does, and is inconclusive when the violation does not show (the real transport); a cell's
// seed is every run's (local-join-seq shows at the first registrations, well inside the 8 s); the suite exits valid when every cell gave what it had to, and the
// JUnit case of an expected verdict passes or fails by it.
func TestExpectedVerdicts(t *testing.T) {
	t.Parallel()
	f, err := Parse("s.yaml", "", []byte(`name: expect
budget: 5m
duration: 8s
scenarios: [steady]
systems:
  - {name: broken, cluster: embedded, transport: 'mutant:local-join-seq'}
  - {name: real, cluster: embedded}
cells:
  - {scenario: steady, expect: invalid, seed: 42}
  - {system: broken, repeats: 2}
`))
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	rep, err := Run(context.Background(), f, Options{Out: out})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]checker.Verdict{"broken": checker.VerdictValid, "real": checker.VerdictInconclusive}
	runs := map[string]int{"broken": 2, "real": 1}
	for _, c := range rep.Cells {
		if c.Verdict != want[c.System] || c.Expect != checker.VerdictInvalid || len(c.Runs) != runs[c.System] {
			t.Errorf("%s: verdict %s expect %q, %d runs; want %s, invalid, %d", c.System, c.Verdict, c.Expect, len(c.Runs), want[c.System], runs[c.System])
		}
		for _, r := range c.Runs {
			if r.Seed != 42 {
				t.Errorf("%s: a run with seed %d, want the cell's 42", c.System, r.Seed)
			}
		}
	}
	if rep.Verdict != checker.VerdictInconclusive {
		t.Errorf("suite verdict %s, want inconclusive (the real transport's expected violation did not show)", rep.Verdict)
	}
	b, err := os.ReadFile(filepath.Join(out, JUnitFile))
	if err != nil {
		t.Fatal(err)
	}
	var ju reports.JUnitSuites
	if err := xml.Unmarshal(b, &ju); err != nil {
		t.Fatal(err)
	}
	failures := map[string]int{}
	for _, s := range ju.Suites {
		for _, tc := range s.Cases {
			if !strings.Contains(tc.Name, "expected invalid") {
				t.Errorf("case %q of %s: want only the expected-verdict cases", tc.Name, tc.ClassName)
			}
			if tc.Failure != nil {
				failures[tc.ClassName]++
			}
		}
	}
	if len(failures) != 1 || failures[firstKey(failures)] != 1 || !strings.Contains(firstKey(failures), "real") {
		t.Errorf("JUnit failures %v: want the real system's run", failures)
	}
}

func firstKey(m map[string]int) string {
	for k := range m {
		return k
	}
	return ""
}

// TestGroupSystems: a group's systems are the only ones it runs on; its cells on the others are
// skipped saying so, and a group naming a system the suite lacks is refused by field. The
// built-in regressions suite, which is such a sparse grid, plans.
func TestGroupSystems(t *testing.T) {
	f, err := Parse("s.yaml", "", []byte(`name: sparse
budget: 1m
groups:
  - {name: one, scenarios: [steady], systems: [a]}
  - {name: both, scenarios: [flapping]}
systems:
  - {name: a, cluster: embedded}
  - {name: b, cluster: embedded, transaction_version: 1}
`))
	if err != nil {
		t.Fatal(err)
	}
	cells, err := f.Plan(false)
	if err != nil {
		t.Fatal(err)
	}
	skipped := map[string]string{}
	for _, c := range cells {
		if c.Status == StatusSkipped {
			skipped[c.Scenario+"×"+c.System] = c.Note
		}
	}
	if len(skipped) != 1 || !strings.Contains(skipped["steady×b"], "runs on a") {
		t.Errorf("skipped %v: want only steady on b, saying the group runs on a", skipped)
	}
	_, err = Parse("s.yaml", "", []byte("name: bad\nbudget: 1m\ngroups: [{name: g, scenarios: [steady], systems: [c]}]\nsystems: [{name: a, cluster: embedded}]\n"))
	if err == nil || !strings.Contains(err.Error(), "groups[0].systems[0]") {
		t.Errorf("a group naming an unknown system: %v, want an error naming groups[0].systems[0]", err)
	}
	reg, err := Find("regressions")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Plan(false); err != nil {
		t.Errorf("the regressions suite does not plan: %v", err)
	}
}
