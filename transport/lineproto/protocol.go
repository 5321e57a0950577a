// Package lineproto lets fencecheck test a lease transport written in any language: the
// harness starts the transport as a separate program (an adapter) and talks to it in JSON
// lines over its stdin and stdout, one request and one response per transport call.
//
// Start (the harness side) starts an adapter per transport instance and gives the workload
// a transport that forwards every call to it; Serve (the adapter side) runs fencecheck's own
// transport behind the protocol, the reference adapter (`fencecheck adapter`).
//
// The protocol (version 1) is documented in docs/exec-protocol.md. In short:
//
//   - every request is one line {"id":N,"op":"...",...}; every response is one line
//     {"id":N,"outcome":"ok"|"fail"|"unknown",...}; responses may come out of order;
//   - ops: hello, start, acquire, register, write_lease, write_fenced, read_role, describe,
//     held, close; and for an adapter whose hello lists the pipelines workload, one member of
//     an exactly-once pipeline per adapter: member_start, poll, transact, close;
//   - a failed call carries {"error":{"kind":"fenced",...}} with one of the seed's error kinds
//     and the outcome: fail (certainly no effect) or unknown (may have taken effect);
//   - the harness encodes every record (keys and values in fencecheck's record format, base64)
//     and decodes what an adapter reads, so an adapter needs no codec;
//   - the adapter dials only the bootstrap addresses the harness hands it: a per-process
//     gateway that routes every broker connection through the process's links, so link and
//     Kafka-aware faults apply unchanged.
package lineproto

import (
	"errors"
	"fmt"
	"slices"

	"github.com/fencecheck/fencecheck/transport"
	"github.com/fencecheck/fencecheck/transport/pipeline"
)

// Version is the protocol version this package speaks. hello carries it both ways; the
// harness refuses an adapter that answers another.
const Version = 1

// The operations of the protocol.
const (
	OpHello       = "hello"
	OpStart       = "start"
	OpAcquire     = "acquire"
	OpRegister    = "register"
	OpWriteLease  = "write_lease"
	OpWriteFenced = "write_fenced"
	OpReadRole    = "read_role"
	OpDescribe    = "describe"
	OpHeld        = "held"
	OpClose       = "close"
	// A pipeline member's (an adapter that lists WorkloadPipelines in hello).
	OpMemberStart = "member_start"
	OpPoll        = "poll"
	OpTransact    = "transact"
	// A self-driven member's (an adapter whose hello lists CapSelfDriven): what it did.
	OpObserve = "observe"
)

// The workloads an adapter may serve, listed in hello's answer (none listed: leases).
const (
	WorkloadLeases    = "leases"
	WorkloadPipelines = "pipelines"
)

// Capabilities an adapter may announce in hello (docs/exec-protocol.md, "Capabilities").
const (
	// CapGatewayToken: the client does not expose the pair InitProducerId minted. acquire and
	// held answer without a token; the harness takes the acquire's token from the
	// InitProducerId answer its gateway relayed to that adapter, and checks the token of
	// every write against it, so the adapter need not.
	CapGatewayToken = "gateway-token"
	// CapNoDescribe: the client has no DescribeTransactions. The harness sends no describe,
	// and the checker reports describe-consistent as not covered.
	CapNoDescribe = "no-describe"
	// CapSelfDriven: a pipeline member whose client runs its own consume-transform-produce
	// loop (Kafka Streams). The harness sends it no poll or transact: after member_start it
	// asks with observe what the member did (each poll's records, each transaction's inputs,
	// offsets, group metadata and outcome), the member makes its outputs itself, and close's
	// answer carries what it did while closing. See docs/exec-protocol.md, "Self-driven
	// members".
	CapSelfDriven = "self-driven"
)

// capabilities are the capabilities this version of the harness knows.
var capabilities = []string{CapGatewayToken, CapNoDescribe, CapSelfDriven}

// Capabilities returns the names of the capabilities this harness knows.
func Capabilities() []string { return slices.Clone(capabilities) }

// Outcomes of a response: what the call says about its effect (transport.Outcome).
const (
	OutcomeOK      = "ok"
	OutcomeFail    = "fail"
	OutcomeUnknown = "unknown"
)

