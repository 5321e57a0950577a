package history

import (
	"fmt"
	"strconv"
	"strings"
)

// FormatVersion is the newest history format this package reads. It writes format 1 for a
// lease history and FormatPipeline for a pipeline history (see FormatOf). Bump it when a line
// changes meaning; adding an optional field does not need a bump, because readers skip
// fields they do not know.
const FormatVersion = FormatPipeline

// FormatOf is the format a history with meta is written in: 1 for the lease workload,
// FormatPipeline for a pipeline, so that a reader that knows only leases refuses it.
func FormatOf(meta *Meta) int {
	if meta != nil && meta.Workload != "" {
		return FormatPipeline
	}
	return 1
}

// EventType tags a line: the header, an invoke, one of the three completions, or the start
// or end of a fault window.
type EventType uint8

// The event types. The zero value is invalid, so a forgotten Type is caught by the writer.
const (
	TypeHeader EventType = iota + 1
	TypeInvoke
	TypeOK   // the operation happened; the result is in the event
	TypeFail // the operation certainly did not happen
	TypeInfo // the operation may or may not have happened
	TypeFaultStart
	TypeFaultEnd
)

var typeNames = [...]string{
	TypeHeader:     "header",
	TypeInvoke:     "invoke",
	TypeOK:         "ok",
	TypeFail:       "fail",
	TypeInfo:       "info",
	TypeFaultStart: "fault-start",
	TypeFaultEnd:   "fault-end",
}

// String returns the type's name as it appears in the file.
func (t EventType) String() string {
	if int(t) < len(typeNames) && typeNames[t] != "" {
		return typeNames[t]
	}
	return "EventType(" + strconv.Itoa(int(t)) + ")"
}

// IsCompletion reports whether t is ok, fail or info.
func (t EventType) IsCompletion() bool { return t == TypeOK || t == TypeFail || t == TypeInfo }

// MarshalText encodes the type as its name.
func (t EventType) MarshalText() ([]byte, error) {
	name, err := t.name()
	if err != nil {
		return nil, err
	}
	return []byte(name), nil
}

// name returns the type's name, or ErrMalformed for an unknown type.
func (t EventType) name() (string, error) {
	if int(t) >= len(typeNames) || typeNames[t] == "" {
		return "", fmt.Errorf("event type %d: %w", t, ErrMalformed)
	}
	return typeNames[t], nil
}

// UnmarshalText decodes a type name.
func (t *EventType) UnmarshalText(b []byte) error {
	v, ok := parseType(b)
	if !ok {
		return fmt.Errorf("event type %q: %w", b, ErrMalformed)
	}
	*t = v
	return nil
}

// typeList names every event type, for error messages.
func typeList() string {
	var names []string
	for _, n := range typeNames {
		if n != "" {
			names = append(names, n)
		}
	}
	return strings.Join(names, ", ")
}

func parseType(b []byte) (EventType, bool) {
	for i, n := range typeNames {
		if n != "" && n == string(b) {
			return EventType(i), true
		}
	}
	return 0, false
}

// Kind is the kind of an operation or of a fault window. Operation kinds are the constants
// below; fault kinds are named by the nemesis, except [KindMemberPause].
type Kind string

// Operation kinds (docs/history.md, "Operation kinds").
const (
	KindRegister   Kind = "register"    // append a registration; ok result: offset
	KindAcquire    Kind = "acquire"     // mint a fencing token; ok result: token
	KindWriteLease Kind = "write-lease" // write the lease under the minted token
	KindWork       Kind = "work"        // a fenced application write through the bound producer
	KindRead       Kind = "read"        // read a committed log during the run
	KindDescribe   Kind = "describe"    // ask the coordinator which token holds the role
	KindFinalRead  Kind = "final-read"  // read a committed log after healing: the reference
)

// KindMemberPause is the fault kind of a paused member (a zombie): the window names the
// process, role and member that were frozen.
const KindMemberPause Kind = "member-pause"

// MaxRecords is the most records a write may carry (Args.Records, Record.Count).
const MaxRecords = 1<<16 - 1

// IsWrite reports whether k is a fenced write (a lease write or a work write).
func (k Kind) IsWrite() bool { return k == KindWriteLease || k == KindWork }

