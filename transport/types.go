package transport

import (
	"context"
	"fmt"
	"time"
)

// Role is a named leadership slot. Each role maps to one Kafka transactional.id and to one
// partition of the coordination topic.
type Role string

// MemberID names a candidate for a role.
type MemberID string

// FencingToken is the (producer id, epoch) pair that InitProducerId minted for a holder.
// Tokens order lexicographically: producer id first, then epoch.
type FencingToken struct {
	ProducerID int64
	Epoch      int16
}

// Compare returns -1, 0 or +1 as t sorts before, equal to or after o.
func (t FencingToken) Compare(o FencingToken) int {
	switch {
	case t.ProducerID < o.ProducerID:
		return -1
	case t.ProducerID > o.ProducerID:
		return 1
	case t.Epoch < o.Epoch:
		return -1
	case t.Epoch > o.Epoch:
		return 1
	}
	return 0
}

// IsZero reports whether t is the zero value. It does not mean "no token": a fresh Kafka
// cluster's first producer id is 0, so (0, 0) is a real minted token there. Absence is always
// reported separately (HeldToken's and Describe's bool).
func (t FencingToken) IsZero() bool { return t == FencingToken{} }

// String renders t as "pid/epoch".
func (t FencingToken) String() string { return fmt.Sprintf("%d/%d", t.ProducerID, t.Epoch) }

// Lease is what a holder writes to renew its claim on a role.
type Lease struct {
	Holder MemberID
	// Seq identifies this write. The transport stores it verbatim; fencecheck's workload puts
	// the run-unique operation id here so the checker can match the record to its write.
	Seq       uint64
	Duration  time.Duration
	WrittenAt time.Time
}

// Registration is a member's announcement on a role's partition. JoinSeq is the broker offset
// of the registration record.
type Registration struct {
	Member  MemberID
	JoinSeq int64
}

// LeaseRecord is a committed lease as read back from the role's partition: the lease, the
// minted token of the writer (taken from the record value, not from batch headers) and the
// record's offset.
type LeaseRecord struct {
	Lease  Lease
	Token  FencingToken
	Offset int64
}

// RoleRecords is a role's committed history, each slice in offset order.
type RoleRecords struct {
	Registrations []Registration
	Leases        []LeaseRecord
}

// CoordinationTransport is the seed's transport contract. See the package documentation for
// the semantics of each call and the errors it returns.
type CoordinationTransport interface {
	AcquireEpoch(ctx context.Context, role Role) (FencingToken, error)
	ReadRoleRecords(ctx context.Context, role Role) (RoleRecords, error)
	Register(ctx context.Context, role Role, member MemberID) (joinSeq int64, err error)
	WriteLease(ctx context.Context, role Role, token FencingToken, lease Lease) error
	Describe(ctx context.Context, role Role) (token FencingToken, held bool, err error)
}