// Request is one line from the harness to the adapter. Which fields are set depends on Op
// (see docs/exec-protocol.md).
type Request struct {
	ID uint64 `json:"id"`
	Op string `json:"op"`

	Version int     `json:"version,omitempty"` // hello
	Config  *Config `json:"config,omitempty"`  // start

	Role      string  `json:"role,omitempty"`
	Member    string  `json:"member,omitempty"`    // register
	Token     *Token  `json:"token,omitempty"`     // write_lease, write_fenced
	Lease     *Lease  `json:"lease,omitempty"`     // write_lease: the lease the record encodes
	Topic     string  `json:"topic,omitempty"`     // register, write_lease, read_role
	Partition *int32  `json:"partition,omitempty"` // register, write_lease, read_role
	Key       []byte  `json:"key,omitempty"`       // register, write_lease: the encoded record
	Value     []byte  `json:"value,omitempty"`
	Records   []Write `json:"records,omitempty"` // write_fenced

	Pipeline *MemberConfig `json:"pipeline,omitempty"` // member_start
	WaitMS   int64         `json:"wait_ms,omitempty"`  // poll: how long to wait for records
	// transact: the time left to the harness's deadline (0: none left, ask nothing more of
	// the cluster than aborting); absent: the request timeout bounds each request.
	TimeoutMS *int64 `json:"timeout_ms,omitempty"`
	// transact: the input offsets to commit (one past each partition's last record of the
	// batch), the outputs, and the group identity the batch was polled under.
	Offsets    []Offset `json:"offsets,omitempty"`
	Outputs    []Output `json:"outputs,omitempty"`
	MemberID   string   `json:"member_id,omitempty"`
	Generation *int32   `json:"generation,omitempty"`
}

// Response is one line from the adapter to the harness, answering the request with the same
// ID.
type Response struct {
	ID      uint64 `json:"id"`
	Outcome string `json:"outcome"`
	Error   *Error `json:"error,omitempty"`

	Version            int      `json:"version,omitempty"`      // hello
	Name               string   `json:"name,omitempty"`         // hello: the adapter's name and version
	Capabilities       []string `json:"capabilities,omitempty"` // hello
	TransactionVersion int      `json:"transaction_version,omitempty"`
	Token              *Token   `json:"token,omitempty"`     // acquire, describe, held
	Held               bool     `json:"held,omitempty"`      // describe, held
	JoinSeq            *int64   `json:"join_seq,omitempty"`  // register
	Records            []Read   `json:"records,omitempty"`   // read_role, poll
	Workloads          []string `json:"workloads,omitempty"` // hello: leases when empty
	MemberID           string   `json:"member_id,omitempty"` // poll
	Generation         *int32   `json:"generation,omitempty"`
	Restart            bool     `json:"restart,omitempty"` // transact, observe: the member cannot go on
	Events             []Event  `json:"events,omitempty"`  // observe, close of a self-driven member
}

// The types of a self-driven member's events.
const (
	EventPoll = "poll"
	EventTxn  = "txn"
)

// Event is one thing a self-driven member did (observe, close): a poll that returned records
// (type poll: Records, with partition and offset only, and the group metadata MemberID and
// Generation) or a transaction that ended (type txn).
type Event struct {
	Type       string `json:"type"`
	MemberID   string `json:"member_id,omitempty"`
	Generation int32  `json:"generation"`
	Records    []Read `json:"records,omitempty"`
	// A transaction: its number (from 1) and the adapter's ref, which its outputs carry;
	// After, the id of the last observe request the adapter had received when it began (0:
	// none); its transactional id, the producer's id and epoch when it began, the inputs it
	// made outputs of, the offsets it sent with MemberID and Generation (the group metadata
	// passed with them), how many records it produced, and its outcome (an Error unless ok).
	Txn             int64    `json:"txn,omitempty"`
	Ref             string   `json:"ref,omitempty"`
	After           uint64   `json:"after,omitempty"`
	TransactionalID string   `json:"transactional_id,omitempty"`
	Token           *Token   `json:"token,omitempty"`
	Inputs          []Offset `json:"inputs,omitempty"`
	Offsets         []Offset `json:"offsets,omitempty"`
	Outputs         int      `json:"outputs,omitempty"`
	Outcome         string   `json:"outcome,omitempty"`
	Error           *Error   `json:"error,omitempty"`
}

