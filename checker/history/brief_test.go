package history_test

import (
	"testing"

	"github.com/fencecheck/fencecheck/checker/history"
)

// TestBriefAgreesWithOp: an operation's brief says what its Op says, on generated histories
// and on operations a test builds whole (which have no brief) or odd (a write under no token
// with a result token, a read with a result token).
func TestBriefAgreesWithOp(t *testing.T) {
	// As the Builder keeps a write under no token that returned a token: in the compact
	// record, the token its result's.
	b := history.NewBuilder(0)
	tok := history.Token{ProducerID: 9, Epoch: 2}
	for _, e := range []history.Event{
		{Type: history.TypeHeader},
		{Type: history.TypeInvoke, ID: 1, Role: "r", Kind: history.KindWriteLease, Args: history.Args{Token: history.NoToken, WriteID: "w"}},
		{Type: history.TypeOK, ID: 1, Time: 1, Result: history.Result{Token: &tok}},
	} {
		if err := b.Add(&e); err != nil {
			t.Fatal(err)
		}
	}
	histories := []*history.History{b.History()}
	for seed := range uint64(4) {
		histories = append(histories, generated(t, seed))
	}
	for _, h := range histories {
		for i, op := range h.All() {
			switch {
			case i%97 == 0 && op.Kind.IsWrite():
				op.Args.Token, op.Result.Token = history.NoToken, &tok
			case i%89 == 0 && op.Kind.IsRead():
				op.Result.Token = &tok
			case i%83 == 0:
				op.Process = "" // a name the Builder has not seen: 0
			}
			h.SetOp(i, op)
		}
		briefs := 0
		var b history.Brief
		for i, op := range h.All() {
			if !h.LoadBrief(i, &b) {
				continue
			}
			briefs++
			want := history.NoToken
			switch {
			case op.Kind.IsWrite():
				want = op.Args.Token
			case op.Result.Token != nil:
				want = *op.Result.Token
			}
			got := [...]any{b.Invoke, b.Return, b.Token, h.Name(b.Process), h.Name(b.Member), h.Name(b.Role), b.Kind, b.Type, b.Pending, b.Held, b.Error}
			wanted := [...]any{op.Invoke, op.Return, want, op.Process, op.Member, op.Role, op.Kind, op.Type, op.Pending, op.Result.Held, op.Error}
			if got != wanted {
				t.Fatalf("op %d: brief %v, op %v", i, got, wanted)
			}
		}
		if briefs == 0 || briefs < h.Len()*9/10 {
			t.Fatalf("%d briefs of %d operations", briefs, h.Len())
		}
	}
}
