package history

import (
	"iter"
	"math"
)

// rec is one operation as a History stores it: 80 bytes and no pointers, where an Op is 264
// bytes with thirteen. A large history is mostly its operations (a million of them held 229
// MiB as Ops), every pass the checker makes over them reads the whole array, and the garbage
// collector scans whatever holds pointers: the array's size is the history's memory and much
// of the time a pass takes (docs/history.md, "In memory").
//
// rec keeps what the Builder produces without redundancy: the one token an operation
// carries (a write's, or what an acquire or a describe returned), the log only as a flag
// and a partition (a lease log is the operation's role), its strings, a read's records, a
// pipeline operation's payloads and a failure's texts as indexes into the History's tables.
// An Op that does not fit this shape (one only a test would build: a write with a result
// token, a log of another role) is kept whole in History.odd, so SetOp and Append keep any Op
// exactly.
type rec struct {
	id, invoke, ret int64
	// The strings, as indexes in History.strs (0 is ""): process, member and role names
	// are interned, a write id has a slot of its own.
	process, member, role, writeID uint32
	// tok is Result.Token when flagResultToken is set (Args.Token is then NoToken), else
	// Args.Token. Op and Load point Result.Token here.
	tok Token
	// aux is Result.Offset when flagOffset is set (Op and Load point Result.Offset here), the
	// index of Result.Records in History.reads when flagRecords is set, the index of a
	// pipeline operation's payloads in History.pipes (see pipeKinds), and else a write's
	// Args.Records.
	aux       int64
	client    int32
	fail      int32 // 1 + the index of Error and Message in History.fails; 0: both empty
	partition int32 // Args.Log.Partition of a work log
	kind      uint8 // index in opKinds
	typ       EventType
	flags     uint8
}

const (
	flagPending     uint8 = 1 << iota
	flagHeld              // Result.Held
	flagResultToken       // Result.Token is &tok
	flagOffset            // Result.Offset is &aux
	flagRecords           // Result.Records is History.reads[aux]
	flagRoleLog           // Args.Log is RoleLog(Role)
	flagWorkLog           // Args.Log is WorkLog(partition)
	flagOdd               // the operation is History.odd[its index]
)

// opKinds are the operation kinds a rec can name; 0 is the empty kind.
var opKinds = [...]Kind{"", KindRegister, KindAcquire, KindWriteLease, KindWork, KindRead, KindDescribe, KindFinalRead,
	KindSend, KindTxn, KindFinalOutput, KindFinalOffsets, KindFetch, KindFinalTxns}

// pipeKinds marks the pipeline kinds of opKinds. A rec of one of them (unless odd) has its
// Args.Pipe and Result.Pipe in History.pipes[aux], and no lease arguments or results. A
// pipeline history is mostly these operations: kept whole, in History.odd, a million of them
// made a map of 240-byte Ops that building the history and every pass of the checker paid
// a hash and a cache miss an operation for.
var pipeKinds = func() (pipe [len(opKinds)]bool) {
	for i, k := range opKinds {
		pipe[i] = k.IsPipeline()
	}
	return pipe
}()

// pipePayload is a pipeline operation's arguments and result (Args.Pipe, Result.Pipe).
type pipePayload struct {
	args *PipeArgs
	res  *PipeResult
}

// writeKinds marks the writes of opKinds: a rec of one of them without flagOffset has its
// Args.Records in aux.
var writeKinds = func() (write [len(opKinds)]bool) {
	for i, k := range opKinds {
		write[i] = k.IsWrite()
	}
	return write
}()

func kindCode(k Kind) (uint8, bool) {
	for i, o := range opKinds {
		if o == k {
			return uint8(i), true
		}
	}
	return 0, false
}

// failText is a failed or unknown completion's error class and message.
type failText struct{ err, msg string }

// Len returns the number of operations.
func (h *History) Len() int { return len(h.ops) }

// Op returns operation i (0 <= i < Len()), in the order of the invoke lines. The Op is a
// copy, but its Result.Token, Result.Offset and Result.Records point into the history (until
// the operation is changed): treat them as read-only, and change an operation with SetOp or
// Edit.
func (h *History) Op(i int) Op {
	var op Op
	h.Load(i, &op)
	return op
}

// All yields every operation with its index, in order (see Op).
func (h *History) All() iter.Seq2[int, Op] {
	return func(yield func(int, Op) bool) {
		for i := range h.ops {
			if !yield(i, h.Op(i)) {
				return
			}
		}
	}
}

// SetOp replaces operation i with op, exactly as given: unlike the Builder, it checks
// nothing, so tests can build histories the Builder would refuse.
func (h *History) SetOp(i int, op Op) {
	delete(h.odd, int32(i))
	h.ops[i] = h.pack(int32(i), &op)
}

