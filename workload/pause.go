package workload

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/cluster"
)

// Point names a place in a holder's loop where the nemesis can freeze the member (a zombie).
// A frozen member keeps its view: when it resumes it goes on as the holder it believed it
// was, with the token it held.
type Point string

// The pause points.
const (
	// AfterAcquire freezes a member right after an ok acquire, before its first lease write.
	AfterAcquire Point = "after-acquire"
	// BeforeLeaseCommit freezes a member inside a lease write: its record is produced (the
	// transaction is open on the partition) and the commit (EndTxn) is held back in the
	// member's process until the pause ends. The transport gives up on a commit after the
	// request timeout, so such a pause must be shorter than Config.RequestTimeout.
	BeforeLeaseCommit Point = "before-lease-commit"
	// BeforeWork freezes a member just before a work write under its token.
	BeforeWork Point = "before-work"
)

// Points lists the pause points.
func Points() []Point { return []Point{AfterAcquire, BeforeLeaseCommit, BeforeWork} }

// Errors of Freeze.
var (
	// ErrNotRunning: Freeze was called while the members are not running (before Run, after
	// it ended, or the pause was cancelled by ThawAll).
	ErrNotRunning = errors.New("workload not running")
	// ErrTarget: the target or the point names nothing the workload has.
	ErrTarget = errors.New("no such pause target")
)

// Target names who a pause may freeze: one member of a role, or (Member empty) whichever
// member of the role holds it when it reaches the point. Every point is on a holder's path,
// so an AfterAcquire pause of "the holder" takes the next member that acquires the role.
type Target struct {
	Role   string `json:"role" yaml:"role"`
	Member string `json:"member,omitempty" yaml:"member,omitempty"`
}

// HolderOf is the target "whichever member holds role".
func HolderOf(role string) Target { return Target{Role: role} }

// String reads "r1/m2" or "holder of r1".
func (t Target) String() string {
	if t.Member == "" {
		return "holder of " + t.Role
	}
	return t.Role + "/" + t.Member
}

// Pause is a pause that took hold. Its window is in the history as a fault of kind
// history.KindMemberPause from Start until the member resumed.
type Pause struct {
	// Fault is the id of the pause's window in the history; 0 when the caller records the
	// windows (WithoutPauseWindows).
	Fault int64
	// Process, Role and Member name the frozen member.
	Process, Role, Member string
	Point                 Point
	Duration              time.Duration
	// Start is the history time at which the member froze.
	Start time.Duration

	done     chan struct{}
	thaw     chan struct{}
	thawOnce sync.Once
	end      time.Duration // set before done is closed
}

// Done is closed once the member has resumed and the window's end is recorded.
func (p *Pause) Done() <-chan struct{} { return p.done }

// End returns the history time at which the member resumed, and false while it is frozen.
// It can be shorter than Start+Duration: a thaw, or the end of the run, resumes it early.
func (p *Pause) End() (time.Duration, bool) {
	select {
	case <-p.done:
		return p.end, true
	default:
		return 0, false
	}
}

// Thaw ends the pause early. It does not wait; see Done.
func (p *Pause) Thaw() { p.thawOnce.Do(func() { close(p.thaw) }) }

// pauseReq is a pause armed by Freeze that has not taken hold yet.
type pauseReq struct {
	target Target
	point  Point
	d      time.Duration
	taken  chan *Pause   // receives the pause when it takes hold
	cancel chan struct{} // closed by ThawAll, to wake Freeze

	// Guarded by pauses.mu.
	claimed bool // a member has it (or its commit gate does) and is about to freeze
	dead    bool // Freeze gave up or ThawAll disarmed it: it must not take hold any more
}

// pauses are the outstanding and active pauses of a workload. A request is armed until a
// member that reaches its point claims it; a claim ends in the pause taking hold, or, when a
// lease write never reached its commit, in the request being armed again. Taking hold,
// giving up (Freeze's ctx) and disarming (ThawAll) are decided under mu, so a pause never
// takes hold after its Freeze call returned an error, nor after ThawAll.
type pauses struct {
	n      atomic.Int32 // outstanding requests not claimed, for the members' fast path
	mu     sync.Mutex
	reqs   []*pauseReq // outstanding: armed or claimed
	active map[*Pause]struct{}
	open   bool // members are running
}

// take claims the first armed request for m at point, or returns nil.
func (ps *pauses) take(m *member, point Point) *pauseReq {
	if ps.n.Load() == 0 {
		return nil
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, r := range ps.reqs {
		if !r.claimed && r.point == point && r.target.Role == m.role && (r.target.Member == "" || r.target.Member == m.id) {
			r.claimed = true
			ps.n.Add(-1)
			return r
		}
	}
	return nil
}

// rearm arms again a request that was claimed but did not take hold (a lease write that
// never reached its commit), unless it was cancelled meanwhile.
func (ps *pauses) rearm(r *pauseReq) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if !r.dead {
		r.claimed = false
		ps.n.Add(1)
	}
}

