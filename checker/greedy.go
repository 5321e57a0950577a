package checker

import (
	"cmp"
	"slices"

	"github.com/anishathalye/porcupine"

	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/checker/model"
)

// linearize looks for an order of a role's model operations that the strict model accepts,
// without searching: it places the operations one at a time, as their intervals allow, and
// never goes back. When it returns true it has built such an order, consistent with real
// time, so the role is linearizable and porcupine need not search it. False proves nothing:
// porcupine then decides, as it would have anyway.
//
// An operation may be placed once no unplaced operation returned before it was invoked (an
// interval that touches the earliest return still overlaps it, as porcupine counts it). Of
// those, it first places every one that is legal and leaves the state as it is, or only adds a
// credit: neither can make a later operation illegal, so placing them early loses nothing.
// When none is left, it places one legal change, chosen by rankChange, which is where a
// correct history put it as a rule. A history the model accepts only by another choice falls
// back to porcupine: 3 of the 1,000 roles of the benchmarks' 1M-operation history do, none of
// the TV2 roles of TestLinearizeIsSoundAndUsuallyFinds, and 27 of its 98 TV1 roles, which
// fight over acquires that abort each other's transactions.
func linearize(ops []porcupine.Operation, buf *searchBuf) bool {
	n := len(ops)
	byCall := buf.order[:0]
	for i := range ops {
		byCall = append(byCall, int32(i))
	}
	slices.SortFunc(byCall, func(a, b int32) int { return cmp.Compare(ops[a].Call, ops[b].Call) })
	byReturn := append(buf.byRet[:0], byCall...)
	slices.SortFunc(byReturn, func(a, b int32) int { return cmp.Compare(ops[a].Return, ops[b].Return) })
	buf.order, buf.byRet = byCall, byReturn
	placed := buf.placedFlags(n)
	cands := buf.cands[:0]
	defer func() { buf.cands = cands }()

	state := model.Init()
	next, earliest, done := 0, 0, 0
	for done < n {
		for placed[byReturn[earliest]] {
			earliest++
		}
		minRet := ops[byReturn[earliest]].Return
		for next < n && ops[byCall[next]].Call <= minRet {
			cands = append(cands, byCall[next])
			next++
		}
		// Every legal operation that changes nothing, or adds a credit.
		kept := cands[:0]
		for _, c := range cands {
			op := in(ops[c])
			if ok, s := model.Step(state, op, false); ok && (s == state || op.Kind == model.Credit) {
				state, placed[c] = s, true
				done++
				continue
			}
			kept = append(kept, c)
		}
		if len(kept) < len(cands) {
			cands = kept
			continue // the earliest return may have moved on
		}
		// Else one legal change, the first by changeRank.
		lowest := history.NoToken // the lowest token of a candidate acquire
		for _, c := range cands {
			if op := in(ops[c]); op.Kind == model.Acquire && (!lowest.Valid() || op.Token.Less(lowest)) {
				lowest = op.Token
			}
		}
		best, bestState, bestRank := -1, state, changeRank{}
		for j, c := range cands {
			ok, s := model.Step(state, in(ops[c]), false)
			if !ok {
				continue
			}
			if r := rankChange(ops[c], lowest); best < 0 || r.less(bestRank) {
				best, bestState, bestRank = j, s, r
			}
		}
		if best < 0 {
			return false
		}
		state, placed[cands[best]] = bestState, true
		done++
		cands = slices.Delete(cands, best, best+1)
	}
	return true
}

// changeRank orders the legal changes linearize may make next.
type changeRank struct {
	class int
	tok   history.Token
	ret   int64
}

func (a changeRank) less(b changeRank) bool {
	if a.class != b.class {
		return a.class < b.class
	}
	if c := a.tok.Compare(b.tok); c != 0 {
		return c < 0
	}
	return a.ret < b.ret
}

// rankChange ranks a legal change, given the lowest token of the candidate acquires:
//
//  0. a describe that raises the floor to d, when no candidate acquire has a token ≤ d
//     (raising the floor then forbids none of them);
//  1. an acquire or abort bump, the lowest token first (tokens only rise);
//  2. anything else (a fence that deposes the holder or spends a credit, a describe that
//     would forbid a candidate acquire), the earliest return first.
func rankChange(o porcupine.Operation, lowest history.Token) changeRank {
	op := in(o)
	switch {
	case op.Kind == model.DescribeHeld && (!lowest.Valid() || op.Token.Less(lowest)):
		return changeRank{class: 0, tok: op.Token, ret: o.Return}
	case op.Kind == model.Acquire || op.Kind == model.AbortBump:
		return changeRank{class: 1, tok: op.Token, ret: o.Return}
	}
	return changeRank{class: 2, ret: o.Return}
}

// placedFlags returns n cleared flags, reusing the buffer's.
func (b *searchBuf) placedFlags(n int) []bool {
	if cap(b.placed) < n {
		b.placed = make([]bool, n)
	}
	b.placed = b.placed[:n]
	clear(b.placed)
	return b.placed
}
