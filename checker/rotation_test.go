package checker_test

import (
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/checker/history"
)

// The golden histories of a rotation on a cluster that hashes producer ids: role "leader"
// exhausts producer id A = 6815940584630365310 at epoch 32766 and gets the smaller
// B = 1234567890123456789 with epoch 0, as kfake does (docs/checker.md, "Producer-id rotation").
const (
	rotationValid     = "token-monotonic--valid--hashed-producer-id-rotation"
	rotationStale     = "fenced-stale-write--invalid--write-under-exhausted-epoch-after-rotation"
	rotationLogOrder  = "log-token-order--invalid--record-from-before-rotation-follows-newer"
	lastBeforeRotated = "(6815940584630365310,32766)"
	firstAfterRotated = "(1234567890123456789,0)"
)

func TestRotationIsJudgedOnHashedProducerIDs(t *testing.T) {
	for _, name := range []string{rotationValid, rotationStale, rotationLogOrder} {
		t.Run(name, func(t *testing.T) {
			res := check(t, golden(t, name), checker.Options{})
			for _, c := range res.Checks {
				if c.Verdict == checker.VerdictUnknown {
					t.Errorf("%s is unknown: %v", c.Name, c.Details)
				}
			}
		})
	}
}

// Explanations and visualizations name the tokens the cluster reported, never the keys
// (rotation index, epoch) the checks compare.
func TestRotationExplanationsPrintRealTokens(t *testing.T) {
	var page strings.Builder
	res := check(t, golden(t, rotationStale), checker.Options{Visualize: func(string) (io.WriteCloser, error) {
		return nopCloser{&page}, nil
	}})
	stale := res.Check(checker.FencedStaleWrite)
	if len(stale.Anomalies) != 1 {
		t.Fatalf("fenced-stale-write: %+v", stale)
	}
	want := "Write-lease op 11 by m2 under token " + lastBeforeRotated + " was acknowledged although acquire op 10 (m3) had returned the newer token " + firstAfterRotated + " before the write was invoked."
	if got := stale.Anomalies[0].Explanation; got != want {
		t.Errorf("explanation:\n got %s\nwant %s", got, want)
	}
	for _, want := range []string{"write-lease " + lastBeforeRotated, "acquire → " + firstAfterRotated, "mint " + firstAfterRotated} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("visualization lacks %q", want)
		}
	}
	if strings.Contains(page.String(), "(1,0)") || strings.Contains(page.String(), "(0,32766)") {
		t.Error("visualization prints rotation keys")
	}

	order := check(t, golden(t, rotationLogOrder), checker.Options{}).Check(checker.LogTokenOrder)
	if len(order.Anomalies) != 1 {
		t.Fatalf("log-token-order: %+v", order)
	}
	if e := order.Anomalies[0].Explanation; !strings.Contains(e, "under "+lastBeforeRotated+", op 9) committed after") || !strings.Contains(e, "under "+firstAfterRotated+", op 12)") {
		t.Errorf("explanation: %s", e)
	}
}

// reported is an acquire or a describe that reported tok over [invoke, ret].
type reported struct {
	kind        history.Kind
	tok         history.Token
	invoke, ret int64
}

// rotationHistory is role r on a cluster that hashes producer ids: ops, then a final read of
// an empty lease log.
func rotationHistory(ops ...reported) *history.History {
	b := history.NewBuilder(0)
	add := func(e history.Event) {
		if err := b.Add(&e); err != nil {
			panic(err)
		}
	}
	add(history.Event{Type: history.TypeHeader, Meta: &history.Meta{LeaseDuration: 1000, TransactionVersion: 1, ProducerIDs: history.ProducerIDsHashed}})
	for i, o := range ops {
		id := int64(i + 1)
		add(history.Event{Type: history.TypeInvoke, ID: id, Time: o.invoke, Client: i, Process: "p", Member: fmt.Sprint("m", i), Role: "r", Kind: o.kind})
		tok := o.tok
		add(history.Event{Type: history.TypeOK, ID: id, Time: o.ret, Result: history.Result{Token: &tok, Held: o.kind == history.KindDescribe}})
	}
	n := int64(len(ops) + 1)
	add(history.Event{Type: history.TypeInvoke, ID: n, Time: 1000, Client: len(ops), Role: "r", Kind: history.KindFinalRead})
	add(history.Event{Type: history.TypeOK, ID: n, Time: 1001, Result: history.Result{Records: []history.Record{}}})
	return b.History()
}

