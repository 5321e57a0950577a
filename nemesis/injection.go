package nemesis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/cluster/links"
)

// State is where an Injection is in its lifecycle.
type State int

// Injection states, in lifecycle order.
const (
	StateNew       State = iota // made, not set up
	StateReady                  // set up: targets resolved and claimed
	StateInjected               // Inject was called (it may have failed halfway): a window is open
	StateRecovered              // Recover was called: the window is closed
	StateCleanedUp              // done; nothing is held
)

var stateNames = [...]string{"new", "ready", "injected", "recovered", "cleaned-up"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Injection is one fault applied by a Nemesis: the state machine around a Fault that refuses
// calls in the wrong state (a *StateError matching ErrWrongState), claims the fault's targets,
// and records each inject/recover as a fault window. Its methods are safe for concurrent use
// and serialized.
type Injection struct {
	n    *Nemesis
	name string // the registered fault name, or the tracked fault's kind
	spec Spec   // the effective spec; zero for a tracked fault
	f    Fault
	step int // the scripted step (1-based) this injection carries out; 0: none

	mu       sync.Mutex
	state    State
	window   Window
	wid      int64 // the open window's id; 0 when none is open
	since    time.Time
	tookHold bool
	// armed is set while a spanned fault (see spanned) is injected and its window not yet
	// opened; armedAt is when Inject was called, in history time.
	armed   bool
	armedAt int64
}

// spanned is implemented by a fault whose effect starts and ends on its own clock, not at
// Inject and Recover: a freeze acts from when the member reaches its pause point until it
// resumes, which can be well after Inject and, when the freezer caps the freeze, before
// Recover. Its window records that span, so the history and the report show what happened,
// not what was asked for. The window opens once the fault acts (nothing changed before: a
// crash while it is only armed leaves no window); a fault that never acted gets a window from
// Inject to Recover that did not take hold, so the miss is on record.
type spanned interface {
	// Span returns when the fault began and stopped acting, in history time (ns since
	// Env.Start): end is 0 while it still acts; ok is false when it has not acted since Inject.
	Span() (start, end int64, ok bool)
}

// Name is the fault's registered name.
func (i *Injection) Name() string { return i.name }

// Spec is the spec with the fault's defaults filled in (zero for a tracked fault).
func (i *Injection) Spec() Spec { return i.spec }

// State returns the current state.
func (i *Injection) State() State {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.state
}

// Window returns what the fault's windows record (valid after Setup).
func (i *Injection) Window() Window {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.window
}

// TookHold reports whether WaitForInjected saw the current (or last) injection hold.
func (i *Injection) TookHold() bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.tookHold
}

func (i *Injection) refuse(op string, allowed ...State) error {
	for _, s := range allowed {
		if i.state == s {
			return nil
		}
	}
	return &StateError{Op: op, State: i.state}
}

// Setup resolves and claims the targets (New → Ready). On error nothing is held and the
// injection is cleaned up; ErrTargetBusy when another injection holds a target, ErrHealing
// while HealAll runs.
func (i *Injection) Setup(ctx context.Context) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if err := i.refuse("setup", StateNew); err != nil {
		return err
	}
	err := i.f.Setup(ctx)
	if err == nil {
		i.window = i.f.Window()
		err = i.n.claim(i, i.window.Targets)
	}
	if err != nil {
		i.state = StateCleanedUp
		return errors.Join(fmt.Errorf("setup %s: %w", i.name, err), i.f.Cleanup(context.WithoutCancel(ctx)))
	}
	i.state = StateReady
	return nil
}