// IsRead reports whether k reads a committed log.
func (k Kind) IsRead() bool { return k == KindRead || k == KindFinalRead }

func (k Kind) valid() bool {
	switch k {
	case KindRegister, KindAcquire, KindWriteLease, KindWork, KindRead, KindDescribe, KindFinalRead,
		KindSend, KindTxn, KindFinalOutput, KindFinalOffsets, KindFetch, KindFinalTxns:
		return true
	}
	return false
}

// Well-known error classes of completions. The transport or the recorder owns the choice of
// class; the checker interprets only ErrorFenced (the broker or the coordinator rejected the
// epoch), and in a pipeline history a failed send (ErrorAborted). Other classes are kept as
// recorded and shown in reports.
const (
	ErrorFenced  = "fenced"   // the epoch check rejected the operation
	ErrorNotHeld = "not-held" // checked locally before any I/O: the process holds no such token
	ErrorTimeout = "timeout"  // the operation did not finish in time
)

// Token is a fencing token: the (producer id, epoch) pair the transaction coordinator minted.
// Tokens order lexicographically. Kafka hands out producer ids from 0 and epochs from 0, so
// (0, 0) is a real token; [NoToken] stands for "none".
type Token struct {
	ProducerID int64 `json:"producer_id"`
	Epoch      int16 `json:"epoch"`
}

// NoToken is Kafka's "no producer id, no epoch" (-1, -1). It sorts before every real token.
var NoToken = Token{ProducerID: -1, Epoch: -1}

// Valid reports whether t is a real token rather than NoToken.
func (t Token) Valid() bool { return t.ProducerID >= 0 }

// Compare returns -1, 0 or +1 as t sorts before, equal to or after u, lexicographically on
// (producer id, epoch).
func (t Token) Compare(u Token) int {
	switch {
	case t.ProducerID < u.ProducerID:
		return -1
	case t.ProducerID > u.ProducerID:
		return 1
	case t.Epoch < u.Epoch:
		return -1
	case t.Epoch > u.Epoch:
		return 1
	}
	return 0
}

// Less reports whether t sorts before u.
func (t Token) Less(u Token) bool { return t.Compare(u) < 0 }

// String formats the token as "(producer id,epoch)", or "none" for NoToken.
func (t Token) String() string {
	if !t.Valid() {
		return "none"
	}
	return "(" + strconv.FormatInt(t.ProducerID, 10) + "," + strconv.Itoa(int(t.Epoch)) + ")"
}

// LogID names one committed log: the lease log of a role (its registrations and lease
// records) or one partition of the work topic. LogID is comparable, so it keys maps.
type LogID struct {
	Role      string // the role, for a lease log; empty for a work partition
	Work      bool   // true for a work-topic partition
	Partition int32  // the work partition, when Work is set
}

// RoleLog names the lease log of role.
func RoleLog(role string) LogID { return LogID{Role: role} }

// WorkLog names partition p of the work topic.
func WorkLog(p int32) LogID { return LogID{Work: true, Partition: p} }

// String formats the log as "lease:<role>" or "work:<partition>".
func (l LogID) String() string {
	if l.Work {
		return "work:" + strconv.Itoa(int(l.Partition))
	}
	return "lease:" + l.Role
}

// RecordKind says what a record of a committed log is.
type RecordKind uint8

// Record kinds. Registrations and lease records share a role's lease log; work records live
// on the work topic.
const (
	RecordRegistration RecordKind = iota + 1
	RecordLease
	RecordWork
)

var recordKindNames = [...]string{
	RecordRegistration: "registration",
	RecordLease:        "lease",
	RecordWork:         "work",
}

// String returns the kind's name as it appears in the file.
func (k RecordKind) String() string {
	if int(k) < len(recordKindNames) && recordKindNames[k] != "" {
		return recordKindNames[k]
	}
	return "RecordKind(" + strconv.Itoa(int(k)) + ")"
}

// MarshalText encodes the kind as its name.
func (k RecordKind) MarshalText() ([]byte, error) {
	if int(k) >= len(recordKindNames) || recordKindNames[k] == "" {
		return nil, fmt.Errorf("record kind %d: %w", k, ErrMalformed)
	}
	return []byte(recordKindNames[k]), nil
}

