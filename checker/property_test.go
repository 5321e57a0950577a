package checker_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/checker/checkertest"
	"github.com/fencecheck/fencecheck/checker/history"
)

// propertyConfigs are the simulated runs of the property test: both transaction versions,
// with and without unknown outcomes and timeouts, few and many members.
func propertyConfigs() map[string]checkertest.Config {
	base := checkertest.DefaultConfig()
	tv1 := base
	tv1.TV = 1
	crowded := base
	crowded.Roles, crowded.MembersPerRole, crowded.OpsPerRole = 2, 6, 120
	uncertain := base
	uncertain.Indeterminate, uncertain.Slow = 0.2, 0.1
	calm := base
	calm.Indeterminate, calm.Slow, calm.Faults, calm.Pauses = 0, 0, 0, 0
	// A lone member per role: its fences come only from its own slow writes (timeout aborts).
	solo := base
	solo.MembersPerRole, solo.Indeterminate, solo.Slow = 1, 0, 0.15
	// TV1 acquires that abort the holder's transaction in flight, with members fighting
	// over roles so that it happens often.
	tv1aborts := tv1
	tv1aborts.AbortBumps, tv1aborts.AcquireRate = true, 0.6
	// Work writes of one to four records, with unknown outcomes and timeouts.
	multi := uncertain
	multi.WorkRecords = 4
	return map[string]checkertest.Config{
		"tv2": base, "tv1": tv1, "crowded": crowded, "uncertain": uncertain, "calm": calm, "solo": solo,
		"tv1-aborts": tv1aborts, "multi-record": multi,
	}
}

// judged reports whether a valid history may give check c its verdict: valid, or for
// no-torn-txn not-covered when the history has no write of several records.
func judged(c checker.Result, cfg checkertest.Config) bool {
	return c.Verdict == checker.VerdictValid || c.Name == checker.NoTornTxn && cfg.WorkRecords <= 1 && c.Verdict == checker.VerdictNotCovered
}

const propertySeeds = 60

func TestPropertySimulatedHistoriesAreValid(t *testing.T) {
	for name, cfg := range propertyConfigs() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for seed := range uint64(propertySeeds) {
				h := checkertest.Generate(cfg, rand.New(rand.NewPCG(seed, 1)))
				res, err := checker.Check(context.Background(), h, checker.Options{})
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range res.Checks {
					if !judged(c, cfg) {
						t.Fatalf("seed %d: %s is %s, want valid: %s", seed, c.Name, c.Verdict, describe(c))
					}
				}
				if res.Verdict != checker.VerdictValid {
					t.Fatalf("seed %d: run is %s, want valid: %v", seed, res.Verdict, res.Coverage)
				}
			}
		})
	}
}

func TestPropertyPlantedViolationIsNamed(t *testing.T) {
	for name, cfg := range propertyConfigs() {
		for _, v := range checkertest.Violations {
			t.Run(name+"/"+v.String(), func(t *testing.T) {
				t.Parallel()
				planted := 0
				for seed := range uint64(propertySeeds) {
					rng := rand.New(rand.NewPCG(seed, 2))
					h := checkertest.Generate(cfg, rng)
					if !checkertest.Plant(h, v, rng) {
						continue
					}
					planted++
					res, err := checker.Check(context.Background(), h, checker.Options{})
					if err != nil {
						t.Fatal(err)
					}
					c := res.Check(v.Guarantee())
					if c.Verdict != checker.VerdictInvalid || res.Verdict != checker.VerdictInvalid {
						t.Fatalf("seed %d: planted %s: %s is %s and the run %s, want both invalid", seed, v, c.Name, c.Verdict, res.Verdict)
					}
					for _, a := range c.Anomalies {
						if a.Guarantee != v.Guarantee() || a.Explanation == "" {
							t.Fatalf("seed %d: anomaly %+v under %s", seed, a, c.Name)
						}
					}
				}
				if planted < propertySeeds/2 {
					t.Fatalf("only %d of %d histories had room for %s", planted, propertySeeds, v)
				}
			})
		}
	}
}