// hold makes the claimed request r take hold as p, unless it was cancelled.
func (ps *pauses) hold(r *pauseReq, p *Pause) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if r.dead {
		return false
	}
	ps.reqs = slices.DeleteFunc(ps.reqs, func(x *pauseReq) bool { return x == r })
	ps.active[p] = struct{}{}
	return true
}

// drop cancels r unless it has taken hold, and reports whether it is cancelled.
func (ps *pauses) drop(r *pauseReq) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if r.dead {
		return true // ThawAll disarmed it
	}
	i := slices.Index(ps.reqs, r)
	if i < 0 {
		return false // it took hold
	}
	r.dead = true
	if !r.claimed {
		ps.n.Add(-1)
	}
	ps.reqs = slices.Delete(ps.reqs, i, i+1)
	return true
}

// Freeze arms a pause of target at point for d and returns once a member has frozen there,
// or when ctx ends (ctx's error) or the run stops (ErrNotRunning); a pause that did not take
// hold is disarmed and leaves no window. The member stays frozen for d (or until Thaw,
// ThawAll or the end of the run) in the background; the pause's window is recorded in the
// history when it takes hold and when the member resumes.
func (wl *Workload) Freeze(ctx context.Context, target Target, point Point, d time.Duration) (*Pause, error) {
	if err := wl.CheckFreeze(target, point, d); err != nil {
		return nil, err
	}
	r := &pauseReq{target: target, point: point, d: d, taken: make(chan *Pause, 1), cancel: make(chan struct{})}
	ps := &wl.pauses
	ps.mu.Lock()
	if !ps.open {
		ps.mu.Unlock()
		return nil, fmt.Errorf("freeze %s: %w", target, ErrNotRunning)
	}
	ps.reqs = append(ps.reqs, r)
	ps.n.Add(1)
	ps.mu.Unlock()

	select {
	case p := <-r.taken:
		return p, nil
	case <-r.cancel:
	case <-ctx.Done():
	}
	if !ps.drop(r) {
		return <-r.taken, nil // it took hold meanwhile; its pause is on the way
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("freeze %s at %s: did not take hold: %w", target, point, ctx.Err())
	}
	return nil, fmt.Errorf("freeze %s at %s: did not take hold: %w", target, point, ErrNotRunning)
}

func (wl *Workload) hasTarget(t Target) bool {
	for _, m := range wl.members {
		if m.role == t.Role && (t.Member == "" || t.Member == m.id) {
			return true
		}
	}
	return false
}

// CheckFreeze returns the error Freeze would refuse target, point and d with (wrapping
// ErrTarget), without arming anything: for a caller that arms a freeze in the background and
// wants a refusal at once.
func (wl *Workload) CheckFreeze(target Target, point Point, d time.Duration) error {
	if !slices.Contains(Points(), point) {
		return fmt.Errorf("freeze %s: point %q (want one of %v): %w", target, point, Points(), ErrTarget)
	}
	if d <= 0 {
		return fmt.Errorf("freeze %s at %s: duration %v must be positive: %w", target, point, d, ErrTarget)
	}
	if point == BeforeWork && wl.cfg.Load.WorkRate <= 0 {
		return fmt.Errorf("freeze %s at %s: the load has no work writes: %w", target, point, ErrTarget)
	}
	if point == BeforeLeaseCommit && d >= wl.cfg.RequestTimeout.D() {
		return fmt.Errorf("freeze %s at %s: duration %v must be below the request timeout %v, after which the transport gives up on the commit: %w",
			target, point, d, wl.cfg.RequestTimeout, ErrTarget)
	}
	if !wl.hasTarget(target) {
		return fmt.Errorf("freeze %s: %w", target, ErrTarget)
	}
	return nil
}

// ThawAll ends every pause and disarms every pause not yet taken (their Freeze calls return
// ErrNotRunning). The runner calls it when it heals all faults.
func (wl *Workload) ThawAll() {
	ps := &wl.pauses
	ps.mu.Lock()
	for _, r := range ps.reqs {
		r.dead = true
		close(r.cancel)
	}
	ps.reqs = nil
	ps.n.Store(0)
	active := make([]*Pause, 0, len(ps.active))
	for p := range ps.active {
		active = append(active, p)
	}
	ps.mu.Unlock()
	for _, p := range active {
		p.Thaw()
	}
}

