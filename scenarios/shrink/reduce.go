package shrink

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fencecheck/fencecheck/internal/units"
	"github.com/fencecheck/fencecheck/nemesis"
	"github.com/fencecheck/fencecheck/workload"
	"github.com/fencecheck/fencecheck/workload/pipeline"
)

type step = nemesis.Step

func wrap(steps []nemesis.Step) []step { return slices.Clone(steps) }

// cand is a reduction of the best plan, with what it changed.
type cand struct {
	p    plan
	what string
}

// reduction proposes smaller plans than p, the most promising (and cheapest) first. The
// search keeps the first that still fails, then asks the same reduction again.
type reduction func(p plan) []cand

// reductions in the order the search tries them: the big cuts first, because they make every
// later try shorter and cheaper. Within a reduction the candidates that remove the most come
// first, and a candidate that is not kept does not end its dimension: the next one, which
// removes less, is tried before the search moves on (dropping every fault, then half the
// script, then each fault; on a loaded machine one unlucky try must not cost the faults their
// turn).
var reductions = []reduction{shortenRun, dropFaults, cutProcesses, cutRoles, cutMembers, cutReaders,
	shortenFaults, earlierFaults, lowerRate}

// pipeReductions are a pipeline run's, in the same spirit: its shape is processes, members
// and input partitions, and its extras (members leaving, aborted input, state) are dropped
// one at a time.
var pipeReductions = []reduction{shortenRun, dropFaults, cutPipeProcesses, cutPipeMembers, cutPartitions, calmPipeline,
	shortenFaults, earlierFaults, lowerPipeRate}

// reductions returns the reductions of p's workload.
func (p plan) reductions() []reduction {
	if p.s.Workload.IsPipeline() {
		return pipeReductions
	}
	return reductions
}

// unit is the time a run needs to show anything: a lease run's lease, a pipeline's session
// timeout (a member frozen for less is no zombie).
func (p plan) unit() time.Duration {
	if p.s.Workload.IsPipeline() {
		return p.pipeline().SessionTimeout.D()
	}
	return p.s.Workload.Lease.D()
}

// pipeline returns p's pipeline settings with their defaults (the scenario was validated, so
// they are valid).
func (p plan) pipeline() pipeline.Config {
	c, _ := p.s.Workload.PipelineConfig()
	return c
}

// withPipeline returns p with its pipeline settings changed by change, in a copy: the
// scenario's may be shared with the catalogue's.
func (p plan) withPipeline(change func(*pipeline.Config)) plan {
	q := p.clone()
	c := q.pipeline()
	change(&c)
	q.s.Workload.Pipeline = &c
	return q
}

// round is the grain of every shortened duration.
const round = 100 * time.Millisecond

func (p plan) clone() plan {
	q := p
	q.steps = slices.Clone(p.steps)
	return q
}

// dropFaults proposes the script emptied (two steps or more), then its first or second half
// dropped (four or more), then one step dropped at a time, the latest first (a failure often
// follows the fault before it).
func dropFaults(p plan) []cand {
	var out []cand
	n := len(p.steps)
	if n >= 2 { // one step: dropping it is below
		q := p.clone()
		q.steps = nil
		out = append(out, cand{q, "drop every fault"})
	}
	if n >= 4 {
		q := p.clone()
		q.steps = slices.Clone(p.steps[:n/2])
		out = append(out, cand{q, fmt.Sprintf("drop faults %d-%d", n/2+1, n)})
		q = p.clone()
		q.steps = slices.Clone(p.steps[n/2:])
		out = append(out, cand{q, fmt.Sprintf("drop faults 1-%d", n/2)})
	}
	for i := n - 1; i >= 0; i-- {
		q := p.clone()
		q.steps = slices.Delete(q.steps, i, i+1)
		out = append(out, cand{q, fmt.Sprintf("drop fault %d (%s)", i+1, p.steps[i].Fault)})
	}
	return out
}

// shortenRun tries a quarter, a half and three quarters of the duration, dropping the steps
// that would start after the end. It never goes below three leases: a shorter run sees
// hardly a handoff, so the few that still fail do so by luck and the result would rarely
// reproduce (measured: 4 s runs of a 2 s lease failed 3 to 4 times in 5).
func shortenRun(p plan) []cand {
	d := p.s.Duration.D()
	floor := 3 * p.unit()
	var out []cand
	for _, f := range []float64{0.25, 0.5, 0.75} {
		nd := time.Duration(float64(d) * f).Round(round)
		if nd < floor || nd >= d {
			continue
		}
		q := p.clone()
		q.s.Duration = units.Duration(nd)
		q.steps = slices.DeleteFunc(q.steps, func(st step) bool { return st.At.D() >= nd })
		out = append(out, cand{q, "run for " + nd.String()})
	}
	return out
}

