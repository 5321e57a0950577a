package scenarios

import (
	"context"
	"fmt"
	"strconv"
	"strings"
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

	mu     sync.Mutex
	pauses map[nemesis.Member]*workload.Pause
	armed  map[nemesis.Member]context.CancelFunc
}

func newFreezer(wl *workload.Workload) *freezer {
	return &freezer{wl: wl, pauses: map[nemesis.Member]*workload.Pause{}, armed: map[nemesis.Member]context.CancelFunc{}}
}

func (f *freezer) Holder(role string) (nemesis.Member, bool) {
	for _, h := range f.wl.Holders() {
		if h.Role == role && !h.Frozen {
			p, err := strconv.Atoi(strings.TrimPrefix(h.Process, "p"))
			if err != nil {
				return nemesis.Member{}, false
			}
			return nemesis.Member{Process: p, Role: h.Role, ID: h.Member}, true
		}
	}
	return nemesis.Member{}, false
}

func (f *freezer) Freeze(ctx context.Context, m nemesis.Member, point string, d time.Duration) error {
	if point == "" {
		point = string(workload.BeforeLeaseCommit)
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d)
	f.mu.Lock()
	if old := f.armed[m]; old != nil {
		old()
	}
	f.armed[m] = cancel
	f.mu.Unlock()
	errc := make(chan error, 1)
	go func() {
		p, err := f.wl.Freeze(actx, workload.Target{Role: m.Role, Member: m.ID}, workload.Point(point), d)
		if err == nil {
			f.mu.Lock()
			f.pauses[m] = p
			f.mu.Unlock()
		}
		errc <- err
	}()
	// Report a refusal at once (a bad point, a duration the workload cannot honour); a freeze
	// that is merely waiting for the member to reach its point is armed.
	select {
	case err := <-errc:
		if err != nil {
			return fmt.Errorf("freeze %s: %w", m, err)
		}
	case <-time.After(50 * time.Millisecond):
	}
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