// check validates an event: a known type, and for a transaction a ref, a number, a known
// outcome and an error of a known kind unless it committed.
func (e *Event) check() error {
	switch e.Type {
	case EventPoll:
		return nil
	case EventTxn:
	default:
		return fmt.Errorf("%w: event type %q, want %s or %s", ErrProtocol, e.Type, EventPoll, EventTxn)
	}
	switch {
	case e.Ref == "" || e.Txn <= 0:
		return fmt.Errorf("%w: txn event without ref or number", ErrProtocol)
	case e.Outcome == OutcomeOK:
		return nil
	case e.Outcome != OutcomeFail && e.Outcome != OutcomeUnknown:
		return fmt.Errorf("%w: txn event %d: outcome %q, want ok, fail or unknown", ErrProtocol, e.Txn, e.Outcome)
	case e.Error == nil:
		return fmt.Errorf("%w: txn event %d: outcome %q without an error", ErrProtocol, e.Txn, e.Outcome)
	}
	if _, ok := ErrorKinds[e.Error.Kind]; !ok {
		return fmt.Errorf("%w: txn event %d: unknown error kind %q", ErrProtocol, e.Txn, e.Error.Kind)
	}
	return nil
}

// Error is a failed call: Kind is one of the seed's error kinds (ErrorKinds).
type Error struct {
	Kind    string `json:"kind"`
	Message string `json:"message,omitempty"`
}

// Config is transport.Config on the wire. Durations are milliseconds. Bootstrap is the
// gateway the harness opened for this transport instance, never the cluster's own addresses.
type Config struct {
	Bootstrap          string `json:"bootstrap"`
	ClientID           string `json:"client_id"`
	Topic              string `json:"topic"`
	LeaseMS            int64  `json:"lease_ms"`
	RequestTimeoutMS   int64  `json:"request_timeout_ms"`
	FetchMaxWaitMS     int64  `json:"fetch_max_wait_ms,omitempty"`
	FetchPartitionMax  int32  `json:"fetch_partition_max,omitempty"`
	TopicPartitions    int32  `json:"topic_partitions"`
	TopicReplication   int16  `json:"topic_replication"`
	TransactionVersion int    `json:"transaction_version"`
}

// Token is a fencing token on the wire.
type Token struct {
	ProducerID int64 `json:"producer_id"`
	Epoch      int16 `json:"epoch"`
}

// Lease is a lease on the wire; the record's Value already encodes it.
type Lease struct {
	Holder      string `json:"holder"`
	Seq         uint64 `json:"seq"`
	DurationNS  int64  `json:"duration_ns"`
	WrittenAtNS int64  `json:"written_at_ns"`
}

// Write is one record of write_fenced.
type Write struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Key       []byte `json:"key,omitempty"`
	Value     []byte `json:"value,omitempty"`
}

// Read is one committed record of read_role, or one polled record of poll (with its
// partition).
type Read struct {
	Partition int32  `json:"partition,omitempty"`
	Offset    int64  `json:"offset"`
	Key       []byte `json:"key,omitempty"`
	Value     []byte `json:"value,omitempty"`
}

// MemberConfig is pipeline.Config on the wire, for member_start. Durations are milliseconds.
// Bootstrap is the gateway the harness opened for this member.
type MemberConfig struct {
	Bootstrap            string `json:"bootstrap"`
	ClientID             string `json:"client_id"`
	Group                string `json:"group"`
	Input                string `json:"input"`
	Output               string `json:"output"`
	TransactionalID      string `json:"transactional_id"`
	TxnIDPerPartition    bool   `json:"txn_id_per_partition,omitempty"`
	SessionTimeoutMS     int64  `json:"session_timeout_ms"`
	RebalanceTimeoutMS   int64  `json:"rebalance_timeout_ms"`
	TransactionTimeoutMS int64  `json:"transaction_timeout_ms"`
	RequestTimeoutMS     int64  `json:"request_timeout_ms"`
	MaxPoll              int    `json:"max_poll"`
	Protocol             string `json:"protocol"`
	TransactionVersion   int    `json:"transaction_version"`
	// A self-driven member's (CapSelfDriven), which makes its outputs itself: the member name
	// they carry, and whether to keep the stateful variant's aggregates.
	Label    string `json:"label,omitempty"`
	Stateful bool   `json:"stateful,omitempty"`
}