// UnmarshalText decodes a kind name.
func (k *RecordKind) UnmarshalText(b []byte) error {
	v, ok := parseRecordKind(b)
	if !ok {
		return fmt.Errorf("record kind %q: %w", b, ErrMalformed)
	}
	*k = v
	return nil
}

func parseRecordKind(b []byte) (RecordKind, bool) {
	switch string(b) {
	case "registration":
		return RecordRegistration, true
	case "lease":
		return RecordLease, true
	case "work":
		return RecordWork, true
	}
	return 0, false
}

// Record is one record of a committed log as a read returned it. Lease and work records carry
// the token their writer minted and the writer's unique write id; a registration carries only
// its member. Role names the writer's role in a work record (the work topic is shared); it is
// empty in a lease log, whose role is the log's. A work record of a write of several records
// says which of them it is: Index (from 0) of Count; Count is 0 for a write of one record.
type Record struct {
	Offset int64
	Kind   RecordKind
	// Index and Count sit in the room Kind leaves before Member: a Record stays 80 bytes.
	Index, Count uint16
	Member       string
	Role         string
	Token        Token // lease and work records only; the reader sets NoToken on registrations
	WriteID      string
}

// Args are an operation's arguments. Which fields are meaningful depends on the kind (see the
// package documentation).
type Args struct {
	// Token is the minted token a write runs under (write-lease, work); the Builder sets
	// NoToken on every other kind.
	Token Token
	// WriteID identifies the write's record in every log that holds it (write-lease, work).
	WriteID string
	// Log is the log the operation writes or reads. In the file only a work partition is
	// written (args.work_partition); the reader sets the role's lease log otherwise.
	Log LogID
	// Records is the number of records a work write carries, all in its one transaction
	// (args.records), from 2 to MaxRecords; 0 for a write of one record, as every write was
	// before writes of several records existed.
	Records int
	// Pipe are a pipeline operation's arguments (args.pipe); nil for the lease kinds.
	Pipe *PipeArgs
}

// Result is what an ok completion returned.
type Result struct {
	// Token is the token an acquire minted, or the pair a describe reported when Held.
	Token *Token
	// Held is describe's answer: false means the coordinator knows no holder ("none").
	Held bool
	// Offset is a registration's offset in the role's lease log: its join sequence.
	Offset *int64
	// Records are a read's records in offset order. Reads of one log that agree share their
	// records' array (see Builder): treat records as read-only.
	Records []Record
	// Pipe is what a pipeline operation returned (result.pipe); nil for the lease kinds.
	Pipe *PipeResult
}

