package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const listOut = `SCENARIO                 CLUSTER   WHAT IT TESTS
black-hole               embedded  The holder's links drop every byte.
chaos                    embedded  A random mix.
isolate-broker           local     Cut one broker.
pipeline-chaos-kafka     embedded  A random mix of Kafka-aware faults on a pipeline.
pipeline-kill-group-coordinator local SIGKILL the group coordinator.
pipeline-steady          embedded  A pipeline with no faults.
steady                   embedded  Handoffs alone.
regression/late-endtxn   embedded  An EndTxn delivered late.
`

func TestCatalogueLeavesOutRandomMixesRegressionsAndOtherClusters(t *testing.T) {
	l := parseList(listOut)
	if got, want := catalogue(l, "lease", "embedded"), []string{"black-hole", "steady"}; !slices.Equal(got, want) {
		t.Errorf("lease catalogue on embedded = %v, want %v", got, want)
	}
	if got, want := catalogue(l, "lease", "local"), []string{"black-hole", "isolate-broker", "steady"}; !slices.Equal(got, want) {
		t.Errorf("lease catalogue on local = %v, want %v", got, want)
	}
	if got, want := catalogue(l, "pipeline", "embedded"), []string{"pipeline-steady"}; !slices.Equal(got, want) {
		t.Errorf("pipeline catalogue on embedded = %v, want %v", got, want)
	}
}

func TestParseMutantsKeysAPipelineMutantThatSharesALeaseName(t *testing.T) {
	out := `ack-fenced           reports a lease write the broker fenced as written
                     must break: no-lost-write (scenario steady)
read-uncommitted     reads at read_uncommitted
                     must break: read-prefix, no-zombie-commit (scenario zombie-reads)
read-uncommitted     polls its input at read_uncommitted
                     must break: eos-read-committed (scenario pipeline-steady)

made for regressions (--transport mutant:NAME accepts them):
no-warm-up           produces a new producer's first record without the warm-up
                     can break: no-lost-write (scenario regression/first-metadata-race)
`
	got := parseMutants(out)
	want := map[string]mutantInfo{
		"ack-fenced":                {"lease", "steady"},
		"read-uncommitted":          {"lease", "zombie-reads"},
		"pipeline:read-uncommitted": {"pipeline", "pipeline-steady"},
		"no-warm-up":                {"lease", "regression/first-metadata-race"},
	}
	if len(got) != len(want) {
		t.Errorf("parsed %d mutants, want %d: %v", len(got), len(want), got)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("mutant %s = %+v, want %+v", k, got[k], w)
		}
	}
}

func TestMedianCountsAMissAsLongerThanAnyFind(t *testing.T) {
	mk := func(found bool, s float64, runs int) attempt {
		return attempt{Found: found, Wall: time.Duration(s * float64(time.Second)), Runs: runs, Budget: 10 * time.Minute, Load: "3.1-7.9"}
	}
	// Three finds of five: the middle one is the third fastest find.
	c := summarize([]attempt{mk(true, 50, 2), mk(false, 600, 20), mk(true, 10, 1), mk(false, 610, 21), mk(true, 30, 1)})
	if !c.ok || c.median != 50*time.Second || c.found != 3 || c.medianRuns != 2 {
		t.Errorf("3 of 5 found: %+v, want median 50 s, 2 runs", c)
	}
	// Two finds of four: the middle pair holds a miss, so there is no median time.
	c = summarize([]attempt{mk(true, 10, 1), mk(true, 20, 1), mk(false, 600, 9), mk(false, 600, 9)})
	if c.ok || !strings.Contains(c.String(), "not reached") {
		t.Errorf("2 of 4 found: %s, want not reached", c)
	}
	// Four of four: the mean of the middle two.
	c = summarize([]attempt{mk(true, 10, 1), mk(true, 20, 2), mk(true, 40, 3), mk(true, 400, 9)})
	if !c.ok || c.median != 30*time.Second || c.medianRuns != 2.5 {
		t.Errorf("4 of 4 found: %+v, want 30 s, 2.5 runs", c)
	}
	if got := c.loadRange(); got != "3–8" {
		t.Errorf("load range %q, want 3–8", got)
	}
}

func TestAttemptsSurviveTheirFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "attempts.tsv")
	in := []attempt{
		{Mutant: "ack-fenced", Method: "explore", Seed: 1000, Found: true, Wall: 31500 * time.Millisecond, Runs: 2,
			Invalid: "run 1: no-lost-write", Verdicts: "exit:1", Budget: 10 * time.Minute, Load: "4.2-5.0", Dir: "/tmp/x"},
		{Mutant: "split-txn", Method: "chaos", Seed: 2000, Wall: 612 * time.Second, Runs: 15, Verdicts: "exit0:14 exit2:1 error: a\tb\nc",
			Budget: 10 * time.Minute, Load: "9-12", Dir: "/tmp/y"},
	}
	for _, a := range in {
		if err := appendAttempt(path, a); err != nil {
			t.Fatal(err)
		}
	}
	out, err := readAttempts(path)
	if err != nil {
		t.Fatal(err)
	}
	in[1].Verdicts = "exit0:14 exit2:1 error: a b c" // a tab or a line break would split the row
	if !slices.Equal(out, in) {
		t.Errorf("read back %+v, want %+v", out, in)
	}
	var b strings.Builder
	writeTable(&b, out)
	for _, want := range []string{"| ack-fenced | - | 1/1, 32 s (2 runs) | 4–5 |", "| split-txn | 0/1, not reached (10m0s) | - | 9–12 |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

func TestParseNamesTheBadFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--mutants", "x"}, "--out"},
		{[]string{"--out", "d"}, "--mutants"},
		{[]string{"--out", "d", "--mutants", "x", "--methods", "fuzz"}, "--methods"},
		{[]string{"--out", "d", "--mutants", "x", "--seeds", "0"}, "--seeds"},
		{[]string{"--out", "d", "--mutants", "x", "--budget", "0s"}, "--budget"},
		{[]string{"--out", "d", "--mutants", "x", "--parallel", "0"}, "--parallel"},
		{[]string{"--table"}, "--table"},
	} {
		_, err := parse(c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("parse(%q) = %v, want an error naming %s", c.args, err, c.want)
		}
	}
}
