package history

import "strconv"

// WorkloadPipeline is Meta.Workload of an exactly-once pipeline run (docs/history.md,
// "Pipelines"). An empty Meta.Workload is the lease workload.
const WorkloadPipeline = "pipeline"

// FormatPipeline is the format version of a pipeline history. A lease history is still
// written as format 1, line for line as before; a pipeline history is format 2, so that a
// reader that knows only leases refuses it (ErrFormat) instead of checking it as one.
const FormatPipeline = 2

// Pipeline operation kinds (docs/history.md, "Pipelines"). Their arguments and results are in
// Args.Pipe and Result.Pipe.
const (
	// KindSend is the harness writing one input record: args.pipe.id names it; an ok result
	// gives where it landed (result.pipe.sent); fail (error ErrorAborted) says it was written
	// in a transaction the harness aborted, so it must never be read committed.
	KindSend Kind = "send"
	// KindTxn is a member's transaction: args.pipe names the input records it consumed, the
	// offsets it commits and the group generation it ran under. ok: committed; fail: it
	// certainly did not commit; info: unknown.
	KindTxn Kind = "txn"
	// KindFinalOutput is the read of every output partition at read_committed after healing:
	// the reference of what the pipeline committed (result.pipe.outputs).
	KindFinalOutput Kind = "final-output"
	// KindFinalOffsets is the fetch of the group's committed offsets after healing, with
	// require-stable (result.pipe.offsets).
	KindFinalOffsets Kind = "final-offsets"
	// KindFetch is a member fetching its group's committed offsets (stable) and starting
	// there: on an assignment, or (args.pipe.rewind) to rewind after a transaction that did
	// not commit. args.pipe names the member's group membership when the answer came;
	// result.pipe.offsets are where it starts per partition (0 where none was committed).
	// An assignment's fetch is recorded when its answer comes, invocation and completion
	// at once: the client does not say when it began.
	KindFetch Kind = "fetch"
	// KindFinalTxns is the look, after the final output read, at what the run left open:
	// the run's transactions still open (result.pipe.open_txns) and each input and output
	// partition's last stable offset against its end (result.pipe.ends). It is taken again
	// until nothing is open or a bound passes; the last look is recorded.
	KindFinalTxns Kind = "final-txns"
)

// ErrorAborted is the error class of a send written in a transaction the harness aborted.
const ErrorAborted = "aborted"

// PipelineMeta is the shape of a pipeline run (Meta.Pipeline).
type PipelineMeta struct {
	Group  string `json:"group"`
	Input  string `json:"input"`
	Output string `json:"output"`
	// Partitions is the input topic's partition count (the output's is at least as many).
	Partitions int32 `json:"partitions"`
	// Member is the member implementation (session, plain, mutant:NAME, exec:...); Protocol
	// the group protocol, classic or consumer.
	Member   string `json:"member,omitempty"`
	Protocol string `json:"protocol,omitempty"`
	// SessionTimeout is the members' session timeout, ns.
	SessionTimeout int64 `json:"session_timeout_ns,omitempty"`
	// Stateful says the members kept a running aggregate per input partition, written in
	// each output (PipeOutput.Count and Sum).
	Stateful bool `json:"stateful,omitempty"`
	// TxnIDs is whose transactional ids the members used: member, or partition (one per
	// input partition, shared by the members). Absent in older histories: member.
	TxnIDs string `json:"txn_ids,omitempty"`
}

// IsPipeline reports whether k is a pipeline operation kind.
func (k Kind) IsPipeline() bool {
	return k == KindSend || k == KindTxn || k == KindFinalOutput || k == KindFinalOffsets || k == KindFetch || k == KindFinalTxns
}

// PipeArgs are a pipeline operation's arguments.
type PipeArgs struct {
	// ID names an input record (send).
	ID string `json:"id,omitempty"`
	// Group, MemberID and Generation are the group membership a transaction ran under (a
	// fetch: the member's when the answer came): the classic protocol's generation or
	// KIP-848's member epoch.
	Group      string `json:"group,omitempty"`
	MemberID   string `json:"member_id,omitempty"`
	Generation int32  `json:"generation,omitempty"`
	// TransactionalID is the producer's transactional id (txn).
	TransactionalID string `json:"txn_id,omitempty"`
	// Inputs are the input records a transaction consumed, a range per partition.
	Inputs []PipeRange `json:"inputs,omitempty"`
	// Offsets are the input offsets a transaction commits: one past its last record, per
	// partition.
	Offsets []PipeOffset `json:"offsets,omitempty"`
	// Rewind marks a fetch made to rewind after a transaction that did not commit, not on an
	// assignment.
	Rewind bool `json:"rewind,omitempty"`
}

