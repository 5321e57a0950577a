package checker

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/anishathalye/porcupine"

	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/checker/model"
)

// Witnesses are orderings that no linearization can repair: if operation a returned before b
// was invoked, a precedes b in every linearization. Each witness below is therefore a sound
// proof that the model rejects the role, and it names the operations precisely. They run only
// on roles porcupine already rejected, to explain them. Tokens compare as the model's keys
// and print through the role's model.Show.

func filterOps(ops []porcupine.Operation, kinds ...model.Kind) []porcupine.Operation {
	var out []porcupine.Operation
	for _, o := range ops {
		if slices.Contains(kinds, in(o).Kind) {
			out = append(out, o)
		}
	}
	return out
}

// bestBefore calls visit for every probe, in invocation order, with the source of greatest
// token among those that returned strictly before the probe was invoked (nil if none).
func bestBefore(sources, probes []porcupine.Operation, visit func(probe, best *porcupine.Operation)) {
	src := slices.Clone(sources)
	slices.SortStableFunc(src, func(a, b porcupine.Operation) int { return cmp.Compare(a.Return, b.Return) })
	prb := slices.Clone(probes)
	slices.SortStableFunc(prb, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
	var best *porcupine.Operation
	j := 0
	for i := range prb {
		for j < len(src) && src[j].Return < prb[i].Call {
			if best == nil || in(*best).Token.Less(in(src[j]).Token) {
				best = &src[j]
			}
			j++
		}
		visit(&prb[i], best)
	}
}

// witnesses returns the anomalies the witnesses prove in the role's model operations, their
// tokens printed through show.
func witnesses(role string, ops []porcupine.Operation, show model.Show) []Anomaly {
	var out []Anomaly
	tok := func(o *porcupine.Operation) history.Token { return show.Apply(in(*o).Token) }
	add := func(g string, explanation string, os ...*porcupine.Operation) {
		a := Anomaly{Guarantee: g, Role: role, Log: history.RoleLog(role).String(), Explanation: explanation}
		for _, o := range os {
			a.Ops = append(a.Ops, in(*o).Hist.ID)
		}
		out = append(out, a)
	}
	acquires := filterOps(ops, model.Acquire)

	// token-monotonic: unique, and increasing in real-time order.
	byToken := map[history.Token]*porcupine.Operation{}
	for i := range acquires {
		a := &acquires[i]
		if prev, dup := byToken[in(*a).Token]; dup {
			add(TokenMonotonic, fmt.Sprintf("Acquires op %d (%s) and op %d (%s) both returned token %s.",
				in(*prev).Hist.ID, in(*prev).Hist.Member, in(*a).Hist.ID, in(*a).Hist.Member, tok(a)), prev, a)
			continue
		}
		byToken[in(*a).Token] = a
	}
	bestBefore(acquires, acquires, func(b, best *porcupine.Operation) {
		if best != nil && in(*b).Token.Less(in(*best).Token) {
			add(TokenMonotonic, fmt.Sprintf("Acquire op %d (%s) returned token %s, below token %s that acquire op %d (%s) returned before op %d was invoked.",
				in(*b).Hist.ID, in(*b).Hist.Member, tok(b), tok(best), in(*best).Hist.ID, in(*best).Hist.Member, in(*b).Hist.ID), best, b)
		}
	})

	// fenced-stale-write: an acknowledged write runs under the current, undeposed mint.
	firstFence := map[history.Token]*porcupine.Operation{}
	fences := filterOps(ops, model.WriteFenced)
	for i := range fences {
		f := &fences[i]
		if prev := firstFence[in(*f).Token]; prev == nil || f.Return < prev.Return {
			firstFence[in(*f).Token] = f
		}
	}
	bestBefore(acquires, filterOps(ops, model.WriteOK), func(w, best *porcupine.Operation) {
		t, h := in(*w).Token, in(*w).Hist
		took := "was acknowledged"
		if h.Type != history.TypeOK {
			took = "committed (its outcome was unknown, but a committed read holds its record)"
		}
		switch f := firstFence[t]; {
		case byToken[t] == nil:
			add(FencedStaleWrite, fmt.Sprintf("%s op %d by %s under token %s %s, but no acquire of role %s returned that token.",
				h.Kind, h.ID, h.Member, tok(w), took, role), w)
		case best != nil && t.Less(in(*best).Token):
			add(FencedStaleWrite, fmt.Sprintf("%s op %d by %s under token %s %s although acquire op %d (%s) had returned the newer token %s before the write was invoked.",
				h.Kind, h.ID, h.Member, tok(w), took, in(*best).Hist.ID, in(*best).Hist.Member, tok(best)), best, w)
		case f != nil && f.Return < w.Call:
			add(FencedStaleWrite, fmt.Sprintf("%s op %d by %s under token %s %s after %s op %d under the same token had been fenced.",
				h.Kind, h.ID, h.Member, tok(w), took, in(*f).Hist.Kind, in(*f).Hist.ID), f, w)
		}
	})

	// describe-consistent: none only while nothing was minted; otherwise at least the mint
	// before it and below the mint after it.
	describes := filterOps(ops, model.DescribeHeld, model.DescribeNone)
	held := filterOps(ops, model.DescribeHeld)
	bestBefore(acquires, describes, func(d, best *porcupine.Operation) {
		switch {
		case best == nil:
		case in(*d).Kind == model.DescribeNone:
			add(DescribeConsistent, fmt.Sprintf("Describe op %d reported no holder after acquire op %d (%s) had returned token %s.",
				in(*d).Hist.ID, in(*best).Hist.ID, in(*best).Hist.Member, tok(best)), best, d)
		case in(*d).Token.Less(in(*best).Token):
			add(DescribeConsistent, fmt.Sprintf("Describe op %d reported %s, below token %s that acquire op %d (%s) had returned before the describe was invoked.",
				in(*d).Hist.ID, tok(d), tok(best), in(*best).Hist.ID, in(*best).Hist.Member), best, d)
		}
	})
	bestBefore(held, filterOps(ops, model.DescribeNone), func(d, best *porcupine.Operation) {
		if best != nil {
			add(DescribeConsistent, fmt.Sprintf("Describe op %d reported no holder after describe op %d had reported %s.",
				in(*d).Hist.ID, in(*best).Hist.ID, tok(best)), best, d)
		}
	})
	bestBefore(held, acquires, func(a, best *porcupine.Operation) {
		if best != nil && !in(*best).Token.Less(in(*a).Token) {
			add(DescribeConsistent, fmt.Sprintf("Acquire op %d (%s) returned token %s, not above %s that describe op %d had reported before the acquire was invoked.",
				in(*a).Hist.ID, in(*a).Hist.Member, tok(a), tok(best), in(*best).Hist.ID), best, a)
		}
	})
	return out
}

// spuriousFences finds the fences of the current holder that nothing can explain (called on
// roles where only such a fence makes the strict model fail). A fence of token t at [call,
// ret] is explained when something may have taken effect before it: an acquire returning a
// newer token or a credit (unknown acquire, unresolved write) invoked by ret, or another fence
// of t that is itself explained or stayed open for the lease. Of the unexplained fences of one
// token only the first to return is reported: the others can follow it as fences of a deposed
// holder. Tokens print through show.
func spuriousFences(role string, ops []porcupine.Operation, show model.Show) []Anomaly {
	fences := filterOps(ops, model.WriteFenced)
	acquires := filterOps(ops, model.Acquire)
	credits := filterOps(ops, model.Credit)
	basic := make([]bool, len(fences))
	for i, f := range fences {
		t := in(f).Token
		basic[i] = in(f).Long
		for _, a := range acquires {
			basic[i] = basic[i] || (t.Less(in(a).Token) && a.Call <= f.Return)
		}
		for _, c := range credits {
			basic[i] = basic[i] || c.Call <= f.Return
		}
	}
	first := map[history.Token]int{}
	for i, f := range fences {
		if basic[i] {
			continue
		}
		explained := false
		for j, g := range fences {
			if j != i && basic[j] && in(g).Token == in(f).Token && g.Call <= f.Return {
				explained = true
			}
		}
		if explained {
			continue
		}
		if k, ok := first[in(f).Token]; !ok || f.Return < fences[k].Return {
			first[in(f).Token] = i
		}
	}
	idx := make([]int, 0, len(first))
	for _, i := range first {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	var out []Anomaly
	for _, i := range idx {
		f := in(fences[i])
		h := f.Hist
		out = append(out, Anomaly{
			Guarantee: SpuriousFence, Role: role, Log: history.RoleLog(role).String(), Ops: []int64{h.ID},
			Explanation: fmt.Sprintf("%s op %d by %s under token %s, the current holder, was fenced although no newer acquire, no operation of unknown outcome and no transaction open for the lease duration preceded it.",
				h.Kind, h.ID, h.Member, show.Apply(f.Token)),
		})
	}
	return out
}
