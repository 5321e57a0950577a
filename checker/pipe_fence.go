package checker

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/fencecheck/fencecheck/checker/history"
)

// The guarantees judged against the members' offset fetches (fetch operations): what a new
// owner of an input partition may start from, and what a member that lost the partition may
// still commit. Both take a transaction as committed when its outputs are in the committed
// output: the reference, not the member's word.
const (
	// EOSGenerationFencing: no transaction of a member whose generation was superseded for
	// a partition (another generation was assigned it and fetched its offsets) sends its
	// offsets after that fetch and commits.
	EOSGenerationFencing = "eos-generation-fencing"
	// EOSStableFetch: a member starts a partition no lower than every offset committed for
	// it before its fetch, nor below the offsets a superseded transaction still had pending
	// when the fetch was answered (KIP-447: a stable fetch waits for them).
	EOSStableFetch = "eos-stable-fetch"
)

func init() {
	meanings[EOSGenerationFencing] = "no member whose generation was superseded for a partition commits for it after the new owner fetched its offsets"
	meanings[EOSStableFetch] = "a member starts a partition no lower than the offsets committed, or pending, when it fetched them"
}

// fenceTxn is a committed transaction as the fetch checks see it, for one input partition.
type fenceTxn struct {
	id int64
	// gen is the generation it ran under; sent when its member began to send its offsets
	// (its invocation when not recorded: earlier, so never a later claim); ret its return
	// (history.Never when it has none).
	gen       int32
	sent, ret int64
	// offset is what it committed for the partition.
	offset int64
}

// fetchOp is a member's fetch of one partition's offset: where it started.
type fetchOp struct {
	id     int64
	member string
	gen    int32
	rewind bool // to rewind; else on an assignment: its member was given the partition at gen
	call   int64
	ret    int64
	start  int64
}

// fenceIndex returns, per input partition, the committed transactions that sent offsets for
// it (ordered by when they began to send them) and the fetches of it (in history order).
func (c *pipeRun) fenceIndex() (map[int32][]fenceTxn, map[int32][]fetchOp) {
	committed := map[int64]bool{}
	for _, o := range c.outputs {
		committed[o.Txn] = true
	}
	txns := map[int32][]fenceTxn{}
	for id := range committed {
		op, ok := c.txns[id]
		if !ok {
			continue // well-formed says so
		}
		sent := op.Invoke
		if op.Result.Pipe != nil && op.Result.Pipe.OffsetsAt > 0 {
			sent = op.Result.Pipe.OffsetsAt
		}
		for _, o := range op.Args.Pipe.Offsets {
			txns[o.Partition] = append(txns[o.Partition], fenceTxn{id: id, gen: op.Args.Pipe.Generation, sent: sent, ret: op.Return, offset: o.Offset})
		}
	}
	for _, ts := range txns {
		slices.SortFunc(ts, func(a, b fenceTxn) int { return cmp.Or(cmp.Compare(a.sent, b.sent), cmp.Compare(a.id, b.id)) })
	}
	fetches := map[int32][]fetchOp{}
	for _, op := range c.fetches {
		for _, o := range op.Result.Pipe.Offsets {
			fetches[o.Partition] = append(fetches[o.Partition], fetchOp{id: op.ID, member: op.Member, gen: op.Args.Pipe.Generation,
				rewind: op.Args.Pipe.Rewind, call: op.Invoke, ret: op.Return, start: o.Offset})
		}
	}
	return txns, fetches
}

// checkFences judges EOSGenerationFencing into gf and EOSStableFetch into sf. Per partition
// and fetch F (member M' at generation g', starting at s), each committed transaction T (at
// generation g, offset o, offsets sent from time t) is judged:
//
//   - T returned before F began and o > s: F started below an offset already committed
//     (stable fetch). This holds for every fetch: nothing else is assumed of it.
//   - F was an assignment and g < g': M' was given the partition at a later generation than
//     T's. If T began to send its offsets after F was answered, the group took offsets from a
//     superseded generation (generation fencing). If it began before and o > s, its offsets
//     were pending or committed when F was answered: either the fetch did not wait for them
//     or the group took them late, and either way the new owner starts below what the zombie
//     committed (stable fetch, the explanation saying both).
//
// A rewind's fetch is judged by the first rule only: a member rewinding may no longer own
// the partition, so its generation says nothing of who does.
func (c *pipeRun) checkFences(gf, sf *Result) {
	if len(c.fetches) == 0 {
		for _, r := range []*Result{gf, sf} {
			r.Verdict = VerdictNotCovered
			r.Details["not_covered"] = "no offset fetch is recorded: the members do not report them (an exec transport) or the history predates them"
		}
		return
	}
	txns, fetches := c.fenceIndex()
	type zombie struct {
		f fetchOp
		p int32
	}
	superseded := map[int64]zombie{} // per zombie transaction, the earliest fetch it followed
	checked := 0
	for _, p := range slices.Sorted(maps.Keys(fetches)) {
		ts := txns[p]
		for _, f := range fetches[p] {
			checked++
			var below []fenceTxn // committed past where F started, with the rule that flags each
			var late bool
			for _, t := range ts {
				older := !f.rewind && t.gen < f.gen
				switch {
				case older && t.sent > f.ret:
					if prev, ok := superseded[t.id]; !ok || f.ret < prev.f.ret {
						superseded[t.id] = zombie{f, p}
					}
				case t.offset <= f.start:
				case t.ret != history.Never && t.ret < f.call:
					below = append(below, t)
				case older:
					below, late = append(below, t), true
				}
			}
			if len(below) == 0 {
				continue
			}
			top := slices.MaxFunc(below, func(a, b fenceTxn) int { return cmp.Compare(a.offset, b.offset) })
			ids := []int64{f.id}
			for _, t := range below {
				ids = append(ids, t.id)
			}
			what, before := "on an assignment", "before the fetch was answered"
			if f.rewind {
				what, before = "to rewind", "before the fetch began"
			}
			expl := fmt.Sprintf("fetch op %d (%s at generation %d, %s) started partition %d at %d, below offset %d that txn op %d (generation %d) committed",
				f.id, f.member, f.gen, what, p, f.start, top.offset, top.id, top.gen)
			if late && top.ret >= f.call {
				expl += ": its offsets were sent before the fetch was answered, so either the fetch did not wait for them (require_stable) or the group took them from a superseded generation"
			} else {
				expl += " " + before
			}
			if len(below) > 1 {
				expl += fmt.Sprintf(" (%d committed transactions end past the start)", len(below))
			}
			sf.Anomalies = append(sf.Anomalies, Anomaly{Guarantee: EOSStableFetch, Log: fmt.Sprintf("input:%d", p), Ops: compactIDs(ids),
				Explanation: expl})
		}
	}
	for _, id := range slices.Sorted(maps.Keys(superseded)) {
		f, p := superseded[id].f, superseded[id].p
		op := c.txns[id]
		gf.Anomalies = append(gf.Anomalies, Anomaly{Guarantee: EOSGenerationFencing, Log: fmt.Sprintf("input:%d", p), Ops: compactIDs([]int64{id, f.id}),
			Explanation: fmt.Sprintf("txn op %d of %s ran under generation %d and committed partition %d's outputs and offsets, but began to send its offsets after %s was given the partition at generation %d and fetched its offsets (fetch op %d)",
				id, op.Member, op.Args.Pipe.Generation, p, f.member, f.gen, f.id)})
	}
	gf.Details["fetches_checked"], sf.Details["fetches_checked"] = checked, checked
}