// Append adds operations after the last, exactly as given (see SetOp).
func (h *History) Append(ops ...Op) {
	for i := range ops {
		h.ops = append(h.ops, rec{})
		h.SetOp(len(h.ops)-1, ops[i])
	}
}

// pack returns the rec of op, operation i, adding to the history's tables what it needs.
func (h *History) pack(i int32, op *Op) rec {
	kind, known := kindCode(op.Kind)
	pipe := known && pipeKinds[kind]
	l := op.Args.Log
	roleLog, workLog := l != (LogID{}) && !l.Work && l.Role == op.Role, l.Work && l.Role == ""
	// The shapes a rec has no room for: an unknown kind, a client beyond 32 bits, a result
	// token beside a write's token, a log of another role, an offset beside records, a
	// pipeline payload on a lease operation, lease arguments or results on a pipeline one,
	// and a count of records on anything but a write without an offset or records.
	if !known || op.Client < math.MinInt32 || op.Client > math.MaxInt32 ||
		op.Args.Records != 0 && (!writeKinds[kind] || op.Result.Offset != nil || op.Result.Records != nil) ||
		!pipe && (op.Args.Pipe != nil || op.Result.Pipe != nil) ||
		pipe && (op.Args.Token != NoToken || op.Args.WriteID != "" || l != (LogID{}) ||
			op.Result.Token != nil || op.Result.Held || op.Result.Offset != nil || op.Result.Records != nil) ||
		op.Result.Token != nil && op.Args.Token != NoToken ||
		l != (LogID{}) && !roleLog && !workLog ||
		op.Result.Offset != nil && op.Result.Records != nil {
		if h.odd == nil {
			h.odd = map[int32]Op{}
		}
		h.odd[i] = *op
		return rec{id: op.ID, invoke: op.Invoke, ret: op.Return, flags: flagOdd}
	}
	if len(h.strs) == 0 {
		h.strs = append(h.strs, "") // index 0
	}
	r := rec{
		id: op.ID, invoke: op.Invoke, ret: op.Return, process: h.name(op.Process), member: h.name(op.Member),
		role: h.name(op.Role), writeID: h.slot(op.Args.WriteID), tok: op.Args.Token,
		client: int32(op.Client), kind: kind, typ: op.Type,
	}
	if op.Pending {
		r.flags |= flagPending
	}
	if op.Result.Held {
		r.flags |= flagHeld
	}
	if op.Result.Token != nil {
		r.tok = *op.Result.Token
		r.flags |= flagResultToken
	}
	switch {
	case roleLog:
		r.flags |= flagRoleLog
	case workLog:
		r.flags, r.partition = r.flags|flagWorkLog, l.Partition
	}
	switch {
	case op.Result.Offset != nil:
		r.aux = *op.Result.Offset
		r.flags |= flagOffset
	case op.Result.Records != nil:
		r.aux = int64(len(h.reads))
		h.reads = append(h.reads, op.Result.Records)
		r.flags |= flagRecords
	}
	if pipe {
		r.aux = int64(len(h.pipes))
		h.pipes = append(h.pipes, pipePayload{op.Args.Pipe, op.Result.Pipe})
	}
	if op.Args.Records != 0 {
		r.aux = int64(op.Args.Records) // a write's, without an offset or records (above)
	}
	if op.Error != "" || op.Message != "" {
		h.fails = append(h.fails, failText{op.Error, op.Message})
		r.fail = int32(len(h.fails))
	}
	return r
}

// log returns the log of the operation r stands for (Args.Log), when r is not odd.
func (h *History) log(r *rec) LogID {
	switch {
	case r.flags&flagRoleLog != 0:
		return LogID{Role: h.strs[r.role]}
	case r.flags&flagWorkLog != 0:
		return LogID{Work: true, Partition: r.partition}
	}
	return LogID{}
}

// name returns the index of s in h.strs, adding it the first time.
func (h *History) name(s string) uint32 {
	if s == "" {
		return 0
	}
	if i, ok := h.names[s]; ok {
		return i
	}
	if h.names == nil {
		h.names = map[string]uint32{}
	}
	i := h.slot(s)
	h.names[s] = i
	return i
}

// slot returns the index of a new entry of h.strs that holds s (0 for ""). h.strs[0] must
// be there: NewBuilder and pack put it first.
func (h *History) slot(s string) uint32 {
	if s == "" {
		return 0
	}
	h.strs = append(h.strs, s)
	return uint32(len(h.strs) - 1)
}

// Edit changes operation i in place: edit gets a copy to change, which SetOp then stores.
func (h *History) Edit(i int, edit func(op *Op)) {
	op := h.Op(i)
	edit(&op)
	h.SetOp(i, op)
}

