package nemesis

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/fencecheck/fencecheck/cluster"
)

// Run injects faults as sched says until ctx ends (a script that ends early leaves the rest of
// the run quiet), then heals every fault and confirms the cluster is healthy (HealAll),
// whether ctx was cancelled or a fault failed. A fault that finds no free target, or that the
// cluster cannot do, is skipped and logged (and leaves a random schedule's menu); one that
// did not take hold is logged (its window says took_hold=false). Run stops early, heals and returns the error when a fault cannot be
// set up or injected for another reason (toxiproxy or the cluster failing). It returns nil
// when ctx ended and healing succeeded.
func (n *Nemesis) Run(ctx context.Context, sched Schedule) error {
	if err := sched.Validate(); err != nil {
		return err
	}
	n.mu.Lock()
	if n.running {
		n.mu.Unlock()
		return ErrRunning
	}
	n.running = true
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		n.running = false
		n.mu.Unlock()
	}()

	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	r := &scheduler{n: n, ctx: runCtx, start: time.Now(), unsupported: map[string]bool{}}
	r.fail = func(err error) {
		r.errOnce.Do(func() { r.err = err })
		cancel(err)
	}
	if sched.Random != nil {
		r.random(sched.Random.withDefaults())
	} else {
		r.script(sched.Script)
	}
	r.wg.Wait() // every fault has healed itself
	return errors.Join(r.err, n.HealAll(ctx))
}

type scheduler struct {
	n     *Nemesis
	ctx   context.Context
	start time.Time
	wg    sync.WaitGroup

	fail    func(error)
	errOnce sync.Once
	err     error

	mu          sync.Mutex
	unsupported map[string]bool // faults the cluster refused at Inject: they leave the menu
}

// skippable reports whether a fault that failed to set up (or to inject) with err leaves the
// run sound: another pick, or the next step, may do.
func skippable(err error) bool {
	return errors.Is(err, ErrNoTarget) || errors.Is(err, ErrTargetBusy) ||
		errors.Is(err, cluster.ErrUnsupported) || errors.Is(err, ErrHealing)
}

// launch runs inj's lifecycle in a goroutine: inject, wait until it holds, keep it for hold
// (from the injection), heal; then it tells ended, if not nil.
func (r *scheduler) launch(inj *Injection, hold time.Duration, ended chan<- struct{}) {
	r.wg.Go(func() {
		if ended != nil {
			defer func() {
				select {
				case ended <- struct{}{}:
				case <-r.ctx.Done():
				}
			}()
		}
		n := r.n
		defer func() {
			if err := inj.Heal(r.ctx); err != nil {
				n.log.Error("fault did not heal", "fault", inj.name, "err", err)
			}
		}()
		injected := time.Now()
		if err := inj.Inject(r.ctx); err != nil {
			if errors.Is(err, cluster.ErrUnsupported) {
				r.mu.Lock()
				r.unsupported[inj.name] = true
				r.mu.Unlock()
			}
			if skippable(err) || r.ctx.Err() != nil {
				n.log.Warn("fault skipped", "fault", inj.name, "err", err)
				return
			}
			r.fail(err)
			return
		}
		wait := n.env.WaitTimeout
		if _, ok := inj.f.(spanned); ok && hold > 0 {
			// A freeze the member has not reached by the end of its window missed: armed any
			// longer, it would freeze the member at a time the schedule never said.
			wait = min(wait, hold)
		}
		if _, ok := inj.f.(*kafkaFault); ok && ended != nil && hold > 0 {
			// A random Kafka-aware fault whose request did not come within its window missed
			// (a JoinGroup comes only with a rebalance): waiting longer would keep the next
			// draws out for a fault the schedule never asked to last that long.
			wait = min(wait, hold)
		}
		wctx, cancel := context.WithTimeout(r.ctx, wait)
		err := inj.WaitForInjected(wctx)
		cancel()
		if err != nil && r.ctx.Err() == nil {
			n.log.Warn("fault did not take hold", "fault", inj.name, "err", err)
		}
		if sp, ok := inj.f.(spanned); ok && err == nil {
			if froze, _, ok := sp.Span(); ok {
				// A freeze lasts its time from when the member froze, not from when it was
				// armed: a client that reaches its pause point seconds after the step (a
				// KafkaJS member polls for seconds on a loaded machine) would otherwise be
				// frozen for less than asked, shorter than the session timeout it must
				// outlast, and its group would never give its partitions away.
				_ = sleep(r.ctx, hold-time.Duration(n.now()-froze))
				return
			}
		}
		_ = sleep(r.ctx, hold-time.Since(injected))
	})
}

