package cluster

import (
	"errors"
	"fmt"
)

// ErrUnsupported is matched (errors.Is) by every error a backend returns for a
// fault or an operation it cannot perform. A backend never turns such a request
// into a silent no-op: a nemesis that believes it killed a broker when nothing
// happened would report a fault window that never existed.
var ErrUnsupported = errors.New("unsupported by this cluster backend")

// ErrUnknownBroker is matched by errors for a broker id the cluster does not have.
var ErrUnknownBroker = errors.New("unknown broker")

// ErrUnknownAddress is matched by the error of a dial function when it is asked
// for an address that is not the advertised address of a known broker. Dialing
// such an address directly would bypass the process's links, so it is refused.
var ErrUnknownAddress = errors.New("address is not a known broker's advertised address")

// ErrClosed is matched by errors of calls made after Close.
var ErrClosed = errors.New("cluster closed")

// UnsupportedError says which backend refused which operation and why. It
// matches ErrUnsupported.
type UnsupportedError struct {
	Kind   string // the backend, e.g. "external"
	Op     string // the operation, e.g. "pause broker 2"
	Reason string // why, for the person reading the log
}

// Error implements error.
func (e *UnsupportedError) Error() string {
	s := fmt.Sprintf("%s cluster: %s: unsupported", e.Kind, e.Op)
	if e.Reason != "" {
		s += " (" + e.Reason + ")"
	}
	return s
}

// Is makes errors.Is(err, ErrUnsupported) true.
func (e *UnsupportedError) Is(target error) bool { return target == ErrUnsupported }

// Unsupported returns an *UnsupportedError; backends use it so every refusal
// reads the same.
func Unsupported(kind, op, reason string) error {
	return &UnsupportedError{Kind: kind, Op: op, Reason: reason}
}

// OptionError is returned by backend constructors for an invalid option; Field
// names the option as it is spelled in the Options struct.
type OptionError struct {
	Field  string
	Value  any
	Reason string
}

// Error implements error.
func (e *OptionError) Error() string {
	return fmt.Sprintf("option %s=%v: %s", e.Field, e.Value, e.Reason)
}
