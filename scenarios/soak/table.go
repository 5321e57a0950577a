package soak

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/internal/atomicfile"
)

// The soak's table files, in its --out folder.
const (
	MarkdownFile = "soak.md"
	JSONFile     = "soak.json"
	// FormatVersion is the version of soak.json.
	FormatVersion = 1
)

// Record is one run of a soak, as soak.json records it.
type Record struct {
	Scenario string          `json:"scenario"`
	Cluster  string          `json:"cluster"`
	Seed     uint64          `json:"seed"`
	Dir      string          `json:"dir"`
	Verdict  checker.Verdict `json:"verdict"`
	// Why names the checks and coverage requirements that did not pass.
	Why []string `json:"why,omitempty"`
	// Interrupted runs (stopped by Ctrl-C) are recorded but not counted.
	Interrupted bool      `json:"interrupted,omitempty"`
	Started     time.Time `json:"started"`
	Seconds     float64   `json:"seconds"`
	Command     string    `json:"command"`
}

// Line is the record as the soak's progress prints it; a run that was not valid also names
// why and its directory.
func (r Record) Line() string {
	s := fmt.Sprintf("%s on %s, seed %d: %s in %.0fs", r.Scenario, r.Cluster, r.Seed, r.Verdict, r.Seconds)
	if r.Interrupted {
		s += " (interrupted, not counted)"
	}
	if r.Verdict != checker.VerdictValid {
		s += " [" + strings.Join(r.Why, "; ") + "] " + r.Dir
	}
	return s
}

// Row counts the verdicts of one scenario on one cluster kind.
type Row struct {
	Scenario     string `json:"scenario"`
	Cluster      string `json:"cluster"`
	Runs         int    `json:"runs"`
	Valid        int    `json:"valid"`
	Invalid      int    `json:"invalid"`
	Inconclusive int    `json:"inconclusive"`
	Unknown      int    `json:"unknown"`
	Error        int    `json:"error"`
}

func (w *Row) count(v checker.Verdict) {
	w.Runs++
	switch v {
	case checker.VerdictValid:
		w.Valid++
	case checker.VerdictInvalid:
		w.Invalid++
	case checker.VerdictInconclusive:
		w.Inconclusive++
	case checker.VerdictUnknown:
		w.Unknown++
	default:
		w.Error++
	}
}

// Summary is the row's counts in one line.
func (w Row) Summary() string {
	return fmt.Sprintf("%d runs: %d valid, %d invalid, %d inconclusive, %d unknown, %d error",
		w.Runs, w.Valid, w.Invalid, w.Inconclusive, w.Unknown, w.Error)
}

// Table is soak.json: the counts are derived from Runs each time it is written.
type Table struct {
	Format int `json:"format"`
	// Commands are the soak commands that added runs to this table (a continued soak has
	// several), oldest first.
	Commands []string  `json:"commands"`
	Started  time.Time `json:"started"`
	Updated  time.Time `json:"updated"`
	// Stopped says why the soak ended before its runs were done ("" if it completed or is
	// still running).
	Stopped  string   `json:"stopped,omitempty"`
	Rows     []Row    `json:"rows"`
	Total    Row      `json:"total"`
	NotValid []Record `json:"not_valid"`
	Runs     []Record `json:"runs"`
}

// Load reads dir/soak.json if there is one (to continue that soak), else returns an
// empty table.
func Load(dir string) (*Table, error) {
	b, err := os.ReadFile(filepath.Join(dir, JSONFile))
	if errors.Is(err, os.ErrNotExist) {
		return &Table{Format: FormatVersion}, nil
	}
	if err != nil {
		return nil, err
	}
	var t Table
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("%s: %w (not a soak table; use another --out)", filepath.Join(dir, JSONFile), err)
	}
	if t.Format != FormatVersion {
		return nil, fmt.Errorf("%s: format %d, this fencecheck writes %d", filepath.Join(dir, JSONFile), t.Format, FormatVersion)
	}
	return &t, nil
}

func (t *Table) add(r Record) { t.Runs = append(t.Runs, r) }

// counted is how many counted (not interrupted) runs of scenario on cluster the table holds.
func (t *Table) counted(scenario, cluster string) int {
	n := 0
	for _, r := range t.Runs {
		if !r.Interrupted && r.Scenario == scenario && r.Cluster == cluster {
			n++
		}
	}
	return n
}

