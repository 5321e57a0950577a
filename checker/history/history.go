package history

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"unsafe"
)

// Errors the reader and the builder return, for errors.Is.
var (
	// ErrMalformed marks a line or an event sequence that is not a valid history.
	ErrMalformed = errors.New("malformed history")
	// ErrFormat marks a history written in a format version this package does not read.
	ErrFormat = errors.New("unsupported history format")
)

// Never is the return time of an operation that never completed (a killed run).
const Never int64 = math.MaxInt64

// MaxTime is the latest time an event may carry: about 146 years after the run started. Times
// lie in [0, MaxTime], so no recorded time equals Never, and the checker's arithmetic on times
// (a time plus one, the difference or the sum of two times) cannot overflow.
const MaxTime int64 = 1 << 62

// CheckTime returns an error (wrapping ErrMalformed) when t is not a time an event may carry.
func CheckTime(t int64) error {
	if t < 0 || t > MaxTime {
		return fmt.Errorf("time %d is out of range: times are nanoseconds since the run started, 0 to %d: %w", t, MaxTime, ErrMalformed)
	}
	return nil
}

// History is a run's history with every operation's invoke and completion joined.
type History struct {
	Format int
	Meta   Meta
	// Faults are the fault windows (member pauses included) in the order they started.
	Faults []Fault
	// End is the latest time any event carries.
	End int64
	// Truncated is set when the last line was cut short (a killed run) and skipped;
	// TruncatedLine is its line number.
	Truncated     bool
	TruncatedLine int

	// The operations in the order of their invoke lines (see Len and Op), and the tables
	// their recs index: their strings (names lists the interned ones), the records of
	// reads, the payloads of pipeline operations, the texts of failures, and the operations
	// kept whole.
	ops   []rec
	strs  []string
	names map[string]uint32
	reads [][]Record
	pipes []pipePayload
	fails []failText
	odd   map[int32]Op
}

// Op is one operation: its invoke and its completion.
type Op struct {
	ID      int64
	Client  int
	Process string
	Member  string
	Role    string
	Kind    Kind
	Args    Args
	Invoke  int64
	Return  int64     // completion time, or Never while pending
	Type    EventType // TypeOK, TypeFail or TypeInfo; a pending operation is TypeInfo
	Pending bool      // no completion was recorded
	Result  Result
	Error   string
	// Message is what the transport said of a failure (its error's text, an exec adapter's
	// message included), for people; the checker never reads it.
	Message string
}

// Fault is one fault window.
type Fault struct {
	ID      int64
	Kind    Kind
	Targets []string
	Desc    string
	Process string // member pauses
	Role    string
	Member  string
	Step    int // the scripted step (1-based, in Meta.Script) it carries out; 0: none
	// Spec is the fault as injected in its one-line form, its targets resolved to what it
	// acted on: replayed at Start, it repeats this fault (fencecheck shrink). "" in histories
	// written before it was recorded, and for faults the harness only tracked.
	Spec     string
	Start    int64
	End      int64 // Never while the window never closed
	TookHold bool
}

// Builder joins events into a History. The reader uses it; so can code that builds histories
// in memory. The first event must be the header. A Builder is not safe for concurrent use.
type Builder struct {
	h History
	// Operation ids → index in h.ops: dense holds ids in [0, len(dense)) (the common case of
	// ids counting up from 0 or 1: no hashing, and recent ids stay in cache), sparse the rest.
	dense     []int32
	sparse    map[int64]int32
	faults    map[int64]int32
	sawHeader bool
	// logs holds, per log, the longest run of records its reads agreed on so far; reads that
	// are prefixes of it share its array (see share). shared lists those reads.
	logs   map[LogID][]Record
	shared []sharedRead
	// sharedBits marks the reads (by index in h.reads) that share their log's array.
	sharedBits []uint64
	// prefixes counts the reads that repeated an earlier read (see decoder.extend): taken in
	// place, put together from the earlier read's records, and decoded from their text.
	prefixes struct{ inPlace, copied, decoded int }
	// names caches h.name by the address of a name's bytes (see name).
	names [1 << 12]nameSlot // 64 - 52 bits of a hash
}

// nameSlot is one entry of Builder.names: a string's bytes, its length and its number.
type nameSlot struct {
	p   *byte
	n   int
	num uint32
}

