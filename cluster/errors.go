package cluster

import (
	"errors"
	"fmt"

	"github.com/fencecheck/fencecheck/cluster/links"
)

// ErrUnsupported is matched (errors.Is) by every error a backend returns for a
// fault or an operation it cannot perform. A backend never turns such a request
// into a silent no-op: a nemesis that believes it killed a broker when nothing
// happened would report a fault window that never existed.
var ErrUnsupported = errors.New("unsupported by this cluster backend")

// ErrUnknownBroker, ErrUnknownAddress and ErrClosed are the links' errors: a backend's own
// calls return them for the same conditions, so one errors.Is covers both.
var (
	ErrUnknownBroker  = links.ErrUnknownBroker
	ErrUnknownAddress = links.ErrUnknownAddress
	ErrClosed         = links.ErrClosed
)

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
// names the option as it is spelled in the Options struct. It is the links' type, so a
// backend passes a network's option error on as it is.
type OptionError = links.OptionError