// A producer-id change the checker cannot order as a rotation leaves the role's model checks
// unknown, with the reason: never a guessed verdict.
func TestUnorderedProducerIDChangeStaysUnknown(t *testing.T) {
	a := func(e int16) history.Token { return history.Token{ProducerID: 900, Epoch: e} }
	b := func(e int16) history.Token { return history.Token{ProducerID: 100, Epoch: e} }
	tests := []struct {
		name string
		h    *history.History
		why  string
	}{
		{"change without exhaustion", golden(t, "token-monotonic--unknown--hashed-producer-id-changes"),
			"producer id changed from 1000 to 77 (op 2) and this cluster hashes producer ids; no operation saw 1000 reach epoch 32766"},
		{"the earlier id seen just below exhaustion", rotationHistory(
			reported{history.KindAcquire, a(32700), 10, 12},
			reported{history.KindAcquire, b(0), 20, 22}),
			"no operation saw 900 reach epoch 32766, where the coordinator rotates it (the highest seen is 32700, op 1)"},
		{"the reports of the two ids overlap", rotationHistory(
			reported{history.KindAcquire, a(32766), 10, 50},
			reported{history.KindAcquire, b(0), 20, 60}),
			"no acquire or describe that reported 900 returned before one that reported 100 was invoked"},
		{"the two ids reported in both orders", rotationHistory(
			reported{history.KindAcquire, a(32766), 10, 12},
			reported{history.KindAcquire, b(0), 20, 22},
			reported{history.KindDescribe, a(32766), 30, 32}),
			"producer ids 900 and 100 were reported in both orders"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := check(t, tt.h, checker.Options{})
			for _, name := range []string{checker.TokenMonotonic, checker.FencedStaleWrite, checker.DescribeConsistent} {
				r := res.Check(name)
				if r.Verdict != checker.VerdictUnknown || !strings.Contains(fmt.Sprint(r.Details["unknown"]), tt.why) {
					t.Errorf("%s is %s, want unknown because %q: %v", name, r.Verdict, tt.why, r.Details["unknown"])
				}
			}
			if res.Verdict != checker.VerdictUnknown {
				t.Errorf("run is %s, want unknown", res.Verdict)
			}
		})
	}
}

// The same histories on Apache Kafka (ordered producer ids) compare tokens as (producer id,
// epoch): there a new, smaller producer id is a token going backwards.
func TestOrderedProducerIDsStillCompareAsTheyAre(t *testing.T) {
	h := golden(t, rotationValid)
	h.Meta.ProducerIDs = history.ProducerIDsOrdered
	h.Meta.Cluster = "local"
	res := check(t, h, checker.Options{})
	if r := res.Check(checker.TokenMonotonic); r.Verdict != checker.VerdictInvalid {
		t.Fatalf("token-monotonic is %s, want invalid: %+v", r.Verdict, r)
	}
}

// withoutExhaustion lowers every epoch of h by 100, so no operation reaches 32766 any more.
func withoutExhaustion(h *history.History) *history.History {
	lower := func(t history.Token) history.Token {
		if t.Valid() && t.Epoch > 100 {
			t.Epoch -= 100
		}
		return t
	}
	for i := range h.Len() {
		op := h.Op(i)
		op.Args.Token = lower(op.Args.Token)
		if op.Result.Token != nil {
			t := lower(*op.Result.Token)
			op.Result.Token = &t
		}
		if op.Result.Records != nil {
			recs := make([]history.Record, len(op.Result.Records))
			for j, rec := range op.Result.Records {
				rec.Token = lower(rec.Token)
				recs[j] = rec
			}
			op.Result.Records = recs
		}
		h.SetOp(i, op)
	}
	return h
}

// The reordered log of the rotation golden history, with the same producer-id change but no
// exhaustion, is not comparable: log-token-order is unknown, not invalid.
func TestLogOrderAcrossAnUnorderedChangeIsUnknown(t *testing.T) {
	res := check(t, withoutExhaustion(golden(t, rotationLogOrder)), checker.Options{})
	r := res.Check(checker.LogTokenOrder)
	if r.Verdict != checker.VerdictUnknown || !strings.Contains(fmt.Sprint(r.Details["not_comparable"]), "could not order as rotations") {
		t.Fatalf("log-token-order is %s: %v", r.Verdict, r.Details)
	}
	if m := res.Check(checker.TokenMonotonic); m.Verdict != checker.VerdictUnknown {
		t.Fatalf("token-monotonic is %s, want unknown", m.Verdict)
	}
}