// name returns h.name(s), from the cache of names when it holds s's bytes. The reader interns
// every name (one string per name per decoder), so the names of a million operations are a
// few thousand strings, and comparing an address is cheaper than hashing a name into
// h.names, three times an operation on the Builder's one goroutine. A string's bytes never
// change, and the slot keeps them alive: an address and a length in the cache are the
// name they were cached for.
func (b *Builder) name(s string) uint32 {
	if s == "" {
		return 0
	}
	p := unsafe.StringData(s)
	// Fibonacci hashing of the address: short names share 16-byte blocks of the allocator.
	slot := &b.names[uint64(uintptr(unsafe.Pointer(p)))*0x9e3779b97f4a7c15>>52]
	if slot.p == p && slot.n == len(s) {
		return slot.num
	}
	num := b.h.name(s)
	*slot = nameSlot{p, len(s), num}
	return num
}

// sharedRead is a read whose records share their log's array: its index in History.reads.
type sharedRead struct {
	read int
	log  LogID
}

// NewBuilder returns an empty builder. sizeHint, when positive, is the expected number of
// operations.
func NewBuilder(sizeHint int) *Builder {
	if sizeHint < 0 {
		sizeHint = 0
	}
	return &Builder{
		// strs gets a slot a write (and one a name): room for one an operation, so that
		// the table is allocated once (growing it by append's quarter allocated five times
		// its size).
		h: History{ops: make([]rec, 0, sizeHint), strs: append(make([]string, 0, sizeHint+64), "")},
		// Room for ids up to the hint and some: ids count up from 0 or 1 in the histories
		// fencecheck writes, so the table is allocated once.
		dense:  make([]int32, 0, sizeHint+1024),
		sparse: map[int64]int32{},
		faults: map[int64]int32{},
		logs:   map[LogID][]Record{},
	}
}

// lookup returns the index of operation id.
func (b *Builder) lookup(id int64) (int32, bool) {
	if id >= 0 && id < int64(len(b.dense)) && b.dense[id] >= 0 {
		return b.dense[id], true
	}
	if len(b.sparse) == 0 {
		return 0, false
	}
	i, ok := b.sparse[id]
	return i, ok
}

// remember records that operation id is at index i. Ids up to twice the number of
// operations so far go to the dense table.
func (b *Builder) remember(id int64, i int32) {
	if id >= 0 && id < 2*int64(len(b.h.ops))+1024 {
		if id >= int64(len(b.dense)) {
			n := int(max(id+1, 2*int64(len(b.dense))))
			if int(id) < cap(b.dense) {
				n = cap(b.dense) // fill the room there is before growing
			}
			old := len(b.dense)
			b.dense = slices.Grow(b.dense, n-old)[:n]
			for j := old; j < n; j++ {
				b.dense[j] = -1
			}
		}
		b.dense[id] = i
		return
	}
	b.sparse[id] = i
}

// Add adds one event. It rejects (wrapping ErrMalformed) a time outside [0, MaxTime], an
// event before the header, a second header, a duplicate operation or fault id, a completion without its invoke or a second
// completion, an unknown operation kind, and a result that does not fit its operation; it
// rejects a newer format with ErrFormat (a header's zero Format means FormatOf(its meta)). The
// builder keeps e's slices, except a read's records, which it copies.
func (b *Builder) Add(e *Event) error {
	if err := CheckTime(e.Time); err != nil {
		return err
	}
	if e.Time > b.h.End {
		b.h.End = e.Time
	}
	if e.Type == TypeHeader {
		if b.sawHeader {
			return fmt.Errorf("second header: %w", ErrMalformed)
		}
		b.sawHeader = true
		format := e.Format
		if format == 0 {
			format = FormatOf(e.Meta) // as the Writer writes it
		}
		if format > FormatVersion || format < 1 {
			return fmt.Errorf("format %d, this reader knows 1 to %d: %w", format, FormatVersion, ErrFormat)
		}
		b.h.Format = format
		if e.Meta != nil {
			b.h.Meta = *e.Meta
			if e.Meta.Workload == WorkloadPipeline {
				// Nearly every operation of a pipeline run has payloads: room for them all, as
				// for the operations (growing the table by append's quarter allocated five
				// times its size).
				b.h.pipes = make([]pipePayload, 0, cap(b.h.ops))
			}
		}
		return nil
	}
	if !b.sawHeader {
		return fmt.Errorf("%s event before the header: %w", e.Type, ErrMalformed)
	}
	switch e.Type {
	case TypeInvoke:
		return b.invoke(e)
	case TypeOK, TypeFail, TypeInfo:
		return b.complete(e)
	case TypeFaultStart:
		if _, dup := b.faults[e.Fault]; dup {
			return fmt.Errorf("fault %d started twice: %w", e.Fault, ErrMalformed)
		}
		b.faults[e.Fault] = int32(len(b.h.Faults))
		b.h.Faults = append(b.h.Faults, Fault{
			ID: e.Fault, Kind: e.Kind, Targets: e.Targets, Desc: e.Desc,
			Process: e.Process, Role: e.Role, Member: e.Member, Step: e.Step, Spec: e.Spec,
			Start: e.Time, End: Never,
		})
		return nil
	case TypeFaultEnd:
		i, ok := b.faults[e.Fault]
		if !ok {
			return fmt.Errorf("end of fault %d that never started: %w", e.Fault, ErrMalformed)
		}
		f := &b.h.Faults[i]
		if f.End != Never {
			return fmt.Errorf("fault %d ended twice: %w", e.Fault, ErrMalformed)
		}
		f.End, f.TookHold = e.Time, e.TookHold
		return nil
	}
	return fmt.Errorf("event type %d: %w", e.Type, ErrMalformed)
}