// Inject opens a fault window and applies the fault (Ready or Recovered → Injected). The
// state is Injected even when it fails, because a fault may fail halfway: Recover (or Heal)
// undoes whatever it did.
func (i *Injection) Inject(ctx context.Context) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if err := i.refuse("inject", StateReady, StateRecovered); err != nil {
		return err
	}
	i.state, i.tookHold, i.since = StateInjected, false, time.Now()
	var recErr error
	if _, ok := i.f.(spanned); ok {
		i.armed, i.armedAt = true, i.n.now()
	} else {
		// The window opens before the fault is applied, so a crash halfway leaves it open.
		recErr = i.n.startWindow(i, i.n.now())
	}
	err := i.f.Inject(ctx)
	if err != nil {
		i.n.log.Warn("inject failed", "fault", i.name, "window", i.wid, "err", err)
		return errors.Join(fmt.Errorf("inject %s: %w", i.name, err), recErr)
	}
	i.n.log.Info("fault injected", "fault", i.name, "window", i.wid, "targets", i.window.Targets, "desc", i.window.Desc)
	return recErr
}

// WaitForInjected returns once the fault holds (Injected), or an error wrapping ErrNotHeld
// when ctx ends first. It records took_hold in the window.
func (i *Injection) WaitForInjected(ctx context.Context) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if err := i.refuse("wait for injected", StateInjected); err != nil {
		return err
	}
	start := time.Now()
	err := i.f.WaitForInjected(ctx)
	i.refreshTargets()
	if err != nil {
		return fmt.Errorf("%s: %w", i.name, err)
	}
	i.tookHold = true
	err = i.openSpan()
	i.n.log.Info("fault took hold", "fault", i.name, "window", i.wid, "after", time.Since(start).Round(time.Millisecond))
	return err
}

// refreshTargets takes up a fault's new targets (a freeze that followed its role's holder
// while waiting to take hold; i.mu held): the claims and the window to record move with it.
func (i *Injection) refreshTargets() {
	w := i.f.Window()
	if slices.Equal(w.Targets, i.window.Targets) {
		return
	}
	i.n.reclaim(i, i.window.Targets, w.Targets)
	i.window = w
}

// openSpan opens the window of an armed spanned fault that has begun acting, at the time it
// began (i.mu held).
func (i *Injection) openSpan() error {
	if !i.armed {
		return nil
	}
	start, _, ok := i.f.(spanned).Span()
	if !ok {
		return nil
	}
	i.armed = false
	return i.n.startWindow(i, start)
}

// Recover undoes the fault and closes its window (Injected → Recovered). The window closes
// and the state moves on even when Recover fails: HealAll's sweep of the whole cluster is
// the backstop for what it left.
func (i *Injection) Recover(ctx context.Context) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if err := i.refuse("recover", StateInjected); err != nil {
		return err
	}
	return i.recover(ctx)
}

func (i *Injection) recover(ctx context.Context) error {
	err := i.f.Recover(ctx)
	if err != nil {
		err = fmt.Errorf("recover %s: %w", i.name, err)
		i.n.log.Error("recover failed", "fault", i.name, "window", i.wid, "err", err)
	} else {
		i.n.log.Info("fault recovered", "fault", i.name, "window", i.wid, "lasted", time.Since(i.since).Round(time.Millisecond))
	}
	i.state = StateRecovered
	return errors.Join(err, i.endSpan())
}

// endSpan closes the fault's window (i.mu held). A spanned fault's window ends when the fault
// stopped acting; one that never acted gets its window from Inject to now, not held.
func (i *Injection) endSpan() error {
	sp, ok := i.f.(spanned)
	if !ok {
		return i.n.endWindow(i, i.n.now())
	}
	if i.armed {
		if _, _, acted := sp.Span(); acted {
			// It acted, but after WaitForInjected gave up: it did take hold, if late.
			i.tookHold = true
			if err := i.openSpan(); err != nil {
				return err
			}
		} else {
			i.armed = false
			if err := i.n.startWindow(i, i.armedAt); err != nil {
				return err
			}
			return i.n.endWindow(i, i.n.now())
		}
	}
	end := i.n.now()
	if _, e, acted := sp.Span(); acted && e > 0 {
		end = e
	}
	return i.n.endWindow(i, end)
}