// Load sets *op to operation i, as Op returns it. A pass over every operation that reuses one
// Op is a third faster with Load than with Op or All (BenchmarkOps).
func (h *History) Load(i int, op *Op) {
	r := &h.ops[i]
	if r.flags&flagOdd != 0 {
		*op = h.odd[int32(i)]
		return
	}
	op.ID, op.Client, op.Invoke, op.Return, op.Type = r.id, int(r.client), r.invoke, r.ret, r.typ
	op.Process, op.Member, op.Role, op.Kind = h.strs[r.process], h.strs[r.member], h.strs[r.role], opKinds[r.kind]
	op.Pending, op.Result.Held = r.flags&flagPending != 0, r.flags&flagHeld != 0
	op.Args.WriteID = h.strs[r.writeID]
	op.Args.Token, op.Result.Token = r.tok, nil
	if r.flags&flagResultToken != 0 {
		op.Args.Token, op.Result.Token = NoToken, &r.tok
	}
	op.Args.Log = h.log(r)
	op.Result.Offset, op.Result.Records = nil, nil
	op.Args.Pipe, op.Result.Pipe = nil, nil
	op.Args.Records = 0
	if pipeKinds[r.kind] {
		p := &h.pipes[r.aux]
		op.Args.Pipe, op.Result.Pipe = p.args, p.res
	} else if r.flags&flagOffset != 0 {
		op.Result.Offset = &r.aux
	} else if r.flags&flagRecords != 0 {
		op.Result.Records = h.reads[r.aux]
	} else if writeKinds[r.kind] {
		op.Args.Records = int(r.aux)
	}
	op.Error, op.Message = "", ""
	if r.fail > 0 {
		f := &h.fails[r.fail-1]
		op.Error, op.Message = f.err, f.msg
	}
}

// Brief is what a pass over every operation reads of most of them, without the strings an
// Op carries: the checker's index makes three such passes over a million operations, and
// loading each operation's names, write id and failure texts was most of their time.
type Brief struct {
	Invoke, Return int64 // Return is Never while pending
	// Token is a write's Args.Token, or another kind's Result.Token (NoToken when nil).
	Token Token
	// Process, Member and Role number the operation's names: two operations name the same
	// process (member, role) exactly when the numbers are equal, and Name gives the name
	// back; 0 is "".
	Process, Member, Role uint32
	Kind                  Kind
	Type                  EventType // as Op.Type
	Pending, Held         bool
	Error                 string // the error class (Op.Error)
}

// LoadBrief sets *b to operation i's brief and returns true, or returns false, leaving *b as
// it was, for an operation kept whole (one only a test builds), which Load must read.
func (h *History) LoadBrief(i int, b *Brief) bool {
	r := &h.ops[i]
	if r.flags&flagOdd != 0 {
		return false
	}
	b.Invoke, b.Return, b.Type, b.Kind = r.invoke, r.ret, r.typ, opKinds[r.kind]
	b.Process, b.Member, b.Role = r.process, r.member, r.role
	b.Pending, b.Held = r.flags&flagPending != 0, r.flags&flagHeld != 0
	b.Token = NoToken
	if writeKinds[r.kind] == (r.flags&flagResultToken == 0) {
		b.Token = r.tok // a write's Args.Token, or another kind's Result.Token
	}
	b.Error = ""
	if r.fail > 0 {
		b.Error = h.fails[r.fail-1].err
	}
	return true
}

// Name returns the name a Brief numbers n.
func (h *History) Name(n uint32) string { return h.strs[n] }

// Pending returns the number of operations that never completed.
func (h *History) Pending() int {
	n := 0
	for i := range h.ops {
		if r := &h.ops[i]; r.flags&flagPending != 0 || r.flags&flagOdd != 0 && h.odd[int32(i)].Pending {
			n++
		}
	}
	return n
}

// WriteToken returns Op(i).Args.Token, reading only the operation's token: the checker
// compares it with every record of every final read, and a whole Load there read every
// string of the operation for nothing (a cache miss each).
func (h *History) WriteToken(i int) Token {
	r := &h.ops[i]
	switch {
	case r.flags&flagOdd != 0:
		return h.odd[int32(i)].Args.Token
	case r.flags&flagResultToken != 0:
		return NoToken
	}
	return r.tok
}

// WriteID returns Op(i).Args.WriteID, reading only the operation's write id.
func (h *History) WriteID(i int) string {
	r := &h.ops[i]
	if r.flags&flagOdd != 0 {
		return h.odd[int32(i)].Args.WriteID
	}
	return h.strs[r.writeID]
}
