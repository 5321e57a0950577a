package reports_test

import (
	"context"
	"encoding/xml"
	"fmt"
	"html"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
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
	return dir, checkDir(t, dir)
}

// checkDir judges dir's history and writes results.json, the visualizations, report.html and
// junit.xml: the writing half of the check pipeline (harness.Check), which this package's
// tests cannot import.
func checkDir(t *testing.T, dir reports.Dir) *checker.Results {
	t.Helper()
	info, err := dir.ReadRunInfo()
	if err != nil {
		t.Fatal(err)
	}
	h, err := history.ReadFile(dir.History())
	if err != nil {
		t.Fatal(err)
	}
	res, err := checker.Check(context.Background(), h, checker.Options{Visualize: dir.Visualize})
	if err != nil {
		t.Fatal(err)
	}
	if err := res.WriteFile(dir.Results()); err != nil {
		t.Fatal(err)
	}
	if err := dir.Write(info, res, h, nil); err != nil {
		t.Fatal(err)
	}
	return res
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
	if l := res.Liveness; !l.Measured || l.HeldFraction <= 0 || l.HeldFraction > 1 || l.Renewals == 0 {
		t.Errorf("liveness %+v: want measured, a held fraction in (0, 1], renewals", l)
	}
	page := read(t, dir.Report())
	for _, want := range []string{`id="verdict"`, `<div class="v">valid</div>`, `id="guarantees"`, "token-monotonic",
		"no-zombie-commit", `class="timeline`, "<svg", "fencecheck run unit --seed 7", `<p id="liveness">Roles held `} {
		if !strings.Contains(page, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	if strings.Contains(page, "http://") || strings.Contains(page, "https://") {
		t.Error("report.html references the network; it must be self-contained")
	}
	// Each guarantee says what it means, and the run's files are links next to the report.
	for _, g := range checker.Guarantees {
		if m := checker.Meaning(g); m == "" || !strings.Contains(page, html.EscapeString(m)) {
			t.Errorf("report.html lacks the meaning of %s (%q)", g, m)
		}
	}
	for _, f := range []string{"run.json", "history.jsonl", "results.json", "junit.xml"} {
		if !strings.Contains(page, `<a href="`+f+`">`) {
			t.Errorf("report.html does not link %s", f)
		}
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
	for i := range h.Len() {
		op := h.Op(i)
		if op.Role == "" {
			continue
		}
		if _, ok := hostile[op.Role]; !ok {
			hostile[op.Role] = names[len(hostile)%len(names)]
		}
		op.Role = hostile[op.Role]
		op.Member = "<img src=x onerror=alert(2)>" + op.Member
		h.SetOp(i, op)
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

// roleHistory builds a history in which every role of roles breaks token-monotonic (so each
// gets a porcupine visualization), its members named after the role's index so each page is
// recognizable.
func roleHistory(t *testing.T, roles []string) *history.History {
	t.Helper()
	b := history.NewBuilder(0)
	add := func(e history.Event) {
		t.Helper()
		if err := b.Add(&e); err != nil {
			t.Fatal(err)
		}
	}
	add(history.Event{Type: history.TypeHeader, Meta: &history.Meta{Scenario: "unit", LeaseDuration: 100}})
	id := int64(0)
	for i, role := range roles {
		for j, epoch := range []int16{1, 0} { // the second acquire returns an older token
			id++
			at := int64(100*i + 10*j + 10)
			add(history.Event{Type: history.TypeInvoke, ID: id, Time: at, Client: int(id), Process: "p",
				Member: fmt.Sprintf("member-of-role-%d-%d", i, j), Role: role, Kind: history.KindAcquire})
			add(history.Event{Type: history.TypeOK, ID: id, Time: at + 2,
				Result: history.Result{Token: &history.Token{ProducerID: 1000, Epoch: epoch}}})
		}
	}
	return b.History()
}

// TestEveryRoleLinksToItsOwnVisualization: roles a/b, a_b and a:b once mapped to one file,
// written by concurrent workers, so the report's three links opened one mixed page.
func TestEveryRoleLinksToItsOwnVisualization(t *testing.T) {
	roles := []string{"a/b", "a_b", "a:b", "A_b", "a_5fb", "_", ".", "..", strings.Repeat("é/", 200), strings.Repeat("é/", 200) + "x"}
	dir, res := writeRun(t, t.TempDir(), roleHistory(t, roles))
	if len(res.Visualized) != len(roles) {
		t.Fatalf("visualized %q, want all %d roles", res.Visualized, len(roles))
	}
	names := map[string]string{}
	for _, role := range roles {
		name := reports.LinearName(role)
		if other, dup := names[name]; dup {
			t.Errorf("roles %q and %q share %s", other, role, name)
		}
		names[name] = role
		if name != reports.LinearName(role) {
			t.Errorf("LinearName(%q) is not stable", role)
		}
		base := strings.TrimPrefix(name, "linear/")
		if strings.ContainsAny(base, `/\:`) || len(base) > 200 || strings.HasPrefix(base, ".") {
			t.Errorf("LinearName(%q) = %q: not a safe file name", role, name)
		}
	}
	// Every anomaly's link opens the page of its own role.
	page := read(t, dir.Report())
	links := 0
	for _, block := range strings.Split(page, `<div class="anomaly">`)[1:] {
		role, _, ok := strings.Cut(block, "</code>")
		_, role, found := strings.Cut(role, "role <code>")
		if !ok || !found {
			continue
		}
		_, href, ok := strings.Cut(block, `<a href="`)
		if !ok {
			t.Errorf("anomaly of role %q has no link", role)
			continue
		}
		href, _, _ = strings.Cut(href, `"`)
		i := slices.Index(roles, html.UnescapeString(role))
		if i < 0 {
			t.Fatalf("anomaly of unknown role %q", role)
		}
		target := read(t, filepath.Join(string(dir), filepath.FromSlash(html.UnescapeString(href))))
		for j := range roles {
			has := strings.Contains(target, fmt.Sprintf("member-of-role-%d-", j))
			if has != (j == i) {
				t.Errorf("link %s of role %q: page shows role %q's members: %t", href, roles[i], roles[j], has)
			}
		}
		links++
	}
	if links != len(roles) {
		t.Errorf("%d links checked, want %d", links, len(roles))
	}
}

func TestLinearNameOfAnEmptyRole(t *testing.T) {
	if got := reports.LinearName(""); got != "linear/_.html" || got == reports.LinearName("_") {
		t.Fatalf("LinearName(\"\") = %q, LinearName(\"_\") = %q", got, reports.LinearName("_"))
	}
}

// TestNewDirConcurrent starts many runs at once under one root, as selftest and suite do from
// one process: every one gets its own folder, and latest ends up pointing at one of them.
func TestNewDirConcurrent(t *testing.T) {
	root := t.TempDir()
	const n = 64
	errs := make(chan error, n)
	dirs := make(chan reports.Dir, n)
	start := make(chan struct{})
	for i := range n {
		go func() {
			<-start
			d, err := reports.NewDir(root, "unit", time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC), uint64(i))
			errs <- err
			dirs <- d
		}()
	}
	close(start)
	seen := map[reports.Dir]bool{}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
		seen[<-dirs] = true
	}
	if len(seen) != n {
		t.Errorf("%d distinct run folders, want %d", len(seen), n)
	}
	target, err := filepath.EvalSymlinks(filepath.Join(root, "latest"))
	if err != nil {
		t.Fatal(err)
	}
	if !seen[reports.Dir(target)] {
		t.Errorf("latest points at %s, not one of the runs", target)
	}
	leftovers, _ := filepath.Glob(filepath.Join(root, ".latest-*"))
	if len(leftovers) > 0 {
		t.Errorf("temporary links left behind: %v", leftovers)
	}
}

// TestReportShowsWhatFailuresSaid: the failures table groups the operations that did not
// succeed by what the transport said, commonest first, and the header names the client, the
// version it speaks and the processes that cannot describe.
func TestReportShowsWhatFailuresSaid(t *testing.T) {
	h := checkertest.Generate(checkertest.DefaultConfig(), rand.New(rand.NewPCG(3, 4)))
	const msg = "acquire \"r1\": adapter: socket.timeout.ms must be <= transaction.timeout.ms + 100"
	n := 0
	for i := range h.Len() {
		if op := h.Op(i); op.Type != history.TypeOK && !op.Pending && n < 3 {
			op.Message, n = msg, n+1
			h.SetOp(i, op)
		}
	}
	if n == 0 {
		t.Fatal("the generated history has no failed operation")
	}
	h.Meta.Client, h.Meta.TransactionVersion, h.Meta.ClusterTransactionVersion = "librdkafka 2.16.0", 1, 2
	h.Meta.NoDescribe = []string{"p1", "p2", "p3"}
	dir, _ := writeRun(t, t.TempDir(), h)
	page := read(t, dir.Report())
	for _, want := range []string{`id="failures"`, "socket.timeout.ms must be &lt;= transaction.timeout.ms &#43; 100", "librdkafka 2.16.0", "TV1 (the cluster finalized TV2)", "p1, p2, p3"} {
		if !strings.Contains(page, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
}
