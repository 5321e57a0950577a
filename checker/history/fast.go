package history

import (
	"bytes"
	"hash/maphash"
)

// The fast path: invokes and completions exactly as appendEvent writes them (its keys, their
// order, no spaces, strings without escapes) are decoded by matching the writer's bytes, not by
// the generic lexer that looks every key up. The first byte that differs from what the writer
// would have written gives the line back to the generic decoder, which decodes it whole, so
// both paths accept exactly the same lines and decode them to the same events
// (TestFastPathAgreesWithTheLexer). Nearly every line of a recorded history takes the fast
// path: BenchmarkRead of the 1M-operation history fell from 1.08-1.12 s to 0.81-0.84 s.

// scan is a cursor that matches the writer's bytes; ok turns false at the first mismatch,
// and every method then does nothing.
type scan struct {
	b  []byte
	i  int
	ok bool
}

// lit consumes s when the text at the cursor starts with it, and reports whether it did.
// Unlike the other methods, a mismatch leaves ok as it was: lit also tests optional keys.
func (c *scan) lit(s string) bool {
	if c.ok && len(c.b)-c.i >= len(s) && string(c.b[c.i:c.i+len(s)]) == s {
		c.i += len(s)
		return true
	}
	return false
}

// must consumes s, or fails.
func (c *scan) must(s string) {
	if !c.lit(s) {
		c.ok = false
	}
}

// int consumes an integer of at most 18 digits (so it cannot overflow int64) that fits in
// bits; longer ones, and anything the writer would not write, fail.
func (c *scan) int(bits int) int64 {
	if !c.ok {
		return 0
	}
	b, i := c.b, c.i
	neg := i < len(b) && b[i] == '-'
	if neg {
		i++
	}
	start := i
	var v int64
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		v = v*10 + int64(b[i]-'0')
		i++
	}
	n := i - start
	if n == 0 || n > 18 || (n > 1 && b[start] == '0') || (i < len(b) && isNumberByte(b[i])) {
		c.ok = false
		return 0
	}
	if neg {
		v = -v
	}
	if lim := int64(1) << (bits - 1); bits < 64 && (v >= lim || v < -lim) {
		c.ok = false
		return 0
	}
	c.i = i
	return v
}

// count consumes a count of records or an index among them, 0 to MaxRecords; anything else
// fails (the lexer then names it).
func (c *scan) count() uint16 {
	v := c.int(32)
	if v < 0 || v > MaxRecords {
		c.ok = false
		return 0
	}
	return uint16(v)
}

// str consumes a string without escapes and returns its bytes (which alias the line).
func (c *scan) str() []byte {
	if !c.ok || c.i >= len(c.b) || c.b[c.i] != '"' {
		c.ok = false
		return nil
	}
	b := c.b
	for j := c.i + 1; j < len(b); j++ {
		switch b[j] {
		case '"':
			s := b[c.i+1 : j]
			c.i = j + 1
			return s
		case '\\':
			c.ok = false
			return nil
		}
	}
	c.ok = false
	return nil
}

// optStr consumes `,"key":"value"` when it comes next, interned; "" when it does not.
func (c *scan) optStr(d *decoder, key string) string {
	if !c.lit(key) {
		return ""
	}
	b := c.str()
	if !c.ok {
		return ""
	}
	return d.internBytes(b)
}

// token consumes a token object.
func (c *scan) token() Token {
	c.must(`{"producer_id":`)
	pid := c.int(64)
	c.must(`,"epoch":`)
	epoch := c.int(16)
	c.must(`}`)
	return Token{ProducerID: pid, Epoch: int16(epoch)}
}

