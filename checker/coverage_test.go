package checker_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/checker/history"
)

// TestFaultTookHoldNamesTheStepsThatMissed checks what the golden histories cannot pin: the
// result names each scripted step that never took hold by its number and line, and says why.
func TestFaultTookHoldNamesTheStepsThatMissed(t *testing.T) {
	for _, tc := range []struct {
		golden string
		want   string
	}{
		{"fault-took-hold--inconclusive--scripted-step-never-held",
			`step 1 "at 30ns freeze holder of leader with point=before-lease-commit for 40ns": injected as fault 1 but never took hold`},
		{"fault-took-hold--inconclusive--scripted-step-never-injected",
			`step 2 "at 150ns kill coordinator of leader for 20ns": never injected`},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			h, err := history.ReadFile(filepath.Join("testdata", tc.golden+".jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			res, err := checker.Check(context.Background(), h, checker.Options{})
			if err != nil {
				t.Fatal(err)
			}
			r := res.Check(checker.CoverFaultTookHold)
			if r == nil || r.Verdict != checker.VerdictInconclusive {
				t.Fatalf("fault-took-hold: %+v, want inconclusive", r)
			}
			missed, _ := r.Details["missed"].([]string)
			if len(missed) != 1 || !strings.HasPrefix(missed[0], tc.want) {
				t.Fatalf("missed %q, want one entry starting %q", missed, tc.want)
			}
			if r.Details["steps"] != 2 || r.Details["steps_held"] != 1 {
				t.Fatalf("details %v: want 2 steps, 1 held", r.Details)
			}
		})
	}
}

// TestAScheduleRequiresFaultTookHoldWithoutAPromise: a history whose header names a fault
// schedule is judged on fault-took-hold even when the scenario did not promise it.
func TestAScheduleRequiresFaultTookHoldWithoutAPromise(t *testing.T) {
	h, err := history.ReadFile(filepath.Join("testdata", "fault-took-hold--inconclusive--random-faults-all-missed.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(h.Meta.Promises, checker.CoverFaultTookHold) {
		t.Fatal("the history promises fault-took-hold: pick one that does not")
	}
	res, err := checker.Check(context.Background(), h, checker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Check(checker.CoverFaultTookHold); r == nil || r.Verdict != checker.VerdictInconclusive || res.Verdict != checker.VerdictInconclusive {
		t.Fatalf("fault-took-hold %+v, run %s: want both inconclusive", r, res.Verdict)
	}
	h.Meta.Schedule = ""
	res, err = checker.Check(context.Background(), h, checker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Check(checker.CoverFaultTookHold); r != nil {
		t.Fatalf("without a schedule or a promise, fault-took-hold is judged: %+v", r)
	}
}
