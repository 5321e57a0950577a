package pipeline

import (
	"context"
	"time"
)

// Observer is a self-driven member: a client that runs its own consume-transform-produce loop
// (Kafka Streams' stream thread polls, processes through its topology and commits on its own
// schedule), so the harness cannot choose its batches or its outputs the way Poll and
// Transact do. It only observes what the member did. Such a member makes each output itself,
// in the format the workload's members write (history.PipeOutput), naming its transaction by
// ObservedTxn.Ref and Number, and keeps the stateful variant's aggregates itself when
// Config.Stateful is set. Poll and Transact of an Observer fail; the workload calls Observe
// and Stop instead.
//
// The contract of an observed transaction is Transact's: committed only when it was, Fail
// only when it certainly will not be (aborted, or ended without a commit ever asked), Unknown
// otherwise.
type Observer interface {
	Member
	// SelfDriven reports whether the member runs its own loop. A member type that can be
	// either (an exec adapter's, which says in its hello) is an Observer only when it does.
	SelfDriven() bool
	// Observe waits until the member did something or ctx ends, and returns what it did since
	// the last Observe, in the order it did it.
	Observe(ctx context.Context) Observation
	// Stop closes the member as Close does, and returns what it did while closing: a
	// self-driven client commits what it processed when it is closed cleanly.
	Stop() Observation
}

// Observation is what a self-driven member did since it was last asked.
type Observation struct {
	Events []Event
	// Restart says the member cannot go on (its client stopped): Stop it and start another.
	Restart bool
	// Err says why, with Restart; or why the member could not be asked.
	Err error
}

// Event is one thing a self-driven member did: a poll that returned records (Poll) or a
// transaction that ended (Txn).
type Event struct {
	Poll *Batch // the records' keys and values are not carried
	Txn  *ObservedTxn
}

// ObservedTxn is one transaction a self-driven member ran, from its begin to its end.
type ObservedTxn struct {
	// Ref and Number name the transaction in its outputs: Ref is the member's (one per client
	// instance), Number counts its transactions from 1.
	Ref    string
	Number int64
	// TransactionalID is its producer's transactional id.
	TransactionalID string
	// MemberID and Generation are the group metadata the member sent its offsets with (the
	// member's last known, when it sent none).
	MemberID   string
	Generation int32
	// Inputs are the records it made outputs of, by partition and offset; Offsets what it
	// committed for each input partition; Outputs how many records it produced.
	Inputs  []Record
	Offsets map[int32]int64
	Outputs int
	// Began and Ended bound the transaction on the harness's clock: it began after Began
	// and had ended before Ended.
	Began, Ended time.Time
	// Result is its outcome, with the producer's id and epoch when it began (zero when the
	// member could not read them); Restart is not used.
	Result Result
}
