package fencecheck_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/fencecheck/fencecheck/transport/mutant"
)

var (
	// fence matches a fenced code block; inlineCode an inline code span.
	fence      = regexp.MustCompile("(?ms)^[ \t]*```.*?^[ \t]*```[ \t]*$")
	inlineCode = regexp.MustCompile("`[^`\n]*`")
	// mdLink matches an inline link or image, capturing its target (an optional title is
	// allowed after a space).
	mdLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	// upward matches a relative path that starts by going up: "../x", "../../y/z".
	upward = regexp.MustCompile(`(?:\.\./)+[^\s)\]>'"` + "`" + `]*`)
)

// TestDocLinks fails on a relative link in README.md or docs/*.md that does not resolve to a
// file or folder of the repository, on a #anchor into a markdown file that names no heading of
// it, and on any link or mention (code spans included) that climbs out of the repository with
// "../": users who clone the project have nothing outside it.
func TestDocLinks(t *testing.T) {
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append([]string{filepath.Join(root, "README.md")}, pages...)
	if len(pages) < 2 {
		t.Fatalf("no pages in docs/: %v", pages)
	}
	anchors := map[string]map[string]bool{} // markdown file → its heading anchors
	checked := 0
	for _, page := range pages {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, page)
		for _, problem := range linkProblems(root, page, string(b), anchors) {
			t.Errorf("%s: %s", rel, problem)
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no page checked")
	}
}

// linkProblems returns what is wrong with the links and mentions of page, whose text is text.
func linkProblems(root, page, text string, anchors map[string]map[string]bool) []string {
	var out []string
	dir := filepath.Dir(page)
	if anchors[page] == nil {
		anchors[page] = headingAnchors(text)
	}
	inside := func(path string) bool {
		rel, err := filepath.Rel(root, path)
		return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
	}
	for _, m := range upward.FindAllString(text, -1) {
		if !inside(filepath.Join(dir, filepath.FromSlash(m))) {
			out = append(out, fmt.Sprintf("%q points outside the repository", m))
		}
	}
	prose := inlineCode.ReplaceAllString(fence.ReplaceAllString(text, ""), "")
	for _, m := range mdLink.FindAllStringSubmatch(prose, -1) {
		target := m[1]
		if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		file, anchor, _ := strings.Cut(target, "#")
		path := page
		if file != "" {
			if strings.HasPrefix(file, "/") {
				out = append(out, fmt.Sprintf("link %q: use a path relative to the page", target))
				continue
			}
			path = filepath.Join(dir, filepath.FromSlash(file))
			if !inside(path) {
				continue // reported above as pointing outside
			}
			if _, err := os.Stat(path); err != nil {
				rel, _ := filepath.Rel(root, path)
				out = append(out, fmt.Sprintf("link %q: %s does not exist", target, filepath.ToSlash(rel)))
				continue
			}
		}
		if anchor == "" || !strings.HasSuffix(path, ".md") {
			continue
		}
		if anchors[path] == nil {
			b, err := os.ReadFile(path)
			if err != nil {
				out = append(out, fmt.Sprintf("link %q: %v", target, err))
				continue
			}
			anchors[path] = headingAnchors(string(b))
		}
		if !anchors[path][anchor] {
			out = append(out, fmt.Sprintf("link %q: no heading with anchor #%s", target, anchor))
		}
	}
	return out
}

// headingAnchors returns the anchors GitHub gives the ATX headings of a markdown text: the
// heading lower-cased, without punctuation, spaces turned into hyphens, and "-1", "-2", ... on
// repeats.
func headingAnchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, line := range strings.Split(fence.ReplaceAllString(text, ""), "\n") {
		trimmed := strings.TrimLeft(line, "#")
		if n := len(line) - len(trimmed); n == 0 || n > 6 || !strings.HasPrefix(trimmed, " ") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(trimmed)) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			seen[a]++
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		out[a] = true
	}
	return out
}