// TestPropertyPlantedTornTransactionIsNamed: a record taken out of a committed write of
// several records in its final log is a torn transaction, named by no-torn-txn alone among
// the guarantees.
func TestPropertyPlantedTornTransactionIsNamed(t *testing.T) {
	cfg := propertyConfigs()["multi-record"]
	planted := 0
	for seed := range uint64(propertySeeds) {
		rng := rand.New(rand.NewPCG(seed, 5))
		h := checkertest.Generate(cfg, rng)
		if !checkertest.PlantTornTxn(h, rng) {
			continue
		}
		planted++
		res, err := checker.Check(context.Background(), h, checker.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range res.Checks {
			if want := c.Name == checker.NoTornTxn; (c.Verdict == checker.VerdictInvalid) != want {
				t.Fatalf("seed %d: planted a torn transaction: %s is %s: %s", seed, c.Name, c.Verdict, describe(c))
			}
		}
	}
	if planted < propertySeeds/2 {
		t.Fatalf("only %d of %d histories had a write of several records", planted, propertySeeds)
	}
}

func describe(r checker.Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v", r.Details)
	for _, a := range r.Anomalies {
		fmt.Fprintf(&b, "\n  %s ops %v offsets %v: %s", a.Role, a.Ops, a.Offsets, a.Explanation)
	}
	return b.String()
}

var _ = history.FormatVersion

// rotationConfigs simulate kfake's producer-id rotation: roles start 6 epochs before
// exhaustion, so most rotate during the run, to a random producer id that sorts before the
// old one about half the time. In "tv1-calm" every epoch bump is an acquire, so every
// rotation is observed; under TV2 commits bump the epoch unseen, and with unknown outcomes
// and timeouts so do aborts.
func rotationConfigs() map[string]checkertest.Config {
	calm := checkertest.DefaultConfig()
	calm.TV, calm.Indeterminate, calm.Slow, calm.Faults, calm.Pauses = 1, 0, 0, 0, 0
	calm.HashedPIDs, calm.FirstEpoch = true, 32760
	tv2 := checkertest.DefaultConfig()
	tv2.HashedPIDs, tv2.FirstEpoch = true, 32740
	uncertain := tv2
	uncertain.TV, uncertain.Indeterminate, uncertain.Slow, uncertain.FirstEpoch = 1, 0.2, 0.1, 32760
	return map[string]checkertest.Config{"tv1-calm": calm, "tv2": tv2, "uncertain": uncertain}
}

// rotations counts the roles whose producer id changed, and of those the ones whose new
// producer id is smaller.
func rotations(h *history.History) (changed, smaller int) {
	first := map[string]int64{}
	last := map[string]int64{}
	for _, op := range h.All() {
		if op.Kind == history.KindAcquire && op.Result.Token != nil {
			if _, ok := first[op.Role]; !ok {
				first[op.Role] = op.Result.Token.ProducerID
			}
			last[op.Role] = op.Result.Token.ProducerID
		}
	}
	for role, pid := range first {
		if last[role] != pid {
			changed++
			if last[role] < pid {
				smaller++
			}
		}
	}
	return changed, smaller
}

// On a cluster that hashes producer ids, simulated rotations are never invalid; where every
// rotation is observed they are valid, and a planted violation is still named.
func TestPropertyRotationOnHashedProducerIDs(t *testing.T) {
	for name, cfg := range rotationConfigs() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var changed, smaller, valid int
			for seed := range uint64(propertySeeds) {
				h := checkertest.Generate(cfg, rand.New(rand.NewPCG(seed, 3)))
				c, s := rotations(h)
				changed, smaller = changed+c, smaller+s
				res, err := checker.Check(context.Background(), h, checker.Options{})
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range res.Checks {
					if c.Verdict == checker.VerdictInvalid || name == "tv1-calm" && !judged(c, cfg) {
						t.Fatalf("seed %d: %s is %s: %s", seed, c.Name, c.Verdict, describe(c))
					}
				}
				if res.Verdict == checker.VerdictValid {
					valid++
				}
			}
			t.Logf("%d rotations (%d to a smaller producer id); %d of %d runs valid", changed, smaller, valid, propertySeeds)
			if smaller == 0 || smaller == changed {
				t.Fatalf("%d rotations, %d to a smaller producer id: the simulation does not rotate as kfake does", changed, smaller)
			}
		})
	}
	cfg := rotationConfigs()["tv1-calm"]
	for _, v := range checkertest.Violations {
		t.Run("tv1-calm/"+v.String(), func(t *testing.T) {
			t.Parallel()
			planted := 0
			for seed := range uint64(propertySeeds) {
				rng := rand.New(rand.NewPCG(seed, 4))
				h := checkertest.Generate(cfg, rng)
				if !checkertest.Plant(h, v, rng) {
					continue
				}
				planted++
				res, err := checker.Check(context.Background(), h, checker.Options{})
				if err != nil {
					t.Fatal(err)
				}
				if c := res.Check(v.Guarantee()); c.Verdict != checker.VerdictInvalid {
					t.Fatalf("seed %d: planted %s: %s is %s: %s", seed, v, c.Name, c.Verdict, describe(*c))
				}
			}
			if planted < propertySeeds/2 {
				t.Fatalf("only %d of %d histories had room for %s", planted, propertySeeds, v)
			}
		})
	}
}
