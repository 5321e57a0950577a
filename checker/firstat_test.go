package checker_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/checker/history"
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

// TestDuplicateRegistrationNamesTheRegistration: a member registered once with two records in
// the final log is an anomaly that names its registration, not only the final read, so it has
// a time (when the registration returned).
func TestDuplicateRegistrationNamesTheRegistration(t *testing.T) {
	h, err := history.Read(strings.NewReader(`{"type":"header","time":0,"format":1,"meta":{"scenario":"golden","lease_ns":100,"transaction_version":1}}
{"type":"invoke","id":1,"time":10,"client":1,"process":"p1","member":"m1","role":"leader","kind":"register"}
{"type":"ok","id":1,"time":12,"result":{"offset":1}}
{"type":"invoke","id":4,"time":100,"client":94,"process":"final","kind":"final-read","role":"leader"}
{"type":"ok","id":4,"time":105,"result":{"records":[{"offset":0,"kind":"registration","member":"m1"},{"offset":1,"kind":"registration","member":"m1"}]}}
`))
	if err != nil {
		t.Fatal(err)
	}
	r := check(t, h, checker.Options{}).Check(checker.RegistrationOrder)
	if r.Verdict != checker.VerdictInvalid || len(r.Anomalies) != 1 {
		t.Fatalf("registration-order %s with %d anomalies, want invalid with 1: %+v", r.Verdict, len(r.Anomalies), r.Anomalies)
	}
	if ops := r.Anomalies[0].Ops; !slices.Equal(ops, []int64{1, 4}) {
		t.Errorf("anomaly ops %v, want the registration and the final read [1 4]", ops)
	}
	if r.FirstAt != 12 {
		t.Errorf("FirstAt = %d, want 12", r.FirstAt)
	}
}
