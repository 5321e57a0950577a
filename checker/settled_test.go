package checker_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/checker/history"
)

// TestSettledReadMustReturnTheWholeLog: after the final read of a log returned, nothing is
// written: a read then must return all of it. p1's read (op 5) returns one of two records:
// invalid. p2 came back short once and then whole: its last read counts, so it is not an
// anomaly; nor is p3's short read during the run (op 3), an earlier prefix.
func TestSettledReadMustReturnTheWholeLog(t *testing.T) {
	h, err := history.Read(strings.NewReader(`{"type":"header","time":0,"format":1,"meta":{"scenario":"golden","lease_ns":100,"transaction_version":1}}
{"type":"invoke","id":1,"time":10,"client":1,"process":"p1","member":"m1","role":"leader","kind":"register"}
{"type":"ok","id":1,"time":12,"result":{"offset":0}}
{"type":"invoke","id":2,"time":20,"client":2,"process":"p2","member":"m2","role":"leader","kind":"register"}
{"type":"ok","id":2,"time":22,"result":{"offset":1}}
{"type":"invoke","id":3,"time":23,"client":3,"process":"p3","role":"leader","kind":"read"}
{"type":"ok","id":3,"time":24,"result":{"records":[{"offset":0,"kind":"registration","member":"m1"}]}}
{"type":"invoke","id":4,"time":100,"client":94,"process":"final","kind":"final-read","role":"leader"}
{"type":"ok","id":4,"time":105,"result":{"records":[{"offset":0,"kind":"registration","member":"m1"},{"offset":1,"kind":"registration","member":"m2"}]}}
{"type":"invoke","id":5,"time":110,"client":4,"process":"p1","role":"leader","kind":"read"}
{"type":"ok","id":5,"time":112,"result":{"records":[{"offset":0,"kind":"registration","member":"m1"}]}}
{"type":"invoke","id":6,"time":110,"client":5,"process":"p2","role":"leader","kind":"read"}
{"type":"ok","id":6,"time":111,"result":{"records":[{"offset":0,"kind":"registration","member":"m1"}]}}
{"type":"invoke","id":7,"time":120,"client":5,"process":"p2","role":"leader","kind":"read"}
{"type":"ok","id":7,"time":121,"result":{"records":[{"offset":0,"kind":"registration","member":"m1"},{"offset":1,"kind":"registration","member":"m2"}]}}
`))
	if err != nil {
		t.Fatal(err)
	}
	res := check(t, h, checker.Options{})
	r := res.Check(checker.ReadPrefix)
	if r.Verdict != checker.VerdictInvalid || len(r.Anomalies) != 1 {
		t.Fatalf("read-prefix %s with anomalies %+v, want invalid with one", r.Verdict, r.Anomalies)
	}
	a := r.Anomalies[0]
	if !slices.Equal(a.Ops, []int64{5, 4}) || !slices.Equal(a.Offsets, []int64{1}) {
		t.Errorf("anomaly ops %v offsets %v, want [5 4] and the first missing offset [1]", a.Ops, a.Offsets)
	}
	if r.FirstAt != 112 {
		t.Errorf("FirstAt %d, want 112 (read op 5 returned)", r.FirstAt)
	}
	for _, c := range res.Checks {
		if c.Name != checker.ReadPrefix && c.Verdict == checker.VerdictInvalid {
			t.Errorf("%s invalid: %+v", c.Name, c.Anomalies)
		}
	}
}
