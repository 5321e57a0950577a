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
	c.res.Liveness = measureLiveness(c.x.h, c.x.cfg.lease)
}

// measureLiveness computes Liveness for h with the given lease (ns).
func measureLiveness(h *history.History, lease int64) Liveness {
	var l Liveness
	if lease <= 0 {
		return l
	}
	type holding struct {
		role string
		pid  int64
		ep   int16
	}
	begin, end, finalAt := int64(-1), int64(-1), int64(-1)
	held := map[string][][2]int64{} // per role: the intervals its ok lease writes cover
	last := map[holding]int64{}     // per holding: its last ok lease write's invocation
	var gaps []int64
	// Every role with operations counts; one that never had an ok lease write held nothing.
	var roles []string
	seen := map[string]bool{}
	for i := range h.Ops {
		op := &h.Ops[i]
		if op.Role == "" {
			continue
		}
		if op.Kind == history.KindFinalRead {
			if finalAt < 0 || op.Invoke < finalAt {
				finalAt = op.Invoke
			}
			continue
		}
		if !seen[op.Role] {
			seen[op.Role] = true
			roles = append(roles, op.Role)
		}
		if begin < 0 || op.Invoke < begin {
			begin = op.Invoke
		}
		if !op.Pending && op.Return > end {
			end = op.Return
		}
		if op.Kind != history.KindWriteLease || op.Type != history.TypeOK {
			continue
		}
		if from, to := op.Return, op.Invoke+lease; to > from {
			held[op.Role] = append(held[op.Role], [2]int64{from, to})
		}
		k := holding{op.Role, op.Args.Token.ProducerID, op.Args.Token.Epoch}
		if prev, ok := last[k]; ok && op.Invoke > prev {
			gaps = append(gaps, op.Invoke-prev)
		}
		if prev, ok := last[k]; !ok || op.Invoke > prev {
			last[k] = op.Invoke
		}
	}
	if finalAt >= 0 { // the workload stopped before the final reads; the reads after them are not its
		end = finalAt
	}
	if len(held) == 0 || end <= begin {
		return l
	}
	l.Measured = true
	slices.Sort(roles)
	l.MinHeldFraction = 2
	for _, role := range roles {
		f := float64(union(held[role], begin, end)) / float64(end-begin)
		l.HeldFraction += f / float64(len(roles))
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
