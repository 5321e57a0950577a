package checker_test

import (
	"slices"
	"testing"

	"github.com/fencecheck/fencecheck/checker"
)

// TestNotValid: the lines that say why a run is not valid name every non-advisory check and
// coverage requirement that did not pass, and the first line of a harness error, and nothing
// for a valid run.
func TestNotValid(t *testing.T) {
	res := &checker.Results{
		Checks: []checker.Result{
			{Name: checker.NoLostWrite, Verdict: checker.VerdictInvalid},
			{Name: checker.TokenMonotonic, Verdict: checker.VerdictValid},
			{Name: "advice", Verdict: checker.VerdictInvalid, Advisory: true},
		},
		Coverage: []checker.Result{{Name: "handoff", Verdict: checker.VerdictInconclusive}},
		Error:    "cluster down\nstack of details",
	}
	want := []string{"no-lost-write: invalid", "handoff: inconclusive", "error: cluster down"}
	if got := res.NotValid(); !slices.Equal(got, want) {
		t.Errorf("NotValid() = %q, want %q", got, want)
	}
	if got := (&checker.Results{Checks: []checker.Result{{Name: checker.NoLostWrite, Verdict: checker.VerdictValid}}}).NotValid(); len(got) != 0 {
		t.Errorf("a valid run: NotValid() = %q, want nothing", got)
	}
}
