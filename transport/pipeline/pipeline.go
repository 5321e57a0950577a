// Package pipeline is the subject of fencecheck's exactly-once pipeline workload: a member of a
// consumer group that polls an input topic at read_committed, produces what it makes of the
// records to an output topic in a transaction, and commits its input offsets in the same
// transaction with the group's metadata (KIP-447), so that a member that lost its partitions
// in a rebalance (a zombie) is fenced by its generation, and a member whose producer was
// replaced by its transactional id's epoch.
//
// Two members implement the contract, both on franz-go: Session on kgo.GroupTransactSession
// (the helper franz-go's users run), and Plain on kgo's consumer and transactional producer,
// sending AddOffsetsToTxn and TxnOffsetCommit itself with the generation its batch was polled
// under. The contract, and what a member must do under it, is in Member's comment; the
// conformance suite is pipelinetest.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/fencecheck/fencecheck/transport"
)

// The members New builds.
const (
	// KindSession is a member on kgo.GroupTransactSession.
	KindSession = "session"
	// KindPlain is a member on kgo's consumer and transactional producer that sends the
	// transaction's offsets itself.
	KindPlain = "plain"
)

// Kinds lists the members New builds.
var Kinds = []string{KindSession, KindPlain}

// The group protocols of Config.Protocol.
const (
	// ProtocolClassic is the classic protocol (JoinGroup, SyncGroup, Heartbeat): the group's
	// generation fences a zombie's offset commit.
	ProtocolClassic = "classic"
	// ProtocolConsumer is KIP-848's (ConsumerGroupHeartbeat, Kafka 4.0+): the member epoch
	// fences it.
	ProtocolConsumer = "consumer"
)

// Defaults for zero fields of Config.
const (
	DefaultSessionTimeout = 10 * time.Second
	DefaultMaxPoll        = 10
)

// Config configures a member.
type Config struct {
	// Conn is how the member reaches the cluster, as for the lease transport: Bootstrap,
	// ClientID, RequestTimeout, Security, Dial, Logger and TransactionVersion. Its
	// LeaseDuration is the member's transaction timeout: the coordinator aborts a transaction
	// the member keeps open longer. The topic fields are not used.
	Conn transport.Config
	// Group is the consumer group. Required.
	Group string
	// Input is the topic the member consumes; Output the one it produces to. Required. The
	// output of input partition P goes to output partition P, so that the output topic keeps
	// each input partition's order: it must have at least as many partitions.
	Input, Output string
	// TransactionalID is the member's own transactional id (EOS v2: one producer per member,
	// fenced across rebalances by the group's generation). Required.
	TransactionalID string
	// TxnIDPerPartition makes the member use one transactional producer per input partition,
	// its id PartitionTransactionalID(TransactionalID, partition), the same in every member:
	// the older style of exactly-once (Kafka Streams' exactly_once before KIP-447, Flink's
	// sink), where a new owner's producer fences the old owner's by the id's epoch. Each
	// Transact then takes a batch of one partition. The plain member only: a session has one
	// producer.
	TxnIDPerPartition bool
	// SessionTimeout is how long the group coordinator waits for the member's heartbeat before
	// it takes its partitions away. Default DefaultSessionTimeout. RebalanceTimeout, how long a
	// rebalance waits for the member to rejoin, defaults to it. Under ProtocolConsumer the
	// session timeout is the group's, set on the cluster (group.consumer.session.timeout.ms,
	// 45 s by default), and this one is not used.
	SessionTimeout, RebalanceTimeout time.Duration
	// MaxPoll is the most records one Poll returns, and so one transaction carries. Default
	// DefaultMaxPoll.
	MaxPoll int
	// Protocol is ProtocolClassic (default) or ProtocolConsumer.
	Protocol string
	// Pause, when set, is called by Transact at each pause point the member reaches
	// (Points), with the point's name; the member goes on when it returns. A test or the
	// workload stops a member there to make it a zombie with its transaction open.
	Pause func(ctx context.Context, point string)
	// Fetched, when set, is told where the member starts on input partitions each time it
	// fetched its group's committed offsets: when it is assigned partitions (the client's own
	// fetch, stable) and, for the plain member, when it rewinds after a transaction that did
	// not commit. It is called from the client's goroutines once the answer is in and before
	// the member reads from there; it must return quickly.
	Fetched func(Fetch)
	// TxnVersion, when set, is told the transaction version of each EndTxn the member sends,
	// as seen on its wire: 2 for EndTxn v5 or later (KIP-890's transactions, which a client
	// sends only on a cluster that finalized transaction.version 2), 1 below. A member behind
	// the exec protocol reports it from its gateway, so it is what the client spoke, whatever
	// it or the cluster claims; fencecheck's in-process members do not call it.
	TxnVersion func(version int)
	// Label and Stateful are for a self-driven member (Observer), which makes its outputs
	// itself: Label is the member name its outputs carry (history.PipeOutput's Member), and
	// Stateful asks it to keep the stateful variant's aggregate (count and sum of the records
	// it applied) per input partition in each output, restored as its client restores state.
	// The other members ignore both: the workload makes their outputs.
	Label    string
	Stateful bool
}

