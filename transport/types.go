package transport

import (
	"context"

	"github.com/fencecheck/fencecheck/transport/record"
)

// Role is a named leadership slot. Each role maps to one Kafka transactional.id and to one
// partition of the coordination topic.
type Role = record.Role

// MemberID names a candidate for a role.
type MemberID = record.MemberID

// FencingToken is the (producer id, epoch) pair that InitProducerId minted for a holder.
type FencingToken = record.FencingToken

// Lease is what a holder writes to renew its claim on a role.
type Lease = record.Lease

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
