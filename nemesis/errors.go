package nemesis

import (
	"errors"
	"fmt"
)

// Sentinel errors, for errors.Is. Backends that cannot perform a fault return errors matching
// cluster.ErrUnsupported, which the nemesis passes through.
var (
	// ErrWrongState: an Injection method was called in a state that does not allow it.
	ErrWrongState = errors.New("wrong state")
	// ErrUnknownFault: a spec names no registered fault.
	ErrUnknownFault = errors.New("unknown fault")
	// ErrInvalidSpec: a spec, a target or a schedule is not valid (a *SpecError says where).
	ErrInvalidSpec = errors.New("invalid spec")
	// ErrNoTarget: a target selector resolved to nothing (no such process, no free broker, no
	// holder of the role).
	ErrNoTarget = errors.New("no target")
	// ErrTargetBusy: a target is held by another injection.
	ErrTargetBusy = errors.New("target busy")
	// ErrNotHeld: WaitForInjected found that the fault did not take hold.
	ErrNotHeld = errors.New("fault did not take hold")
	// ErrNotRecovered: WaitForRecovered found that service did not come back.
	ErrNotRecovered = errors.New("service did not recover")
	// ErrHealing: HealAll is running; nothing new is injected meanwhile.
	ErrHealing = errors.New("healing")
	// ErrRunning: Run was called while the nemesis is already running a schedule.
	ErrRunning = errors.New("nemesis already running")
)

// SpecError names the field of a spec, target, parameter or schedule that is wrong, as it is
// spelled in the scenario file ("params.latency", "script[2].for"). It matches ErrInvalidSpec.
type SpecError struct {
	Field  string
	Value  any
	Reason string
}

// Error implements error: `params.latency "5": want a duration with a unit`. A SpecError
// without a field is about the spec's text as a whole, which its caller quotes.
func (e *SpecError) Error() string {
	switch v := e.Value.(type) {
	case nil:
		if e.Field == "" {
			return e.Reason
		}
		return fmt.Sprintf("%s: %s", e.Field, e.Reason)
	case string:
		return fmt.Sprintf("%s %q: %s", e.Field, v, e.Reason)
	case fmt.Stringer:
		return fmt.Sprintf("%s %q: %s", e.Field, v.String(), e.Reason)
	}
	return fmt.Sprintf("%s %v: %s", e.Field, e.Value, e.Reason)
}

// Is makes errors.Is(err, ErrInvalidSpec) true.
func (e *SpecError) Is(target error) bool { return target == ErrInvalidSpec }

// prefixed returns err with field prefixed to a SpecError's field ("script[2]." + "for").
func prefixed(prefix string, err error) error {
	var se *SpecError
	if errors.As(err, &se) {
		return &SpecError{Field: prefix + se.Field, Value: se.Value, Reason: se.Reason}
	}
	return err
}

// StateError says which call was refused in which state. It matches ErrWrongState.
type StateError struct {
	Op    string
	State State
}

// Error implements error.
func (e *StateError) Error() string {
	return fmt.Sprintf("%s in state %s: %v", e.Op, e.State, ErrWrongState)
}

// Is makes errors.Is(err, ErrWrongState) true.
func (e *StateError) Is(target error) bool { return target == ErrWrongState }
