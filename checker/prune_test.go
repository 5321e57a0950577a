package checker

import (
	"math/rand/v2"
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/fencecheck/fencecheck/checker/checkertest"
	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/checker/model"
)

// TestPruneKeepsTheVerdict: dropping the operations prune drops never changes what porcupine
// decides, on correct histories and on histories with a planted violation or with writes
// moved in time (so that some fall outside their holder's stretch), TV2 and TV1 (with abort
// bumps), and the lenient model agrees too.
func TestPruneKeepsTheVerdict(t *testing.T) {
	cfg := checkertest.DefaultConfig()
	cfg.Indeterminate = 0.1
	pruned, total, illegal := 0, 0, 0
	movedIllegal := 0 // illegal searches of histories with moved writes
	for seed := range uint64(80) {
		rng := rand.New(rand.NewPCG(seed, 9))
		cfg := cfg
		if seed%2 == 1 { // TV1 acquires that abort the holder's transaction: abort bumps
			cfg.TV, cfg.AbortBumps, cfg.AcquireRate = 1, true, 0.6
		}
		h := checkertest.Generate(cfg, rng)
		switch seed % 4 {
		case 1:
			checkertest.Plant(h, checkertest.StaleWrite, rng)
		case 2: // a describe that reports an epoch from long ago
			for i := range h.Ops {
				if op := &h.Ops[i]; op.Kind == history.KindDescribe && op.Result.Held && op.Result.Token.Epoch > 3 && rng.IntN(4) == 0 {
					op.Result.Token = &history.Token{ProducerID: op.Result.Token.ProducerID, Epoch: 1}
				}
			}
		case 3: // acknowledged writes moved, as a whole, up to a lease earlier or later
			for i := range h.Ops {
				if op := &h.Ops[i]; op.Kind.IsWrite() && op.Type == history.TypeOK && rng.IntN(8) == 0 {
					d := rng.Int64N(2*cfg.Lease) - cfg.Lease
					d = max(d, -op.Invoke)
					op.Invoke, op.Return = op.Invoke+d, op.Return+d
				}
			}
		}
		c, err := Options{}.config(&history.Meta{LeaseDuration: h.Meta.LeaseDuration, TransactionVersion: h.Meta.TransactionVersion})
		if err != nil {
			t.Fatal(err)
		}
		x := newIndex(h, &c)
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
					if seed%4 == 3 {
						movedIllegal++
					}
				}
			}
		}
	}
	if pruned == 0 || illegal == 0 || movedIllegal == 0 {
		t.Fatalf("the test proves nothing: pruned %d of %d operations, %d illegal searches (%d with moved writes)", pruned, total, illegal, movedIllegal)
	}
	t.Logf("pruned %d of %d model operations; %d illegal searches, %d with moved writes", pruned, total, illegal, movedIllegal)
}
