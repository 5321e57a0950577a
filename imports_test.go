package fencecheck_test

import (
	"os/exec"
	"slices"
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
	{pkg: "transport", forbidden: []string{"..."}, allowed: []string{"transport", "transport/record"}},
	// The record format is a leaf: its fuzz target links nothing else.
	{pkg: "transport/record", forbidden: []string{"..."}, allowed: []string{"transport/record"}},
	// The exec protocol's harness side is a transport too: it knows nothing of fencecheck.
	{pkg: "transport/lineproto", forbidden: []string{"..."}, allowed: []string{"transport", "transport/record", "transport/lineproto", "transport/pipeline"}},
	// The pipeline's members are transports too: the connection settings and the outcome
	// classes are transport's, nothing else of fencecheck.
	{pkg: "transport/pipeline", forbidden: []string{"..."}, allowed: []string{"transport", "transport/record", "transport/pipeline"}},
	{pkg: "transport/pipeline/pipelinetest", forbidden: []string{"..."}, allowed: []string{"transport", "transport/record", "transport/pipeline", "transport/pipeline/pipelinetest"}},
	{pkg: "transport/transporttest", forbidden: []string{"cluster/local", "cluster/containers", "cluster/external",
		"workload", "nemesis", "checker/...", "scenarios", "reports"}},
	{pkg: "checker/history", forbidden: []string{"..."}, allowed: []string{"checker/history"}},
	// units is a leaf the workload, the nemesis and the scenarios share (Duration).
	{pkg: "internal/units", forbidden: []string{"..."}, allowed: []string{"internal/units"}},
	// atomicfile is a leaf: every package that writes a file a reader may see half of uses it.
	{pkg: "internal/atomicfile", forbidden: []string{"..."}, allowed: []string{"internal/atomicfile"}},
	// links is the fault mechanism under every backend: it knows no cluster, no policy.
	{pkg: "cluster/links", forbidden: []string{"..."}, allowed: []string{"cluster/links"}},
	{pkg: "cluster/...", forbidden: []string{"transport/...", "workload", "nemesis", "checker/...", "scenarios", "reports"}},
	{pkg: "workload/...", forbidden: []string{"nemesis/...", "checker", "checker/model", "scenarios", "reports"}},
	{pkg: "nemesis/...", forbidden: []string{"transport/...", "workload/...", "checker", "checker/model", "scenarios", "reports"}},
	{pkg: "checker/...", forbidden: []string{"transport/...", "workload/...", "nemesis/...", "cluster/...", "reports", "scenarios"}},
	{pkg: "reports/...", forbidden: []string{"transport/...", "workload/...", "nemesis/...", "cluster/...", "scenarios"}},
	// shrink drives whole runs through harness.Run; the command line only wires it.
	{pkg: "scenarios/shrink", forbidden: []string{"cmd/..."}},
	// suite runs many scenarios through harness.Run and writes one page; the command wires it.
	{pkg: "scenarios/suite", forbidden: []string{"cmd/..."}},
	// soak and selftest are campaigns like suite and shrink: the command line only wires them.
	{pkg: "scenarios/soak", forbidden: []string{"cmd/..."}},
	{pkg: "scenarios/selftest", forbidden: []string{"cmd/..."}},
	// explore is a campaign too: many runs through harness.Run, a shrink at the end.
	{pkg: "scenarios/explore", forbidden: []string{"cmd/..."}},
	// What the campaigns share (a lock, seeds, runs side by side) knows nothing of a run.
	{pkg: "scenarios/campaign", forbidden: []string{"..."}, allowed: []string{"scenarios/campaign"}},
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

// commandImports lists the module packages a command may import directly. A command only
// wires flags to the scenarios (data), the harness that runs one (scenarios/harness), the
// campaigns that run many (suite, soak, selftest, shrink, explore, and what they share in
// scenarios/campaign), verdicts and exit codes (checker) and the run directory (reports):
// faults, mutants, process names, durations and the check reach it through those, so there is
// one door to each.
var commandImports = []string{"scenarios", "scenarios/harness", "scenarios/shrink", "scenarios/suite", "scenarios/soak", "scenarios/selftest", "scenarios/explore", "scenarios/campaign", "checker", "reports"}

// TestCommandsOnlyWire fails when a command imports a module package other than
// commandImports.
func TestCommandsOnlyWire(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./cmd/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	for _, line := range lines {
		fields := strings.Fields(line)
		for _, imp := range fields[1:] {
			d, ok := strings.CutPrefix(imp, module+"/")
			if ok && !slices.Contains(commandImports, d) {
				t.Errorf("%s imports %s: commands only wire, through %s", fields[0], d, strings.Join(commandImports, ", "))
			}
		}
	}
	if len(lines) == 0 || lines[0] == "" {
		t.Fatal("no command found under ./cmd")
	}
}
