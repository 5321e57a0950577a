package suite

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"html/template"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/internal/atomicfile"
	"github.com/fencecheck/fencecheck/reports"
)

// Write writes the suite directory's suite.json, index.html, junit.xml and summary.md from
// rep, its cells worst first (rep itself is left in its order); run directories are read from
// dir (their junit.xml). Each file is replaced whole.
func Write(dir string, rep *Report) error {
	sorted := *rep
	sorted.Cells = slices.Clone(rep.Cells)
	sortCells(sorted.Cells)
	rep = &sorted
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, JSONFile), append(b, '\n')); err != nil {
		return err
	}
	if b, err = renderIndex(rep); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, IndexFile), b); err != nil {
		return err
	}
	if b, err = mergeJUnit(dir, rep); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, JUnitFile), b); err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, SummaryFile), Summary(rep, ""))
}

// writeFile replaces path atomically, so a reader (or a killed suite) never sees half a file.
func writeFile(path string, b []byte) error { return atomicfile.Write(path, b) }

// sortCells puts failures first (worst first), then by group, scenario and system order as
// given; stable, so the suite's own order breaks ties.
func sortCells(cells []Cell) {
	slices.SortStableFunc(cells, func(a, b Cell) int { return b.severity() - a.severity() })
}

// rows is the grid: one row per scenario (failing rows first), one column per system.
type grid struct {
	Systems []string
	Rows    []gridRow
}

type gridRow struct {
	Scenario string
	Group    string
	Cells    []*Cell // one per system; nil where the scenario has no cell on it
}

func makeGrid(rep *Report) grid {
	var g grid
	for _, s := range rep.Systems {
		if !slices.Contains(g.Systems, s.Name) {
			g.Systems = append(g.Systems, s.Name)
		}
	}
	for i := range rep.Cells {
		if c := &rep.Cells[i]; !slices.Contains(g.Systems, c.System) {
			g.Systems = append(g.Systems, c.System)
		}
	}
	index := map[string]int{}
	for i := range rep.Cells { // cells are sorted worst first: so are the rows
		c := &rep.Cells[i]
		n, ok := index[c.Scenario]
		if !ok {
			n = len(g.Rows)
			index[c.Scenario] = n
			g.Rows = append(g.Rows, gridRow{Scenario: c.Scenario, Group: c.Group, Cells: make([]*Cell, len(g.Systems))})
		}
		g.Rows[n].Cells[slices.Index(g.Systems, c.System)] = c
	}
	return g
}

//go:embed index.html.tmpl
var indexTmpl string

var indexPage = template.Must(template.New("index").Funcs(template.FuncMap{
	"report": func(r CellRun) string { return path.Join(r.Dir, "report.html") },
	"secs":   func(s float64) string { return fmt.Sprintf("%.0f s", s) },
	"class": func(v any) string {
		c := asCell(v)
		if c.Status != StatusRan {
			return strings.ReplaceAll(c.Status, " ", "-")
		}
		return string(c.Verdict)
	},
	"label":   func(v any) string { return cellLabel(asCell(v)) },
	"inc":     func(i int) int { return i + 1 },
	"failing": func(c Cell) bool { return c.failing() },
	"notrun":  func(c Cell) bool { return c.Status != StatusRan },
	"join":    strings.Join,
}).Parse(indexTmpl))

// asCell lets the template's functions take a cell of the grid (*Cell) or of a list (Cell).
func asCell(v any) *Cell {
	if c, ok := v.(*Cell); ok {
		return c
	}
	c := v.(Cell)
	return &c
}

// cellLabel is the verdict, or the status of a cell that did not run; a cell whose runs had to
// give another verdict than valid and did reads "invalid, as expected".
func cellLabel(c *Cell) string {
	if c.Status != StatusRan {
		return c.Status
	}
	if c.Expect != "" && c.Verdict == checker.VerdictValid {
		return string(c.Expect) + ", as expected"
	}
	return string(c.Verdict)
}

