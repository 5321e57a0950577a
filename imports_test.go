package fencecheck_test

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/fencecheck/fencecheck"

// forbidden lists, per package prefix, the module packages it must not depend on, directly or
// through others (docs/architecture.md, "Dependency rules"). An entry ending in "/..." covers subpackages;
// allowed lists exceptions.
var forbidden = []struct {
	pkg       string
	forbidden []string
	allowed   []string
}{
	{pkg: "transport", forbidden: []string{"..."}, allowed: []string{"transport"}},
	{pkg: "transport/transporttest", forbidden: []string{"cluster/local", "cluster/containers", "cluster/external",
		"workload", "nemesis", "checker/...", "scenarios", "reports"}},
	{pkg: "checker/history", forbidden: []string{"..."}, allowed: []string{"checker/history"}},
	{pkg: "cluster/...", forbidden: []string{"transport/...", "workload", "nemesis", "checker/...", "scenarios", "reports"}},
	{pkg: "workload/...", forbidden: []string{"nemesis/...", "checker", "checker/model", "scenarios", "reports"}},
	{pkg: "nemesis/...", forbidden: []string{"transport/...", "workload/...", "checker", "checker/model", "scenarios", "reports"}},
	{pkg: "checker/...", forbidden: []string{"transport/...", "workload/...", "nemesis/...", "cluster/...", "reports", "scenarios"}},
	{pkg: "reports/...", forbidden: []string{"transport/...", "workload/...", "nemesis/...", "cluster/...", "scenarios"}},
	// shrink drives whole runs through scenarios.Run; the command line only wires it.
	{pkg: "scenarios/shrink", forbidden: []string{"cmd/..."}},
}

// match reports whether the module-relative path p matches pattern (exact, "x/..." for x and
// below, or "..." for everything).
func match(pattern, p string) bool {
	if pattern == "..." {
		return true
	}
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return p == base || strings.HasPrefix(p, base+"/")
	}
	return p == pattern
}

// TestImportRules fails the build when a package depends on one it must not, so a wrong arrow
// is caught where it is written, not in review.
func TestImportRules(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, "./...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, ok := strings.CutPrefix(fields[0], module+"/")
		if !ok {
			continue
		}
		for _, rule := range forbidden {
			if !match(rule.pkg, pkg) {
				continue
			}
			checked++
		deps:
			for _, dep := range fields[1:] {
				d, ok := strings.CutPrefix(dep, module+"/")
				if !ok || strings.Contains(d, "/internal/") || strings.HasSuffix(d, "/internal") {
					continue
				}
				for _, a := range rule.allowed {
					if match(a, d) {
						continue deps
					}
				}
				for _, f := range rule.forbidden {
					if match(f, d) {
						t.Errorf("%s depends on %s, which docs/architecture.md forbids", pkg, d)
					}
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no package matched a rule: the module path or the rules are wrong")
	}
}
