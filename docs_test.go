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
