package main

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// suiteJSON is what the tests read of suite.json.
type suiteJSON struct {
	Verdict  string `json:"verdict"`
	ExitCode int    `json:"exit_code"`
	Stopped  string `json:"stopped"`
	Cells    []struct {
		Scenario, System, Status, Verdict, Note, Cluster, Repeat, Mark string
		Runs                                                           []struct {
			Dir         string `json:"dir"`
			Seed        uint64 `json:"seed"`
			Verdict     string `json:"verdict"`
			Command     string `json:"command"`
			Interrupted bool   `json:"interrupted"`
		} `json:"runs"`
	} `json:"cells"`
}

func readSuite(t *testing.T, dir string) suiteJSON {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "suite.json"))
	if err != nil {
		t.Fatalf("suite.json: %v", err)
	}
	var s suiteJSON
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("suite.json: %v", err)
	}
	return s
}

type junitFile struct {
	Suites []struct {
		Name     string `xml:"name,attr"`
		Failures int    `xml:"failures,attr"`
		Props    []struct {
			Name  string `xml:"name,attr"`
			Value string `xml:"value,attr"`
		} `xml:"properties>property"`
		Cases []struct {
			Name    string `xml:"name,attr"`
			Failure *struct {
				Body string `xml:",chardata"`
			} `xml:"failure"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

func readJUnit(t *testing.T, path string) junitFile {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var j junitFile
	if err := xml.Unmarshal(b, &j); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return j
}

func writeSuite(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "suite.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// checkFailingCell requires that the suite in out has exactly one invalid cell, scenario on
// system (the others may be inconclusive: short runs may not fit a scenario's faults); that it comes first in index.html's grid and junit.xml; and that both point
// at its run's report (which exists) and the command that repeats it.
func checkFailingCell(t *testing.T, out, scenario, system string) {
	t.Helper()
	s := readSuite(t, out)
	var report, repeat, runDir string
	var seed uint64
	for _, c := range s.Cells {
		if (c.Scenario == scenario && c.System == system) != (c.Verdict == "invalid") {
			t.Errorf("cell %s on %s: %s %s; want only %s on %s invalid", c.Scenario, c.System, c.Status, c.Verdict, scenario, system)
		}
		if c.Scenario == scenario && c.System == system && len(c.Runs) == 1 {
			report, repeat = filepath.ToSlash(filepath.Join(c.Runs[0].Dir, "report.html")), c.Repeat
			runDir, seed = filepath.Join(out, filepath.FromSlash(c.Runs[0].Dir)), c.Runs[0].Seed
		}
	}
	if report == "" {
		t.Fatalf("no run of %s on %s in suite.json: %+v", scenario, system, s.Cells)
	}
	if _, err := os.Stat(filepath.Join(out, report)); err != nil {
		t.Errorf("the failing run's report: %v", err)
	}
	// The repeat names the run's directory (in a merged suite, its place in the merged tree),
	// which keeps the mutant transport, and the run's seed.
	if want := fmt.Sprintf("fencecheck run %s --seed %d", runDir, seed); repeat != want {
		t.Errorf("repeat command %q, want %q", repeat, want)
	}
	var info struct {
		Transport string `json:"transport"`
	}
	if b, err := os.ReadFile(filepath.Join(runDir, "run.json")); err != nil || json.Unmarshal(b, &info) != nil || info.Transport != "mutant:local-join-seq" {
		t.Errorf("the repeated run's run.json (%v) keeps transport %q, want the mutant's", err, info.Transport)
	}
	index, err := os.ReadFile(filepath.Join(out, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(index)
	firstCell := page[strings.Index(page, `<td class="cell`):]
	if !strings.HasPrefix(firstCell, `<td class="cell invalid" data-scenario="`+scenario+`" data-system="`+system+`"`) {
		t.Errorf("the grid does not start with the failing cell: %.200s", firstCell)
	}
	if !strings.Contains(firstCell[:strings.Index(firstCell, "</td>")], `href="`+report+`"`) {
		t.Errorf("the failing cell does not link %s: %.600s", report, firstCell)
	}
	if !strings.Contains(page, "<code>"+repeat+"</code>") {
		t.Errorf("index.html lacks the repeat command %q", repeat)
	}
	j := readJUnit(t, filepath.Join(out, "junit.xml"))
	if len(j.Suites) != len(s.Cells) {
		t.Errorf("%d testsuites for %d cells", len(j.Suites), len(s.Cells))
	}
	first := j.Suites[0]
	if first.Name != scenario+" on "+system || first.Failures == 0 {
		t.Fatalf("first testsuite %q with %d failures; want %s on %s failing", first.Name, first.Failures, scenario, system)
	}
	props := map[string]string{}
	for _, p := range first.Props {
		props[p.Name] = p.Value
	}
	if props["report"] != report || props["repeat"] != repeat || props["verdict"] != "invalid" {
		t.Errorf("testsuite properties %v; want report %s, repeat %s", props, report, repeat)
	}
	for _, c := range first.Cases {
		if c.Failure != nil && !strings.Contains(c.Failure.Body, "report: "+report) {
			t.Errorf("failure of %s does not name the report: %s", c.Name, c.Failure.Body)
		}
	}
}