func (b *Builder) invoke(e *Event) error {
	kind, ok := kindCode(e.Kind)
	if !ok || kind == 0 {
		return fmt.Errorf("op %d: unknown kind %q: %w", e.ID, e.Kind, ErrMalformed)
	}
	if _, dup := b.lookup(e.ID); dup {
		return fmt.Errorf("op %d invoked twice: %w", e.ID, ErrMalformed)
	}
	if len(b.h.ops) >= math.MaxInt32 {
		return fmt.Errorf("more than %d operations: %w", math.MaxInt32, ErrMalformed)
	}
	if e.Client < math.MinInt32 || e.Client > math.MaxInt32 {
		return fmt.Errorf("op %d: client %d out of range: %w", e.ID, e.Client, ErrMalformed)
	}
	r := rec{
		id: e.ID, invoke: e.Time, ret: Never, process: b.name(e.Process), member: b.name(e.Member), role: b.name(e.Role),
		tok: NoToken, client: int32(e.Client), kind: kind, typ: TypeInfo, flags: flagPending,
	}
	switch e.Kind {
	case KindWriteLease:
		r.flags |= flagRoleLog
	case KindWork:
		if !e.Args.Log.Work {
			return fmt.Errorf("op %d: work without a work partition: %w", e.ID, ErrMalformed)
		}
		r.flags, r.partition = r.flags|flagWorkLog, e.Args.Log.Partition
	case KindRead, KindFinalRead:
		if e.Args.Log.Work {
			r.flags, r.partition = r.flags|flagWorkLog, e.Args.Log.Partition
		} else {
			r.flags |= flagRoleLog
		}
	}
	if pipeKinds[kind] {
		// Its payload in History.pipes: only args.pipe, whatever lease arguments the line has.
		r.aux = int64(len(b.h.pipes))
		b.h.pipes = append(b.h.pipes, pipePayload{args: e.Args.Pipe})
	}
	if e.Kind.IsWrite() {
		if e.Args.WriteID == "" {
			return fmt.Errorf("op %d: %s without a write id: %w", e.ID, e.Kind, ErrMalformed)
		}
		r.tok, r.writeID = e.Args.Token, b.h.slot(e.Args.WriteID)
		r.aux = int64(e.Args.Records)
	}
	b.remember(e.ID, int32(len(b.h.ops)))
	b.h.ops = append(b.h.ops, r)
	return nil
}