// PipeRange is the input records [From, To) of one partition.
type PipeRange struct {
	Partition int32 `json:"partition"`
	From      int64 `json:"from"`
	To        int64 `json:"to"`
}

// PipeOffset is an offset of one partition.
type PipeOffset struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
}

// String formats the offset as "partition/offset".
func (o PipeOffset) String() string {
	return strconv.Itoa(int(o.Partition)) + "/" + strconv.FormatInt(o.Offset, 10)
}

// PipeResult is what an ok pipeline operation returned.
type PipeResult struct {
	// Token is the producer's (id, epoch) a committed transaction ran under.
	Token *Token `json:"token,omitempty"`
	// Sent is where an input record landed (send).
	Sent *PipeOffset `json:"sent,omitempty"`
	// Outputs are the output records read committed (final-output), in offset order per
	// partition.
	Outputs []PipeOutput `json:"outputs,omitempty"`
	// Offsets are the group's committed offsets (final-offsets), a partition without a
	// committed offset absent; or where a member starts after a fetch (fetch).
	Offsets []PipeOffset `json:"offsets,omitempty"`
	// OffsetsAt is when a committed transaction's member began to send its offsets (ns,
	// the history's clock): from then on the group coordinator may hold them pending. Zero
	// when not recorded; the checker then takes the invocation.
	OffsetsAt int64 `json:"offsets_at,omitempty"`
	// TxnVersion is the transaction version of a committed transaction (txn) as the member
	// spoke it on the wire: 2 when its EndTxn was v5 or later (KIP-890), 1 when earlier.
	// Recorded for members behind the exec protocol, whose gateway sees their requests; 0
	// when not seen (fencecheck's in-process members, older histories). A client without
	// KIP-890 speaks 1 on a cluster that finalized 2.
	TxnVersion int `json:"txn_version,omitempty"`
	// OpenTxns are the run's transactions the coordinators still had open (final-txns):
	// none when empty.
	OpenTxns []PipeOpenTxn `json:"open_txns,omitempty"`
	// Ends are, per partition of the input and output topics, the last stable offset and
	// the end (final-txns).
	Ends []PipeEnd `json:"ends,omitempty"`
	// InputEnds are the input partitions' end offsets read with the committed offsets
	// (final-offsets): no committed offset may be past them. Absent in histories written
	// before they were recorded.
	InputEnds []PipeOffset `json:"input_ends,omitempty"`
}

// PipeOutput is one output record as the final read found it: where it is, and what its
// value says of the input record it was made from and of the transaction that wrote it.
type PipeOutput struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
	// In is the input record's partition and offset; ID its id.
	In PipeOffset `json:"in"`
	ID string     `json:"id"`
	// Txn is the id of the txn operation that produced it; Member and Generation the member
	// and the generation it ran under.
	Txn        int64  `json:"txn"`
	Member     string `json:"member,omitempty"`
	Generation int32  `json:"generation,omitempty"`
	// Count and Sum are the stateful variant's aggregate of the input partition after this
	// record: how many records were applied and the sum of their numbers (input "i42" is 42).
	Count int64 `json:"count,omitempty"`
	Sum   int64 `json:"sum,omitempty"`
}

// PipeOpenTxn is a transaction a coordinator had open: its transactional id, its state as
// the coordinator names it (Ongoing, PrepareCommit, PrepareAbort, ...) and its producer.
type PipeOpenTxn struct {
	TransactionalID string `json:"txn_id"`
	State           string `json:"state"`
	ProducerID      int64  `json:"producer_id"`
}

// PipeEnd is one partition's last stable offset (what a read_committed consumer can reach)
// and its end (the high watermark): an open transaction holds the first below the second.
type PipeEnd struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Stable    int64  `json:"stable"`
	End       int64  `json:"end"`
}
