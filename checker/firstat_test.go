package checker_test

import (
	"testing"

	"github.com/fencecheck/fencecheck/checker"
)

// TestFirstAtIsWhenTheFirstViolationWasObservable: a check's FirstAt is the completion of the
// last operation (final reads aside) of its earliest anomaly. Write op 3 is acknowledged at 32
// and missing from the final log read at 105: no-lost-write was first violated at 32.
func TestFirstAtIsWhenTheFirstViolationWasObservable(t *testing.T) {
	res := check(t, golden(t, "no-lost-write--invalid--acknowledged-lease-missing"), checker.Options{})
	if got := res.Check(checker.NoLostWrite).FirstAt; got != 32 {
		t.Errorf("no-lost-write FirstAt = %d, want 32", got)
	}
	for _, c := range res.Checks {
		if c.Verdict == checker.VerdictValid && c.FirstAt != 0 {
			t.Errorf("valid check %s has FirstAt %d", c.Name, c.FirstAt)
		}
	}
}
