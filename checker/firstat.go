package checker

import "github.com/fencecheck/fencecheck/checker/history"

// setFirstAt sets r.FirstAt from all of r's anomalies, before any is dropped by the cap: it is
// how long the run took to produce its first violation, which `fencecheck selftest` reports
// as a mutant's time to detect.
func (x *index) setFirstAt(r *Result, byID map[int64]int32) {
	for _, a := range r.Anomalies {
		at, ok := x.observedAt(a, byID)
		if ok && (r.FirstAt == 0 || at < r.FirstAt) {
			r.FirstAt = at
		}
	}
}

// observedAt is the history time at which a became observable: when the last of its
// operations completed (a pending one counts at its invocation). Final reads are left out:
// they are the reference taken after the run, not part of the violation. ok is false when a
// names no other operation.
func (x *index) observedAt(a Anomaly, byID map[int64]int32) (at int64, ok bool) {
	for _, id := range a.Ops {
		i, found := byID[id]
		if !found {
			continue
		}
		op := x.op(i)
		if op.Kind == history.KindFinalRead {
			continue
		}
		t := op.Return
		if op.Pending {
			t = op.Invoke
		}
		if !ok || t > at {
			at, ok = t, true
		}
	}
	return at, ok
}

// opsByID maps the id of every operation the checks' anomalies name to its index (the last,
// should two operations share an id). The anomalies name few operations: a map of every id
// would cost a tenth of a second and 35 MB on a million operations, this one pass over the
// history a hundredth.
func (x *index) opsByID(checks []Result) map[int64]int32 {
	want := map[int64]bool{}
	for i := range checks {
		for _, a := range checks[i].Anomalies {
			for _, id := range a.Ops {
				want[id] = true
			}
		}
	}
	m := make(map[int64]int32, len(want))
	if len(want) == 0 {
		return m
	}
	var op history.Op
	for i := range x.h.Len() {
		x.h.Load(i, &op)
		if want[op.ID] {
			m[op.ID] = int32(i)
		}
	}
	return m
}