// fastLine decodes line into e (which must be zero) when it is an invoke or a completion
// written by appendEvent, and reports whether it did; otherwise e is left zero.
func (d *decoder) fastLine(line []byte, e *Event) bool {
	c := scan{b: line, ok: true}
	c.must(`{"type":"`)
	switch {
	case c.lit(`invoke"`):
		e.Type = TypeInvoke
		d.fastInvoke(&c, e)
	case c.lit(`ok"`):
		e.Type = TypeOK
	case c.lit(`fail"`):
		e.Type = TypeFail
	case c.lit(`info"`):
		e.Type = TypeInfo
	default:
		return false // the header and fault windows: the lexer's
	}
	if e.Type.IsCompletion() {
		d.fastCompletion(&c, e)
	}
	c.must(`}`)
	if !c.ok || c.i != len(line) {
		*e = Event{}
		d.pending = pendingRead{}
		return false
	}
	if d.pending.slot != nil {
		// Only now: a line the fast path gives back to the lexer names no read to extend.
		*d.pending.slot = d.pending.value
		d.pending = pendingRead{}
	}
	return true
}

func (d *decoder) fastInvoke(c *scan, e *Event) {
	c.must(`,"id":`)
	e.ID = c.int(64)
	c.must(`,"time":`)
	e.Time = c.int(64)
	c.must(`,"client":`)
	e.Client = int(c.int(64))
	e.Process = c.optStr(d, `,"process":`)
	e.Member = c.optStr(d, `,"member":`)
	e.Role = c.optStr(d, `,"role":`)
	c.must(`,"kind":`)
	if k := c.str(); c.ok {
		e.Kind = Kind(d.internBytes(k))
		if !e.Kind.valid() { // the writer writes none; the Builder names it
			c.ok = false
			return
		}
	}
	if !c.lit(`,"args":{`) {
		return
	}
	if e.Kind.IsPipeline() {
		c.must(`"pipe":`)
		e.Args.Pipe = d.fastPipeArgs(c)
		c.must(`}`)
		return
	}
	write := e.Kind.IsWrite()
	if write {
		c.must(`"token":`)
		e.Args.Token = c.token()
		c.must(`,"write_id":`)
		e.Args.WriteID = d.writeIDBytes(c.str())
	}
	if (e.Kind == KindWork || e.Kind.IsRead()) && (!write || c.lit(`,`)) {
		c.must(`"work_partition":`)
		e.Args.Log = WorkLog(int32(c.int(32)))
	}
	if write && c.lit(`,"records":`) {
		e.Args.Records = int(c.count())
	}
	c.must(`}`)
}

func (d *decoder) fastCompletion(c *scan, e *Event) {
	c.must(`,"id":`)
	e.ID = c.int(64)
	c.must(`,"time":`)
	e.Time = c.int(64)
	if e.Type == TypeOK && c.lit(`,"result":{`) {
		if c.lit(`"pipe":`) {
			e.Result.Pipe = d.fastPipeResult(c)
		} else {
			d.fastResult(c, e)
		}
		c.must(`}`)
	}
	e.Error = c.optStr(d, `,"error":`)
	e.Message = c.optStr(d, `,"message":`)
}

// fastResult consumes a result's fields, in the writer's order, each after the first
// preceded by a comma.
func (d *decoder) fastResult(c *scan, e *Event) {
	r := &e.Result
	first := true
	// field consumes key (which starts with its comma), without the comma when first.
	field := func(key string) bool {
		if first {
			key = key[1:]
		}
		if !c.lit(key) {
			return false
		}
		first = false
		return true
	}
	if field(`,"held":true`) {
		r.Held = true
	}
	if field(`,"token":`) {
		t := c.token()
		r.Token = &t
	}
	if field(`,"offset":`) {
		v := c.int(64)
		r.Offset = &v
	}
	if !field(`,"records":[`) {
		if first {
			c.ok = false // the writer writes no empty result
		}
		return
	}
	recs := d.records[:0]
	start := c.i // the records' text: from here to the closing bracket
	var slot *readSlot
	for c.ok && !c.lit(`]`) {
		if len(recs) > 0 || e.prefixN > 0 {
			c.must(`,`)
		}
		recs = append(recs, d.fastRecord(c))
		if slot == nil && d.repeats && c.ok && recs[len(recs)-1].Kind != RecordRegistration {
			// The records up to the first lease or work record, which names its write,
			// name the log (a lease log's registrations name only their members, so many
			// logs start alike): enough to find the last read of it this decoder saw.
			slot = d.extend(c, e, start, len(recs))
			if e.prefixN > 0 {
				recs = recs[:0]
			}
		}
	}
	if c.ok {
		r.Records = d.keepRecords(recs)
		if slot != nil {
			text := c.b[start : c.i-1]
			d.pending = pendingRead{slot, readSlot{
				key: slot.key, id: e.ID, n: e.prefixN + len(recs), len: len(text), sum: maphash.Bytes(readSeed, text),
			}}
		}
	}
	clear(recs) // drop the strings the scratch would keep alive
	d.records = recs[:0]
}

