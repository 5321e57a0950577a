// Package record is the record format of fencecheck's coordination topic: the keys and
// values the lease transport writes and reads (registrations, leases, work), their encoding
// and decoding, and the values they carry (roles, members, fencing tokens, leases). Package
// transport re-exports each of them under the same name.
//
// It imports nothing of the module and no Kafka client, so its fuzz target builds in seconds
// (a fuzz build instruments every package the test links).
package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"time"
)

// Record format, version 1. Both key and value start with the magic byte 0xFC and a version
// byte, so a record of another writer (or of a future format) is recognised, not misread.
//
//	key   = 0xFC 0x01 role-bytes
//	value = 0xFC 0x01 kind fields...
//	  kind 1, registration: member
//	  kind 2, lease:        token holder seq duration-ns written-at-unix-ns
//	  kind 3, work:         token member write-id payload
//	  kind 4, work part:    token member write-id index count payload
//	token  = producer-id (zigzag varint) epoch (zigzag varint)
//	string = length (uvarint) bytes; integers are varints (zigzag for signed)
//
// Kind 4 is a record of a work write of several records, all in one transaction: index (from
// 0) and count (2 to MaxWorkRecords) say which of its write's records it is, so a reader can
// tell whether it saw all of them. It decodes as a work value (KindWork) with Index and Count
// set; a work write of one record is still kind 3, byte for byte as before.
//
// Decoding is strict: a short field, a non-minimal varint, an oversized length or trailing
// bytes are errors, so every value has exactly one encoding.
const (
	recordMagic   = 0xFC
	recordVersion = 1
	// wireWorkPart is the kind byte of a work record of a write of several records.
	wireWorkPart = 4
)

// MaxWorkRecords is the most records one work write may carry (a record's count).
const MaxWorkRecords = 1000

// ValueKind says what a record value holds.
type ValueKind byte

// The kinds of record value.
const (
	KindRegistration ValueKind = 1
	KindLease        ValueKind = 2
	KindWork         ValueKind = 3
)

func (k ValueKind) String() string {
	switch k {
	case KindRegistration:
		return "registration"
	case KindLease:
		return "lease"
	case KindWork:
		return "work"
	}
	return fmt.Sprintf("kind(%d)", byte(k))
}

// Value is a decoded record value. Which fields are meaningful depends on Kind:
// registration: Member; lease: Token, Lease (Member = Lease.Holder); work: Token, Member,
// WriteID, Payload, and Index and Count for a write of several records.
type Value struct {
	Kind    ValueKind
	Member  MemberID
	Token   FencingToken
	Lease   Lease
	WriteID uint64
	Payload []byte
	// Count is the number of records of the work write this record is one of, Index its
	// place among them (from 0). A Count of 0 or 1 is a write of one record (Index 0).
	Index, Count int
}

// EncodeKey returns the record key of role.
func EncodeKey(role Role) []byte {
	return append([]byte{recordMagic, recordVersion}, role...)
}

// DecodeKey returns the role a record key names.
func DecodeKey(b []byte) (Role, error) {
	if len(b) < 2 || b[0] != recordMagic {
		return "", errors.New("key: not a fencecheck key")
	}
	if b[1] != recordVersion {
		return "", fmt.Errorf("key: unsupported version %d", b[1])
	}
	return Role(b[2:]), nil
}

// AppendValue appends the encoding of v to dst. A work value of several records (Count above
// 1) needs an Index below its Count and a Count of at most MaxWorkRecords to decode.
func AppendValue(dst []byte, v Value) []byte {
	kind := byte(v.Kind)
	if v.Kind == KindWork && v.Count > 1 {
		kind = wireWorkPart
	}
	dst = append(dst, recordMagic, recordVersion, kind)
	switch v.Kind {
	case KindRegistration:
		dst = appendString(dst, string(v.Member))
	case KindLease:
		dst = appendToken(dst, v.Token)
		dst = appendString(dst, string(v.Lease.Holder))
		dst = binary.AppendUvarint(dst, v.Lease.Seq)
		dst = binary.AppendVarint(dst, int64(v.Lease.Duration))
		dst = binary.AppendVarint(dst, v.Lease.WrittenAt.UnixNano())
	case KindWork:
		dst = appendToken(dst, v.Token)
		dst = appendString(dst, string(v.Member))
		dst = binary.AppendUvarint(dst, v.WriteID)
		if kind == wireWorkPart {
			dst = binary.AppendUvarint(dst, uint64(v.Index))
			dst = binary.AppendUvarint(dst, uint64(v.Count))
		}
		dst = appendString(dst, string(v.Payload))
	}
	return dst
}

