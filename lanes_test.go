package fencecheck_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// laneTag is a test file's lane, its first line's build constraint: "kafka", "!kafka" or ""
// (a file of helpers both lanes compile).
func laneTag(text string) string {
	first, _, _ := strings.Cut(text, "\n")
	if c, ok := strings.CutPrefix(first, "//go:build "); ok {
		return strings.TrimSpace(c)
	}
	return ""
}

// testFunc matches a test's declaration (TestMain takes a *testing.M: no test).
var testFunc = regexp.MustCompile(`(?m)^func (Test\w*)\(t \*testing\.T\)`)

// testFiles maps each package folder of the module (nested modules such as the adapters'
// excluded) to its test files' contents.
func testFiles(t *testing.T) map[string]map[string]string {
	t.Helper()
	dirs := map[string]map[string]string{}
	err := filepath.WalkDir(".", func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "testdata" || d.Name() == "runs") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); p != "." && err == nil {
				return filepath.SkipDir // a module of its own
			}
			return nil
		}
		if !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		dir := filepath.Dir(p)
		if dirs[dir] == nil {
			dirs[dir] = map[string]string{}
		}
		dirs[dir][filepath.Base(p)] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}

// TestLaneTags: the build tag kafka picks make test's lanes (internal/testenv says how), so in
// a package with Kafka test files every file that declares tests names its lane, kafka or
// !kafka. An untagged file of tests there would run in both lanes, its tests twice; a
// constraint other than the two would hide a file from both.
func TestLaneTags(t *testing.T) {
	kafkaPkgs := 0
	for dir, files := range testFiles(t) {
		hasKafka := false
		for f, text := range files {
			switch tag := laneTag(text); tag {
			case "", "kafka", "!kafka":
				hasKafka = hasKafka || tag == "kafka"
			default:
				t.Errorf("%s: build constraint %q; a test file's is kafka, !kafka or none", filepath.Join(dir, f), tag)
			}
		}
		if !hasKafka {
			continue
		}
		kafkaPkgs++
		for f, text := range files {
			if laneTag(text) == "" && testFunc.MatchString(text) {
				t.Errorf("%s: declares tests but no lane in a package with Kafka test files: begin it with //go:build kafka (it starts brokers) or //go:build !kafka", filepath.Join(dir, f))
			}
		}
	}
	if kafkaPkgs == 0 {
		t.Fatal("no package has Kafka test files: the walk found nothing")
	}
}

// goTestCmd matches a `go test` command in the docs up to the end of its code span or line;
// goTestPkg and goTestRun pick its package and the first test its -run names.
var (
	goTestCmd = regexp.MustCompile("go test[^`#\n]*(?:\n[ \t]*[^`#\n ][^`#\n]*)?")
	goTestPkg = regexp.MustCompile(`(?:^|\s)\./([\w./-]*?)/?(?:\s|$)`)
	goTestRun = regexp.MustCompile(`-run[ =]'?\^?\(?(Test\w+)`)
)

// TestDocTestCommandsCarryTheirTags: a `go test ... -run TestX` in the docs that names a test
// of a Kafka test file carries -tags kafka (without it, go test compiles no such test and
// passes having run nothing), and one naming a light test of a package with Kafka files does
// not (with it, the test is not compiled).
func TestDocTestCommandsCarryTheirTags(t *testing.T) {
	lane := map[string]string{} // "dir TestX" → the lane of the file declaring it
	for dir, files := range testFiles(t) {
		for _, text := range files {
			for _, m := range testFunc.FindAllStringSubmatch(text, -1) {
				lane[dir+" "+m[1]] = laneTag(text)
			}
		}
	}
	docs, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, doc := range append(docs, "README.md") {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, cmd := range goTestCmd.FindAllString(string(b), -1) {
			pkg, run := goTestPkg.FindStringSubmatch(cmd), goTestRun.FindStringSubmatch(cmd)
			if pkg == nil || run == nil {
				continue
			}
			// -run matches names by regexp: the tests whose names hold its first word.
			dir, tags := filepath.Clean(pkg[1]), map[string]bool{}
			for k, tag := range lane {
				if d, name, _ := strings.Cut(k, " "); d == dir && strings.Contains(name, run[1]) {
					tags[tag] = true
				}
			}
			if len(tags) == 0 {
				t.Errorf("%s: %q runs %s, which ./%s does not declare", doc, cmd, run[1], dir)
				continue
			}
			checked++
			tagged := strings.Contains(cmd, "-tags kafka")
			switch {
			case tags["kafka"] && !tagged:
				t.Errorf("%s: %q runs a Kafka test without -tags kafka", doc, cmd)
			case tags["!kafka"] && tagged:
				t.Errorf("%s: %q runs a light test with -tags kafka, which leaves it out", doc, cmd)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no go test command of the docs was checked")
	}
	t.Logf("%d go test commands checked", checked)
}
