package pipeline

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/transport/pipeline"
)

// A frozen member is a zombie: its loop stops after a poll, holding the batch it polled (or
// inside the transaction that copies it, at a later pause point),
// and every connection of its client stalls, so that its heartbeats stop as a stopped
// process's would (a paused loop alone is no zombie: the client heartbeats on its own
// goroutine, and the group keeps the member). Past its session timeout the group coordinator
// takes its partitions away and gives them to others; when it resumes it copies the old
// batch and must be fenced.

// The pause points of a freeze. PointAfterPoll is the default (""): after a poll that
// returned records, before the transaction that copies them. The others are inside the
// transaction (pipeline.Points): a member frozen there is a zombie with a transaction open.
const (
	PointAfterPoll    = "after-poll"
	PointAfterProduce = pipeline.PointAfterProduce
	PointBeforeCommit = pipeline.PointBeforeCommit
)

// CheckPoint reports whether a member of kind (Config.Member) reaches pause point ("" is
// PointAfterPoll); the error names the points it has.
func CheckPoint(kind, point string) error {
	points := append([]string{PointAfterPoll}, pipeline.Points(kind)...)
	if point == "" || slices.Contains(points, point) {
		return nil
	}
	return fmt.Errorf("%w: point=%s: a %s member pauses only at %s", ErrConfig, point, kind, strings.Join(points, ", "))
}

// PartitionRole names input partition p as the nemesis's roles do ("in0", "in1", ...): a
// freeze of the holder of in0 stops the member that owns input partition 0.
func PartitionRole(p int32) string { return "in" + strconv.Itoa(int(p)) }

// partitionOfRole is PartitionRole's inverse.
func partitionOfRole(role string) (int32, bool) {
	n, err := strconv.Atoi(strings.TrimPrefix(role, "in"))
	if !strings.HasPrefix(role, "in") || err != nil || n < 0 {
		return 0, false
	}
	return int32(n), true
}

// Roles returns the nemesis's names of the input partitions.
func (wl *Workload) Roles() []string {
	out := make([]string, wl.cfg.Partitions)
	for p := range wl.cfg.Partitions {
		out[p] = PartitionRole(p)
	}
	return out
}

// Keys are what names an input partition's brokers: the group (its coordinator), the input
// partition (its leader), and the transactional id of the member that owns it now (its
// transaction coordinator; "" while no member owns it).
type Keys struct {
	Group, Input    string
	Partition       int32
	TransactionalID string
}

// Keys returns the keys of the input partition role names (PartitionRole).
func (wl *Workload) Keys(role string) (Keys, bool) {
	p, ok := partitionOfRole(role)
	if !ok || p >= wl.cfg.Partitions {
		return Keys{}, false
	}
	k := Keys{Group: wl.group, Input: wl.input, Partition: p}
	if o, ok := wl.Owner(role); ok {
		k.TransactionalID = wl.member(o.Member).txnID
	}
	return k, true
}

// Owner is the member that owns an input partition, as far as the workload knows: the last
// member whose poll returned records of it or whose assignment gave it (its fetch of the
// partition's offsets).
type Owner struct {
	Process int // 1-based
	Member  string
}

// Owner returns the owner of the input partition role names (PartitionRole), skipping a
// member that is frozen (a zombie's partition belongs to another by now).
func (wl *Workload) Owner(role string) (Owner, bool) {
	p, ok := partitionOfRole(role)
	if !ok || p >= wl.cfg.Partitions {
		return Owner{}, false
	}
	var best *member
	var at int64
	for _, m := range wl.members {
		m.mu.Lock()
		held, frozen := m.held[p], m.frozen
		m.mu.Unlock()
		if held > at && !frozen {
			best, at = m, held
		}
	}
	if best == nil {
		return Owner{}, false
	}
	return Owner{Process: best.processN, Member: best.name}, true
}

// ErrNoMember is Freeze's error for a member the run does not have.
var ErrNoMember = errors.New("pipeline workload: no such member")