func renderIndex(rep *Report) ([]byte, error) {
	counts := map[string]int{}
	for _, c := range rep.Cells {
		counts[cellLabel(&c)]++
	}
	var sharing []clusterUse
	byLabel := map[string]int{}
	for _, c := range rep.Cells {
		if !strings.HasPrefix(c.Cluster, "shared ") {
			continue
		}
		label := strings.TrimPrefix(c.Cluster, "shared ")
		n, ok := byLabel[label]
		if !ok {
			n = len(sharing)
			byLabel[label] = n
			sharing = append(sharing, clusterUse{Label: label})
		}
		sharing[n].Cells = append(sharing[n].Cells, c.Scenario)
	}
	var buf bytes.Buffer
	err := indexPage.Execute(&buf, struct {
		*Report
		Grid    grid
		Counts  map[string]int
		Sharing []clusterUse
	}{rep, makeGrid(rep), counts, sharing})
	return buf.Bytes(), err
}

type clusterUse struct {
	Label string
	Cells []string
}

// mergeJUnit builds one testsuite per cell, named "<scenario> on <system>", holding the test
// cases of every run of the cell (prefixed "run N: " when the cell repeats), with the cell's
// verdict, system, reports and repeat command as properties. A cell that did not run is one
// skipped case saying why; a run without a junit.xml (its harness failed first) is one error
// case.
func mergeJUnit(dir string, rep *Report) ([]byte, error) {
	var out reports.JUnitSuites
	for _, c := range rep.Cells {
		name := c.Scenario + " on " + c.System
		class := "fencecheck." + c.Scenario + "." + c.System
		s := reports.JUnitSuite{Name: name, Time: fmt.Sprintf("%.3f", c.Seconds)}
		s.Props = append(s.Props, reports.JUnitProp{Name: "verdict", Value: cellLabel(&c)}, reports.JUnitProp{Name: "system", Value: c.System},
			reports.JUnitProp{Name: "group", Value: c.Group})
		if c.Cluster != "" {
			s.Props = append(s.Props, reports.JUnitProp{Name: "cluster", Value: c.Cluster})
		}
		if c.Mark != "" {
			s.Props = append(s.Props, reports.JUnitProp{Name: "mark", Value: c.Mark})
		}
		if c.Flaky {
			s.Props = append(s.Props, reports.JUnitProp{Name: "flaky", Value: "true"})
		}
		if c.Repeat != "" {
			s.Props = append(s.Props, reports.JUnitProp{Name: "repeat", Value: c.Repeat})
		}
		if c.Status != StatusRan {
			s.Cases = append(s.Cases, reports.JUnitCase{Name: c.Status, ClassName: class, Skipped: &reports.JUnitProblem{Message: c.Note}})
			s.Tests, s.Skipped = 1, 1
			out.Suites = append(out.Suites, s)
			continue
		}
		for n, r := range c.Runs {
			prefix := ""
			if len(c.Runs) > 1 {
				prefix = fmt.Sprintf("run %d: ", n+1)
			}
			report := path.Join(r.Dir, "report.html")
			if r.Dir != "" {
				s.Props = append(s.Props, reports.JUnitProp{Name: "report", Value: report})
			}
			if r.Expected != "" {
				// The run's own checks fail by design: the case is whether it gave the verdict.
				tc := reports.JUnitCase{Name: prefix + "expected " + string(r.Expected), ClassName: class}
				if r.judged() != checker.VerdictValid {
					tc.Failure = &reports.JUnitProblem{Type: string(r.judged()), Message: r.label(),
						Body: fmt.Sprintf("report: %s\nrepeat: %s\n%s", report, r.Command, strings.Join(r.Why, "\n"))}
					s.Failures++
				}
				s.Cases = append(s.Cases, tc)
				s.Tests++
				continue
			}
			var run reports.JUnitSuites
			b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(r.Dir), JUnitFile))
			if err == nil && r.Dir != "" {
				err = xml.Unmarshal(b, &run)
			}
			if err != nil || r.Dir == "" || len(run.Suites) == 0 {
				s.Cases = append(s.Cases, reports.JUnitCase{Name: prefix + "harness", ClassName: class,
					Error: &reports.JUnitProblem{Type: string(checker.VerdictError), Message: strings.Join(r.Why, "; ")}})
				s.Tests++
				s.Errors++
				continue
			}
			for _, rs := range run.Suites {
				for _, tc := range rs.Cases {
					tc.Name = prefix + tc.Name
					tc.ClassName = class + strings.TrimPrefix(tc.ClassName, rs.Name)
					for _, p := range []*reports.JUnitProblem{tc.Failure, tc.Error} {
						if p != nil { // where to look, in the message CI shows
							p.Body = fmt.Sprintf("report: %s\nrepeat: %s\n%s", report, r.Command, p.Body)
						}
					}
					s.Cases = append(s.Cases, tc)
				}
				s.Tests += rs.Tests
				s.Failures += rs.Failures
				s.Errors += rs.Errors
				s.Skipped += rs.Skipped
			}
		}
		out.Suites = append(out.Suites, s)
	}
	b, err := xml.MarshalIndent(out, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode junit: %w", err)
	}
	return append([]byte(xml.Header), append(b, '\n')...), nil
}

