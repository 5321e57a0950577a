package checker

import (
	"math/rand/v2"
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/fencecheck/fencecheck/checker/checkertest"
	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/checker/model"
)

// Mutations of the simulated histories of mutatedIndexes, by seed modulo 5.
const (
	mutateNone        = iota
	mutateStaleWrite  // a planted stale write
	mutateOutOfOrder  // a planted out-of-order commit
	mutateOldDescribe // describes that report an epoch from long ago
	mutateMovedWrites // acknowledged writes moved, as a whole, up to a lease earlier or later
	mutations
)

// mutatedIndexes calls f with the index of a simulated history for each of seeds seeds: TV2 on
// even seeds, TV1 on odd ones with acquires that abort the holder's transaction (abort bumps),
// correct or with the mutation of seed % mutations. stream varies the histories from test to
// test.
func mutatedIndexes(t *testing.T, seeds, stream uint64, f func(seed uint64, x *index)) {
	t.Helper()
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(seed, stream))
		cfg := checkertest.DefaultConfig()
		cfg.Indeterminate = 0.1
		if seed%2 == 1 {
			cfg.TV, cfg.AbortBumps, cfg.AcquireRate = 1, true, 0.6
		}
		h := checkertest.Generate(cfg, rng)
		switch seed % mutations {
		case mutateStaleWrite:
			checkertest.Plant(h, checkertest.StaleWrite, rng)
		case mutateOutOfOrder:
			checkertest.Plant(h, checkertest.OutOfOrder, rng)
		case mutateOldDescribe:
			for i := range h.Len() {
				if op := h.Op(i); op.Kind == history.KindDescribe && op.Result.Held && op.Result.Token.Epoch > 3 && rng.IntN(4) == 0 {
					op.Result.Token = &history.Token{ProducerID: op.Result.Token.ProducerID, Epoch: 1}
					h.SetOp(i, op)
				}
			}
		case mutateMovedWrites:
			for i := range h.Len() {
				if op := h.Op(i); op.Kind.IsWrite() && op.Type == history.TypeOK && rng.IntN(8) == 0 {
					d := max(rng.Int64N(2*cfg.Lease)-cfg.Lease, -op.Invoke)
					op.Invoke, op.Return = op.Invoke+d, op.Return+d
					h.SetOp(i, op)
				}
			}
		}
		c, err := Options{}.config(&history.Meta{LeaseDuration: h.Meta.LeaseDuration, TransactionVersion: h.Meta.TransactionVersion})
		if err != nil {
			t.Fatal(err)
		}
		f(seed, newIndex(h, &c))
	}
}

// TestPruneKeepsTheVerdict: dropping the operations prune drops never changes what porcupine
// decides, on correct histories and on histories with a planted violation or with writes
// moved in time (so that some fall outside their holder's stretch), TV2 and TV1 (with abort
// bumps), and the lenient model agrees too.
func TestPruneKeepsTheVerdict(t *testing.T) {
	pruned, total, illegal := 0, 0, 0
	movedIllegal := 0 // illegal searches of histories with moved writes
	mutatedIndexes(t, 100, 9, func(seed uint64, x *index) {
		for _, role := range x.roles {
			for _, lenient := range []bool{false, true} {
				m := model.New(lenient, nil)
				full := x.modelOps(role, nil, false)
				want := porcupine.CheckOperations(m, full)
				small := prune(x.modelOps(role, nil, false), &searchBuf{})
				if got := porcupine.CheckOperations(m, small); got != want {
					t.Fatalf("seed %d role %s lenient %t: %t with all %d operations, %t with the %d kept", seed, role, lenient, want, len(full), got, len(small))
				}
				total += len(full)
				pruned += len(full) - len(small)
				if !want {
					illegal++
					if seed%mutations == mutateMovedWrites {
						movedIllegal++
					}
				}
			}
		}
	})
	if pruned == 0 || illegal == 0 || movedIllegal == 0 {
		t.Fatalf("the test proves nothing: pruned %d of %d operations, %d illegal searches (%d with moved writes)", pruned, total, illegal, movedIllegal)
	}
	t.Logf("pruned %d of %d model operations; %d illegal searches, %d with moved writes", pruned, total, illegal, movedIllegal)
}
