//go:build !kafka

package scenarios_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/checker/checkertest"
	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/reports"
	"github.com/fencecheck/fencecheck/scenarios/harness"
)

// storedRun writes a run directory as a run leaves it: run.json and a correct history.
func storedRun(t *testing.T, interrupted bool) reports.Dir {
	t.Helper()
	dir, err := reports.NewDir(t.TempDir(), "unit", time.Now(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := dir.WriteRunInfo(&reports.RunInfo{Scenario: "unit", Seed: 3, Interrupted: interrupted}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(dir.History())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := history.Encode(f, checkertest.Generate(checkertest.DefaultConfig(), rand.New(rand.NewPCG(1, 2)))); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestCheckStoredRun: re-checking a stored run gives what the run gave. An interrupted run
// stays inconclusive (run.json says it was interrupted), harness failures make it error, and
// every output file is written.
func TestCheckStoredRun(t *testing.T) {
	tests := []struct {
		name        string
		interrupted bool
		harness     []error
		want        checker.Verdict
		wantErr     string
	}{
		{name: "complete run - valid", want: checker.VerdictValid},
		{name: "interrupted run - inconclusive", interrupted: true, want: checker.VerdictInconclusive, wantErr: "interrupted"},
		{name: "harness failure - error", harness: []error{errors.New("heal: boom")}, want: checker.VerdictError, wantErr: "heal: boom"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := storedRun(t, tc.interrupted)
			res, err := harness.Check(context.Background(), dir, harness.CheckOptions{Harness: tc.harness})
			if err != nil {
				t.Fatal(err)
			}
			if res.Verdict != tc.want || res.ExitCode != checker.ExitCode(tc.want) || !strings.Contains(res.Error, tc.wantErr) {
				t.Fatalf("verdict %s (exit %d, error %q), want %s (error containing %q)", res.Verdict, res.ExitCode, res.Error, tc.want, tc.wantErr)
			}
			stored, err := checker.ReadResultsFile(dir.Results())
			if err != nil || stored.Verdict != tc.want {
				t.Fatalf("results.json: %v, verdict %v; want %s", err, stored, tc.want)
			}
			for _, f := range []string{dir.Report(), dir.JUnit()} {
				if _, err := os.Stat(f); err != nil {
					t.Errorf("not written: %v", err)
				}
			}
		})
	}
}

// TestCheckUnreadableHistory: a history that cannot be read is a harness error, written to
// results.json, unless the run failed before it had one.
func TestCheckUnreadableHistory(t *testing.T) {
	dir := storedRun(t, false)
	if err := os.WriteFile(dir.History(), []byte("not json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := harness.Check(context.Background(), dir, harness.CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != checker.VerdictError || !strings.Contains(res.Error, "line 1") {
		t.Fatalf("verdict %s, error %q; want error naming line 1", res.Verdict, res.Error)
	}
	if err := os.Remove(dir.History()); err != nil {
		t.Fatal(err)
	}
	res, err = harness.Check(context.Background(), dir, harness.CheckOptions{Harness: []error{errors.New("cluster up: no jars")}, NoHistory: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != checker.VerdictError || res.Error != "cluster up: no jars" {
		t.Fatalf("verdict %s, error %q; want error with only the cluster's reason", res.Verdict, res.Error)
	}
}

// TestCheckUnreadableRunInfo: a damaged run.json still gives results (the error verdict, naming
// it), never none.
func TestCheckUnreadableRunInfo(t *testing.T) {
	dir := storedRun(t, false)
	if err := os.WriteFile(dir.RunJSON(), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := harness.Check(context.Background(), dir, harness.CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res == nil || res.Verdict != checker.VerdictError || !strings.Contains(res.Error, "run.json") {
		t.Fatalf("results %+v, want the error verdict naming run.json", res)
	}
}
