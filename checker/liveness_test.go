package checker

import (
	"testing"

	"github.com/fencecheck/fencecheck/checker/history"
)

// TestLivenessHeldFractionAndGaps: two roles over an 8 s span (to the first final read; the
// read after it does not stretch the span) with a 2 s lease; r1 renews at
// 0, 1, 2 s (each write taking 100 ms) and then never again, so it holds from 0.1 s to 4 s;
// r2 has no ok lease write and holds nothing. The gaps are r1's two renewals, 1 s each; a
// write under another token starts a new holding, not a gap.
func TestLivenessHeldFractionAndGaps(t *testing.T) {
	const s = int64(1e9)
	tok := func(e int16) history.Token { return history.Token{ProducerID: 7, Epoch: e} }
	write := func(role string, at int64, tk history.Token, typ history.EventType) history.Op {
		op := history.Op{Role: role, Kind: history.KindWriteLease, Invoke: at, Return: at + s/10, Type: typ}
		op.Args.Token = tk
		return op
	}
	h := &history.History{}
	h.Append(
		write("r1", 0, tok(1), history.TypeOK),
		write("r1", 1*s, tok(1), history.TypeOK),
		write("r1", 2*s, tok(1), history.TypeOK),
		write("r1", 2*s+s/2, tok(2), history.TypeOK), // another holding: no gap, covers to 4.5 s
		write("r2", 3*s, tok(1), history.TypeFail),
		history.Op{Role: "r2", Kind: history.KindDescribe, Invoke: 7 * s, Return: 7*s + s/2, Type: history.TypeOK},
		history.Op{Role: "r1", Kind: history.KindFinalRead, Invoke: 8 * s, Return: 9 * s, Type: history.TypeOK},
		history.Op{Role: "r2", Kind: history.KindRead, Invoke: 10 * s, Return: 11 * s, Type: history.TypeOK}, // a settled read
	)
	l := measureLiveness(h, 2*s)
	if !l.Measured {
		t.Fatal("not measured")
	}
	// r1: [0.1, 4.5] of [0, 8] = 0.55; r2: 0. Mean 0.275, lowest r2.
	if d := l.HeldFraction - 0.275; d > 1e-9 || d < -1e-9 || l.MinHeldFraction != 0 || l.MinHeldRole != "r2" {
		t.Errorf("held %.4f (min %.4f %s), want 0.275 (min 0 r2)", l.HeldFraction, l.MinHeldFraction, l.MinHeldRole)
	}
	if l.Renewals != 2 || l.RenewalGapP50 != s || l.RenewalGapMax != s {
		t.Errorf("renewals %d, p50 %d, max %d; want 2 gaps of 1 s", l.Renewals, l.RenewalGapP50, l.RenewalGapMax)
	}
	if l := measureLiveness(h, 0); l.Measured {
		t.Error("measured without a lease duration")
	}
}
