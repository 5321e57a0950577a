package reports_test

import (
	"context"
	"encoding/xml"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/checker/checkertest"
	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/reports"
)

// writeRun stores h as a run directory under root, checks it and renders its report, as
// `fencecheck check` does.
func writeRun(t *testing.T, root string, h *history.History) (reports.Dir, *checker.Results) {
	t.Helper()
	dir, err := reports.NewDir(root, "unit", time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC), 7)
	if err != nil {
		t.Fatal(err)
	}
	info := &reports.RunInfo{Scenario: "unit", Seed: 7, Cluster: "embedded", Processes: 3, Roles: 3, Members: 3,
		Command: "fencecheck run unit --seed 7", Started: time.Now()}
	if err := dir.WriteRunInfo(info); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(dir.History())
	if err != nil {
		t.Fatal(err)
	}
	if err := history.Encode(f, h); err != nil {
		t.Fatal(err)
	}
	f.Close()
	res, err := checker.Check(context.Background(), h, checker.Options{Visualize: checker.DirVisualizer(dir.Linear())})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.WriteFile(dir.Results()); err != nil {
		t.Fatal(err)
	}
	if err := dir.Render(); err != nil {
		t.Fatal(err)
	}
	return dir, res
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestReportValidRun(t *testing.T) {
	root := t.TempDir()
	h := checkertest.Generate(checkertest.DefaultConfig(), rand.New(rand.NewPCG(1, 2)))
	dir, res := writeRun(t, root, h)
	if res.Verdict != checker.VerdictValid {
		t.Fatalf("generated history judged %s, want valid", res.Verdict)
	}
	page := read(t, dir.Report())
	for _, want := range []string{`id="verdict"`, `<div class="v">valid</div>`, `id="guarantees"`, "token-monotonic",
		"no-zombie-commit", `class="timeline`, "<svg", "fencecheck run unit --seed 7"} {
		if !strings.Contains(page, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	if strings.Contains(page, "http://") || strings.Contains(page, "https://") {
		t.Error("report.html references the network; it must be self-contained")
	}
	latest, err := filepath.EvalSymlinks(filepath.Join(root, "latest"))
	if err != nil {
		t.Fatal(err)
	}
	if abs, _ := filepath.EvalSymlinks(string(dir)); latest != abs {
		t.Errorf("latest -> %s, want %s", latest, abs)
	}
}

func TestReportInvalidRun(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	h := checkertest.Generate(checkertest.DefaultConfig(), rng)
	if !checkertest.Plant(h, checkertest.StaleWrite, rng) {
		t.Fatal("could not plant a stale write")
	}
	dir, res := writeRun(t, t.TempDir(), h)
	if res.Verdict != checker.VerdictInvalid {
		t.Fatalf("planted history judged %s, want invalid", res.Verdict)
	}
	page := read(t, dir.Report())
	for _, want := range []string{`<div class="v">invalid</div>`, `class="anomaly"`, checkertest.StaleWrite.Guarantee()} {
		if !strings.Contains(page, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}

	var suites struct {
		Suites []struct {
			Tests    int `xml:"tests,attr"`
			Failures int `xml:"failures,attr"`
			Cases    []struct {
				Name    string    `xml:"name,attr"`
				Failure *struct{} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal([]byte(read(t, dir.JUnit())), &suites); err != nil {
		t.Fatalf("junit.xml does not parse: %v", err)
	}
	if len(suites.Suites) != 1 || suites.Suites[0].Failures == 0 {
		t.Fatalf("junit.xml = %+v, want one suite with failures", suites)
	}
	failed := map[string]bool{}
	for _, c := range suites.Suites[0].Cases {
		failed[c.Name] = c.Failure != nil
	}
	if !failed[checkertest.StaleWrite.Guarantee()] {
		t.Errorf("junit.xml does not fail %s: %v", checkertest.StaleWrite.Guarantee(), failed)
	}
	if failed[checker.TokenMonotonic] {
		t.Errorf("junit.xml fails %s, which held", checker.TokenMonotonic)
	}
}

func TestReportEscapesHostileNames(t *testing.T) {
	h := checkertest.Generate(checkertest.DefaultConfig(), rand.New(rand.NewPCG(5, 6)))
	hostile := map[string]string{}
	names := []string{"<script>alert(1)</script>", `"quoted' & <b>`, "bad\xff\xfeutf8"}
	for i := range h.Ops {
		op := &h.Ops[i]
		if op.Role == "" {
			continue
		}
		if _, ok := hostile[op.Role]; !ok {
			hostile[op.Role] = names[len(hostile)%len(names)]
		}
		op.Role = hostile[op.Role]
		op.Member = "<img src=x onerror=alert(2)>" + op.Member
	}
	dir, _ := writeRun(t, t.TempDir(), h)
	page := read(t, dir.Report())
	for _, bad := range []string{"<script>alert(1)", "<img src=x", `"quoted'`} {
		if strings.Contains(page, bad) {
			t.Errorf("report.html contains unescaped %q", bad)
		}
	}
	if !strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Error("report.html does not show the hostile role name escaped")
	}
}
