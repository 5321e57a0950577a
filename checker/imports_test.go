package checker_test

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImportsKeepTheCheckerOffline pins docs/architecture.md's rules for these packages: the
// history imports only the standard library; the checker reads a history and nothing else, so
// it never imports the transport, workload, nemesis, cluster or reports.
func TestImportsKeepTheCheckerOffline(t *testing.T) {
	const module = "github.com/fencecheck/fencecheck/"
	allowed := map[string][]string{
		"history": nil,
		"model":   {"github.com/anishathalye/porcupine", module + "checker/history"},
		".":       {"github.com/anishathalye/porcupine", module + "checker/history", module + "checker/model"},
	}
	for dir, extra := range allowed {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no files (%v)", dir, err)
		}
		for _, file := range files {
			if strings.HasSuffix(file, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range f.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				std := !strings.Contains(strings.Split(path, "/")[0], ".")
				ok := std
				for _, e := range extra {
					ok = ok || path == e
				}
				if !ok {
					t.Errorf("%s imports %s", file, path)
				}
			}
		}
	}
}
