package checkertest

import (
	"math/rand/v2"
	"slices"

	"github.com/fencecheck/fencecheck/checker/history"
)

// Violation is a kind of bug Plant can put into a correct history.
type Violation int

// Violations Plant knows, each with the guarantee that must catch it.
const (
	// StaleWrite acknowledges a write under a token that a newer acquire had replaced
	// before the write was invoked (fenced-stale-write).
	StaleWrite Violation = iota
	// OutOfOrder swaps two committed lease records so that an older holder's record follows
	// its successor's in the final log (log-token-order).
	OutOfOrder
	// LostWrite removes an acknowledged write's records from the final log (no-lost-write).
	LostWrite
)

// Violations lists every Violation.
var Violations = []Violation{StaleWrite, OutOfOrder, LostWrite}

// String names the violation.
func (v Violation) String() string {
	switch v {
	case StaleWrite:
		return "stale-write"
	case OutOfOrder:
		return "out-of-order"
	case LostWrite:
		return "lost-write"
	}
	return "unknown"
}

// Guarantee returns the name of the guarantee that must report v.
func (v Violation) Guarantee() string {
	switch v {
	case StaleWrite:
		return "fenced-stale-write"
	case OutOfOrder:
		return "log-token-order"
	case LostWrite:
		return "no-lost-write"
	}
	return ""
}

// Plant puts one violation of kind v into h, choosing where with rng, and reports whether the
// history offered a place for it. It never changes a record slice in place (reads share them).
func Plant(h *history.History, v Violation, rng *rand.Rand) bool {
	switch v {
	case StaleWrite:
		return plantStaleWrite(h, rng)
	case OutOfOrder:
		return plantOutOfOrder(h, rng)
	case LostWrite:
		return plantLostWrite(h, rng)
	}
	return false
}

// plantStaleWrite flips a write that was fenced because a newer acquire had returned before
// it was invoked into an acknowledged one. Without such a write it adds one: the holder of an
// older token writes, and is acknowledged, after a newer acquire returned. A token is older
// than another when an acquire returned it before the other's acquire was invoked: real time
// orders them on every cluster, even where a producer-id rotation makes the newer token sort
// first.
func plantStaleWrite(h *history.History, rng *rand.Rand) bool {
	type acq struct {
		tok    history.Token
		inv    int64
		ret    int64
		member string
		proc   string
		client int
	}
	acquires := map[string][]acq{}
	for _, op := range h.All() {
		if op.Kind == history.KindAcquire && op.Type == history.TypeOK {
			acquires[op.Role] = append(acquires[op.Role], acq{*op.Result.Token, op.Invoke, op.Return, op.Member, op.Process, op.Client})
		}
	}
	older := func(role string, t history.Token, newer acq) bool {
		for _, a := range acquires[role] {
			if a.tok == t && a.ret < newer.inv {
				return true
			}
		}
		return false
	}
	var stale []int
	for i, op := range h.All() {
		if !op.Kind.IsWrite() || op.Type != history.TypeFail || op.Error != history.ErrorFenced {
			continue
		}
		for _, a := range acquires[op.Role] {
			if a.ret < op.Invoke && older(op.Role, op.Args.Token, a) {
				stale = append(stale, i)
				break
			}
		}
	}
	if len(stale) > 0 {
		i := stale[rng.IntN(len(stale))]
		op := h.Op(i)
		op.Type, op.Error = history.TypeOK, ""
		h.SetOp(i, op)
		return true
	}
	// The first acquire to return and the last to be invoked, when they do not overlap.
	span := func(as []acq) (old, newer acq, ok bool) {
		old, newer = as[0], as[0]
		for _, a := range as {
			if a.ret < old.ret {
				old = a
			}
			if a.inv > newer.inv {
				newer = a
			}
		}
		return old, newer, old.ret < newer.inv
	}
	roles := make([]string, 0, len(acquires))
	for r, as := range acquires {
		if _, _, ok := span(as); ok {
			roles = append(roles, r)
		}
	}
	if len(roles) == 0 {
		return false
	}
	slices.Sort(roles)
	role := roles[rng.IntN(len(roles))]
	old, newer, _ := span(acquires[role])
	var maxID int64
	for _, op := range h.All() {
		maxID = max(maxID, op.ID)
	}
	h.Append(history.Op{
		ID: maxID + 1, Client: old.client, Process: old.proc, Member: old.member, Role: role,
		Kind: history.KindWriteLease, Invoke: newer.ret + 1, Return: newer.ret + 2, Type: history.TypeOK,
		Args: history.Args{Token: old.tok, WriteID: "planted-stale", Log: history.RoleLog(role)},
	})
	return true
}