// WaitForRecovered returns once service is back (Recovered), or an error wrapping
// ErrNotRecovered when ctx ends first.
func (i *Injection) WaitForRecovered(ctx context.Context) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if err := i.refuse("wait for recovered", StateRecovered); err != nil {
		return err
	}
	if err := i.f.WaitForRecovered(ctx); err != nil {
		return fmt.Errorf("%s: %w", i.name, err)
	}
	return nil
}

// Cleanup releases the fault's resources and targets (any state but CleanedUp →
// CleanedUp). An injected fault is recovered first.
func (i *Injection) Cleanup(ctx context.Context) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if err := i.refuse("cleanup", StateNew, StateReady, StateInjected, StateRecovered); err != nil {
		return err
	}
	return i.cleanup(ctx)
}

func (i *Injection) cleanup(ctx context.Context) error {
	var errs []error
	if i.state == StateInjected {
		errs = append(errs, i.recover(ctx))
	}
	if i.state != StateNew {
		errs = append(errs, i.f.Cleanup(ctx))
		i.n.release(i, i.window.Targets)
	}
	i.state = StateCleanedUp
	return errors.Join(errs...)
}

// Heal does whatever is left of Recover, WaitForRecovered and Cleanup, on a context that
// outlives ctx's cancellation (Env.HealTimeout; WaitForRecovered within Env.WaitTimeout). It
// is idempotent: healing a cleaned-up injection does nothing.
func (i *Injection) Heal(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), i.n.env.HealTimeout)
	defer cancel()
	i.mu.Lock()
	defer i.mu.Unlock()
	var errs []error
	if i.state == StateInjected {
		errs = append(errs, i.recover(ctx))
	}
	if i.state == StateRecovered {
		wctx, wcancel := context.WithTimeout(ctx, i.n.env.WaitTimeout)
		if err := i.f.WaitForRecovered(wctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", i.name, err))
		}
		wcancel()
	}
	if i.state != StateCleanedUp {
		errs = append(errs, i.cleanup(ctx))
	}
	return errors.Join(errs...)
}

// Status is an active injection as the status line shows it.
type Status struct {
	Fault    string        // registered name
	Window   int64         // the open window's id; 0 when none is open
	State    State         //
	Targets  []string      //
	Desc     string        //
	Since    time.Duration // since the last Inject; 0 before
	TookHold bool
}

// String reads like "partition#3 [p1->b2] 4.2s held".
func (s Status) String() string {
	held := "not held"
	if s.TookHold {
		held = "held"
	}
	if s.State != StateInjected {
		held = s.State.String()
	}
	return fmt.Sprintf("%s#%d [%s] %v %s", s.Fault, s.Window, strings.Join(s.Targets, " "), s.Since.Round(100*time.Millisecond), held)
}

func (i *Injection) status() Status {
	i.mu.Lock()
	defer i.mu.Unlock()
	st := Status{Fault: i.name, Window: i.wid, State: i.state, Targets: i.window.Targets, Desc: i.window.Desc, TookHold: i.tookHold}
	if !i.since.IsZero() {
		st.Since = time.Since(i.since)
	}
	return st
}

// windowEvent is the fault-start event of i's window id.
func (i *Injection) windowEvent(id, at int64) history.Event {
	e := history.Event{Type: history.TypeFaultStart, Time: at, Fault: id, Kind: i.window.Kind,
		Targets: i.window.Targets, Desc: i.window.Desc, Step: i.step}
	if i.spec.Fault != "" { // not a tracked fault
		spec := i.spec
		if t := i.window.Target; t != nil {
			spec.Target = *t
		}
		e.Spec = spec.String()
	}
	if m := i.window.Member; m != nil {
		e.Process, e.Role, e.Member = links.ProcessName(m.Process), m.Role, m.ID
	}
	return e
}