// Fetch is where a member starts after fetching its group's committed offsets.
type Fetch struct {
	// Starts is the offset the member starts at, per input partition fetched: the committed
	// offset, or 0 (the input's first offset) where none is committed.
	Starts map[int32]int64
	// MemberID and Generation are the member's identity in the group when the answer came
	// (the classic generation or KIP-848's member epoch). Generation is -1 when the member
	// had none yet.
	MemberID   string
	Generation int32
	// Rewind says the member fetched to rewind after a transaction that did not commit, not
	// on an assignment.
	Rewind bool
	// Began is when the member began to fetch; zero when its client does not say (an
	// assignment's fetch is kgo's own).
	Began time.Time
}

// The pause points inside Transact (Config.Pause).
const (
	// PointAfterProduce: the outputs are produced in the open transaction; the offsets are
	// not sent yet.
	PointAfterProduce = "after-produce"
	// PointBeforeCommit: the offsets are sent in the transaction too (the group coordinator
	// holds them pending); the commit is not asked yet. A new owner that fetches its offsets
	// stable (KIP-447) must wait for this transaction to end.
	PointBeforeCommit = "before-commit"
)

// Points returns the pause points a member of kind reaches in Transact: a session sends its
// offsets and commits in one call, so it has no PointBeforeCommit. An exec member ("exec:...")
// has both: the harness pauses it on the wire, before its AddOffsetsToTxn and its committing
// EndTxn.
func Points(kind string) []string {
	if kind == KindSession {
		return []string{PointAfterProduce}
	}
	return []string{PointAfterProduce, PointBeforeCommit}
}

// pause calls c.Pause at point, if set.
func (c Config) pause(ctx context.Context, point string) {
	if c.Pause != nil {
		c.Pause(ctx, point)
	}
}

// fetched calls c.Fetched with f, if set.
func (c Config) fetched(f Fetch) {
	if c.Fetched != nil {
		c.Fetched(f)
	}
}

// WithDefaults validates c and returns it with its defaults filled in, as New does; errors
// wrap transport.ErrInvalidConfig and name the field. For members built elsewhere (an exec
// adapter's).
func (c Config) WithDefaults() (Config, error) { return c.withDefaults() }

