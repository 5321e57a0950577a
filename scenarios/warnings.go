package scenarios

import (
	"fmt"
	"time"

	"github.com/fencecheck/fencecheck/nemesis"
	"github.com/fencecheck/fencecheck/workload"
)

// Warnings returns, one line each, what s asks for that will not happen as written, naming
// the step: a before-lease-commit freeze longer than a commit can be held back (the freezer
// caps it under the request timeout, so the member freezes for less), and a step that starts
// at or after the end of the run (it never runs, which makes the run inconclusive). Call it on
// a valid scenario, after every override (cluster kind, duration): the command line prints
// the warnings before the run starts.
func (s *Scenario) Warnings() []string {
	var out []string
	commitCap := commitHoldCap(s.Workload.RequestTimeout.D())
	freezeCap := func(field string, spec nemesis.Spec) {
		if spec.Fault != "freeze" || (spec.Params.Point != "" && spec.Params.Point != string(workload.BeforeLeaseCommit)) {
			return
		}
		asked := spec.For.D()
		if asked == 0 {
			asked = 2 * s.Workload.Lease.D() // the nemesis's default: twice the lease
		}
		if asked > commitCap {
			out = append(out, fmt.Sprintf("%s: a commit is held back at most %v (a tenth under the workload's %v request timeout), so this freeze will last %v, not %v",
				field, commitCap, s.Workload.RequestTimeout, commitCap, asked))
		}
	}
	for i, line := range s.Nemesis.Script {
		st, err := nemesis.ParseStep(line)
		if err != nil {
			continue // Validate reports it
		}
		field := fmt.Sprintf("nemesis.script[%d] %q", i, line)
		if st.At.D() >= s.Duration.D() {
			out = append(out, fmt.Sprintf("%s: starts at %v, not before the end of the %v run: it will not run, and the run will be inconclusive (fault-took-hold)",
				field, st.At, time.Duration(s.Duration)))
		}
		freezeCap(field, st.Spec)
	}
	if r := s.Nemesis.Random; r != nil {
		if len(r.Faults) == 0 {
			freezeCap("nemesis.random (every fault: freeze with its defaults)", nemesis.Spec{Fault: "freeze"})
		}
		for i, f := range r.Faults {
			freezeCap(fmt.Sprintf("nemesis.random.faults[%d] %q", i, f.String()), f)
		}
	}
	return out
}
