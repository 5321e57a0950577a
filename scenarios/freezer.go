package scenarios

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/fencecheck/fencecheck/nemesis"
	"github.com/fencecheck/fencecheck/workload"
)

// freezer lets the nemesis freeze the workload's members: it adapts workload.Freeze, which
// waits for the member to reach its pause point, to nemesis.MemberFreezer, which arms a freeze
// and then watches for it to take hold.
type freezer struct {
	wl *workload.Workload
	// maxCommitHold caps a before-lease-commit freeze: the nemesis passes a safety bound
	// (the window plus its wait timeout), but a commit held longer than the request timeout
	// is abandoned by the transport, which is another test than a zombie's.
	maxCommitHold time.Duration

	mu     sync.Mutex
	pauses map[nemesis.Member]*workload.Pause
	armed  map[nemesis.Member]context.CancelFunc
}

func newFreezer(wl *workload.Workload, requestTimeout time.Duration) *freezer {
	return &freezer{wl: wl, maxCommitHold: requestTimeout - requestTimeout/10, pauses: map[nemesis.Member]*workload.Pause{}, armed: map[nemesis.Member]context.CancelFunc{}}
}

func (f *freezer) Holder(role string) (nemesis.Member, bool) {
	for _, h := range f.wl.Holders() {
		if h.Role == role && !h.Frozen {
			return nemesis.Member{Process: h.Process, Role: h.Role, ID: h.Member}, true
		}
	}
	return nemesis.Member{}, false
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
	// workload.Freeze returns once the member reached its point; the nemesis watches Frozen
	// for that, so the freeze is armed in the background, bounded by d.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d)
	f.mu.Lock()
	if old := f.armed[m]; old != nil {
		old()
	}
	f.armed[m] = cancel
	f.mu.Unlock()
	go func() {
		p, err := f.wl.Freeze(actx, target, pt, d)
		if err != nil {
			return // not reached in time, or thawed first: Frozen stays false, and the nemesis says so
		}
		f.mu.Lock()
		f.pauses[m] = p
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

func (f *freezer) Thaw(_ context.Context, m nemesis.Member) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if cancel := f.armed[m]; cancel != nil {
		cancel()
		delete(f.armed, m)
	}
	if p := f.pauses[m]; p != nil {
		p.Thaw()
		delete(f.pauses, m)
	}
	return nil
}
