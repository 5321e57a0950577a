package checker

import (
	"cmp"
	"slices"

	"github.com/fencecheck/fencecheck/checker/history"
)

// Exposure is the split-brain exposure of a run (docs/checker.md, "Exposure"): the time during which two
// members each believed they held the same role. It is a measurement, not a verdict: leases
// cannot prevent it in an asynchronous network, fencing must make it harmless (which
// log-token-order and fenced-stale-write judge).
type Exposure struct {
	// LeaseNS is the lease duration the beliefs were computed with; 0 means unknown, and then
	// a belief ends with the holder's last successful write.
	LeaseNS int64 `json:"lease_ns"`
	// TotalNS sums the overlap of every role; LongestNS is the longest single overlap, in
	// LongestRole.
	TotalNS     int64  `json:"total_ns"`
	LongestNS   int64  `json:"longest_ns"`
	LongestRole string `json:"longest_role,omitempty"`
	// Roles lists the roles with any overlap, by role name.
	Roles []RoleExposure `json:"roles,omitempty"`
	// Error is set when the measurement failed (a checker bug); the run's verdict is unaffected.
	Error string `json:"error,omitempty"`
}

// RoleExposure is one role's overlap.
type RoleExposure struct {
	Role      string `json:"role"`
	TotalNS   int64  `json:"total_ns"`
	LongestNS int64  `json:"longest_ns"`
	// Overlaps are the intervals in time order (at most maxOverlaps; Count has them all).
	Overlaps []Overlap `json:"overlaps"`
	Count    int       `json:"count"`
}

// Overlap is one interval during which at least two members believed they held the role.
type Overlap struct {
	StartNS int64    `json:"start_ns"`
	EndNS   int64    `json:"end_ns"`
	Holders []Holder `json:"holders"`
}

// Holder is one member's belief: from its acquire's return until its lease ran out by its own
// clock (the lease counted from the invocation of its last successful lease write, or of the
// acquire), it learned it was fenced, or it acquired again.
type Holder struct {
	Process string        `json:"process,omitempty"`
	Member  string        `json:"member"`
	Token   history.Token `json:"token"`
	Acquire int64         `json:"acquire_op"`
	StartNS int64         `json:"start_ns"`
	EndNS   int64         `json:"end_ns"`
}

const maxOverlaps = 20

// beliefs returns the intervals in which members of role believed they held it. When the
// role's operations are not in invocation order it sorts a copy of them in *scratch, which it
// keeps for the next role.
func (x *index) beliefs(role string, scratch *[]roleOp) []Holder {
	lease := x.cfg.lease
	rd := x.byRole[role]
	type state struct {
		h        Holder
		renew    int64 // invocation of the last lease renewal
		evidence int64 // return of the last successful write
		cut      int64 // when the member learned it no longer held the role
		open     bool
	}
	var out []Holder
	cur := make([]state, len(rd.members))
	closeBelief := func(s *state) {
		end := s.evidence
		if lease > 0 {
			end = s.renew + lease
		}
		end = min(end, s.cut, x.h.End)
		if end > s.h.StartNS {
			s.h.EndNS = end
			out = append(out, s.h)
		}
		s.open = false
	}
	ops := rd.ops
	if !slices.IsSortedFunc(ops, func(a, b roleOp) int { return cmp.Compare(a.invoke, b.invoke) }) {
		ops = append((*scratch)[:0], ops...)
		*scratch = ops
		slices.SortStableFunc(ops, func(a, b roleOp) int { return cmp.Compare(a.invoke, b.invoke) })
	}
	for i := range ops {
		ro := &ops[i]
		s := &cur[ro.member]
		switch {
		case ro.kind == opAcquire && ro.typ == history.TypeOK:
			if s.open {
				s.cut = min(s.cut, ro.invoke)
				closeBelief(s)
			}
			m := rd.members[ro.member]
			*s = state{
				h:     Holder{Process: m.process, Member: m.member, Token: ro.token(), Acquire: x.op(ro.op).ID, StartNS: ro.ret},
				renew: ro.invoke, evidence: ro.ret, cut: history.Never, open: true,
			}
		case ro.kind == opAcquire && s.open:
			s.cut = min(s.cut, ro.invoke) // it set out to acquire again: it no longer holds
		case ro.kind.isWrite() && s.open && ro.token() == s.h.Token:
			switch {
			case ro.typ == history.TypeOK:
				s.evidence = max(s.evidence, ro.ret)
				if ro.kind == opWriteLease {
					s.renew = max(s.renew, ro.invoke)
				}
			case ro.typ == history.TypeFail && (ro.fenced() || ro.notHeld()):
				s.cut = min(s.cut, ro.ret)
			}
		}
	}
	for i := range cur {
		if cur[i].open {
			closeBelief(&cur[i])
		}
	}
	slices.SortStableFunc(out, func(a, b Holder) int { return cmp.Compare(a.StartNS, b.StartNS) })
	return out
}

// measureExposure sweeps each role's beliefs for the times two or more overlap.
func (c *run) measureExposure() {
	x := c.x
	e := &c.res.Exposure
	e.LeaseNS = x.cfg.lease
	var scratch []roleOp
	for _, role := range x.roles {
		hs := x.beliefs(role, &scratch)
		if len(hs) < 2 {
			continue
		}
		type edge struct {
			t     int64
			delta int
			h     int
		}
		edges := make([]edge, 0, 2*len(hs))
		for i, h := range hs {
			edges = append(edges, edge{h.StartNS, +1, i}, edge{h.EndNS, -1, i})
		}
		// Ends sort before starts at the same time: touching beliefs do not overlap.
		slices.SortFunc(edges, func(a, b edge) int {
			return cmp.Or(cmp.Compare(a.t, b.t), cmp.Compare(a.delta, b.delta))
		})
		re := RoleExposure{Role: role}
		active := map[int]bool{}
		var cur *Overlap
		var holders map[int]bool
		for _, ed := range edges {
			if ed.delta > 0 {
				active[ed.h] = true
				if len(active) == 2 {
					cur = &Overlap{StartNS: ed.t}
					holders = map[int]bool{}
					for h := range active {
						holders[h] = true
					}
				} else if cur != nil {
					holders[ed.h] = true
				}
				continue
			}
			delete(active, ed.h)
			if cur != nil && len(active) < 2 {
				cur.EndNS = ed.t
				d := cur.EndNS - cur.StartNS
				re.TotalNS += d
				re.LongestNS = max(re.LongestNS, d)
				re.Count++
				if len(re.Overlaps) < maxOverlaps {
					idx := make([]int, 0, len(holders))
					for h := range holders {
						idx = append(idx, h)
					}
					slices.Sort(idx)
					for _, h := range idx {
						cur.Holders = append(cur.Holders, hs[h])
					}
					re.Overlaps = append(re.Overlaps, *cur)
				}
				cur = nil
			}
		}
		if re.Count == 0 {
			continue
		}
		e.Roles = append(e.Roles, re)
		e.TotalNS += re.TotalNS
		if re.LongestNS > e.LongestNS {
			e.LongestNS, e.LongestRole = re.LongestNS, role
		}
	}
}