// tabulate derives Rows, Total and NotValid from Runs. Rows are sorted by cluster kind, then
// scenario.
func (t *Table) tabulate() {
	rows := map[[2]string]*Row{}
	t.Total = Row{Scenario: "total"}
	t.NotValid = nil
	for _, r := range t.Runs {
		if r.Verdict != checker.VerdictValid {
			t.NotValid = append(t.NotValid, r)
		}
		if r.Interrupted {
			continue
		}
		k := [2]string{r.Cluster, r.Scenario}
		if rows[k] == nil {
			rows[k] = &Row{Scenario: r.Scenario, Cluster: r.Cluster}
		}
		rows[k].count(r.Verdict)
		t.Total.count(r.Verdict)
	}
	t.Rows = t.Rows[:0]
	for _, w := range rows {
		t.Rows = append(t.Rows, *w)
	}
	sort.Slice(t.Rows, func(i, j int) bool {
		a, b := t.Rows[i], t.Rows[j]
		if a.Cluster != b.Cluster {
			return a.Cluster < b.Cluster
		}
		return a.Scenario < b.Scenario
	})
}

// Totals is the row of every counted run of the table.
func (t *Table) Totals() Row {
	t.tabulate()
	return t.Total
}

// write rewrites soak.json and soak.md in dir, each atomically (a rename), so a reader or a
// killed soak never leaves a half-written table.
func (t *Table) write(dir string) error {
	t.tabulate()
	t.Updated = time.Now().UTC()
	b, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return err
	}
	if err := writeAtomic(filepath.Join(dir, JSONFile), append(b, '\n')); err != nil {
		return err
	}
	var md bytes.Buffer
	if err := t.WriteMarkdown(&md); err != nil {
		return err
	}
	return writeAtomic(filepath.Join(dir, MarkdownFile), md.Bytes())
}

func writeAtomic(path string, b []byte) error {
	if err := atomicfile.Write(path, b); err != nil {
		return fmt.Errorf("soak table: %w", err)
	}
	return nil
}

// WriteMarkdown renders the table: counts per scenario and cluster kind, then every run that
// was not valid with its seed, why, run directory and repeat command.
func (t *Table) WriteMarkdown(w io.Writer) error {
	t.tabulate()
	var b strings.Builder
	b.WriteString("# fencecheck soak\n\n")
	for _, c := range t.Commands {
		fmt.Fprintf(&b, "    %s\n", c)
	}
	b.WriteString("\n")
	state := "complete or running"
	if t.Stopped != "" {
		state = "stopped: " + t.Stopped
	}
	fmt.Fprintf(&b, "Started %s, updated %s (%s).\n\n", t.Started.Format(time.RFC3339), t.Updated.Format(time.RFC3339), state)
	b.WriteString("| scenario | cluster | runs | valid | invalid | inconclusive | unknown | error |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|\n")
	row := func(r Row) {
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d | %d | %d |\n",
			r.Scenario, r.Cluster, r.Runs, r.Valid, r.Invalid, r.Inconclusive, r.Unknown, r.Error)
	}
	for _, r := range t.Rows {
		row(r)
	}
	row(t.Total)
	if t.Total.Runs > 0 {
		fmt.Fprintf(&b, "\nInvalid %.1f%%, inconclusive or unknown %.1f%%, error %.1f%% of %d runs.\n",
			pct(t.Total.Invalid, t.Total.Runs), pct(t.Total.Inconclusive+t.Total.Unknown, t.Total.Runs),
			pct(t.Total.Error, t.Total.Runs), t.Total.Runs)
	}
	if len(t.NotValid) > 0 {
		b.WriteString("\n## Runs that were not valid\n\n")
		b.WriteString("| scenario | cluster | seed | verdict | why | run directory |\n|---|---|---:|---|---|---|\n")
		for _, r := range t.NotValid {
			v := string(r.Verdict)
			if r.Interrupted {
				v += " (interrupted, not counted)"
			}
			fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s |\n", r.Scenario, r.Cluster, r.Seed, v,
				mdCell(strings.Join(r.Why, "; ")), r.Dir)
		}
		b.WriteString("\nRepeat one with its command:\n\n```\n")
		for _, r := range t.NotValid {
			b.WriteString(r.Command + "\n")
		}
		b.WriteString("```\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func pct(n, of int) float64 { return 100 * float64(n) / float64(of) }

// mdCell keeps a table cell on one line and its pipes from splitting it.
func mdCell(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	return strings.ReplaceAll(s, "|", `\|`)
}
