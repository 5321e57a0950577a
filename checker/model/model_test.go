package model_test

import (
	"math"
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/checker/model"
)

func tok(e int16) history.Token { return history.Token{ProducerID: 1000, Epoch: e} }

func state(mint, floor history.Token, deposed bool, credits int32) model.State {
	return model.State{Mint: mint, Floor: floor, Deposed: deposed, Credits: credits}
}

func TestStepFollowsSemantics(t *testing.T) {
	none := history.NoToken
	held := state(tok(1), tok(1), false, 0)
	tests := []struct {
		name    string
		from    model.State
		op      model.Op
		lenient bool
		ok      bool
		to      model.State
	}{
		{"acquire - first mint - legal", model.Init(), model.Op{Kind: model.Acquire, Token: tok(0)}, false, true, state(tok(0), none, false, 0)},
		{"acquire - above mint and floor - legal and undeposes", state(tok(1), tok(3), true, 0), model.Op{Kind: model.Acquire, Token: tok(4)}, false, true, state(tok(4), tok(3), false, 0)},
		{"acquire - equal to mint - illegal", held, model.Op{Kind: model.Acquire, Token: tok(1)}, false, false, held},
		{"acquire - not above floor - illegal", state(tok(1), tok(3), false, 0), model.Op{Kind: model.Acquire, Token: tok(3)}, false, false, state(tok(1), tok(3), false, 0)},
		{"acquire - newer producer id sorts later - legal", held, model.Op{Kind: model.Acquire, Token: history.Token{ProducerID: 2000, Epoch: 0}}, false, true, state(history.Token{ProducerID: 2000}, tok(1), false, 0)},
		{"credit - adds one", held, model.Op{Kind: model.Credit}, false, true, state(tok(1), tok(1), false, 1)},
		{"write ok - current holder - legal", held, model.Op{Kind: model.WriteOK, Token: tok(1)}, false, true, held},
		{"write ok - older token - illegal", held, model.Op{Kind: model.WriteOK, Token: tok(0)}, false, false, held},
		{"write ok - deposed holder - illegal", state(tok(1), none, true, 0), model.Op{Kind: model.WriteOK, Token: tok(1)}, false, false, state(tok(1), none, true, 0)},
		{"write fenced - older token - legal, no change", held, model.Op{Kind: model.WriteFenced, Token: tok(0)}, false, true, held},
		{"write fenced - never minted - illegal", held, model.Op{Kind: model.WriteFenced, Token: tok(2)}, false, false, held},
		{"write fenced - holder already deposed - legal", state(tok(1), none, true, 0), model.Op{Kind: model.WriteFenced, Token: tok(1)}, false, true, state(tok(1), none, true, 0)},
		{"write fenced - open for the lease - deposes, keeps credits", state(tok(1), none, false, 1), model.Op{Kind: model.WriteFenced, Token: tok(1), Long: true}, false, true, state(tok(1), none, true, 1)},
		{"write fenced - a credit explains it - spends it and deposes", state(tok(1), none, false, 2), model.Op{Kind: model.WriteFenced, Token: tok(1)}, false, true, state(tok(1), none, true, 1)},
		{"write fenced - nothing explains it - spurious, illegal", held, model.Op{Kind: model.WriteFenced, Token: tok(1)}, false, false, held},
		{"write fenced - nothing explains it - lenient deposes", held, model.Op{Kind: model.WriteFenced, Token: tok(1)}, true, true, state(tok(1), tok(1), true, 0)},
		{"describe none - nothing minted - legal", model.Init(), model.Op{Kind: model.DescribeNone}, false, true, model.Init()},
		{"describe none - after a mint - illegal", held, model.Op{Kind: model.DescribeNone}, false, false, held},
		{"describe none - after a describe reported a holder - illegal", state(none, tok(2), false, 0), model.Op{Kind: model.DescribeNone}, false, false, state(none, tok(2), false, 0)},
		{"describe none - only unknown acquires so far - legal", state(none, none, false, 3), model.Op{Kind: model.DescribeNone}, false, true, state(none, none, false, 3)},
		{"describe - above the mint (TV2 commits) - raises the floor", held, model.Op{Kind: model.DescribeHeld, Token: tok(5)}, false, true, state(tok(1), tok(5), false, 0)},
		{"describe - below the floor but at the mint - legal, floor stays", state(tok(1), tok(5), false, 0), model.Op{Kind: model.DescribeHeld, Token: tok(1)}, false, true, state(tok(1), tok(5), false, 0)},
		{"describe - below the mint - illegal", held, model.Op{Kind: model.DescribeHeld, Token: tok(0)}, false, false, held},
		{"abort bump - room below the acquire's token - mints the next epoch for nobody", held, model.Op{Kind: model.AbortBump, Token: tok(5)}, false, true, state(tok(2), tok(1), true, 0)},
		{"abort bump - acquire's token is the next epoch - no change", held, model.Op{Kind: model.AbortBump, Token: tok(2)}, false, true, held},
		{"abort bump - acquire's token not above the mint - no change", state(tok(4), none, false, 1), model.Op{Kind: model.AbortBump, Token: tok(3)}, false, true, state(tok(4), none, false, 1)},
		{"abort bump - nothing minted - no change", state(none, tok(3), false, 0), model.Op{Kind: model.AbortBump, Token: tok(5)}, false, true, state(none, tok(3), false, 0)},
		{"abort bump - acquire's token on a newer producer id - bumps the old one", held, model.Op{Kind: model.AbortBump, Token: history.Token{ProducerID: 2000, Epoch: 0}}, false, true, state(tok(2), tok(1), true, 0)},
		{"abort bump - mint at the last epoch - no change", state(tok(math.MaxInt16), none, false, 0), model.Op{Kind: model.AbortBump, Token: history.Token{ProducerID: 2000, Epoch: 3}}, false, true, state(tok(math.MaxInt16), none, false, 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, to := model.Step(tt.from, &tt.op, tt.lenient)
			if ok != tt.ok || (ok && to != tt.to) {
				t.Fatalf("Step = %t, %+v; want %t, %+v", ok, to, tt.ok, tt.to)
			}
		})
	}
}

