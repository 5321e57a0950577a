package nemesis

import (
	"context"

	"github.com/fencecheck/fencecheck/checker/history"
)

// Fault is one fault's implementation. An Injection drives it through its lifecycle and
// guarantees the order of calls (so a Fault need not check its state):
//
//   - Setup resolves the target to concrete links, brokers or members and prepares; nothing
//     of the cluster changes yet. Window is valid afterwards.
//   - Inject applies the fault. It records what it did, so Recover undoes exactly that, even
//     after Inject failed halfway. An error matching cluster.ErrUnsupported means the
//     cluster refused before anything changed (its window closes at once, not held).
//   - WaitForInjected returns nil once the fault holds, checked against the cluster, or an
//     error wrapping ErrNotHeld when ctx ends first.
//   - Recover undoes Inject. It must work on a context.WithoutCancel context and keep going
//     past a failing target (returning the errors joined).
//   - WaitForRecovered returns nil once service is back, or an error wrapping ErrNotRecovered.
//   - Cleanup releases what Setup prepared.
//
// Inject may be called again after WaitForRecovered (a new window).
type Fault interface {
	Setup(ctx context.Context) error
	Inject(ctx context.Context) error
	WaitForInjected(ctx context.Context) error
	Recover(ctx context.Context) error
	WaitForRecovered(ctx context.Context) error
	Cleanup(ctx context.Context) error
	// Window describes the fault for its history windows and names its targets; it is valid
	// after Setup.
	Window() Window
}

// Window is what the history records of a fault (see history.Event, fault-start).
type Window struct {
	Kind history.Kind
	// Targets name what the fault acts on: links "p1->b2", brokers "b2", members
	// "p1/role-3/m1", transactional ids "txn:<id>". An injection claims them: no other
	// injection may hold one at the same time.
	Targets []string
	Desc    string
	Member  *Member // the frozen member, for member-pause windows
	// Target is the spec's target resolved, so that the spec with it repeats this fault
	// (history.Fault.Spec): processes and brokers picked at random or by a role become their
	// ids; a role picked at random becomes its name, and "the holder of" it stays a holder
	// (whoever holds it at that moment of the replay); every process stays every process.
	// nil: the spec's own target stands.
	Target *Target
}
