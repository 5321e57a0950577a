package checker

import (
	"fmt"
	"slices"

	"github.com/fencecheck/fencecheck/checker/history"
)

// Coverage requirement names. The first two are always required; scenarios promise the others
// by name (Options.Promises, or the history header's promises).
const (
	CoverFinalRead      = "final-read"       // every log has a successful final read
	CoverOpsSucceeded   = "ops-succeeded"    // at least one operation (besides final reads) succeeded
	CoverHandoff        = "handoff"          // some role was acquired by two different members
	CoverFence          = "fence"            // some write was fenced
	CoverFaultTookHold  = "fault-took-hold"  // every scripted step held; of a random schedule, some fault
	CoverOpsAroundFault = "ops-around-fault" // operations succeeded before, during and after faults
	CoverZombieFenced   = "zombie-fenced"    // a paused member's write was fenced after it resumed
)

// coverage evaluates one requirement: VerdictValid when it was met, VerdictInconclusive when
// not, with details saying what was found.
type coverage func(x *index) (bool, map[string]any)

var coverages = map[string]coverage{
	CoverFinalRead:      coverFinalRead,
	CoverOpsSucceeded:   coverOpsSucceeded,
	CoverHandoff:        coverHandoff,
	CoverFence:          coverFence,
	CoverFaultTookHold:  coverFaultTookHold,
	CoverOpsAroundFault: coverOpsAroundFault,
	CoverZombieFenced:   coverZombieFenced,
}

