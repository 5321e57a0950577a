package workload

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/transport"
)

// member is one candidate of one role on one process. It runs the life of a leader:
//
//  1. register once (its join sequence);
//  2. as a candidate, look at the role now and then (read its records, or describe it) and
//     acquire when the role looks free (no lease renewed within its duration, by the member's
//     clock; or a describe that finds it never held) or at its contention moments;
//  3. as a holder, write the lease at once and then every Lease/3, and write work at the
//     load's rate;
//  4. when a write fails (fenced, or any other failure: the transport drops the holding on
//     any write error) or an acquire fails, back off with jitter and become a candidate again.
type member struct {
	w       *Workload
	proc    *process
	role    string
	id      string // "m2"
	name    string // "p3/r1/m2": the pause window's target
	txnID   string // the role's transactional id, for the commit gate
	workP   int32  // the role's work partition
	payload []byte
	plan    *MemberPlan
	cl      *client

	frozen    atomic.Bool
	acquiring atomic.Bool // an acquire call is in flight (Workload.Acquiring)

	mu   sync.Mutex
	view Holding // valid while holding
	held bool
}

func (m *member) run(ctx context.Context) {
	for n := 1; ; n++ {
		if _, err := m.cl.Register(ctx, m.role); err == nil {
			break
		}
		if !m.sleep(ctx, m.plan.Backoff(n)) {
			return
		}
	}
	now := time.Now()
	nextLook := now.Add(m.plan.FirstLook())
	var nextContend time.Time // zero: no contention schedule
	if gap := m.plan.NextContend(); gap > 0 {
		nextContend = now.Add(gap)
	}
	losses := 0 // consecutive acquires or holdings that ended without a renewal
	for {
		at, contend := nextLook, false
		if !nextContend.IsZero() && nextContend.Before(at) {
			at, contend = nextContend, true
		}
		if !m.sleepUntil(ctx, at) {
			return
		}
		try := contend
		if contend {
			nextContend = nextContend.Add(m.plan.NextContend())
		} else {
			look := m.plan.NextLook()
			nextLook = time.Now().Add(look.Wait)
			// A transport that cannot describe looks by reading; the plan stays the seed's.
			try = m.looksFree(ctx, look.Describe && m.proc.describe)
		}
		if !try || m.stopped() {
			continue
		}
		m.acquiring.Store(true)
		tok, err := m.cl.Acquire(ctx, m.role)
		m.acquiring.Store(false)
		if err == nil && m.hold(ctx, tok) {
			losses = 0
		}
		losses++
		if !m.sleep(ctx, m.plan.Backoff(losses)) {
			return
		}
		// Contention moments that passed while holding or backing off are dropped, so the
		// k-th moment stays where the plan put it.
		now := time.Now()
		for !nextContend.IsZero() && nextContend.Before(now) {
			nextContend = nextContend.Add(m.plan.NextContend())
		}
	}
}

// looksFree makes one look at the role and reports whether the member should acquire.
func (m *member) looksFree(ctx context.Context, describe bool) bool {
	if describe {
		_, held, err := m.cl.Describe(ctx, m.role)
		return err == nil && !held
	}
	rr, err := m.cl.ReadRole(ctx, history.KindRead, m.role)
	if err != nil {
		return false
	}
	if len(rr.Leases) == 0 {
		return true
	}
	last := rr.Leases[len(rr.Leases)-1].Lease
	return time.Since(last.WrittenAt) >= last.Duration
}