// Reads repeat their log. Every read of a log returns the records an earlier read of it
// returned and then some (read-prefix), so a history's reads are its logs many times over:
// 2.07 million records in the reads of the 1M-operation benchmark history, whose logs end with
// 0.54 million. A decoder remembers, per log, the last read it decoded by the fast path:
// its operation id, the length of its records' text, a hash of that text and the number of
// records; a read whose text starts with the same text, up to a record boundary, takes its
// first records from that read (Event.prefixOf, prefixN) and is decoded from there on. The
// Builder copies them from the earlier read, which it has seen by then: a decoder takes its
// chunks in file order, and the Builder adds every chunk in file order. The texts are
// compared by length and a 64-bit hash with a seed chosen per process, not byte for byte:
// holding every log's text (two copies, one per decoder) would cost more memory than the
// reads save (600 MB a decoder at ten million operations). Two different texts of one length
// with equal hashes, the one case where a read would take records it does not hold, happen
// with a probability of about 2^-64 per read.

// readSeed seeds the hashes of reads' texts.
var readSeed = maphash.MakeSeed()

// readSlots is the number of logs a decoder remembers reads of (one slot a log, chosen by
// the hash of the log's first records, up to the first naming a write): a 10M-operation
// history has about 10,000 logs.
const readSlots = 1 << 15

// readSlot is the last read a decoder decoded of the log whose first records' text (up to
// the first naming a write) hashes to key.
type readSlot struct {
	key uint64
	id  int64 // the read's operation id
	n   int   // its number of records
	len int   // the length of its records' text (from the first's brace to the last's)
	sum uint64
}

// pendingRead is the slot a line's read will set once the whole line has decoded (none
// when slot is nil).
type pendingRead struct {
	slot  *readSlot
	value readSlot
}

// extend is called once a read's first n records, up to the first that names a write, have
// been decoded from c.b[start:c.i]: when a read this decoder saw earlier of the same log has
// more records, and a text that the text at start begins with up to a record boundary, it
// sets e's prefix to that read's records and moves the cursor past them. It returns the
// log's slot.
func (d *decoder) extend(c *scan, e *Event, start, n int) *readSlot {
	if d.reads == nil {
		d.reads = new([readSlots]readSlot) // 1.3 MB: only once a history has reads
	}
	key := maphash.Bytes(readSeed, c.b[start:c.i])
	slot := &d.reads[key&(readSlots-1)]
	if slot.key != key {
		*slot = readSlot{key: key}
		return slot
	}
	end := start + slot.len
	if slot.n <= n || end >= len(c.b) || (c.b[end] != ',' && c.b[end] != ']') ||
		maphash.Bytes(readSeed, c.b[start:end]) != slot.sum {
		return slot
	}
	e.prefixOf, e.prefixN, e.prefixText = slot.id, slot.n, c.b[start:end]
	c.i = end
	return slot
}

func (d *decoder) fastRecord(c *scan) Record {
	r := Record{Token: NoToken}
	c.must(`{"offset":`)
	r.Offset = c.int(64)
	switch {
	case c.lit(`,"kind":"registration"`):
		r.Kind = RecordRegistration
	case c.lit(`,"kind":"lease"`):
		r.Kind = RecordLease
	case c.lit(`,"kind":"work"`):
		r.Kind = RecordWork
	default:
		c.ok = false
		return r
	}
	r.Member = c.optStr(d, `,"member":`)
	r.Role = c.optStr(d, `,"role":`)
	if r.Kind != RecordRegistration {
		c.must(`,"token":`)
		r.Token = c.token()
		if c.lit(`,"write_id":`) {
			r.WriteID = d.writeIDBytes(c.str())
		}
	}
	if c.lit(`,"index":`) {
		r.Index = c.count()
		c.must(`,"count":`)
		r.Count = c.count()
	}
	c.must(`}`)
	return r
}