// Freeze arms a freeze of member (by name): when it next reaches point (a poll that returned
// records, for PointAfterPoll or "") it stops there, and its connections stall, until Thaw or
// until d has passed. It returns at once. point must be one the member reaches (CheckPoint).
func (wl *Workload) Freeze(member, point string, d time.Duration) error {
	if err := CheckPoint(wl.cfg.Member, point); err != nil {
		return err
	}
	if point == "" {
		point = PointAfterPoll
	}
	m := wl.member(member)
	if m == nil {
		return fmt.Errorf("%w: %s", ErrNoMember, member)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.frozen {
		return fmt.Errorf("%w: %s is frozen already", ErrConfig, member)
	}
	m.closeThaw() // an earlier freeze not reached yet: replaced
	m.armed, m.armAt, m.armFor, m.thaw, m.thawClosed, m.froze, m.resumed = true, point, d, make(chan struct{}), false, 0, 0
	return nil
}

// Thaw ends member's freeze, or disarms one it has not reached.
func (wl *Workload) Thaw(member string) {
	m := wl.member(member)
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.armed = false
	m.closeThaw()
}

// closeThaw ends the freeze armed last, once. m.mu is held.
func (m *member) closeThaw() {
	if m.thaw != nil && !m.thawClosed {
		close(m.thaw)
		m.thawClosed = true
	}
}

// Frozen reports whether member is stopped at its pause point now.
func (wl *Workload) Frozen(member string) bool {
	m := wl.member(member)
	if m == nil {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.frozen
}

// LastFreeze returns when member froze at its pause point for the freeze armed last and
// when it resumed (0 while frozen), as durations since Start; ok is false until it froze.
func (wl *Workload) LastFreeze(member string) (froze, resumed time.Duration, ok bool) {
	m := wl.member(member)
	if m == nil {
		return 0, 0, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.froze, m.resumed, m.froze > 0
}

// ThawAll ends every freeze and disarms every armed one.
func (wl *Workload) ThawAll() {
	for _, m := range wl.members {
		wl.Thaw(m.name)
	}
}

func (wl *Workload) member(name string) *member {
	for _, m := range wl.members {
		if m.name == name {
			return m
		}
	}
	return nil
}

// pausePoint stops m at point when a freeze is armed for it: its connections stall, and it
// waits for the thaw or the freeze's bound.
func (m *member) pausePoint(ctx context.Context, point string) {
	m.mu.Lock()
	if !m.armed || m.armAt != point {
		m.mu.Unlock()
		return
	}
	m.armed, m.frozen, m.froze = false, true, time.Duration(m.wl.now())
	thaw, bound := m.thaw, m.armFor
	m.mu.Unlock()
	m.gate.stall()
	t := time.NewTimer(bound)
	select {
	case <-thaw:
	case <-t.C:
	case <-ctx.Done():
	}
	t.Stop()
	m.gate.release()
	m.mu.Lock()
	m.frozen, m.resumed = false, time.Duration(m.wl.now())
	m.mu.Unlock()
}

// gate stalls every connection made through its dial while it is closed: reads and writes
// wait (up to the connection's deadline, as a silent peer would make them) until it opens.
type gate struct {
	mu      sync.Mutex
	stalled chan struct{} // nil: open; else closed when the gate opens
}

func (g *gate) stall() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stalled == nil {
		g.stalled = make(chan struct{})
	}
}

func (g *gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stalled != nil {
		close(g.stalled)
		g.stalled = nil
	}
}

// wait returns at once when the gate is open, else when it opens, the deadline passes
// (os.ErrDeadlineExceeded) or the connection closes (net.ErrClosed).
func (g *gate) wait(deadline time.Time, closed <-chan struct{}) error {
	g.mu.Lock()
	stalled := g.stalled
	g.mu.Unlock()
	if stalled == nil {
		return nil
	}
	var expire <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		expire = t.C
	}
	select {
	case <-stalled:
		return nil
	case <-expire:
		return os.ErrDeadlineExceeded
	case <-closed:
		return net.ErrClosed
	}
}

// dial wraps d: its connections pass through g.
func (g *gate) dial(d cluster.DialFunc) cluster.DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &gatedConn{Conn: c, g: g, closed: make(chan struct{})}, nil
	}
}

// gatedConn is a connection whose reads and writes wait while its gate is stalled.
type gatedConn struct {
	net.Conn
	g          *gate
	rd, wd     atomic.Pointer[time.Time]
	closed     chan struct{}
	closedOnce sync.Once
}

func deadlineOf(p *atomic.Pointer[time.Time]) time.Time {
	if t := p.Load(); t != nil {
		return *t
	}
	return time.Time{}
}

func (c *gatedConn) Read(b []byte) (int, error) {
	if err := c.g.wait(deadlineOf(&c.rd), c.closed); err != nil {
		return 0, err
	}
	n, err := c.Conn.Read(b)
	if err == nil {
		// Bytes that arrived as the gate closed wait too: a stopped process reads nothing.
		err = c.g.wait(deadlineOf(&c.rd), c.closed)
	}
	return n, err
}

func (c *gatedConn) Write(b []byte) (int, error) {
	if err := c.g.wait(deadlineOf(&c.wd), c.closed); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}

func (c *gatedConn) SetDeadline(t time.Time) error {
	c.rd.Store(&t)
	c.wd.Store(&t)
	return c.Conn.SetDeadline(t)
}

func (c *gatedConn) SetReadDeadline(t time.Time) error {
	c.rd.Store(&t)
	return c.Conn.SetReadDeadline(t)
}

func (c *gatedConn) SetWriteDeadline(t time.Time) error {
	c.wd.Store(&t)
	return c.Conn.SetWriteDeadline(t)
}

func (c *gatedConn) Close() error {
	c.closedOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}
