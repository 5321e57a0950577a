package reports

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"strconv"
	"strings"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/checker/history"
)

//go:embed report.html.tmpl
var reportTemplate string

var tmpl = template.Must(template.New("report").Funcs(template.FuncMap{
	"add": func(a, b float64) float64 { return a + b },
	"num": thousands,
}).Parse(reportTemplate))

// thousands formats n with thin separators every three digits: 1 001 016 reads at a glance.
func thousands(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteString("\u2009")
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// HTML renders the report page. h may be nil when the history could not be read (histErr
// says why); the page then shows the results alone.
func HTML(info *RunInfo, res *checker.Results, h *history.History, histErr error) ([]byte, error) {
	var b bytes.Buffer
	if err := tmpl.Execute(&b, newPage(info, res, h, histErr)); err != nil {
		return nil, fmt.Errorf("render report: %w", err)
	}
	return b.Bytes(), nil
}

// Render reads a run directory's run.json, results.json and history and writes report.html
// and junit.xml. A missing run.json is tolerated (the header then shows less); missing
// results are an error: check the run first.
func (d Dir) Render() error {
	info, err := d.ReadRunInfo()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	res, err := checker.ReadResultsFile(d.Results())
	if err != nil {
		return err
	}
	h, histErr := history.ReadFile(d.History())
	return d.Write(info, res, h, histErr)
}

// Write renders report.html and junit.xml from what the caller already holds.
func (d Dir) Write(info *RunInfo, res *checker.Results, h *history.History, histErr error) error {
	page, err := HTML(info, res, h, histErr)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(d.Report(), page); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	junit, err := JUnit(info, res)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(d.JUnit(), junit); err != nil {
		return fmt.Errorf("write junit: %w", err)
	}
	return nil
}