// The pipeline payloads, as encoding/json writes them (appendPipe): the struct's fields in
// order, the empty ones left out. A pipeline history is nearly all of them, and its final
// read of the output is one line of an output a record (100 MB at a million operations),
// which one worker decodes alone: the lexer's closures and key lookups made most of a read.

// fields matches an object's optional keys in the writer's order: each key after the first
// is preceded by a comma.
type fields struct {
	c     *scan
	first bool
}

// key consumes key (which starts with its comma, dropped for the first) when it comes next.
func (f *fields) key(key string) bool {
	if f.first {
		key = key[1:]
	}
	if !f.c.lit(key) {
		return false
	}
	f.first = false
	return true
}

func (d *decoder) fastPipeArgs(c *scan) *PipeArgs {
	a := d.slabs.args()
	c.must(`{`)
	f := fields{c: c, first: true}
	if f.key(`,"id":`) {
		a.ID = string(c.str()) // unique: neither interned nor cached
	}
	if f.key(`,"group":`) {
		a.Group = d.internBytes(c.str())
	}
	if f.key(`,"member_id":`) {
		a.MemberID = d.internBytes(c.str())
	}
	if f.key(`,"generation":`) {
		a.Generation = int32(c.int(32))
	}
	if f.key(`,"txn_id":`) {
		a.TransactionalID = d.internBytes(c.str())
	}
	if f.key(`,"inputs":[`) {
		for c.ok {
			var r PipeRange
			c.must(`{"partition":`)
			r.Partition = int32(c.int(32))
			c.must(`,"from":`)
			r.From = c.int(64)
			c.must(`,"to":`)
			r.To = c.int(64)
			c.must(`}`)
			a.Inputs = append(a.Inputs, r)
			if !c.lit(`,`) {
				break
			}
		}
		c.must(`]`)
	}
	if f.key(`,"offsets":[`) {
		a.Offsets = c.pipeOffsets()
	}
	c.must(`}`)
	return a
}

func (d *decoder) fastPipeResult(c *scan) *PipeResult {
	r := d.slabs.result()
	c.must(`{`)
	f := fields{c: c, first: true}
	if f.key(`,"token":`) {
		t := c.token()
		r.Token = &t
	}
	if f.key(`,"sent":`) {
		r.Sent = d.slabs.offset()
		*r.Sent = c.pipeOffset()
	}
	if f.key(`,"outputs":[`) {
		// Room for them all at once: growing a slice of a million outputs by append copied
		// it over and over and allocated several times its size. Each output is two objects
		// (itself and its "in"); counting a byte is the fast count.
		r.Outputs = make([]PipeOutput, 0, bytes.Count(c.b[c.i:], []byte{'{'})/2+1)
		r.Outputs = d.outputs(c, r.Outputs)
		c.must(`]`)
	}
	if f.key(`,"offsets":[`) {
		r.Offsets = c.pipeOffsets()
	}
	if f.key(`,"input_ends":[`) {
		r.InputEnds = c.pipeOffsets()
	}
	c.must(`}`)
	return r
}

// splitOutputs is the length of text from which an array of outputs is decoded in two halves
// at once. A final read of the output is one line (103 MB for the 1M-operation benchmark
// history), which one worker decoded alone while the other had nothing left to decode.
var splitOutputs = 4 << 20

// outputBoundary is the text between two outputs of an array. It cannot occur inside a
// string (a quote there is escaped), and within a line the writer writes only between the
// elements of an array of objects that start with a partition: the outputs, and the offsets
// and input ends that follow them.
const outputBoundary = `},{"partition":`