// TestAbortBumpOnlyForbidsMore: whatever the state, an abort bump followed by its acquire
// accepts the acquire exactly when the acquire alone does, and leaves the same state; and
// after an abort bump alone, no acquire, acknowledged write or describe is legal that was not
// legal before it (only fences are).
func TestAbortBumpOnlyForbidsMore(t *testing.T) {
	none := history.NoToken
	toks := []history.Token{none, tok(0), tok(1), tok(2), tok(3), tok(4), {ProducerID: 2000, Epoch: 0}, {ProducerID: 2000, Epoch: 1}}
	var states []model.State
	for _, mint := range toks {
		for _, floor := range toks {
			for _, deposed := range []bool{false, true} {
				states = append(states, state(mint, floor, deposed, 0), state(mint, floor, deposed, 1))
			}
		}
	}
	for _, s := range states {
		for _, acq := range toks[1:] {
			bump := &model.Op{Kind: model.AbortBump, Token: acq}
			okB, afterBump := model.Step(s, bump, false)
			if !okB {
				t.Fatalf("abort bump illegal from %+v", s)
			}
			a := &model.Op{Kind: model.Acquire, Token: acq}
			ok1, s1 := model.Step(s, a, false)
			ok2, s2 := model.Step(afterBump, a, false)
			if ok1 != ok2 || (ok1 && s1 != s2) {
				t.Fatalf("from %+v, acquire %s alone: %t %+v; after its abort bump: %t %+v", s, acq, ok1, s1, ok2, s2)
			}
			for _, k := range []model.Kind{model.Acquire, model.WriteOK, model.DescribeHeld, model.DescribeNone} {
				for _, x := range toks {
					op := &model.Op{Kind: k, Token: x}
					before, _ := model.Step(s, op, false)
					after, _ := model.Step(afterBump, op, false)
					if after && !before {
						t.Fatalf("from %+v, an abort bump for %s makes %+v legal", s, acq, op)
					}
				}
			}
		}
	}
}

func TestEqualStatesHashEqually(t *testing.T) {
	a := state(tok(1), tok(2), true, 3)
	b := state(tok(1), tok(2), true, 3)
	if model.Hash(a) != model.Hash(b) {
		t.Fatal("equal states hash differently")
	}
	if model.Hash(a) == model.Hash(state(tok(1), tok(2), false, 3)) {
		t.Fatal("deposed does not change the hash")
	}
}

func TestPorcupineModelDescribesWhatItChecks(t *testing.T) {
	hist := &history.Op{ID: 7, Member: "m2", Kind: history.KindWriteLease}
	ops := []porcupine.Operation{
		{ClientId: 0, Input: &model.Op{Kind: model.Acquire, Token: tok(0), Hist: &history.Op{ID: 6, Member: "m1", Kind: history.KindAcquire}}, Call: 0, Return: 10},
		{ClientId: 1, Input: &model.Op{Kind: model.WriteOK, Token: tok(0), Hist: hist}, Call: 20, Return: 30},
	}
	m := model.New(false, nil)
	if res := porcupine.CheckOperations(m, ops); !res {
		t.Fatal("a write by the holder after its acquire is not linearizable")
	}
	if got, want := m.DescribeOperation(ops[1].Input, nil), "#7 m2 write-lease (1000,0) → ok"; got != want {
		t.Errorf("DescribeOperation = %q, want %q", got, want)
	}
	bump := &model.Op{Kind: model.AbortBump, Token: tok(3), Hist: &history.Op{ID: 6, Member: "m1", Kind: history.KindAcquire}}
	if got, want := m.DescribeOperation(bump, nil), "#6 m1 acquire → (1000,3): abort bump before it (TV1)"; got != want {
		t.Errorf("DescribeOperation = %q, want %q", got, want)
	}
	if got, want := m.DescribeState(state(tok(1), tok(3), true, 2)), "mint (1000,1), floor (1000,3), deposed, 2 credits"; got != want {
		t.Errorf("DescribeState = %q, want %q", got, want)
	}
	// The checker may hand the model keys (rotation index, epoch) for tokens; descriptions
	// print the tokens the keys stand for.
	keyOf := map[int64]int64{0: 77}
	shown := model.New(false, func(k history.Token) history.Token {
		if !k.Valid() {
			return k
		}
		return history.Token{ProducerID: keyOf[k.ProducerID], Epoch: k.Epoch}
	})
	key := history.Token{ProducerID: 0, Epoch: 32766}
	if got, want := shown.DescribeOperation(&model.Op{Kind: model.WriteOK, Token: key, Hist: hist}, nil), "#7 m2 write-lease (77,32766) → ok"; got != want {
		t.Errorf("DescribeOperation with a Show = %q, want %q", got, want)
	}
	if got, want := shown.DescribeState(state(key, history.NoToken, false, 0)), "mint (77,32766), floor none"; got != want {
		t.Errorf("DescribeState with a Show = %q, want %q", got, want)
	}
}