// Summary renders the suite as Markdown for a CI job summary: the verdict, the grid and, for
// every failing cell, links to its runs' reports and the command that repeats it. Links are
// linkBase + the run's path ("" keeps them relative to the suite directory).
func Summary(rep *Report, linkBase string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "# fencecheck suite %s: %s (exit %d)\n\n", rep.Suite, rep.Verdict, rep.ExitCode)
	if rep.Stopped != "" {
		fmt.Fprintf(&b, "Stopped early: %s.\n\n", rep.Stopped)
	}
	g := makeGrid(rep)
	b.WriteString("| scenario |")
	for _, s := range g.Systems {
		fmt.Fprintf(&b, " %s |", s)
	}
	b.WriteString("\n|---|")
	for range g.Systems {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, r := range g.Rows {
		fmt.Fprintf(&b, "| %s |", r.Scenario)
		for _, c := range r.Cells {
			if c == nil {
				b.WriteString(" |")
				continue
			}
			text := cellLabel(c)
			if c.failing() && c.failingRun().Dir != "" {
				text = fmt.Sprintf("[%s](%s)", text, link(linkBase, c.failingRun().Dir))
			}
			if c.Mark != "" {
				text += " (" + c.Mark + ")"
			}
			if c.Flaky {
				text += " (flaky)"
			}
			fmt.Fprintf(&b, " %s |", text)
		}
		b.WriteString("\n")
	}
	first := true
	for _, c := range rep.Cells {
		if !c.failing() {
			continue
		}
		if first {
			b.WriteString("\n## Failures\n\n")
			first = false
		}
		fmt.Fprintf(&b, "- **%s on %s**: %s", c.Scenario, c.System, c.Verdict)
		if c.Mark != "" {
			fmt.Fprintf(&b, ", %s", c.Mark)
		}
		if c.Flaky {
			b.WriteString(", flaky")
		}
		b.WriteString("\n")
		for _, r := range c.Runs {
			if r.judged() == checker.VerdictValid {
				continue
			}
			if r.Dir != "" {
				fmt.Fprintf(&b, "  - [%s report](%s): %s\n", r.label(), link(linkBase, r.Dir), strings.Join(r.Why, ", "))
			} else {
				fmt.Fprintf(&b, "  - %s: %s\n", r.label(), strings.Join(r.Why, ", "))
			}
			if r.Command != "" {
				fmt.Fprintf(&b, "    `%s`\n", r.Command)
			}
		}
	}
	for _, c := range rep.Cells {
		if c.Mark == MarkFixed {
			fmt.Fprintf(&b, "\nFixed since the baseline: %s on %s.\n", c.Scenario, c.System)
		}
	}
	return []byte(b.String())
}

// failingRun is the cell's first run that does not pass (else its first).
func (c *Cell) failingRun() CellRun {
	for _, r := range c.Runs {
		if r.judged() != checker.VerdictValid {
			return r
		}
	}
	return c.Runs[0]
}

func link(base, dir string) string {
	p := path.Join(dir, "report.html")
	if base == "" {
		return p
	}
	return strings.TrimSuffix(base, "/") + "/" + p
}
