package workload

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/transport"
)

// Stats is a snapshot of a run's progress, for a status line and for tests.
type Stats struct {
	// Elapsed is the time since Run started the members (it stops when Run returns).
	Elapsed time.Duration
	// Ops is the number of completed operations; OpsPerSecond is Ops over Elapsed.
	Ops          int64
	OpsPerSecond float64
	// Kinds counts completed operations by kind and outcome.
	Kinds map[history.Kind]Outcomes
	// Fences counts writes the epoch check rejected (completions with the error class
	// history.ErrorFenced, fail or info).
	Fences int64
	// Handoffs counts ok acquires by another member than the role's previous ok acquire.
	Handoffs int64
	// RolesHeld is the number of roles some member believes it holds now; Believers the
	// number of members that believe they hold their role now, which exceeds RolesHeld while
	// a deposed holder (a zombie, or one that has not noticed a handoff yet) still believes;
	// Frozen the number of members paused now.
	RolesHeld int
	Believers int
	Frozen    int
	// HeldFraction is the fraction of Elapsed during which a role had a lease renewed within
	// the lease duration (an ok lease write that completed at most Lease after it was
	// invoked), averaged over roles; MinHeldFraction is the lowest role's.
	HeldFraction    float64
	MinHeldFraction float64
}

// Outcomes counts completions by type.
type Outcomes struct {
	OK, Fail, Info int64
}

// Total is the number of completions.
func (o Outcomes) Total() int64 { return o.OK + o.Fail + o.Info }

// opKinds are the operation kinds in counter order.
var opKinds = [...]history.Kind{
	history.KindRegister, history.KindAcquire, history.KindWriteLease, history.KindWork,
	history.KindRead, history.KindDescribe, history.KindFinalRead,
}

func kindIndex(k history.Kind) int {
	for i, x := range opKinds {
		if x == k {
			return i
		}
	}
	return 0
}

// counters are the live counters behind Stats.
type counters struct {
	lease int64 // ns

	kinds    [len(opKinds)][3]atomic.Int64 // by transport.Outcome
	fences   atomic.Int64
	handoffs atomic.Int64
	frozen   atomic.Int64

	// begin and end bound the measured window in history time: begin is -1 before Run, end
	// is 0 while it runs.
	begin, end atomic.Int64

	mu           sync.Mutex
	lastAcquirer map[string]string // role → process/member of its last ok acquire
	held         map[string]*heldSpan
}

// heldSpan accumulates the time a role was held: the union of [completion, invoke+lease)
// over its ok lease writes. Completions arrive nearly in time order, so a running "covered
// until" suffices.
type heldSpan struct {
	until int64 // history time the role is covered until
	total int64 // ns covered, including up to until
}

func newCounters(lease time.Duration, roles []string) *counters {
	c := &counters{lease: int64(lease), lastAcquirer: map[string]string{}, held: map[string]*heldSpan{}}
	c.begin.Store(-1)
	for _, r := range roles {
		c.held[r] = &heldSpan{}
	}
	return c
}

func (c *counters) completed(k *call, out transport.Outcome, err error, ret int64) {
	c.kinds[kindIndex(k.kind)][out].Add(1)
	if k.kind.IsWrite() && errors.Is(err, transport.ErrFenced) {
		c.fences.Add(1)
	}
	if out != transport.OK {
		return
	}
	switch k.kind {
	case history.KindAcquire:
		who := k.c.process + "/" + k.c.member
		c.mu.Lock()
		if prev, ok := c.lastAcquirer[k.role]; ok && prev != who {
			c.handoffs.Add(1)
		}
		c.lastAcquirer[k.role] = who
		c.mu.Unlock()
	case history.KindWriteLease:
		from, to := ret, k.invoke+c.lease
		if to <= from {
			return // completed after its own lease ran out: it renewed nothing
		}
		c.mu.Lock()
		s := c.held[k.role]
		switch {
		case from >= s.until:
			s.total += to - from
			s.until = to
		case to > s.until:
			s.total += to - s.until
			s.until = to
		}
		c.mu.Unlock()
	}
}

func (c *counters) snapshot(now int64) Stats {
	begin, end := c.begin.Load(), c.end.Load()
	if end == 0 {
		end = now
	}
	s := Stats{
		Kinds:    make(map[history.Kind]Outcomes, len(opKinds)),
		Fences:   c.fences.Load(),
		Handoffs: c.handoffs.Load(),
		Frozen:   int(c.frozen.Load()),
	}
	if begin >= 0 {
		s.Elapsed = time.Duration(end - begin)
	}
	for i, k := range opKinds {
		o := Outcomes{OK: c.kinds[i][transport.OK].Load(), Fail: c.kinds[i][transport.Fail].Load(), Info: c.kinds[i][transport.Unknown].Load()}
		if o.Total() > 0 {
			s.Kinds[k] = o
		}
		s.Ops += o.Total()
	}
	if s.Elapsed > 0 {
		s.OpsPerSecond = float64(s.Ops) / s.Elapsed.Seconds()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.Elapsed <= 0 || len(c.held) == 0 {
		return s
	}
	s.MinHeldFraction = 1
	for _, h := range c.held {
		held := h.total - max(0, h.until-end) // not the part beyond the window
		f := float64(held) / float64(end-begin)
		s.HeldFraction += f / float64(len(c.held))
		s.MinHeldFraction = min(s.MinHeldFraction, f)
	}
	return s
}