// Promises returns the names of every coverage requirement, sorted.
func Promises() []string {
	names := make([]string, 0, len(coverages))
	for n := range coverages {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// coverageNames are the coverage requirements a run is held to: final-read and
// ops-succeeded always, fault-took-hold when it scheduled faults, then its promises.
func (c *run) coverageNames(meta *history.Meta) []string {
	names := []string{CoverFinalRead, CoverOpsSucceeded}
	if meta.Schedule != "" {
		// A run that scheduled faults promises that they happened, whether or not the
		// scenario says so: without them it tested a quiet cluster.
		names = append(names, CoverFaultTookHold)
	}
	for _, p := range c.cfg.promises {
		if !slices.Contains(names, p) {
			names = append(names, p)
		}
	}
	return names
}

func (c *run) checkCoverage() {
	for _, name := range c.coverageNames(&c.x.h.Meta) {
		r := Result{Name: name, Verdict: VerdictValid, Details: map[string]any{}}
		c.safely(&r, func() {
			ok, details := coverages[name](c.x)
			for k, v := range details {
				r.Details[k] = v
			}
			if !ok {
				r.Verdict = VerdictInconclusive
			}
		})
		c.res.Coverage = append(c.res.Coverage, r)
	}
}

func coverFinalRead(x *index) (bool, map[string]any) {
	var missing []string
	for _, id := range x.logIDs {
		if x.logs[id].final < 0 {
			missing = append(missing, id.String())
		}
	}
	failed := x.tally.failedFinalReads
	d := map[string]any{"logs": len(x.logIDs), "final_reads": x.finalCount}
	if failed > 0 {
		d["final_reads_failed"] = failed
	}
	if len(missing) > 0 {
		d["missing"] = capStrings(missing, 20)
	}
	if x.h.Truncated {
		d["truncated_at_line"] = x.h.TruncatedLine
	}
	return len(x.logIDs) > 0 && len(missing) == 0, d
}

func coverOpsSucceeded(x *index) (bool, map[string]any) {
	ok := x.tally.ok
	return ok > 0, map[string]any{"ok": ok, "ops": x.h.Len()}
}

func coverHandoff(x *index) (bool, map[string]any) {
	roles := 0
	for _, role := range x.roles {
		members := map[uint16]bool{}
		for _, ro := range x.byRole[role].ops {
			if ro.kind == opAcquire && ro.typ == history.TypeOK {
				members[ro.member] = true
			}
		}
		if len(members) >= 2 {
			roles++
		}
	}
	return roles > 0, map[string]any{"roles_with_handoff": roles}
}

func coverFence(x *index) (bool, map[string]any) {
	fenced := x.tally.fenced
	return fenced > 0, map[string]any{"fenced_writes": fenced}
}

// coverFaultTookHold: when the history's header lists a script, every step must have a window
// that took hold, and the details name each step that did not (with its line); otherwise (a
// random schedule, or no schedule named), at least one window must have taken hold. A
// random schedule picks its targets blindly, so single misses are expected and say nothing
// about the transport; a run in which every fault missed tested a quiet cluster.
func coverFaultTookHold(x *index) (bool, map[string]any) {
	held := 0
	for _, f := range x.h.Faults {
		if f.TookHold {
			held++
		}
	}
	d := map[string]any{"faults": len(x.h.Faults), "took_hold": held}
	script := x.h.Meta.Script
	if len(script) == 0 {
		d["rule"] = "at least one fault took hold"
		var missed []string
		for _, f := range x.h.Faults {
			if !f.TookHold {
				missed = append(missed, fmt.Sprintf("fault %d (%s)", f.ID, faultName(f)))
			}
		}
		if len(missed) > 0 {
			d["missed"] = capStrings(missed, 20)
		}
		return held > 0, d
	}
	d["rule"] = "every scripted step took hold"
	windows := make([][]history.Fault, len(script))
	var stray []string
	for _, f := range x.h.Faults {
		if f.Step >= 1 && f.Step <= len(script) {
			windows[f.Step-1] = append(windows[f.Step-1], f)
		} else if f.Step != 0 {
			stray = append(stray, fmt.Sprintf("fault %d names step %d of %d", f.ID, f.Step, len(script)))
		}
	}
	var missed []string
	for i, ws := range windows {
		step := fmt.Sprintf("step %d %q", i+1, script[i])
		switch {
		case len(ws) == 0:
			missed = append(missed, step+": never injected (no target, or the run ended first)")
		case !slices.ContainsFunc(ws, func(f history.Fault) bool { return f.TookHold }):
			missed = append(missed, fmt.Sprintf("%s: injected as fault %d but never took hold", step, ws[0].ID))
		}
	}
	d["steps"], d["steps_held"] = len(script), len(script)-len(missed)
	if len(missed) > 0 {
		d["missed"] = capStrings(missed, 20)
	}
	if len(stray) > 0 {
		d["malformed"] = capStrings(stray, 20)
	}
	return len(missed) == 0 && len(stray) == 0, d
}

func faultName(f history.Fault) string {
	if f.Desc != "" {
		return f.Desc
	}
	return string(f.Kind)
}

func coverOpsAroundFault(x *index) (bool, map[string]any) {
	var faults []history.Fault
	for _, f := range x.h.Faults {
		if f.Kind != history.KindMemberPause {
			faults = append(faults, f)
		}
	}
	if len(faults) == 0 {
		return false, map[string]any{"faults": 0}
	}
	first, last := faults[0].Start, int64(0)
	for _, f := range faults {
		first = min(first, f.Start)
		last = max(last, f.End)
	}
	before, during, after := 0, 0, 0
	var op history.Op
	for i := range x.h.Len() {
		x.h.Load(i, &op)
		if op.Type != history.TypeOK || op.Kind == history.KindFinalRead {
			continue
		}
		switch {
		case op.Return < first:
			before++
		case op.Invoke > last:
			after++
		}
		for _, f := range faults {
			if op.Invoke >= f.Start && op.Return <= f.End {
				during++
				break
			}
		}
	}
	d := map[string]any{"before": before, "during": during, "after": after}
	if last == history.Never {
		d["after"] = fmt.Sprintf("%d (a fault never ended)", after)
	}
	return before > 0 && during > 0 && after > 0, d
}

func coverZombieFenced(x *index) (bool, map[string]any) {
	pauses, fenced := 0, 0
	for _, f := range x.h.Faults {
		if f.Kind != history.KindMemberPause {
			continue
		}
		pauses++
		rd := x.byRole[f.Role]
		if rd == nil {
			continue
		}
		for _, ro := range rd.ops {
			m := rd.members[ro.member]
			if m.member == f.Member && (f.Process == "" || m.process == f.Process) && ro.kind.isWrite() &&
				ro.invoke >= f.End && ro.typ == history.TypeFail && ro.fenced() {
				fenced++
				break
			}
		}
	}
	return fenced > 0, map[string]any{"member_pauses": pauses, "zombies_fenced": fenced}
}