// Offset is an input partition's offset to commit.
type Offset struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
}

// Output is a record a transaction produces: Partition is the input partition it was made
// from, which is its output partition too.
type Output struct {
	Partition int32  `json:"partition"`
	Key       []byte `json:"key,omitempty"`
	Value     []byte `json:"value,omitempty"`
}

func tokenOf(t transport.FencingToken) *Token {
	return &Token{ProducerID: t.ProducerID, Epoch: t.Epoch}
}

func (t *Token) fencing() transport.FencingToken {
	if t == nil {
		return transport.FencingToken{}
	}
	return transport.FencingToken{ProducerID: t.ProducerID, Epoch: t.Epoch}
}

// ErrorKinds maps the wire name of every error kind to the transport's sentinel.
var ErrorKinds = map[string]error{
	"invalid_config": transport.ErrInvalidConfig,
	"admin":          transport.ErrAdmin,
	"fenced":         transport.ErrFenced,
	"producer":       transport.ErrProducer,
	"client":         transport.ErrClient,
	"not_held":       transport.ErrNotHeld,
	"record":         transport.ErrRecord,
	"closed":         transport.ErrClosed,
}

// kindName returns the wire name of the sentinel err wraps, "client" when it wraps none. A
// pipeline member fenced by its generation is "fenced".
func kindName(err error) string {
	if errors.Is(err, pipeline.ErrFenced) {
		return "fenced"
	}
	for name, kind := range ErrorKinds {
		if errors.Is(err, kind) {
			return name
		}
	}
	return "client"
}

// ErrProtocol: the adapter broke the protocol (a malformed line, a wrong version, an unknown
// error kind or outcome). The call's outcome is unknown.
var ErrProtocol = errors.New("adapter protocol error")

// check validates the fields every response must have right.
func (r *Response) check() error {
	switch r.Outcome {
	case OutcomeOK:
		return nil
	case OutcomeFail, OutcomeUnknown:
		if r.Error == nil {
			return fmt.Errorf("%w: response %d: outcome %q without an error", ErrProtocol, r.ID, r.Outcome)
		}
		if _, ok := ErrorKinds[r.Error.Kind]; !ok {
			return fmt.Errorf("%w: response %d: unknown error kind %q", ErrProtocol, r.ID, r.Error.Kind)
		}
		return nil
	}
	return fmt.Errorf("%w: response %d: outcome %q, want ok, fail or unknown", ErrProtocol, r.ID, r.Outcome)
}

// SplitCommand splits an adapter command line into the program and its arguments, as a POSIX
// shell would split words: blanks separate, single quotes keep everything, double quotes keep
// everything but a backslash before " or \, and a backslash outside quotes keeps the next
// character. There is no expansion of variables, globs or ~.
func SplitCommand(s string) ([]string, error) {
	var (
		words []string
		cur   []rune
		in    bool // inside a word
		quote rune // ' or " while inside quotes
	)
	rs := []rune(s)
	for i := 0; i < len(rs); i++ {
		c := rs[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				cur = append(cur, c)
			}
		case quote == '"':
			switch {
			case c == '"':
				quote = 0
			case c == '\\' && i+1 < len(rs) && (rs[i+1] == '"' || rs[i+1] == '\\'):
				i++
				cur = append(cur, rs[i])
			default:
				cur = append(cur, c)
			}
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == '\\':
			if i+1 == len(rs) {
				return nil, fmt.Errorf("command %q ends with a backslash", s)
			}
			i++
			cur, in = append(cur, rs[i]), true
		case c == ' ' || c == '\t' || c == '\n':
			if in {
				words, cur, in = append(words, string(cur)), nil, false
			}
		default:
			cur, in = append(cur, c), true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("command %q has an unclosed %c", s, quote)
	}
	if in {
		words = append(words, string(cur))
	}
	if len(words) == 0 {
		return nil, fmt.Errorf("command %q is empty", s)
	}
	return words, nil
}
