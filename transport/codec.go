package transport

import "github.com/fencecheck/fencecheck/transport/record"

// The record format of the coordination topic is package record's (record.go says it byte by
// byte); these names re-export it, so the transport's users need one import.

// MaxWorkRecords is the most records one work write may carry (a record's count).
const MaxWorkRecords = record.MaxWorkRecords

// ValueKind says what a record value holds.
type ValueKind = record.ValueKind

// The kinds of record value.
const (
	KindRegistration = record.KindRegistration
	KindLease        = record.KindLease
	KindWork         = record.KindWork
)

// Value is a decoded record value (record.Value says which fields each kind has).
type Value = record.Value

// EncodeKey returns the record key of role.
func EncodeKey(role Role) []byte { return record.EncodeKey(role) }

// DecodeKey returns the role a record key names.
func DecodeKey(b []byte) (Role, error) { return record.DecodeKey(b) }

// AppendValue appends the encoding of v to dst (record.AppendValue).
func AppendValue(dst []byte, v Value) []byte { return record.AppendValue(dst, v) }

// DecodeValue decodes a record value. It returns an error, never panics, on any input.
func DecodeValue(b []byte) (Value, error) { return record.DecodeValue(b) }

// PartitionFor returns the partition of role in a topic of the given partition count: FNV-1a
// of the role name, modulo the count. Every process computes the same answer.
func PartitionFor(role Role, partitions int32) int32 { return record.PartitionFor(role, partitions) }

// TransactionalID returns the transactional.id of role on topic.
func TransactionalID(topic string, role Role) string { return record.TransactionalID(topic, role) }