func (b *Builder) complete(e *Event) error {
	i, ok := b.lookup(e.ID)
	if !ok {
		return fmt.Errorf("%s of op %d that was never invoked: %w", e.Type, e.ID, ErrMalformed)
	}
	r := &b.h.ops[i]
	if r.flags&flagOdd != 0 { // an operation kept whole (see below)
		op := b.h.odd[i]
		if !op.Pending {
			return fmt.Errorf("op %d completed twice: %w", e.ID, ErrMalformed)
		}
		if e.Type == TypeOK {
			op.Result = Result{Pipe: e.Result.Pipe}
		}
		op.Pending, op.Type, op.Return, op.Error, op.Message = false, e.Type, e.Time, e.Error, e.Message
		b.h.odd[i] = op
		return nil
	}
	if r.flags&flagPending == 0 {
		return fmt.Errorf("op %d completed twice: %w", e.ID, ErrMalformed)
	}
	kind := opKinds[r.kind]
	if pipeKinds[r.kind] {
		// Only result.pipe: a pipeline operation has no lease result.
		if e.Type == TypeOK {
			b.h.pipes[r.aux].res = e.Result.Pipe
		}
	} else if e.Type == TypeOK {
		res := &e.Result
		// from is the read whose records this one's first e.prefixN extend in place (-1:
		// none); otherwise the records are put together whole here.
		from := -1
		if e.prefixN > 0 {
			if from = b.extendable(e, r, kind); from >= 0 {
				b.prefixes.inPlace++
			} else {
				full, err := b.prefixRecords(e)
				if err != nil {
					return fmt.Errorf("op %d: %w", e.ID, err)
				}
				copied := *res
				copied.Records = full
				res = &copied
			}
		}
		if err := checkResult(kind, res); err != nil {
			return fmt.Errorf("op %d: %w", e.ID, err)
		}
		if res.Token != nil && r.tok != NoToken || res.Offset != nil && res.Records != nil && kind.IsRead() ||
			res.Offset != nil && r.aux != 0 && kind.IsWrite() {
			// Not what the writer writes (a result token on a write, an offset beside a read's
			// records or a write's record count): keep the operation whole.
			op := b.h.Op(int(i))
			op.Result = *res
			op.Result.Records = nil
			if kind.IsRead() && res.Records != nil {
				op.Result.Records = slices.Clone(res.Records)
			}
			op.Pending, op.Type, op.Return, op.Error, op.Message = false, e.Type, e.Time, e.Error, e.Message
			b.h.SetOp(int(i), op)
			return nil
		}
		if res.Held {
			r.flags |= flagHeld
		}
		if res.Token != nil {
			r.tok, r.flags = *res.Token, r.flags|flagResultToken
		}
		switch {
		case from >= 0:
			k := len(b.h.reads)
			r.aux, r.flags = int64(k), r.flags|flagRecords
			b.h.reads = append(b.h.reads, b.shareFrom(k, b.h.log(r), e.prefixN, res.Records))
		case res.Records != nil && kind.IsRead():
			k := len(b.h.reads)
			r.aux, r.flags = int64(k), r.flags|flagRecords
			b.h.reads = append(b.h.reads, b.share(k, b.h.log(r), res.Records))
		case res.Offset != nil:
			r.aux, r.flags = *res.Offset, r.flags|flagOffset
		}
	}
	r.flags &^= flagPending
	r.typ, r.ret = e.Type, e.Time
	if e.Error != "" || e.Message != "" {
		b.h.fails = append(b.h.fails, failText{e.Error, e.Message})
		r.fail = int32(len(b.h.fails))
	}
	return nil
}

// share returns a copy of recs, op's records: a slice of the array that the reads of log
// share when recs agree with what they read. Every read of a log returns a prefix of the same
// committed log (read-prefix), so a history with many reads would otherwise hold the same
// records many times over. The shared slices have no spare capacity: appending to one copies
// it. History re-points them all at their log's final array, so the arrays the growth left
// behind become garbage.
//
// The reader passes records that live in its chunk buffers: what the Builder keeps, it copies.
func (b *Builder) share(read int, log LogID, recs []Record) []Record {
	if len(recs) == 0 {
		if recs == nil {
			return nil
		}
		return []Record{}
	}
	return b.shareFrom(read, log, 0, recs)
}

