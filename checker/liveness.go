package checker

import (
	"slices"

	"github.com/fencecheck/fencecheck/checker/history"
)

// Liveness is how well the roles were held, measured from the history: advisory, never a
// verdict (a run that held nothing broke no fencing guarantee). It answers whether a fleet made
// progress: the held fraction falls when faults or load keep roles unheld, and the renewal gap
// grows when holders renew late.
type Liveness struct {
	// Measured is false when the history gives no lease duration or has no ok lease write;
	// the other fields are then zero.
	Measured bool `json:"measured"`
	// HeldFraction is the fraction of the workload's span (the first invocation to the first
	// final read's, when the workload had stopped; without final reads, to the last
	// completion) during which a role had a lease renewed within its lease, averaged over the
	// roles: an ok lease write covers from its
	// completion to its invocation plus the lease (none when it completed later than that).
	// MinHeldFraction is the lowest role's, MinHeldRole that role.
	HeldFraction    float64 `json:"held_fraction"`
	MinHeldFraction float64 `json:"min_held_fraction"`
	MinHeldRole     string  `json:"min_held_role,omitempty"`
	// Renewals counts the gaps between consecutive ok lease writes of one holding (a role
	// under one token), invocation to invocation; the percentiles are of those gaps, in ns.
	Renewals      int   `json:"renewals"`
	RenewalGapP50 int64 `json:"renewal_gap_p50_ns"`
	RenewalGapP99 int64 `json:"renewal_gap_p99_ns"`
	RenewalGapMax int64 `json:"renewal_gap_max_ns"`
}

// measureLiveness fills c.res.Liveness from the history's lease writes.
func (c *run) measureLiveness() {
	c.res.Liveness = c.x.liveness()
}

// measureLiveness computes Liveness for h with the given lease (ns).
func measureLiveness(h *history.History, lease int64) Liveness {
	return newIndex(h, &config{lease: lease}).liveness()
}

// liveness computes Liveness from the index: the workload's span from one pass over the
// operations, the held intervals and the renewal gaps from each role's operations (the lease
// writes among them), so nothing is looked up by role name.
func (x *index) liveness() Liveness {
	var l Liveness
	lease := x.cfg.lease
	if lease <= 0 {
		return l
	}
	h := x.h
	begin, end, finalAt := int64(-1), int64(-1), int64(-1)
	// Every role with an operation other than a final read counts; one that never had an ok
	// lease write held nothing.
	workload := make([]bool, len(x.roles))
	var op history.Op
	for i := range h.Len() {
		h.Load(i, &op)
		r := x.roleOf[i]
		if r < 0 {
			continue
		}
		if op.Kind == history.KindFinalRead {
			if finalAt < 0 || op.Invoke < finalAt {
				finalAt = op.Invoke
			}
			continue
		}
		workload[r] = true
		if begin < 0 || op.Invoke < begin {
			begin = op.Invoke
		}
		if !op.Pending && op.Return > end {
			end = op.Return
		}
	}
	if finalAt >= 0 { // the workload stopped before the final reads; the reads after them are not its
		end = finalAt
	}
	renewals := 0 // an upper bound on the gaps: the roles' ok lease writes
	for r, rd := range x.roleData {
		if workload[r] {
			for i := range rd.ops {
				if ro := &rd.ops[i]; ro.kind == opWriteLease && ro.typ == history.TypeOK {
					renewals++
				}
			}
		}
	}
	var (
		held  [][2]int64 // the role's: the intervals its ok lease writes cover
		any   bool
		gaps  = make([]int64, 0, renewals)
		roles int
		last  = map[history.Token]int64{} // per holding of the role: its last ok lease write's invocation
	)
	fractions := make([]float64, len(x.roles))
	for r, rd := range x.roleData {
		if !workload[r] {
			continue
		}
		roles++
		clear(last)
		held = held[:0]
		for i := range rd.ops {
			ro := &rd.ops[i]
			if ro.kind != opWriteLease || ro.typ != history.TypeOK {
				continue
			}
			if from, to := ro.ret, ro.invoke+lease; to > from {
				held = append(held, [2]int64{from, to})
				any = true
			}
			k := ro.token()
			prev, ok := last[k]
			if ok && ro.invoke > prev {
				gaps = append(gaps, ro.invoke-prev)
			}
			if !ok || ro.invoke > prev {
				last[k] = ro.invoke
			}
		}
		if end > begin {
			fractions[r] = float64(union(held, begin, end)) / float64(end-begin)
		}
	}
	if !any || end <= begin {
		return l
	}
	l.Measured = true
	l.MinHeldFraction = 2
	for r, role := range x.roles { // in name order, as the sum has always been taken
		if !workload[r] {
			continue
		}
		f := fractions[r]
		l.HeldFraction += f / float64(roles)
		if f < l.MinHeldFraction {
			l.MinHeldFraction, l.MinHeldRole = f, role
		}
	}
	if len(gaps) > 0 {
		slices.Sort(gaps)
		l.Renewals = len(gaps)
		l.RenewalGapP50 = gaps[len(gaps)*50/100]
		l.RenewalGapP99 = gaps[min(len(gaps)-1, len(gaps)*99/100)]
		l.RenewalGapMax = gaps[len(gaps)-1]
	}
	return l
}

// union is the length of the union of the intervals, clipped to [begin, end].
func union(iv [][2]int64, begin, end int64) int64 {
	slices.SortFunc(iv, func(a, b [2]int64) int {
		switch {
		case a[0] < b[0]:
			return -1
		case a[0] > b[0]:
			return 1
		}
		return 0
	})
	var total, upTo int64 = 0, begin
	for _, v := range iv {
		from, to := max(v[0], upTo), min(v[1], end)
		if to > from {
			total += to - from
			upTo = to
		}
	}
	return total
}