// finalReads returns, per log, the index of its last ok final read (by return time).
func finalReads(h *history.History) map[history.LogID]int {
	best, ret := map[history.LogID]int{}, map[history.LogID]int64{}
	for i, op := range h.All() {
		if op.Kind != history.KindFinalRead || op.Type != history.TypeOK {
			continue
		}
		if r, ok := ret[op.Args.Log]; !ok || op.Return >= r {
			best[op.Args.Log], ret[op.Args.Log] = i, op.Return
		}
	}
	return best
}

func plantOutOfOrder(h *history.History, rng *rand.Rand) bool {
	type place struct{ op, p int }
	var places []place
	finals := finalReads(h)
	for i, op := range h.All() {
		if j, ok := finals[op.Args.Log]; !ok || j != i || op.Args.Log.Work {
			continue
		}
		recs := op.Result.Records
		last := -1
		for p := range recs {
			if recs[p].Kind != history.RecordLease {
				continue
			}
			if last >= 0 && recs[last].Token.Less(recs[p].Token) {
				places = append(places, place{i, p})
			}
			last = p
		}
	}
	if len(places) == 0 {
		return false
	}
	pl := places[rng.IntN(len(places))]
	op := h.Op(pl.op)
	recs := slices.Clone(op.Result.Records)
	// Move the newer record p before the last older lease record, keeping offsets in place.
	q := pl.p - 1
	for recs[q].Kind != history.RecordLease {
		q--
	}
	a, b := recs[q], recs[pl.p]
	a.Offset, b.Offset = b.Offset, a.Offset
	recs[q], recs[pl.p] = b, a
	op.Result.Records = recs
	h.SetOp(pl.op, op)
	return true
}

func plantLostWrite(h *history.History, rng *rand.Rand) bool {
	ok := map[string]bool{}
	for _, op := range h.All() {
		if op.Kind.IsWrite() && op.Type == history.TypeOK {
			ok[op.Args.WriteID] = true
		}
	}
	places := finalRecords(h, func(rec history.Record) bool { return rec.Kind != history.RecordRegistration && ok[rec.WriteID] })
	if len(places) == 0 {
		return false
	}
	pl := places[rng.IntN(len(places))]
	op := h.Op(pl.op)
	// Every record of the write: one of a write of several records alone is a torn
	// transaction (PlantTornTxn).
	id := op.Result.Records[pl.pos].WriteID
	op.Result.Records = slices.DeleteFunc(slices.Clone(op.Result.Records), func(r history.Record) bool {
		return r.Kind != history.RecordRegistration && r.WriteID == id
	})
	h.SetOp(pl.op, op)
	return true
}

// PlantTornTxn removes one record, not the only one, of a committed write of several records
// from the final read of its log (no-torn-txn): the final log then shows part of a
// transaction. It reports whether the history had such a write (see Config.WorkRecords).
func PlantTornTxn(h *history.History, rng *rand.Rand) bool {
	places := finalRecords(h, func(rec history.Record) bool { return rec.Count > 1 })
	if len(places) == 0 {
		return false
	}
	pl := places[rng.IntN(len(places))]
	h.Edit(pl.op, func(op *history.Op) {
		op.Result.Records = slices.Delete(slices.Clone(op.Result.Records), pl.pos, pl.pos+1)
	})
	return true
}

// recordPlace is a record of a read: the operation's index and the record's position.
type recordPlace struct{ op, pos int }

// finalRecords returns the records of the final reads of every log that keep says yes to.
func finalRecords(h *history.History, keep func(history.Record) bool) []recordPlace {
	var places []recordPlace
	finals := finalReads(h)
	for i, op := range h.All() {
		if j, ok := finals[op.Args.Log]; !ok || j != i {
			continue
		}
		for p, rec := range op.Result.Records {
			if keep(rec) {
				places = append(places, recordPlace{i, p})
			}
		}
	}
	return places
}
