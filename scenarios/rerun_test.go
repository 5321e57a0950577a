//go:build !kafka

package scenarios_test

import (
	"testing"

	"github.com/fencecheck/fencecheck/checker"
)

// TestCoverageOnly: only a run whose checks all held (or had nothing to judge) and that missed
// a promise is run again;
// an invalid or unknown check, a harness error or a valid run is judged as it is.
func TestCoverageOnly(t *testing.T) {
	ok := checker.Result{Name: "fenced-stale-write", Verdict: checker.VerdictValid}
	bad := checker.Result{Name: "fenced-stale-write", Verdict: checker.VerdictInvalid}
	unknown := checker.Result{Name: "log-token-order", Verdict: checker.VerdictUnknown}
	advisory := checker.Result{Name: "spurious-fence", Verdict: checker.VerdictInvalid, Advisory: true}
	notCovered := checker.Result{Name: "eos-fold", Verdict: checker.VerdictNotCovered}
	missedHold := checker.Result{Name: "fault-took-hold", Verdict: checker.VerdictInconclusive}
	held := checker.Result{Name: "fault-took-hold", Verdict: checker.VerdictValid}
	cases := []struct {
		name string
		res  *checker.Results
		want bool
	}{
		{"a promise missed", &checker.Results{Verdict: checker.VerdictInconclusive, Checks: []checker.Result{ok, advisory}, Coverage: []checker.Result{missedHold}}, true},
		{"a promise missed, a check not covered", &checker.Results{Verdict: checker.VerdictInconclusive, Checks: []checker.Result{ok, notCovered}, Coverage: []checker.Result{missedHold}}, true},
		{"valid", &checker.Results{Verdict: checker.VerdictValid, Checks: []checker.Result{ok}, Coverage: []checker.Result{held}}, false},
		{"invalid", &checker.Results{Verdict: checker.VerdictInvalid, Checks: []checker.Result{bad}, Coverage: []checker.Result{missedHold}}, false},
		{"unknown check", &checker.Results{Verdict: checker.VerdictInconclusive, Checks: []checker.Result{unknown}, Coverage: []checker.Result{missedHold}}, false},
		{"harness error", &checker.Results{Verdict: checker.VerdictInconclusive, Error: "history: truncated", Checks: []checker.Result{ok}, Coverage: []checker.Result{missedHold}}, false},
		{"no results", nil, false},
	}
	for _, tc := range cases {
		if got := coverageOnly(tc.res); got != tc.want {
			t.Errorf("%s: coverageOnly %v, want %v", tc.name, got, tc.want)
		}
	}
}
