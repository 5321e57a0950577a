package selftest

import (
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/checker"
)

// TestRowJudgesAndTimes: a mutant's run counts as caught only on one of its
// guarantees; its time to detect is the earliest FirstAt of the checks it broke; the median
// of an even count is the mean of the middle two.
func TestRowJudgesAndTimes(t *testing.T) {
	run := func(checks ...checker.Result) *checker.Results {
		return &checker.Results{Verdict: checker.VerdictInvalid, Checks: checks}
	}
	bad := func(name string, at time.Duration) checker.Result {
		return checker.Result{Name: name, Verdict: checker.VerdictInvalid, FirstAt: int64(at)}
	}
	r := &Row{transport: "mutant:x", guarantees: []string{checker.NoLostWrite}}
	if ok, why := r.add(run(bad(checker.ReadPrefix, time.Second))); ok {
		t.Errorf("caught on a guarantee the mutant does not name: %s", why)
	}
	r.add(run(bad(checker.NoLostWrite, 4*time.Second), bad(checker.ReadPrefix, 2*time.Second)))
	r.add(run(bad(checker.NoLostWrite, 6*time.Second)))
	advisory := bad(checker.SpuriousFence, time.Millisecond)
	advisory.Advisory = true
	r.add(run(bad(checker.NoLostWrite, 3*time.Second), advisory))
	if r.tried != 4 || r.caught != 3 {
		t.Errorf("tried %d caught %d, want 4 and 3", r.tried, r.caught)
	}
	// Detect times 2 s (read-prefix came first), 6 s, 3 s: the advisory check does not count.
	if got := r.median(); got != "3s" {
		t.Errorf("median %s, want 3s", got)
	}
	r.add(run(bad(checker.NoLostWrite, 5*time.Second)))
	if got := r.median(); got != "4s" {
		t.Errorf("median of 2s 3s 5s 6s = %s, want 4s", got)
	}
	if got := (&Row{}).median(); got != "-" {
		t.Errorf("median with no times = %s, want -", got)
	}
}
