package explore

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/internal/testenv"
	"github.com/fencecheck/fencecheck/scenarios"
)

// small is steady, shrunk to a few seconds and processes: the search's real runs in make test.
func small(t *testing.T, d time.Duration) *scenarios.Scenario {
	s := steady(t)
	s.Workload.Processes, s.Workload.Roles, s.Workload.MembersPerRole = 4, 2, 2
	s.Duration = scenarios.Duration(d)
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRealRunsFeedback runs a search of two real runs on the embedded cluster: the first,
// without faults, is kept with the answers the links observed (EndTxn and InitProducerId
// answered), its operations and their outcomes, and every promise judged; both runs'
// directories, the corpus file and the summary are written.
func TestRealRunsFeedback(t *testing.T) {
	if testing.Short() {
		t.Skip("runs scenarios")
	}
	t.Parallel()
	out := t.TempDir()
	res, err := Run(context.Background(), small(t, 6*time.Second), Options{Out: out, Runs: 2, Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	first := firstOfTwo(t, res, "answer endtxn NONE", "answer initproducerid NONE", "op acquire ok", "op work ok",
		"promise handoff kept", "check fenced-stale-write valid")
	if !slices.ContainsFunc(first.New, func(s string) bool { return strings.HasPrefix(s, "promise zombie-fenced") }) {
		t.Errorf("the first run's tuples judge no zombie-fenced promise, which steady does not make: %v", first.New)
	}
	for _, r := range res.Runs {
		if _, err := os.Stat(filepath.Join(r.Dir, "results.json")); err != nil {
			t.Errorf("run %d's directory: %v", r.N, err)
		}
	}
	for _, f := range []string{summaryFile, resultFile, filepath.Join(corpusDir, "steady-e0.yaml")} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("output %s: %v", f, err)
		}
	}
}

// TestRealPipelineRunsFeedback runs a search of two real pipeline runs on the embedded
// cluster: the first, without faults, is kept with the pipeline's own answers
// (TxnOffsetCommit, AddOffsetsToTxn, the group's JoinGroup), its transactions and the
// exactly-once checks' verdicts; the second's schedule holds no broker fault (the menu of a
// pipeline on kfake) and its feedback names its faults.
func TestRealPipelineRunsFeedback(t *testing.T) {
	if testing.Short() {
		t.Skip("runs scenarios")
	}
	t.Parallel()
	s, err := scenarios.Find("pipeline-steady")
	if err != nil {
		t.Fatal(err)
	}
	s.Duration = scenarios.Duration(6 * time.Second)
	res, err := Run(context.Background(), s, Options{Out: t.TempDir(), Runs: 2, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	firstOfTwo(t, res, "answer txnoffsetcommit NONE", "answer addoffsetstotxn NONE", "answer joingroup NONE",
		"op txn ok", "check eos-no-duplicate valid", "promise final-read kept")
	second := res.Runs[1]
	if len(second.Schedule) == 0 {
		t.Fatal("the second run had no faults")
	}
	for _, line := range second.Schedule {
		for _, k := range []string{" kill ", " pause ", " restart ", " isolate "} {
			if strings.Contains(line, k) {
				t.Errorf("the second run's step %q: no broker fault on a pipeline on kfake", line)
			}
		}
	}
	var faults int
	for _, tu := range res.Tuples {
		if strings.HasPrefix(tu.Tuple, "fault ") && tu.Run == 1 {
			faults++
		}
	}
	if faults == 0 {
		t.Errorf("the second run's feedback names none of its faults (schedule %q)", second.Schedule)
	}
}

// TestExploreFindsUnknownCommitFails: from steady, with no scripted faults, explore finds the
// mutant that reports a commit of unknown outcome as failed, which only a lost or late EndTxn
// answer shows. Bounded by runs, not time: how fast it finds it is a measurement
// (docs/measurements.md), not a test.
func TestExploreFindsUnknownCommitFails(t *testing.T) {
	testenv.Long(t)
	out := t.TempDir()
	res, err := Run(context.Background(), steady(t), Options{Out: out, Runs: 120, Seed: 1000,
		Transport: "mutant:unknown-commit-fails", Progress: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Invalid == nil {
		t.Fatalf("no invalid run in %d runs (stopped: %s)", len(res.Runs), res.Stopped)
	}
	if !slices.Contains(res.Invalid.Broken, checker.NoZombieCommit) && !slices.Contains(res.Invalid.Broken, checker.NoLostWrite) {
		t.Errorf("the invalid run broke %v: want no-zombie-commit or no-lost-write", res.Invalid.Broken)
	}
}

// testWriter logs each line a search prints.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// firstOfTwo checks that a search stopped by --runs after two runs, the first of which (no
// faults) was kept, valid, and reached each tuple of want; it returns that first run.
func firstOfTwo(t *testing.T, res *Result, want ...string) RunRecord {
	t.Helper()
	if len(res.Runs) != 2 || res.Stopped != StoppedRuns {
		t.Fatalf("%d runs, stopped %q: want 2, stopped by --runs", len(res.Runs), res.Stopped)
	}
	first := res.Runs[0]
	if !first.Kept || first.Verdict != string(checker.VerdictValid) {
		t.Errorf("the run without faults: kept %v, verdict %s: want kept, valid", first.Kept, first.Verdict)
	}
	for _, w := range want {
		if !slices.Contains(first.New, w) {
			t.Errorf("the first run's tuples lack %q: %v", w, first.New)
		}
	}
	return first
}

// TestRealFreezeMakesAZombie runs pipeline-zombie-commit (the owner of input partition 0
// frozen at before-commit for 4.5 s, past the 3 s session timeout) on the embedded cluster as
// explore runs a schedule, and reads its feedback: the freeze took hold, as the fault freeze
// before-commit, and made a zombie (another member fetched partition 0's offsets). Before,
// explore skipped the member-pause window a freeze is recorded as, and a pipeline search
// never saw a freeze take hold.
func TestRealFreezeMakesAZombie(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a scenario")
	}
	t.Parallel()
	s, err := scenarios.Find("pipeline-zombie-commit")
	if err != nil {
		t.Fatal(err)
	}
	s.Duration = scenarios.Duration(12 * time.Second)
	obs, err := realRun(Options{Out: t.TempDir(), Transport: "real"})(context.Background(), s, 7)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"fault freeze before-commit took-hold", "state zombie freeze before-commit"} {
		if !obs.Tuples[want] {
			t.Errorf("no %q in the feedback (verdict %s, run %s): %q", want, obs.Verdict, obs.Dir, obs.Tuples.sorted())
		}
	}
}