// outputs consumes the elements of a non-empty array of outputs, appending them to out, and
// stops before its closing bracket. When the text left is long, a second goroutine decodes
// from an element boundary in its middle to the end of the array while this one decodes up to
// the boundary: if the boundary turns out not to be in this array (this half reaches the end
// first) or the second half fails, this one goes on alone from where it is.
func (d *decoder) outputs(c *scan, out []PipeOutput) []PipeOutput {
	stop := -1
	var second struct {
		out []PipeOutput
		end int
		ok  bool
	}
	var done chan struct{}
	if rest := len(c.b) - c.i; rest >= splitOutputs {
		mid := c.i + rest/2
		if k := bytes.Index(c.b[mid:], []byte(outputBoundary)); k >= 0 {
			stop = mid + k + len(`},`)
			done = make(chan struct{})
			// The goroutine gets its own scan: one that captured c would move every line's
			// scan to the heap (92 MB of the 1M-operation lease read).
			c2 := &scan{b: c.b, i: stop, ok: true}
			go func() {
				defer close(done)
				var d2 decoder // interns the members on its own
				second.out = d2.outputsFrom(c2, make([]PipeOutput, 0, bytes.Count(c2.b[c2.i:], []byte{'{'})/2+1), -1)
				second.end, second.ok = c2.i, c2.ok
			}()
		}
	}
	out = d.outputsFrom(c, out, stop)
	if done != nil {
		<-done // the second half reads c.b, which the chunk's next use overwrites
		if c.ok && c.i == stop {
			if second.ok {
				c.i = second.end
				return append(out, second.out...)
			}
			return d.outputsFrom(c, out, -1)
		}
	}
	return out
}

// outputsFrom consumes outputs, appending them to out, until the text at the cursor is
// not the start of another (at the closing bracket, the comma consumed) or the cursor reaches
// stop (-1: never), where the element at stop is left to be decoded.
func (d *decoder) outputsFrom(c *scan, out []PipeOutput, stop int) []PipeOutput {
	for c.ok && c.i != stop {
		var o PipeOutput
		c.must(`{"partition":`)
		o.Partition = int32(c.int(32))
		c.must(`,"offset":`)
		o.Offset = c.int(64)
		c.must(`,"in":{"partition":`)
		o.In.Partition = int32(c.int(32))
		c.must(`,"offset":`)
		o.In.Offset = c.int(64)
		c.must(`},"id":`)
		o.ID = string(c.str()) // an input's: unique, neither interned nor cached
		c.must(`,"txn":`)
		o.Txn = c.int(64)
		o.Member = c.optStr(d, `,"member":`)
		if c.lit(`,"generation":`) {
			o.Generation = int32(c.int(32))
		}
		c.must(`}`)
		out = append(out, o)
		if !c.lit(`,`) {
			break
		}
	}
	return out
}

// pipeOffset consumes a {partition, offset} object.
func (c *scan) pipeOffset() PipeOffset {
	c.must(`{"partition":`)
	p := c.int(32)
	c.must(`,"offset":`)
	o := c.int(64)
	c.must(`}`)
	return PipeOffset{Partition: int32(p), Offset: o}
}

// pipeOffsets consumes the elements of a non-empty array of {partition, offset} objects, and
// its closing bracket.
func (c *scan) pipeOffsets() []PipeOffset {
	var out []PipeOffset
	for c.ok {
		out = append(out, c.pipeOffset())
		if !c.lit(`,`) {
			break
		}
	}
	c.must(`]`)
	return out
}

// pipeSlabs hands out the payloads the fast path decodes from blocks of them, not one
// allocation each: a pipeline history has a million or so, nearly all kept to the end, and
// an allocation each was a tenth of a read.
type pipeSlabs struct {
	argsBlock    []PipeArgs
	resultBlock  []PipeResult
	offsetsBlock []PipeOffset
}

const slabSize = 256

func (s *pipeSlabs) args() *PipeArgs { return next(&s.argsBlock) }

func (s *pipeSlabs) result() *PipeResult { return next(&s.resultBlock) }

func (s *pipeSlabs) offset() *PipeOffset { return next(&s.offsetsBlock) }

// next returns a pointer to a new zero element of *block, starting a new block when it is
// full.
func next[T any](block *[]T) *T {
	if len(*block) == cap(*block) {
		*block = make([]T, 0, slabSize)
	}
	*block = (*block)[:len(*block)+1]
	return &(*block)[len(*block)-1]
}