// DecodeValue decodes a record value. It returns an error, never panics, on any input.
func DecodeValue(b []byte) (Value, error) {
	if len(b) < 3 || b[0] != recordMagic {
		return Value{}, errors.New("value: not a fencecheck value")
	}
	if b[1] != recordVersion {
		return Value{}, fmt.Errorf("value: unsupported version %d", b[1])
	}
	d := decoder{b: b[3:]}
	v := Value{Kind: ValueKind(b[2])}
	switch v.Kind {
	case KindRegistration:
		v.Member = MemberID(d.string())
	case KindLease:
		v.Token = d.token()
		v.Lease.Holder = MemberID(d.string())
		v.Member = v.Lease.Holder
		v.Lease.Seq = d.uvarint()
		v.Lease.Duration = time.Duration(d.varint())
		v.Lease.WrittenAt = time.Unix(0, d.varint())
	case KindWork, wireWorkPart:
		v.Kind = KindWork
		v.Token = d.token()
		v.Member = MemberID(d.string())
		v.WriteID = d.uvarint()
		if b[2] == wireWorkPart {
			index, count := d.uvarint(), d.uvarint()
			if d.err == nil && (count < 2 || count > MaxWorkRecords || index >= count) {
				d.err = fmt.Errorf("record %d of %d: want a count of 2 to %d and an index below it", index, count, MaxWorkRecords)
			}
			v.Index, v.Count = int(index), int(count)
		}
		v.Payload = []byte(d.string())
	default:
		return Value{}, fmt.Errorf("value: unknown kind %d", b[2])
	}
	if d.err != nil {
		return Value{}, fmt.Errorf("value: %s: %w", v.Kind, d.err)
	}
	if len(d.b) != 0 {
		return Value{}, fmt.Errorf("value: %s: %d trailing bytes", v.Kind, len(d.b))
	}
	return v, nil
}

// PartitionFor returns the partition of role in a topic of the given partition count: FNV-1a
// of the role name, modulo the count. Every process computes the same answer.
func PartitionFor(role Role, partitions int32) int32 {
	h := fnv.New32a()
	h.Write([]byte(role))
	return int32(h.Sum32() % uint32(partitions))
}

// TransactionalID returns the transactional.id of role on topic.
func TransactionalID(topic string, role Role) string { return topic + "/" + string(role) }

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendToken(dst []byte, t FencingToken) []byte {
	dst = binary.AppendVarint(dst, t.ProducerID)
	return binary.AppendVarint(dst, int64(t.Epoch))
}

// decoder reads fields, remembering the first error so call sites stay linear.
type decoder struct {
	b   []byte
	err error
}

var (
	errShort        = errors.New("truncated")
	errNonCanonical = errors.New("non-minimal varint") // one value, one encoding
)

// uvarintLen is the length of the minimal uvarint encoding of v.
func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errShort
		return 0
	}
	if n != uvarintLen(v) {
		d.err = errNonCanonical
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errShort
		return 0
	}
	if ux := uint64(v) << 1; n != uvarintLen(ux^uint64(v>>63)) {
		d.err = errNonCanonical
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) string() string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.b)) {
		d.err = fmt.Errorf("length %d exceeds the %d bytes left", n, len(d.b))
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) token() FencingToken {
	pid := d.varint()
	epoch := d.varint()
	if d.err == nil && (epoch < -1<<15 || epoch > 1<<15-1) {
		d.err = fmt.Errorf("epoch %d out of range", epoch)
	}
	return FencingToken{ProducerID: pid, Epoch: int16(epoch)}
}

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