// Meta is the header's run metadata. The checker uses LeaseDuration, ProducerIDs, Promises,
// the transaction versions (on 1, an acquire may bump the epoch twice) and NoDescribe; the
// rest identifies the run.
type Meta struct {
	Run      string `json:"run,omitempty"`
	Scenario string `json:"scenario,omitempty"`
	// Workload is the run's workload kind: "" for leases, WorkloadPipeline for an
	// exactly-once pipeline, whose shape is Pipeline. The checker refuses a kind it does not
	// know rather than judge it by another's guarantees.
	Workload string        `json:"workload,omitempty"`
	Pipeline *PipelineMeta `json:"pipeline,omitempty"`
	Seed     uint64        `json:"seed,omitempty"`
	Started  string        `json:"started,omitempty"` // wall clock, RFC 3339
	Cluster  string        `json:"cluster,omitempty"` // embedded, local, containers, external
	// TransactionVersion is the transaction version the run's producers speak, 1 or 2 (0:
	// unknown): what the processes' transports reported when they started. A client without
	// KIP-890 speaks 1 on a cluster that finalized 2.
	TransactionVersion int `json:"transaction_version,omitempty"`
	// ProcessTransactionVersions gives the processes ("p3") whose transports speak another
	// version than TransactionVersion, with theirs.
	ProcessTransactionVersions map[string]int `json:"process_transaction_versions,omitempty"`
	// ClusterTransactionVersion is the cluster's finalized transaction.version, when it is
	// not TransactionVersion.
	ClusterTransactionVersion int `json:"cluster_transaction_version,omitempty"`
	// Client names the client under test when it is not fencecheck's own transport: an exec
	// adapter's name and version, as its hello gave them.
	Client string `json:"client,omitempty"`
	// NoDescribe lists the processes whose transports cannot describe a role (an exec
	// adapter's no-describe capability): they issued no describe.
	NoDescribe    []string `json:"no_describe,omitempty"`
	LeaseDuration int64    `json:"lease_ns,omitempty"` // the transport's lease (= transaction timeout), ns
	// ProducerIDs is "ordered" (Kafka: ids come in increasing blocks, so a rotation still sorts
	// later) or "hashed" (kfake: a rotation gives a random id, so a producer-id change compares
	// only as a rotation the checker can order). Empty means ordered.
	ProducerIDs string `json:"producer_ids,omitempty"`
	// Promises are the coverage the scenario promises (for example "handoff", "fence"), so an
	// offline re-check judges coverage as the run did.
	Promises []string `json:"promises,omitempty"`
	// Schedule is the fault schedule's kind: ScheduleScript, ScheduleRandom, or empty when
	// the run had no faults (or the writer did not say). A run with a schedule must show
	// faults that took hold (the fault-took-hold coverage).
	Schedule string `json:"schedule,omitempty"`
	// Script is a scripted schedule's steps as the scenario wrote them, in the scenario's
	// order; a fault window names its step by number (Event.Step, 1-based).
	Script []string          `json:"script,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
}

// ProcessTransactionVersion returns the transaction version process speaks (0: unknown).
func (m *Meta) ProcessTransactionVersion(process string) int {
	if v, ok := m.ProcessTransactionVersions[process]; ok {
		return v
	}
	return m.TransactionVersion
}

// Fault schedule kinds for [Meta.Schedule].
const (
	ScheduleScript = "script"
	ScheduleRandom = "random"
)

// Producer-id orderings for [Meta.ProducerIDs].
const (
	ProducerIDsOrdered = "ordered"
	ProducerIDsHashed  = "hashed"
)

// Event is one line of a history file. Which fields a line uses depends on its Type:
//
//   - header: Format (set by the writer when zero) and Meta;
//   - invoke: ID, Time, Client (porcupine client id), Process, Member, Role, Kind, Args;
//   - ok, fail, info: ID, Time, Result (ok), Error (the error class, fail and info) and
//     Message (what the transport said, fail and info; for people, never interpreted);
//   - fault-start: Fault, Time, Kind, Targets, Desc, Step (a scripted step's number), Spec
//     (the fault's one-line form, targets resolved), and
//     Process, Role, Member for a pause;
//   - fault-end: Fault, Time, TookHold.
type Event struct {
	Type EventType
	// TookHold (fault-end) sits beside Type, in the room Type leaves before Time: an Event
	// stays 344 bytes with Args.Records (a history's reader holds thousands of them).
	TookHold bool
	Time     int64 // nanoseconds since the run started (monotonic)

	ID      int64 // operation id, unique in the run
	Client  int   // porcupine client id; retired after an info completion
	Process string
	Member  string
	Role    string
	Kind    Kind
	Args    Args
	Result  Result
	Error   string
	Message string

	Fault   int64  // fault window id, unique in the run
	Step    int    // the scripted step (1-based, in Meta.Script) the window carries out; 0: none
	Spec    string // the fault as injected, its targets resolved (Fault.Spec)
	Targets []string
	Desc    string

	Format int
	Meta   *Meta

	// The reader sets these on an ok completion whose records start with the records of an
	// earlier read of the same log (see decoder.extend): the first prefixN records are that
	// read's, the read of operation prefixOf, and Result.Records holds only the rest.
	// prefixText is the repeated records' text, in the reader's chunk, which lives until the
	// Builder has added the chunk: the Builder decodes it when the earlier read's records are
	// not at hand.
	prefixOf   int64
	prefixN    int
	prefixText []byte
}

// MarshalJSON encodes the event as its history line (without the newline).
func (e Event) MarshalJSON() ([]byte, error) {
	return appendEvent(nil, &e)
}

// UnmarshalJSON decodes one history line.
func (e *Event) UnmarshalJSON(b []byte) error {
	var d decoder
	*e = Event{}
	return d.decodeLine(b, e)
}