// smaller returns the values below n worth trying, smallest first: lo, n/2, n-1.
func smaller(n, lo int) []int {
	var out []int
	for _, v := range []int{lo, n / 2, n - 1} {
		if v >= lo && v < n && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

func cutProcesses(p plan) []cand {
	w := p.s.Workload
	var out []cand
	for _, n := range smaller(w.Processes, w.MembersPerRole) {
		q := p.clone()
		q.s.Workload.Processes = n
		q.steps = remapSteps(q.steps, n, w.Roles)
		out = append(out, cand{q, fmt.Sprintf("%d processes", n)})
	}
	return out
}

func cutRoles(p plan) []cand {
	w := p.s.Workload
	var out []cand
	for _, n := range smaller(w.Roles, 1) {
		q := p.clone()
		q.s.Workload.Roles = n
		q.steps = remapSteps(q.steps, w.Processes, n)
		out = append(out, cand{q, fmt.Sprintf("%d roles", n)})
	}
	return out
}

// cutMembers tries fewer members per role. It leaves the processes alone: cutProcesses, which
// the search asks again in its next round, may then go down to as many as the members.
func cutMembers(p plan) []cand {
	w := p.s.Workload
	var out []cand
	for _, n := range smaller(w.MembersPerRole, 1) {
		q := p.clone()
		q.s.Workload.MembersPerRole = n
		out = append(out, cand{q, fmt.Sprintf("%d members per role", n)})
	}
	return out
}

func cutReaders(p plan) []cand {
	if p.s.Workload.Readers == 0 {
		return nil
	}
	q := p.clone()
	q.s.Workload.Readers = 0
	return []cand{{q, "no readers"}}
}

// shortenFaults halves each lasting step's window, down to one lease.
func shortenFaults(p plan) []cand {
	lease := p.unit()
	var out []cand
	for i, st := range p.steps {
		nf := (st.For.D() / 2).Round(round)
		if st.For == 0 || nf < lease/2 || nf <= 0 {
			continue
		}
		q := p.clone()
		q.steps[i].For = units.Duration(nf)
		out = append(out, cand{q, fmt.Sprintf("fault %d (%s) for %v", i+1, st.Fault, nf)})
	}
	return out
}

// earlierFaults moves every step earlier by half the first one's start (keeping their
// spacing, and shortening the run by as much), then each step on its own to half its start.
func earlierFaults(p plan) []cand {
	if len(p.steps) == 0 {
		return nil
	}
	var out []cand
	first := p.steps[0].At.D()
	for _, st := range p.steps {
		first = min(first, st.At.D())
	}
	if shift := (first / 2).Round(round); shift > 0 {
		q := p.clone()
		for i := range q.steps {
			q.steps[i].At -= units.Duration(shift)
		}
		q.s.Duration -= units.Duration(shift)
		out = append(out, cand{q, fmt.Sprintf("every fault %v earlier", shift)})
	}
	for i, st := range p.steps {
		na := (st.At.D() / 2).Round(round)
		if na >= st.At.D() || st.At.D()-na < time.Second {
			continue
		}
		q := p.clone()
		q.steps[i].At = units.Duration(na)
		out = append(out, cand{q, fmt.Sprintf("fault %d (%s) at %v", i+1, st.Fault, na)})
	}
	return out
}

// lowerRate halves the work rate and the look and contention rates (doubling their
// intervals), and the readers' rate.
func lowerRate(p plan) []cand {
	l := p.s.Workload.Load
	var out []cand
	if l.WorkRate > 0 {
		q := p.clone()
		q.s.Workload.Load.WorkRate = l.WorkRate / 2
		if q.s.Workload.Load.WorkRate < 0.5 {
			q.s.Workload.Load.WorkRate = 0
		}
		out = append(out, cand{q, fmt.Sprintf("work rate %g/s", q.s.Workload.Load.WorkRate)})
	}
	if l.Contend > 0 && l.Contend.D() < p.s.Duration.D() {
		q := p.clone()
		q.s.Workload.Load.Contend = l.Contend * 2
		out = append(out, cand{q, "contend every " + q.s.Workload.Load.Contend.D().String()})
	}
	if l.Look.D() < p.s.Workload.Lease.D() {
		q := p.clone()
		q.s.Workload.Load.Look = l.Look * 2
		out = append(out, cand{q, "look every " + q.s.Workload.Load.Look.D().String()})
	}
	return out
}

func cutPipeProcesses(p plan) []cand {
	c := p.pipeline()
	var out []cand
	for _, n := range smaller(c.Processes, 1) {
		q := p.withPipeline(func(c *pipeline.Config) { c.Processes = n })
		q.steps = remapSteps(q.steps, n, 0)
		out = append(out, cand{q, fmt.Sprintf("%d processes", n)})
	}
	return out
}

// cutPipeMembers tries fewer members, never fewer than two: a zombie needs another member to
// take its partitions.
func cutPipeMembers(p plan) []cand {
	c := p.pipeline()
	var out []cand
	for _, n := range smaller(c.Members, 2) {
		out = append(out, cand{p.withPipeline(func(c *pipeline.Config) { c.Members = n }), fmt.Sprintf("%d members", n)})
	}
	return out
}

// cutPartitions tries fewer input partitions; a step's role inK becomes in(K mod n).
func cutPartitions(p plan) []cand {
	c := p.pipeline()
	var out []cand
	for _, n := range smaller(int(c.Partitions), 1) {
		q := p.withPipeline(func(c *pipeline.Config) { c.Partitions = int32(n) })
		for i := range q.steps {
			t := &q.steps[i].Target
			t.Role, t.Processes.Role, t.Brokers.Role = remapPartition(t.Role, n), remapPartition(t.Processes.Role, n), remapPartition(t.Brokers.Role, n)
		}
		out = append(out, cand{q, fmt.Sprintf("%d partitions", n)})
	}
	return out
}

func remapPartition(role string, partitions int) string {
	n, err := strconv.Atoi(strings.TrimPrefix(role, "in"))
	if err != nil || !strings.HasPrefix(role, "in") || n < partitions {
		return role
	}
	return pipeline.PartitionRole(int32(n % partitions))
}

// calmPipeline drops what a pipeline does besides copying, one at a time: members leaving
// and rejoining, aborted input, state.
func calmPipeline(p plan) []cand {
	c := p.pipeline()
	var out []cand
	if c.Restart > 0 {
		out = append(out, cand{p.withPipeline(func(c *pipeline.Config) { c.Restart = 0 }), "no member restarts"})
	}
	if c.AbortedInput > 0 {
		out = append(out, cand{p.withPipeline(func(c *pipeline.Config) { c.AbortedInput = 0 }), "no aborted input"})
	}
	if c.Stateful {
		out = append(out, cand{p.withPipeline(func(c *pipeline.Config) { c.Stateful = false }), "not stateful"})
	}
	return out
}

// lowerPipeRate halves the input rate, down to 5 records a second.
func lowerPipeRate(p plan) []cand {
	c := p.pipeline()
	if c.Rate/2 < 5 {
		return nil
	}
	return []cand{{p.withPipeline(func(c *pipeline.Config) { c.Rate /= 2 }), fmt.Sprintf("input rate %g/s", c.Rate/2)}}
}

// remapSteps rewrites the steps' process ids and roles for a run with fewer processes or
// roles: process pK becomes p((K-1) mod processes + 1), role rK becomes r((K-1) mod roles + 1).
// A step whose targets thereby repeat keeps one of each.
func remapSteps(steps []step, processes, roles int) []step {
	out := slices.Clone(steps)
	for i := range out {
		t := &out[i].Target
		if t.Processes.Kind == nemesis.SelectIDs {
			var ids []int
			for _, id := range t.Processes.IDs {
				id = (id-1)%processes + 1
				if !slices.Contains(ids, id) {
					ids = append(ids, id)
				}
			}
			slices.Sort(ids)
			t.Processes.IDs = ids
		}
		t.Role = remapRole(t.Role, roles)
		t.Processes.Role = remapRole(t.Processes.Role, roles)
		t.Brokers.Role = remapRole(t.Brokers.Role, roles)
	}
	return out
}

func remapRole(role string, roles int) string {
	n, err := strconv.Atoi(strings.TrimPrefix(role, "r"))
	if err != nil || !strings.HasPrefix(role, "r") || n <= roles || roles <= 0 {
		return role
	}
	return workload.RoleName((n - 1) % roles)
}
