package harness

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/fencecheck/fencecheck/nemesis"
	"github.com/fencecheck/fencecheck/scenarios"
	"github.com/fencecheck/fencecheck/workload"
)

// freezer lets the nemesis freeze the workload's members: it adapts workload.Freeze, which
// waits for the member to reach its pause point, to nemesis.MemberFreezer, which arms a freeze
// and then watches for it to take hold. It reports when each member actually froze and
// resumed (nemesis.FreezeSpanner), so a freeze's window is what happened.
type freezer struct {
	wl *workload.Workload
	// maxCommitHold caps a before-lease-commit freeze: the nemesis passes a safety bound
	// (the window plus its wait timeout), but a commit held longer than the request timeout
	// is abandoned by the transport, which is another test than a zombie's.
	maxCommitHold time.Duration

	mu     sync.Mutex
	pauses map[nemesis.Member]*workload.Pause // frozen now
	last   map[nemesis.Member]*workload.Pause // the pause of the freeze armed last, once it took hold
	armed  map[nemesis.Member]context.CancelFunc
	gen    map[nemesis.Member]int // counts Freeze calls, so a stale arm does not report
}

func newFreezer(wl *workload.Workload, requestTimeout time.Duration) *freezer {
	return &freezer{wl: wl, maxCommitHold: scenarios.CommitHoldCap(requestTimeout), pauses: map[nemesis.Member]*workload.Pause{},
		last: map[nemesis.Member]*workload.Pause{}, armed: map[nemesis.Member]context.CancelFunc{}, gen: map[nemesis.Member]int{}}
}

func (f *freezer) Holder(role string) (nemesis.Member, bool) {
	h, ok := newestHolder(f.wl.Holders(), role)
	return memberOf(h), ok
}

// SettledHolder is Holder once the handoff has settled: no member of role has an acquire in
// flight, and the newest believer has renewed its lease since it acquired. In a scramble
// (several members acquiring at once, as at a run's start) the first to return may be
// deposed a moment later by an acquire still in flight; a freeze aimed at it never takes
// hold, since its next write fails before its pause point. Acquiring is asked after the
// holders are read: an acquire that ended in between shows as a holder not yet renewed.
func (f *freezer) SettledHolder(role string) (nemesis.Member, bool) {
	h, ok := newestHolder(f.wl.Holders(), role)
	if !ok || h.LeaseUntil == 0 || f.wl.Acquiring(role) {
		return nemesis.Member{}, false
	}
	return memberOf(h), true
}

func memberOf(h workload.Holding) nemesis.Member {
	return nemesis.Member{Process: h.Process, Role: h.Role, ID: h.Member}
}

// newestHolder returns the holding of hs for role whose member is not frozen; when several
// believe they hold it, the one that minted last. A member deposed by a newer acquire keeps
// believing until its next write fails, and that write fails before any commit: a
// before-lease-commit freeze aimed at it never takes hold, and a fault on its process misses
// the real holder. Within one producer id the higher epoch minted last; across producer ids
// (an id rotated at epoch exhaustion) the later acquire.
func newestHolder(hs []workload.Holding, role string) (workload.Holding, bool) {
	var best *workload.Holding
	for i := range hs {
		h := &hs[i]
		if h.Role != role || h.Frozen {
			continue
		}
		if best == nil ||
			(h.Token.ProducerID == best.Token.ProducerID && h.Token.Epoch > best.Token.Epoch) ||
			(h.Token.ProducerID != best.Token.ProducerID && h.Since > best.Since) {
			best = h
		}
	}
	if best == nil {
		return workload.Holding{}, false
	}
	return *best, true
}

func (f *freezer) Freeze(ctx context.Context, m nemesis.Member, point string, d time.Duration) error {
	if point == "" {
		point = string(workload.BeforeLeaseCommit)
	}
	target, pt := workload.Target{Role: m.Role, Member: m.ID}, workload.Point(point)
	if pt == workload.BeforeLeaseCommit {
		d = min(d, f.maxCommitHold)
	}
	if err := f.wl.CheckFreeze(target, pt, d); err != nil {
		return fmt.Errorf("freeze %s: %w", m, err)
	}
	// workload.Freeze returns once the member reached its point; the nemesis watches for
	// that, so the freeze is armed in the background, bounded by d.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d)
	f.mu.Lock()
	if old := f.armed[m]; old != nil {
		old()
	}
	f.armed[m] = cancel
	delete(f.last, m)
	f.gen[m]++
	gen := f.gen[m]
	f.mu.Unlock()
	go func() {
		p, err := f.wl.Freeze(actx, target, pt, d)
		if err != nil {
			return // not reached in time, or thawed first: the nemesis sees no freeze, and says so
		}
		f.mu.Lock()
		f.pauses[m] = p
		if f.gen[m] == gen {
			f.last[m] = p
		}
		f.mu.Unlock()
		if actx.Err() != nil { // thawed while the member was reaching its point
			p.Thaw()
		}
	}()
	return nil
}

func (f *freezer) Frozen(m nemesis.Member) bool {
	for _, h := range f.wl.Holders() {
		if h.Role == m.Role && h.Member == m.ID {
			return h.Frozen
		}
	}
	return false
}

// LastFreeze reports the pause of the freeze armed last for m: when m froze and resumed.
func (f *freezer) LastFreeze(m nemesis.Member) (froze, resumed time.Duration, ok bool) {
	f.mu.Lock()
	p := f.last[m]
	f.mu.Unlock()
	if p == nil {
		return 0, 0, false
	}
	end, _ := p.End()
	return p.Start, end, true
}

// Thaw disarms m's freeze and resumes m, waiting (up to ctx) until it has resumed, so that
// LastFreeze knows when.
func (f *freezer) Thaw(ctx context.Context, m nemesis.Member) error {
	f.mu.Lock()
	if cancel := f.armed[m]; cancel != nil {
		cancel()
		delete(f.armed, m)
	}
	p := f.pauses[m]
	delete(f.pauses, m)
	f.mu.Unlock()
	if p == nil {
		return nil
	}
	p.Thaw()
	select {
	case <-p.Done():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("thaw %s: it did not resume: %w", m, ctx.Err())
	}
}