// shareFrom is share for a read whose first n records are the first n of log's shared
// array (they are a shared read's of the same log: see extendable), followed by tail.
func (b *Builder) shareFrom(read int, log LogID, n int, tail []Record) []Record {
	canon := b.logs[log]
	total := n + len(tail)
	for i := n; i < min(total, len(canon)); i++ {
		if tail[i-n] != canon[i] {
			// Not a prefix of what the others read: keep its own.
			own := make([]Record, total)
			copy(own, canon[:n])
			copy(own[n:], tail)
			return own
		}
	}
	recs := tail // the records past canon's end are tail's
	if total > len(canon) {
		if len(recs) > cap(canon) {
			// Double. A log's reads come at a steady rate, each a little longer than the
			// last, so growing by less copies the log at nearly every read: on the
			// 1M-operation benchmark history growing by an eighth allocated 110 MB for
			// arrays that finally held 46, doubling 90 MB for 57 (the slack of each log's
			// last array stays). The arrays left behind become garbage (see History).
			grown := make([]Record, len(canon), max(total, 2*cap(canon)))
			copy(grown, canon)
			canon = grown
		}
		canon = append(canon, recs[len(canon)-n:]...)
		b.logs[log] = canon
	}
	b.shared = append(b.shared, sharedRead{read, log})
	if read/64 >= len(b.sharedBits) {
		b.sharedBits = append(b.sharedBits, make([]uint64, read/64+1-len(b.sharedBits))...)
	}
	b.sharedBits[read/64] |= 1 << (read % 64)
	return canon[:total:total]
}

// extendable returns the index in History.reads of the read whose records e's first
// e.prefixN are (see decoder.extend) when op r, of kind, can take them in place: r is a read
// whose result the Builder keeps in the compact record, and that read shares the array of
// r's log, so its records are the log's first ones. It returns -1 otherwise.
func (b *Builder) extendable(e *Event, r *rec, kind Kind) int {
	res := &e.Result
	if !kind.IsRead() || res.Offset != nil || res.Token != nil && r.tok != NoToken {
		return -1 // kept whole, or its records dropped: see complete
	}
	i, ok := b.lookup(e.prefixOf)
	if !ok {
		return -1
	}
	from := &b.h.ops[i]
	if from.flags&flagRecords == 0 || from.flags&flagOdd != 0 {
		return -1
	}
	k := int(from.aux)
	if k/64 >= len(b.sharedBits) || b.sharedBits[k/64]&(1<<(k%64)) == 0 ||
		len(b.h.reads[k]) < e.prefixN || b.h.log(from) != b.h.log(r) {
		return -1
	}
	return k
}

// prefixRecords returns e's records whole: the first e.prefixN taken from the read they
// repeat, or decoded from their text when that read's records are not at hand (it was not a
// read, say, so its records were dropped), then the rest.
func (b *Builder) prefixRecords(e *Event) ([]Record, error) {
	var head []Record
	if i, ok := b.lookup(e.prefixOf); ok {
		switch r := &b.h.ops[i]; {
		case r.flags&flagOdd != 0:
			head = b.h.odd[i].Result.Records
		case r.flags&flagRecords != 0:
			head = b.h.reads[r.aux]
		}
	}
	if len(head) >= e.prefixN {
		head = head[:e.prefixN]
		b.prefixes.copied++
	} else {
		b.prefixes.decoded++
		var d decoder
		l := lexer{b: append(append([]byte{'['}, e.prefixText...), ']')}
		head = nil
		err := l.array(func() error {
			head = append(head, Record{Token: NoToken})
			return d.record(&l, &head[len(head)-1])
		})
		if err != nil || len(head) != e.prefixN {
			return nil, fmt.Errorf("the records a read repeats do not decode (%v): %w", err, ErrMalformed)
		}
	}
	return append(append(make([]Record, 0, len(head)+len(e.Result.Records)), head...), e.Result.Records...), nil
}

// checkResult verifies that an ok result carries what its kind promises.
func checkResult(k Kind, r *Result) error {
	switch k {
	case KindAcquire:
		if r.Token == nil {
			return fmt.Errorf("ok acquire without a token: %w", ErrMalformed)
		}
	case KindDescribe:
		if r.Held != (r.Token != nil) {
			return fmt.Errorf("describe with held=%t but token %v: %w", r.Held, r.Token, ErrMalformed)
		}
	case KindRegister:
		if r.Offset == nil {
			return fmt.Errorf("ok register without an offset: %w", ErrMalformed)
		}
	}
	return nil
}

// History returns the history built so far, its faults sorted by start. Operations still
// pending are TypeInfo with Return set to Never. The builder must not be used afterwards.
func (b *Builder) History() *History {
	h := &b.h
	if !b.sawHeader {
		h.Format = 1
	}
	slices.SortStableFunc(h.Faults, func(a, b Fault) int { return cmp.Compare(a.Start, b.Start) })
	for _, s := range b.shared {
		n := len(h.reads[s.read])
		h.reads[s.read] = b.logs[s.log][:n:n]
	}
	b.shared = b.shared[:0]
	return h
}
