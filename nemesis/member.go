package nemesis

import (
	"context"
	"errors"
	"fmt"

	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/internal/units"
)

// freeze stops the holder of a role at a pause point (a zombie): its lease runs out while it
// believes it still holds the role; after the thaw, fencing must make its writes harmless.
type freeze struct {
	n    *Nemesis
	spec Spec
	role string
	m    Member
}

func newFreeze(n *Nemesis, s Spec) Fault {
	f := &freeze{n: n, spec: s}
	if sp, ok := n.env.Freezer.(FreezeSpanner); ok {
		return &spannedFreeze{freeze: f, sp: sp}
	}
	return f
}

// spannedFreeze is a freeze whose freezer reports when the member actually froze and
// resumed: its window is that span.
type spannedFreeze struct {
	*freeze
	sp FreezeSpanner
}

// WaitForInjected: the freezer reports that the member froze at its pause point (it may have
// resumed already: a short freeze still took hold).
func (f *spannedFreeze) WaitForInjected(ctx context.Context) error {
	return poll(ctx, ErrNotHeld, func() error {
		if _, _, ok := f.sp.LastFreeze(f.m); !ok {
			f.follow(ctx)
			return fmt.Errorf("%s has not reached a pause point", f.m)
		}
		return nil
	})
}

func (f *spannedFreeze) Span() (start, end int64, ok bool) {
	froze, resumed, ok := f.sp.LastFreeze(f.m)
	return froze.Nanoseconds(), resumed.Nanoseconds(), ok
}

// freezeFor is freeze's default duration: twice the lease, so the lease surely runs out.
func freezeFor(env *Env) units.Duration { return units.Duration(2 * env.Lease) }

func (f *freeze) Setup(ctx context.Context) error {
	fz := f.n.env.Freezer
	if fz == nil {
		return cluster.Unsupported("nemesis", "freeze", "the run has no member freezer")
	}
	if f.spec.For <= 0 {
		return &SpecError{Field: "for", Reason: "required: the env has no lease to derive it from"}
	}
	role, err := f.n.pickRole(f.spec.Target.Role)
	if err != nil {
		return err
	}
	// A step may come between two holders (a handoff, a holder just deposed by an earlier
	// step, the scramble at a run's start): the freeze then takes the holder the handoff
	// settles on, if one comes within a lease, else whoever holds then.
	wait := f.n.env.Lease
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var m Member
	err = poll(wctx, ErrNoTarget, func() error {
		var ok bool
		if m, ok = fz.SettledHolder(role); !ok {
			return fmt.Errorf("holder of %s: nobody held it for %v", role, wait)
		}
		return nil
	})
	if errors.Is(err, ErrNoTarget) && ctx.Err() == nil {
		var ok bool
		if m, ok = fz.Holder(role); ok {
			err = nil
		}
	}
	if err != nil {
		return err
	}
	f.role, f.m = role, m
	return nil
}

func (f *freeze) Window() Window {
	point := f.spec.Params.Point
	if point == "" {
		point = "its default pause point"
	}
	m := f.m
	return Window{Kind: historyKind(f.spec.Fault), Targets: []string{m.String()}, Member: &m,
		Desc:   fmt.Sprintf("freeze %s (holder of %s) at %s for %v", m, f.role, point, f.spec.For),
		Target: &Target{Role: f.role}}
}

// Inject arms the freeze. Its bound outlasts the window by WaitTimeout, so a member whose
// nemesis is gone still thaws.
func (f *freeze) Inject(ctx context.Context) error {
	f.n.noteFrozen(f.m)
	return f.n.env.Freezer.Freeze(ctx, f.m, f.spec.Params.Point, f.spec.For.D()+f.n.env.WaitTimeout)
}

// WaitForInjected: the freezer reports the member stopped at its pause point.
func (f *freeze) WaitForInjected(ctx context.Context) error {
	return poll(ctx, ErrNotHeld, func() error {
		if !f.n.env.Freezer.Frozen(f.m) {
			f.follow(ctx)
			return fmt.Errorf("%s has not reached a pause point", f.m)
		}
		return nil
	})
}

// follow moves an armed freeze that has not taken hold to the role's holder, when the role
// has settled on another member since the target was chosen. The step asks for the holder
// of the role, and a member deposed after it was chosen (a handoff; on a loaded machine,
// renewals late enough that another member's look finds the lease expired) never reaches a
// pause point that comes before a write it can no longer make. The old target is disarmed;
// a member another fault holds is left alone. The Injection picks up the new target from
// Window (targets, claims, the window it records).
func (f *freeze) follow(ctx context.Context) {
	fz := f.n.env.Freezer
	m, ok := fz.SettledHolder(f.role)
	if !ok || m == f.m || f.n.busy(m.String()) {
		return
	}
	if err := fz.Thaw(ctx, f.m); err != nil {
		return
	}
	if err := fz.Freeze(ctx, m, f.spec.Params.Point, f.spec.For.D()+f.n.env.WaitTimeout); err != nil {
		return
	}
	f.n.log.Info("freeze follows the holder", "role", f.role, "from", f.m.String(), "to", m.String())
	f.n.noteFrozen(m)
	f.m = m
}

func (f *freeze) Recover(ctx context.Context) error { return f.n.env.Freezer.Thaw(ctx, f.m) }

func (f *freeze) WaitForRecovered(ctx context.Context) error {
	return poll(ctx, ErrNotRecovered, func() error {
		if f.n.env.Freezer.Frozen(f.m) {
			return fmt.Errorf("%s is still frozen", f.m)
		}
		return nil
	})
}

func (f *freeze) Cleanup(context.Context) error { return nil }