// withDefaults validates c and fills in its defaults. Errors name the field.
func (c Config) withDefaults() (Config, error) {
	bad := func(field, format string, args ...any) (Config, error) {
		return c, fmt.Errorf("%w: %s: %s", transport.ErrInvalidConfig, field, fmt.Sprintf(format, args...))
	}
	switch {
	case c.Group == "":
		return bad("Group", "required")
	case c.Input == "":
		return bad("Input", "required")
	case c.Output == "":
		return bad("Output", "required")
	case c.Input == c.Output:
		return bad("Output", "%q is the input topic too", c.Output)
	case c.TransactionalID == "":
		return bad("TransactionalID", "required")

	case c.SessionTimeout < 0:
		return bad("SessionTimeout", "must not be negative, got %v", c.SessionTimeout)
	case c.RebalanceTimeout < 0:
		return bad("RebalanceTimeout", "must not be negative, got %v", c.RebalanceTimeout)
	case c.MaxPoll < 0:
		return bad("MaxPoll", "must not be negative, got %d", c.MaxPoll)
	}
	switch c.Protocol {
	case "":
		c.Protocol = ProtocolClassic
	case ProtocolClassic, ProtocolConsumer:
	default:
		return bad("Protocol", "%q, want %s or %s", c.Protocol, ProtocolClassic, ProtocolConsumer)
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = DefaultSessionTimeout
	}
	if c.RebalanceTimeout == 0 {
		c.RebalanceTimeout = c.SessionTimeout
	}
	if c.MaxPoll == 0 {
		c.MaxPoll = DefaultMaxPoll
	}
	// The connection is validated as the lease transport's (ClientOptions); its topic fields
	// mean nothing here and must not fail that.
	if c.Conn.TopicPartitions == 0 {
		c.Conn.TopicPartitions = transport.DefaultTopicPartitions
	}
	if c.Conn.TopicReplication == 0 {
		c.Conn.TopicReplication = transport.DefaultTopicReplication
	}
	if c.Conn.RequestTimeout == 0 {
		c.Conn.RequestTimeout = transport.DefaultRequestTimeout
	}
	if c.Conn.Logger == nil {
		c.Conn.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// Record is an input record a member polled.
type Record struct {
	Partition  int32
	Offset     int64
	Key, Value []byte
}

// Batch is what one Poll returned: the records, in offset order per partition, and the group
// metadata they were polled under.
type Batch struct {
	Records []Record
	// MemberID and Generation are the member's identity in the group when it polled:
	// Generation is the classic protocol's generation or KIP-848's member epoch.
	MemberID   string
	Generation int32
}

// Offsets returns the offset to commit for each input partition of b: one past its last record.
func (b Batch) Offsets() map[int32]int64 {
	out := map[int32]int64{}
	for _, r := range b.Records {
		out[r.Partition] = max(out[r.Partition], r.Offset+1)
	}
	return out
}

// Output is a record to produce: Partition is the input partition it was made from, which is
// also its output partition.
type Output struct {
	Partition  int32
	Key, Value []byte
}

// Result is what became of one transaction.
type Result struct {
	// Outcome is transport.OK when the transaction committed, transport.Fail when it certainly
	// did not (it was aborted, or never asked to commit: nothing of it will ever be read
	// committed), transport.Unknown when the member cannot know.
	Outcome transport.Outcome
	// Token is the producer's (id, epoch) the transaction ran under; zero when the member had
	// none yet.
	Token transport.FencingToken
	// Err says why the transaction did not commit (nil with OK).
	Err error
	// Restart says the member cannot go on: its producer failed, an abort failed, or it could
	// not rewind to the committed offsets. Close it and start another with the same Config;
	// the new producer fences the old, and the new member starts at the committed offsets.
	Restart bool
}

// Member is one member of a pipeline's consumer group with its own transactional producer.
//
// The contract:
//   - Poll returns records of the input partitions the member owns, read committed, in offset
//     order per partition, with the group metadata they were polled under.
//   - Transact commits, in one transaction, at least one output and the input offsets past
//     the batch's records, sent with the group's metadata, so that the group coordinator
//     refuses them if the member's generation was superseded. It never reports a transaction
//     committed that was not, nor aborted one that may commit; when it cannot know, the
//     outcome is Unknown.
//   - After a transaction that did not commit, the member's position is back at its group's
//     committed offsets, so that the batch's records are polled again, by this member or by
//     the partition's new owner.
//   - After a Result with Restart set the member is unusable: Close it and start another.
//
// The members differ where the client under test decides. Plain sends the metadata its batch
// was polled under and rewinds to offsets it fetches stable; a superseded member's refusal
// wraps ErrFenced. Session reports what kgo.GroupTransactSession.End says: the session sends
// the metadata it has when it commits, rewinds to the offsets it last saw committed, and its
// "not committed" is the session's own claim, under test like the rest of it.
//
// A member is used by one goroutine at a time.
type Member interface {
	// Poll waits until records arrive or ctx ends, and returns at most Config.MaxPoll of them.
	// When ctx ends first it returns an empty batch and ctx's error.
	Poll(ctx context.Context) (Batch, error)
	// Transact produces outs to the output topic and commits them with b's offsets.
	Transact(ctx context.Context, b Batch, outs []Output) Result
	// Close leaves the group and closes the member's clients.
	Close()
}

// New starts a member of kind (KindSession, KindPlain, or a mutant's "mutant:NAME") with cfg. It does not wait for the
// group: the first Poll joins it.
func New(ctx context.Context, kind string, cfg Config) (Member, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	// Each constructor's result is returned only when it is not nil: a nil *plain in the
	// interface would not be a nil Member.
	switch flaw, isMutant := mutant(kind); {
	case kind == KindSession && cfg.TxnIDPerPartition:
		return nil, fmt.Errorf("%w: TxnIDPerPartition: a %s member has one producer", transport.ErrInvalidConfig, KindSession)
	case kind == KindSession:
		m, err := newSession(ctx, cfg)
		if err != nil {
			return nil, err
		}
		return m, nil
	case kind == KindPlain || isMutant:
		m, err := newPlain(ctx, cfg, flaw)
		if err != nil {
			return nil, err
		}
		return m, nil
	}
	return nil, fmt.Errorf("%w: kind %q, want one of %v or %sNAME (Mutants)", transport.ErrInvalidConfig, kind, Kinds, MutantPrefix)
}

// errNoOutput refuses a transaction without an output (see Member).
var errNoOutput = errors.New("a transaction needs at least one output")

// ErrFenced marks a transaction refused because the member was fenced: its generation was
// superseded (the group refused its offsets) or its producer was (the transactional id's
// epoch moved on).
var ErrFenced = errors.New("fenced")