// setup prepares and sets up spec. A nil injection with a nil error means "skipped".
func (r *scheduler) setup(spec Spec) (*Injection, error) {
	inj, err := r.n.Prepare(spec)
	if err != nil {
		return nil, err
	}
	if err := inj.Setup(r.ctx); err != nil {
		if skippable(err) || r.ctx.Err() != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%s: %w", spec, err)
	}
	return inj, nil
}

// random runs a RandomSchedule (defaults applied) until the run's context ends.
func (r *scheduler) random(rs RandomSchedule) {
	menu := slices.Clone(rs.Faults)
	ended := make(chan struct{})
	next := r.start.Add(rs.Interval.D()) // the earliest next start
	lastEnd := r.start
	active := 0
	for {
		due := next
		if active == 0 {
			due = later(due, lastEnd.Add(rs.Stable.D()))
		}
		var timer <-chan time.Time
		var t *time.Timer
		if active < rs.MaxActive && len(menu) > 0 {
			t = time.NewTimer(time.Until(due))
			timer = t.C
		}
		select {
		case <-r.ctx.Done():
		case <-ended:
			if active--; active == 0 {
				lastEnd = time.Now()
			}
		case <-timer:
			next = time.Now().Add(rs.Interval.D())
			inj, hold, err := r.pick(rs, &menu)
			if err != nil {
				r.fail(err)
				return
			}
			if inj != nil {
				active++
				r.launch(inj, hold, ended)
			}
		}
		if t != nil {
			t.Stop()
		}
		if r.ctx.Err() != nil {
			return
		}
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// pick draws specs from the menu until one sets up; faults the cluster cannot do leave the
// menu. It returns a nil injection when nothing could be set up this time.
func (r *scheduler) pick(rs RandomSchedule, menu *[]Spec) (*Injection, time.Duration, error) {
	n := r.n
	for range 2*len(*menu) + 1 {
		r.mu.Lock()
		*menu = slices.DeleteFunc(*menu, func(s Spec) bool { return r.unsupported[s.Fault] })
		r.mu.Unlock()
		if len(*menu) == 0 || r.ctx.Err() != nil {
			break
		}
		var spec Spec
		n.rand(func(rng *rand.Rand) { spec = (*menu)[rng.IntN(len(*menu))] })
		d, _ := lookup(spec.Fault)
		if d.kafka && spec.Params.API == "" {
			var err error
			if spec, err = n.drawKafka(spec); err != nil {
				n.log.Debug("fault pick skipped", "fault", spec.Fault, "err", err)
				continue
			}
		}
		if spec.For == 0 && !d.event {
			if d.defaultFor != nil {
				spec.For = d.defaultFor(&n.env)
			}
			if spec.For == 0 {
				spec.For = rs.For
			}
		}
		inj, err := r.setup(spec)
		switch {
		case err == nil:
			return inj, inj.spec.For.D(), nil
		case errors.Is(err, cluster.ErrUnsupported):
			n.log.Info("fault leaves the menu", "fault", spec.Fault, "err", err)
			r.mu.Lock()
			r.unsupported[spec.Fault] = true
			r.mu.Unlock()
		case skippable(err) || r.ctx.Err() != nil:
			n.log.Debug("fault pick skipped", "fault", spec.Fault, "err", err)
		default:
			return nil, 0, err
		}
	}
	n.log.Info("no fault this interval: nothing free to inject")
	return nil, 0, nil
}

// script runs the steps at their times, then waits for the run's context to end. Each step's
// window carries its number (1-based, in the order given), so the checker can tell which
// step never took hold.
func (r *scheduler) script(steps []Step) {
	n := r.n
	order := make([]int, len(steps))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(steps[a].At, steps[b].At) })
	for _, i := range order {
		st := steps[i]
		if sleep(r.ctx, time.Until(r.start.Add(st.At.D()))) != nil {
			return
		}
		inj, err := r.setup(st.Spec)
		switch {
		case err == nil:
			inj.step = i + 1
			r.launch(inj, inj.spec.For.D(), nil)
		case skippable(err) || r.ctx.Err() != nil:
			n.log.Warn("step skipped", "step", st.String(), "err", err)
		default:
			r.fail(fmt.Errorf("step %q: %w", st, err))
			return
		}
	}
	<-r.ctx.Done()
}