// TestDocLinksCatchesBadLinks shows TestDocLinks's rules fail where they should, on a page
// written for the purpose.
func TestDocLinksCatchesBadLinks(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	other := "# Other page\n\n## A heading, with `code`\n\n## Repeat\n\n## Repeat\n"
	if err := os.WriteFile(filepath.Join(root, "docs", "other.md"), []byte(other), 0o644); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(root, "docs", "page.md")
	text := strings.Join([]string{
		"# Page",
		"[ok](other.md) [ok](other.md#a-heading-with-code) [ok](other.md#repeat-1) [ok](#page)",
		"[ok](../docs/other.md) [ok](https://example.com/x.md)",
		"[bad](missing.md) [bad](other.md#nowhere) [bad](#nowhere) [bad](/docs/other.md)",
		"[bad](../../outside.md) and a mention of `../../notes/DESIGN.md`",
		"```", "[ignored in a code block](missing-too.md)", "```",
	}, "\n")
	got := linkProblems(root, page, text, map[string]map[string]bool{})
	want := []string{
		`"../../outside.md" points outside the repository`,
		`"../../notes/DESIGN.md" points outside the repository`,
		`link "missing.md": docs/missing.md does not exist`,
		`link "other.md#nowhere": no heading with anchor #nowhere`,
		`link "#nowhere": no heading with anchor #nowhere`,
		`link "/docs/other.md": use a path relative to the page`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestDocCounts holds the docs' counts and lists to the tree: the number of golden histories
// docs/testing.md quotes, the scenarios of docs/usage.md's table (against
// scenarios/catalogue), the mutants of docs/measurements.md's selftest table and the number
// it writes out in words (against `fencecheck selftest --list`, transport/mutant), and the
// regressions of docs/regressions.md's measured table (against scenarios/regressions).
func TestDocCounts(t *testing.T) {
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	names := func(glob, ext string) []string {
		files, err := filepath.Glob(glob)
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: %v (%d files)", glob, err, len(files))
		}
		var out []string
		for _, f := range files {
			out = append(out, strings.TrimSuffix(filepath.Base(f), ext))
		}
		slices.Sort(out)
		return out
	}
	// tableColumn is the first column of the markdown table whose header row starts with head,
	// split on ", " (one row may name several).
	tableColumn := func(text, head string) []string {
		i := strings.Index(text, head)
		if i < 0 {
			t.Fatalf("no table headed %q", head)
		}
		var out []string
		for _, line := range strings.Split(text[i:], "\n")[2:] {
			if !strings.HasPrefix(line, "|") {
				break
			}
			for _, n := range strings.Split(strings.TrimSpace(strings.Split(line, "|")[1]), ", ") {
				if !slices.Contains(out, n) {
					out = append(out, n)
				}
			}
		}
		slices.Sort(out)
		return out
	}

	golden := len(names("checker/testdata/*.jsonl", ".jsonl"))
	m := regexp.MustCompile(`(\d+) hand-written golden histories`).FindStringSubmatch(read("docs/testing.md"))
	if m == nil || m[1] != fmt.Sprint(golden) {
		t.Errorf("docs/testing.md quotes %v golden histories; checker/testdata has %d", m, golden)
	}

	if got, want := tableColumn(read("docs/usage.md"), "| scenario | what it does |"), names("scenarios/catalogue/*.yaml", ".yaml"); !slices.Equal(got, want) {
		t.Errorf("docs/usage.md's scenario table names %v; scenarios/catalogue has %v", got, want)
	}

	var mutants []string // selftest's: mutant.List leaves out the regressions' mutants
	for _, d := range mutant.List() {
		mutants = append(mutants, d.Name)
	}
	slices.Sort(mutants)
	meas := read("docs/measurements.md")
	if got := tableColumn(meas, "| mutant | what it breaks |"); !slices.Equal(got, mutants) {
		t.Errorf("docs/measurements.md's selftest table names %v; transport/mutant has %v", got, mutants)
	}
	words := []string{"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
		"thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty"}
	if len(mutants) >= len(words) || !strings.Contains(meas, words[len(mutants)]+" broken\ntransports") {
		t.Errorf("docs/measurements.md does not say %q broken transports (transport/mutant has %d)", words[min(len(mutants), len(words)-1)], len(mutants))
	}

	var regressions []string
	for _, row := range regexp.MustCompile(`(?m)^\| ([a-z0-9-]+) \|`).FindAllStringSubmatch(tableText(t, read("docs/regressions.md"), "## The measured table"), -1) {
		if !slices.Contains(regressions, row[1]) && row[1] != "regression" {
			regressions = append(regressions, row[1])
		}
	}
	for _, r := range names("scenarios/regressions/*.yaml", ".yaml") {
		if !slices.Contains(regressions, r) {
			t.Errorf("regression %s has no row in docs/regressions.md's measured table (rows: %v)", r, regressions)
		}
	}
}

// tableText is the part of text from the heading head to the next heading of any level.
func tableText(t *testing.T, text, head string) string {
	t.Helper()
	i := strings.Index(text, head)
	if i < 0 {
		t.Fatalf("no heading %q", head)
	}
	rest := text[i+len(head):]
	if j := strings.Index(rest, "\n#"); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// envVar is a FENCECHECK_* variable's name.
var envVar = regexp.MustCompile(`FENCECHECK_[A-Z0-9_]*[A-Z0-9]`)

// TestEnvironmentTable: every FENCECHECK_* variable the code, the scripts and the adapters
// read or set has a row in docs/environment.md, and every variable that table names is still
// in them, so what stays an environment variable is documented in one place.
func TestEnvironmentTable(t *testing.T) {
	inCode := map[string]string{}
	err := filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", ".venv", "runs", "docs", "testdata", ".ci", "target":
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(p) {
		case ".go", ".sh", ".mk", ".py", ".js", ".rs":
		default:
			if d.Name() != "Makefile" {
				return nil
			}
		}
		if p == "docs_test.go" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, v := range envVar.FindAllString(string(b), -1) {
			if _, ok := inCode[v]; !ok {
				inCode[v] = p
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("docs/environment.md")
	if err != nil {
		t.Fatal(err)
	}
	inDoc := map[string]bool{}
	for _, v := range envVar.FindAllString(string(doc), -1) {
		inDoc[v] = true
	}
	if len(inCode) < 40 {
		t.Fatalf("found %d variables in the tree; the walk misses files", len(inCode))
	}
	for v, where := range inCode {
		if !inDoc[v] {
			t.Errorf("%s (in %s) has no row in docs/environment.md", v, where)
		}
	}
	for v := range inDoc {
		if _, ok := inCode[v]; !ok {
			t.Errorf("docs/environment.md names %s, which nothing reads or sets any more", v)
		}
	}
}