// freeze runs a pause that m has reached, unless it was cancelled: it records the window's
// start, tells Freeze, waits out the pause (or a thaw, or the end of the run) and records the
// window's end. It runs on the goroutine that reached the point, which is what freezes the
// member.
func (wl *Workload) freeze(r *pauseReq, m *member) {
	p := &Pause{
		Process: m.proc.name, Role: m.role, Member: m.id,
		Point: r.point, Duration: r.d, done: make(chan struct{}), thaw: make(chan struct{}),
	}
	if !wl.pauses.hold(r, p) {
		return
	}
	start := wl.rec.now()
	p.Start = time.Duration(start)
	if wl.pauseWindows {
		p.Fault = wl.faultID()
		wl.rec.append(history.Event{
			Type: history.TypeFaultStart, Fault: p.Fault, Time: start, Kind: history.KindMemberPause,
			Process: p.Process, Role: p.Role, Member: p.Member, Targets: []string{m.name},
			Desc: fmt.Sprintf("freeze %s at %s for %v", m.name, r.point, r.d),
		})
	}
	m.frozen.Store(true)
	wl.rec.stats.frozen.Add(1)
	r.taken <- p
	wl.log.Info("member frozen", "process", p.Process, "role", p.Role, "member", p.Member, "point", r.point, "for", r.d, "fault", p.Fault)

	t := time.NewTimer(r.d)
	select {
	case <-t.C:
	case <-p.thaw:
	case <-wl.stopping:
	}
	t.Stop()

	end := wl.rec.now()
	p.end = time.Duration(end)
	if wl.pauseWindows {
		wl.rec.append(history.Event{Type: history.TypeFaultEnd, Fault: p.Fault, Time: end, TookHold: true})
	}
	m.frozen.Store(false)
	wl.rec.stats.frozen.Add(-1)
	wl.pauses.mu.Lock()
	delete(wl.pauses.active, p)
	wl.pauses.mu.Unlock()
	close(p.done)
	wl.log.Info("member resumed", "process", p.Process, "role", p.Role, "member", p.Member, "fault", p.Fault)
}

// commitGate holds back the commit of a lease write in one process while a
// BeforeLeaseCommit pause of that process's member is armed. It sits in the process's dial
// function, below the transport: the member's goroutine is inside WriteLease, waiting for the
// commit, so holding the EndTxn request back freezes the member between its produce and its
// commit, as a process stopped there would be.
type commitGate struct {
	n    atomic.Int32 // len(arms), for the connections' fast path
	mu   sync.Mutex
	arms map[string]*gateArm // transactional id → arm
	fire func(r *pauseReq, m *member)
}

type gateArm struct {
	r     *pauseReq
	m     *member
	fired bool
}

// arm holds back the next commit of txnID for r.
func (g *commitGate) arm(txnID string, r *pauseReq, m *member) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.arms[txnID] = &gateArm{r: r, m: m}
	g.n.Store(int32(len(g.arms)))
}

// disarm removes the arm of txnID and reports whether it fired.
func (g *commitGate) disarm(txnID string) (fired bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	a := g.arms[txnID]
	delete(g.arms, txnID)
	g.n.Store(int32(len(g.arms)))
	return a != nil && a.fired
}

// hold runs the pause armed for the commit in b, if b is the EndTxn commit request of an
// armed transactional id.
func (g *commitGate) hold(b []byte) {
	txnID, ok := endTxnCommit(b)
	if !ok {
		return
	}
	g.mu.Lock()
	a := g.arms[txnID]
	if a == nil || a.fired {
		g.mu.Unlock()
		return
	}
	a.fired = true
	g.mu.Unlock()
	g.fire(a.r, a.m)
}

// dial wraps a process's dial function so every connection passes through g.
func (g *commitGate) dial(base cluster.DialFunc) cluster.DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := base(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &gatedConn{Conn: c, g: g}, nil
	}
}

type gatedConn struct {
	net.Conn
	g *commitGate
}

// Write passes b on, after the pause armed for it when b is an armed commit. kgo writes one
// whole request per Write, so b starts with the request's size.
func (c *gatedConn) Write(b []byte) (int, error) {
	if c.g.n.Load() > 0 {
		c.g.hold(b)
	}
	return c.Conn.Write(b)
}

// endTxnCommit returns the transactional id of b when b is an EndTxn request that commits.
func endTxnCommit(b []byte) (string, bool) {
	const endTxnKey = 26
	if len(b) < 8 {
		return "", false
	}
	r := kbin.Reader{Src: b[4:]} // after the size
	if r.Int16() != endTxnKey {
		return "", false
	}
	req := kmsg.NewPtrEndTxnRequest()
	req.SetVersion(r.Int16())
	r.Int32()          // correlation id
	r.NullableString() // client id
	if req.IsFlexible() {
		kmsg.SkipTags(&r)
	}
	if r.Complete() != nil || req.ReadFrom(r.Src) != nil || !req.Commit {
		return "", false
	}
	return req.TransactionalID, true
}
