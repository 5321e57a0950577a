package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Sentinel errors. Every error a transport call returns wraps exactly one of them, so callers
// branch with errors.Is.
var (
	// ErrInvalidConfig: the configuration (or an argument) is unusable; nothing was sent.
	ErrInvalidConfig = errors.New("invalid config")
	// ErrAdmin: an admin call (connection, topic, coordinator lookup, describe) failed.
	ErrAdmin = errors.New("admin")
	// ErrFenced: the broker rejected the producer's epoch: a newer holder took the role, or the
	// coordinator aborted the holder's transaction. The holding is gone.
	ErrFenced = errors.New("fenced")
	// ErrProducer: the broker refused a produce, an InitProducerId or a commit.
	ErrProducer = errors.New("producer")
	// ErrClient: a connection failed or a call was cut off by its deadline.
	ErrClient = errors.New("client")
	// ErrNotHeld: this process holds no epoch for the role, or holds another one. Checked
	// locally: nothing was sent.
	ErrNotHeld = errors.New("not held")
	// ErrRecord: a record of the role could not be decoded.
	ErrRecord = errors.New("record")
	// ErrClosed: the transport was closed. Nothing was sent.
	ErrClosed = errors.New("transport closed")
)

// Op names a transport call in errors and classification.
type Op string

// The calls of a transport.
const (
	OpStart    Op = "start"
	OpRegister Op = "register"
	OpAcquire  Op = "acquire"
	OpWrite    Op = "write"
	OpRead     Op = "read"
	OpDescribe Op = "describe"
)

// Stage says how far a call got before it failed; Classify needs it to tell "did not happen"
// from "may have happened".
type Stage int

const (
	// StageLocal: failed before any request left this process.
	StageLocal Stage = iota
	// StageSend: a request left, but for writes no commit was requested, so no record of this
	// call can ever become committed.
	StageSend
	// StageCommit: the commit (EndTxn) was requested and its outcome is not confirmed.
	StageCommit
)

// Error is the error every transport call returns. It wraps one sentinel (Kind) and the
// underlying cause.
type Error struct {
	Op    Op
	Role  Role
	Kind  error
	Stage Stage
	Err   error
}

func (e *Error) Error() string {
	who := string(e.Op)
	if e.Role != "" {
		who = fmt.Sprintf("%s %q", e.Op, e.Role)
	}
	if e.Err == nil {
		return fmt.Sprintf("%s: %v", who, e.Kind)
	}
	if isAuthorization(e.Err) {
		return fmt.Sprintf("%s: %v: not authorized by the cluster's ACLs: %v", who, e.Kind, e.Err)
	}
	return fmt.Sprintf("%s: %v: %v", who, e.Kind, e.Err)
}

// Unwrap exposes both the sentinel and the cause to errors.Is and errors.As.
func (e *Error) Unwrap() []error { return []error{e.Kind, e.Err} }

// Outcome is what a completed call says about its effect.
type Outcome int

const (
	// OK: the call took effect with the result it returned.
	OK Outcome = iota
	// Fail: the call certainly had no effect.
	Fail
	// Unknown: the call may or may not have taken effect, now or later.
	Unknown
)

func (o Outcome) String() string {
	switch o {
	case OK:
		return "ok"
	case Fail:
		return "fail"
	}
	return "unknown"
}

// Classify decides whether a call that returned err had an effect. It is the one place that
// decision is made; fencecheck's recorder maps its answer to ok/fail/info. When unsure it says
// Unknown: calling something Fail that may have happened would hide bugs from the checker.
func Classify(err error) Outcome {
	if err == nil {
		return OK
	}
	var e *Error
	if !errors.As(err, &e) {
		return Unknown // not ours: we cannot know how far it got
	}
	switch {
	case e.Stage == StageLocal:
		// Nothing was sent (bad argument, not held, closed transport).
		return Fail
	case e.Op == OpRead || e.Op == OpDescribe || e.Op == OpStart:
		// These change nothing on the cluster, so a failure has no effect to account for.
		return Fail
	case e.Op == OpAcquire && isAuthorization(e.Err):
		// The authorizer refused InitProducerId before the coordinator acted on it. Every
		// attempt kgo made was refused the same way (a principal's ACLs do not change while
		// one call runs), so nothing was minted and no holder was fenced.
		return Fail
	case e.Op == OpAcquire:
		// InitProducerId may have reached the coordinator (kgo retries it internally) and
		// minted a token that fenced the previous holder, whatever error came back last.
		return Unknown
	case e.Op == OpWrite && e.Stage == StageSend:
		// Transactional records become visible only through a commit marker, and no commit
		// was requested; the open transaction is aborted by the next InitProducerId for the
		// role or by the transaction timeout. If such a record ever shows up in a committed
		// read, the checker reports it (no-zombie-commit): that is a bug worth finding. This
		// covers a produce rejected for a stale epoch (ErrFenced) too.
		return Fail
	case e.Op == OpRegister && e.Stage == StageSend && isBrokerRejection(e.Err):
		// The broker answered the produce with a non-retriable error: nothing was appended.
		return Fail
	}
	// A commit whose answer never came, or that was answered with an error after kgo may
	// have retried it (even a fencing answer can follow an attempt that committed); a
	// registration cut off in flight: may have happened.
	return Unknown
}

// isBrokerRejection reports whether err is a definite error answer from a broker (as opposed
// to a lost connection or an expired deadline, after which the request may still apply).
func isBrokerRejection(err error) bool {
	var ke *kerr.Error
	if !errors.As(err, &ke) {
		return false
	}
	return !ke.Retriable && ke != kerr.UnknownServerError && ke != kerr.RequestTimedOut
}

// isFencing reports whether err is one of the broker's answers to a stale producer epoch.
// INVALID_TXN_STATE is what kfake answers a deposed TV1 producer's produce; OPERATION_NOT_ATTEMPTED
// is not here: kgo returns it for a commit it did not send (see WriteFenced in lease.go).
func isFencing(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) ||
		errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.InvalidTxnState)
}

// isConnection reports whether err is a network failure or an expired deadline.
func isConnection(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, context.Canceled) || errors.Is(err, os.ErrDeadlineExceeded)
}

// kindOf maps a broker or client error to a sentinel for call sites that have no better
// knowledge.
func kindOf(err error) error {
	switch {
	case isFencing(err):
		return ErrFenced
	case isConnection(err):
		return ErrClient
	}
	return ErrProducer
}
