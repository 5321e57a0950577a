package checker_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/checker/history"
)

// tornHistory is a run of two roles sharing work partition 0: r1's holder writes w3, a work
// write of three records in one transaction, and r2's holder w6, a write of one record whose
// transaction interleaves with w3's, so the partition reads
//
//	offset 0  w3 record 0
//	offset 1  w6
//	offset 2  w3 record 1
//	offset 3  w3 record 2
//
// final is the final read's records of work:0 and reads the records of reads of it, each a
// list of "w3/0"-style names (a record of w3 with its index; "w6" for w6's); a name may be
// followed by "@N" to place it at offset N instead of where the table above puts it, and a
// record of w3 by "ofN" to name a count of N. A read whose first name is "settled" is invoked
// after the final read returned, by process p9. outcome is w3's completion ("ok", "fail",
// "info").
func tornHistory(t *testing.T, outcome string, final []string, reads ...[]string) *history.History {
	t.Helper()
	offsets := map[string]int{"w3/0": 0, "w6": 1, "w3/1": 2, "w3/2": 3}
	record := func(name string) string {
		name, at, placed := strings.Cut(name, "@")
		base, _, _ := strings.Cut(name, "of")
		off := offsets[base]
		if placed {
			fmt.Sscan(at, &off)
		}
		if name == "w6" {
			return fmt.Sprintf(`{"offset":%d,"kind":"work","member":"m1","role":"r2","token":{"producer_id":8,"epoch":0},"write_id":"w6"}`, off)
		}
		var i, n int = 0, 3
		if _, err := fmt.Sscanf(name, "w3/%d", &i); err != nil {
			t.Fatalf("record %q", name)
		}
		if idx, count, ok := strings.Cut(strings.TrimPrefix(name, "w3/"), "of"); ok { // "w3/1of2": a misfit
			fmt.Sscan(idx, &i)
			fmt.Sscan(count, &n)
		}
		return fmt.Sprintf(`{"offset":%d,"kind":"work","member":"m1","role":"r1","token":{"producer_id":7,"epoch":0},"write_id":"w3","index":%d,"count":%d}`, off, i, n)
	}
	records := func(names []string) string {
		var parts []string
		for _, n := range names {
			parts = append(parts, record(n))
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	completion := `{"type":"ok","id":3,"time":40}`
	switch outcome {
	case "fail":
		completion = `{"type":"fail","id":3,"time":40,"error":"fenced"}`
	case "info":
		completion = `{"type":"info","id":3,"time":40,"error":"timeout"}`
	}
	lines := []string{
		`{"type":"header","time":0,"format":1,"meta":{"scenario":"torn","lease_ns":1000000000,"transaction_version":2}}`,
		`{"type":"invoke","id":1,"time":10,"client":1,"process":"p1","member":"m1","role":"r1","kind":"register"}`,
		`{"type":"ok","id":1,"time":11,"result":{"offset":0}}`,
		`{"type":"invoke","id":2,"time":12,"client":1,"process":"p1","member":"m1","role":"r1","kind":"acquire"}`,
		`{"type":"ok","id":2,"time":13,"result":{"token":{"producer_id":7,"epoch":0}}}`,
		`{"type":"invoke","id":3,"time":20,"client":1,"process":"p1","member":"m1","role":"r1","kind":"work","args":{"token":{"producer_id":7,"epoch":0},"write_id":"w3","work_partition":0,"records":3}}`,
		completion,
		`{"type":"invoke","id":4,"time":10,"client":2,"process":"p2","member":"m1","role":"r2","kind":"register"}`,
		`{"type":"ok","id":4,"time":11,"result":{"offset":0}}`,
		`{"type":"invoke","id":5,"time":12,"client":2,"process":"p2","member":"m1","role":"r2","kind":"acquire"}`,
		`{"type":"ok","id":5,"time":13,"result":{"token":{"producer_id":8,"epoch":0}}}`,
		`{"type":"invoke","id":6,"time":21,"client":2,"process":"p2","member":"m1","role":"r2","kind":"work","args":{"token":{"producer_id":8,"epoch":0},"write_id":"w6","work_partition":0}}`,
		`{"type":"ok","id":6,"time":45}`,
	}
	id, now := 10, 50
	var settled []string
	for _, r := range reads {
		if len(r) > 0 && r[0] == "settled" {
			settled = append(settled, records(r[1:]))
			continue
		}
		lines = append(lines,
			fmt.Sprintf(`{"type":"invoke","id":%d,"time":%d,"client":3,"process":"p3","kind":"read","args":{"work_partition":0}}`, id, now),
			fmt.Sprintf(`{"type":"ok","id":%d,"time":%d,"result":{"records":%s}}`, id, now+1, records(r)))
		id, now = id+1, now+2
	}
	reg := `[{"offset":0,"kind":"registration","member":"m1"}]`
	lines = append(lines,
		`{"type":"invoke","id":100,"time":100,"client":9,"process":"final","role":"r1","kind":"final-read"}`,
		`{"type":"ok","id":100,"time":101,"result":{"records":`+reg+`}}`,
		`{"type":"invoke","id":101,"time":100,"client":10,"process":"final","role":"r2","kind":"final-read"}`,
		`{"type":"ok","id":101,"time":101,"result":{"records":`+reg+`}}`,
		`{"type":"invoke","id":102,"time":100,"client":11,"process":"final","kind":"final-read","args":{"work_partition":0}}`,
		`{"type":"ok","id":102,"time":102,"result":{"records":`+records(final)+`}}`,
	)
	for i, recs := range settled {
		lines = append(lines,
			fmt.Sprintf(`{"type":"invoke","id":%d,"time":%d,"client":12,"process":"p9","kind":"read","args":{"work_partition":0}}`, 110+i, 110+2*i),
			fmt.Sprintf(`{"type":"ok","id":%d,"time":%d,"result":{"records":%s}}`, 110+i, 111+2*i, recs))
	}
	h, err := history.Read(strings.NewReader(strings.Join(lines, "\n") + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

var whole = []string{"w3/0", "w6", "w3/1", "w3/2"}

func tornResult(t *testing.T, res *checker.Results) *checker.Result {
	t.Helper()
	r := res.Check(checker.NoTornTxn)
	if r == nil {
		t.Fatal("no check named no-torn-txn")
	}
	return r
}

// TestNoTornTxn: a committed read shows all of a transaction's records or none, except that a
// read may stop inside one at the last stable offset (a prefix of the log).
func TestNoTornTxn(t *testing.T) {
	tests := []struct {
		name    string
		outcome string
		final   []string
		reads   [][]string
		// torn are the anomalies' ops, one list each; also says which other checks must fail.
		torn  [][]int64
		other []string
	}{
		{name: "whole in the final log", outcome: "ok", final: whole},
		{
			// w6's transaction was open at offset 1 when the first two reads ran: the last
			// stable offset stopped them inside w3, whose commit was already written.
			name: "reads stopped by the last stable offset inside a committed transaction", outcome: "ok", final: whole,
			reads: [][]string{{}, {"w3/0"}, {"w3/0", "w6"}, {"w3/0", "w6", "w3/1"}, whole},
		},
		{name: "part in the final log", outcome: "ok", final: []string{"w3/0", "w6", "w3/1"}, torn: [][]int64{{3, 102}}},
		{name: "part of a failed write in the final log", outcome: "fail", final: []string{"w3/0", "w6"},
			torn: [][]int64{{3, 102}}, other: []string{checker.NoZombieCommit}},
		{name: "part of an unknown write in the final log", outcome: "info", final: []string{"w6", "w3/2"}, torn: [][]int64{{3, 102}}},
		{
			name: "a read skips a record below its last", outcome: "ok", final: whole,
			reads: [][]string{{"w3/0", "w6", "w3/2"}}, torn: [][]int64{{3, 10}}, other: []string{checker.ReadPrefix},
		},
		{
			name: "a read skips the first record", outcome: "ok", final: whole,
			reads: [][]string{{"w6", "w3/1"}}, torn: [][]int64{{3, 10}}, other: []string{checker.ReadPrefix},
		},
		{
			// Not in the final log at all (an open transaction read uncommitted): only the
			// order of the write's own records says record 1 lies below record 2.
			name: "a read of a write that never committed skips one of its records", outcome: "fail", final: []string{"w6"},
			reads: [][]string{{"w3/0", "w6", "w3/2"}}, torn: [][]int64{{3, 10}}, other: []string{checker.ReadPrefix, checker.NoZombieCommit},
		},
		{
			// The same read without the skip: records of an open transaction, read
			// uncommitted, are read-prefix's and no-zombie-commit's, not a torn transaction.
			name: "a read of a write that never committed, in order", outcome: "fail", final: []string{"w6"},
			reads: [][]string{{"w3/0", "w6"}}, other: []string{checker.ReadPrefix, checker.NoZombieCommit},
		},
		{
			name: "a settled read stops inside a transaction", outcome: "ok", final: whole,
			reads: [][]string{{"settled", "w3/0", "w6"}}, torn: [][]int64{{3, 110}}, other: []string{checker.ReadPrefix},
		},
		{
			name: "a settled read came back short, then whole", outcome: "ok", final: whole,
			reads: [][]string{{"settled", "w3/0", "w6"}, append([]string{"settled"}, whole...)},
		},
		{
			name: "a record names a count its write did not carry", outcome: "ok", final: []string{"w3/0", "w6", "w3/1", "w3/2of4"},
			torn: [][]int64{{3, 102}, {3, 102}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := check(t, tornHistory(t, tt.outcome, tt.final, tt.reads...), checker.Options{})
			r := tornResult(t, res)
			var got [][]int64
			for _, a := range r.Anomalies {
				got = append(got, a.Ops)
				if a.Guarantee != checker.NoTornTxn || !strings.HasSuffix(a.Explanation, ".") || a.Log != "work:0" {
					t.Errorf("anomaly %+v", a)
				}
			}
			want := checker.VerdictValid
			if len(tt.torn) > 0 {
				want = checker.VerdictInvalid
			}
			if r.Verdict != want || !slices.EqualFunc(got, tt.torn, slices.Equal) {
				t.Fatalf("no-torn-txn %s with anomalies %v, want %s with %v: %s", r.Verdict, got, want, tt.torn, describe(*r))
			}
			for _, c := range res.Checks {
				if c.Name != checker.NoTornTxn && c.Name != checker.SpuriousFence && (c.Verdict == checker.VerdictInvalid) != slices.Contains(tt.other, c.Name) {
					t.Errorf("%s is %s: %s", c.Name, c.Verdict, describe(c))
				}
			}
			if len(tt.torn) == 0 && len(tt.other) == 0 && res.Verdict != checker.VerdictValid {
				t.Errorf("run is %s, want valid", res.Verdict)
			}
		})
	}
}

// TestTornTxnDetailsAndFirstAt: the anomaly of a transaction torn in the final log names the
// records the log holds and the missing ones, and becomes observable when the write
// completed (the final read is the reference, not part of the violation).
func TestTornTxnDetailsAndFirstAt(t *testing.T) {
	res := check(t, tornHistory(t, "ok", []string{"w3/0", "w6", "w3/2"}), checker.Options{})
	r := tornResult(t, res)
	if len(r.Anomalies) != 1 {
		t.Fatalf("anomalies %+v", r.Anomalies)
	}
	a := r.Anomalies[0]
	if !slices.Equal(a.Offsets, []int64{0, 3}) || !strings.Contains(a.Explanation, "holds records 0, 2 of write \"w3\"") ||
		!strings.Contains(a.Explanation, "not 1") || a.Role != "r1" {
		t.Errorf("anomaly %+v", a)
	}
	if r.FirstAt != 40 {
		t.Errorf("FirstAt %d, want 40 (w3 completed)", r.FirstAt)
	}
	if res.Check(checker.NoLostWrite).Verdict != checker.VerdictValid {
		t.Errorf("no-lost-write %+v: a torn transaction is no-torn-txn's", res.Check(checker.NoLostWrite))
	}
}

// TestNoTornTxnNotCoveredWithoutSeveralRecords: a history whose writes carry one record each
// never exercises the guarantee: not-covered, not a pass.
func TestNoTornTxnNotCoveredWithoutSeveralRecords(t *testing.T) {
	res := check(t, golden(t, "token-monotonic--valid--handoff-tv1"), checker.Options{})
	r := tornResult(t, res)
	if r.Verdict != checker.VerdictNotCovered || !strings.Contains(fmt.Sprint(r.Details["not_covered"]), "work_records") {
		t.Fatalf("no-torn-txn %s %v, want not-covered saying why", r.Verdict, r.Details)
	}
	if res.Verdict != checker.VerdictValid {
		t.Fatalf("run %s, want valid", res.Verdict)
	}
}

// TestNoLostWriteJudgesEveryRecord: a write of several records is in its final log when all
// of its records are, each once: missing whole, it is lost; a record of it twice is a
// duplicate.
func TestNoLostWriteJudgesEveryRecord(t *testing.T) {
	tests := []struct {
		name    string
		outcome string
		final   []string
		reads   [][]string
		lost    bool
	}{
		{name: "every record once", outcome: "ok", final: whole},
		{name: "an acknowledged write missing", outcome: "ok", final: []string{"w6"}, lost: true},
		{name: "an unknown write seen, then missing", outcome: "info", final: []string{"w6"}, reads: [][]string{{"w3/0"}}, lost: true},
		{name: "an unknown write never seen", outcome: "info", final: []string{"w6"}},
		{name: "a record twice", outcome: "ok", final: []string{"w3/0", "w6", "w3/1", "w3/2", "w3/1@4"}, lost: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := check(t, tornHistory(t, tt.outcome, tt.final, tt.reads...), checker.Options{})
			r := res.Check(checker.NoLostWrite)
			if got := r.Verdict == checker.VerdictInvalid; got != tt.lost {
				t.Fatalf("no-lost-write %s: %s", r.Verdict, describe(*r))
			}
			if r.Verdict == checker.VerdictInvalid && !slices.Equal(r.Anomalies[0].Ops[:1], []int64{3}) {
				t.Errorf("anomaly %+v, want it to name w3 (op 3)", r.Anomalies[0])
			}
		})
	}
}