// hold runs the holder's loop under tok until a write fails or the run stops. It reports
// whether at least one lease write succeeded (the backoff starts over then).
func (m *member) hold(ctx context.Context, tok transport.FencingToken) (renewed bool) {
	m.setHolding(tok)
	defer m.clearHolding()
	if m.checkpoint(AfterAcquire) {
		return false
	}

	nextRenew := time.Now()
	var nextWork time.Time // zero: no work
	if gap := m.plan.NextWork(); gap > 0 {
		nextWork = nextRenew.Add(gap)
	}
	for {
		at, work := nextRenew, false
		if !nextWork.IsZero() && nextWork.Before(at) {
			at, work = nextWork, true
		}
		if !m.sleepUntil(ctx, at) {
			return renewed
		}
		if work {
			if m.checkpoint(BeforeWork) {
				return renewed
			}
			if err := m.cl.Work(ctx, m.role, tok, m.w.workTopic, m.workP, m.payload, m.plan.WorkRecords()); err != nil {
				return renewed
			}
			nextWork = time.Now().Add(m.plan.NextWork())
			continue
		}
		writtenAt, err := m.writeLease(ctx, tok)
		if err != nil {
			return renewed
		}
		renewed = true
		m.renewed(writtenAt)
		nextRenew = writtenAt.Add(m.plan.NextRenew())
	}
}

// writeLease writes one lease, with the commit held back when a BeforeLeaseCommit pause is
// armed for this member.
func (m *member) writeLease(ctx context.Context, tok transport.FencingToken) (time.Time, error) {
	r := m.w.pauses.take(m, BeforeLeaseCommit)
	if r != nil {
		m.proc.gate.arm(m.txnID, r, m)
	}
	at, err := m.cl.WriteLease(ctx, m.role, tok)
	if r != nil && !m.proc.gate.disarm(m.txnID) {
		m.w.pauses.rearm(r) // the write never reached its commit: keep the pause for the next
	}
	return at, err
}

// checkpoint freezes the member here when a pause is armed for it at point, and reports
// whether the run stopped meanwhile.
func (m *member) checkpoint(point Point) (stopped bool) {
	if r := m.w.pauses.take(m, point); r != nil {
		m.w.freeze(r, m)
	}
	return m.stopped()
}

func (m *member) setHolding(tok transport.FencingToken) {
	m.mu.Lock()
	m.held = true
	m.view = Holding{
		Process: m.proc.n, Role: m.role, Member: m.id,
		Token: historyToken(tok), Since: time.Duration(m.w.rec.now()),
	}
	m.mu.Unlock()
}

func (m *member) renewed(writtenAt time.Time) {
	m.mu.Lock()
	m.view.LeaseUntil = writtenAt.Add(m.w.cfg.Lease.D()).Sub(m.w.rec.start)
	m.mu.Unlock()
}

func (m *member) clearHolding() {
	m.mu.Lock()
	m.held = false
	m.mu.Unlock()
}

// holding returns the member's view of its holding, if it holds.
func (m *member) holding() (Holding, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.view
	h.Frozen = m.frozen.Load()
	return h, m.held
}

func (m *member) stopped() bool {
	select {
	case <-m.w.stopping:
		return true
	default:
		return false
	}
}

// sleepUntil waits until t; false when the run stops first.
func (m *member) sleepUntil(ctx context.Context, t time.Time) bool {
	return m.sleep(ctx, time.Until(t))
}

// sleep waits d; false when the run stops first.
func (m *member) sleep(ctx context.Context, d time.Duration) bool {
	return sleep(ctx, m.w.stopping, d)
}

// sleep waits d; false when stop closes or ctx ends first.
func sleep(ctx context.Context, stop <-chan struct{}, d time.Duration) bool {
	if d <= 0 {
		select {
		case <-stop:
			return false
		case <-ctx.Done():
			return false
		default:
			return true
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-stop:
		return false
	case <-ctx.Done():
		return false
	}
}

// Holding is a member's own view of a role it holds.
type Holding struct {
	// Process is the number (1-based) of the member's process, as the cluster's links and the
	// nemesis number processes; links.ProcessName names it.
	Process      int
	Role, Member string
	// Token is the token the member minted.
	Token history.Token
	// Since is the history time the member started holding (its acquire returned).
	Since time.Duration
	// LeaseUntil is the history time until which its last ok lease write holds by its own
	// clock; zero before its first.
	LeaseUntil time.Duration
	// Frozen is set while the member is paused (a zombie that still believes it holds).
	Frozen bool
}
