//go:build kafka

package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencecheck/fencecheck/internal/testenv"
)

// TestSuiteLocalKafka runs a suite on a local Apache Kafka cluster: steady with a mutant
// transport (invalid) and holder-partition with the real one, both on one cluster started once
// and shared; exit 1, and index and JUnit point at the failing cell.
func TestSuiteLocalKafka(t *testing.T) {
	testenv.NeedKafka(t, "starts a Kafka cluster")
	bin := buildBinary(t)
	file := writeSuite(t, `name: kafka
budget: 10m
duration: 6s
scenarios: [steady, holder-partition]
systems: [{name: kafka, cluster: local}]
cells:
  - {scenario: steady, transport: "mutant:local-join-seq"}
`)
	out := filepath.Join(t.TempDir(), "suite")
	b, err := exec.Command(bin, "suite", file, "--out", out).CombinedOutput()
	if code := exitCode(t, err); code != 1 {
		t.Fatalf("exit %d, want 1; output:\n%s", code, b)
	}
	checkFailingCell(t, out, "steady", "kafka")
	for _, c := range readSuite(t, out).Cells {
		if c.Cluster != "shared kafka#1" {
			t.Errorf("%s ran on cluster %q, want the one shared cluster", c.Scenario, c.Cluster)
		}
	}
	if strings.Count(string(b), "starting shared cluster") != 1 {
		t.Errorf("want one cluster start:\n%s", b)
	}
}
