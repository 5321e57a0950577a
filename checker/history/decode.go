package history

import (
	"encoding/json"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// decoder decodes history lines without reflection. It knows the schema, skips keys it does
// not know (so a newer writer's optional fields are tolerated), and interns the strings that
// repeat (processes, members, roles, kinds, error classes), so a
// large history costs few allocations.
type decoder struct {
	intern  map[string]string
	scratch []byte
	records []Record // reused while a read's records are decoded
	// arena, when set, receives the records of every read of a chunk: the Builder copies
	// what it keeps (see Builder.share), so a read costs no allocation of its own.
	arena *[]Record
	// ids, when set, caches recent write ids by hash: reads return the same records again
	// and again, and a hit reuses the string instead of allocating it.
	ids *[idSlots]strSlot
	// strs, when set, caches interned strings by hash in front of the intern map: a hit
	// costs a hash and a comparison, where the map (thousands of roles) costs a probe.
	strs *[strSlots]strSlot
	// slabs hold the pipeline payloads of the fast path.
	slabs pipeSlabs
	// repeats, when set, has reads decoded from where an earlier read of their log ended:
	// reads remembers the last read of each log (see extend), and pending is the slot the
	// line being decoded will set.
	repeats bool
	reads   *[readSlots]readSlot
	pending pendingRead
}

var errSyntax = fmt.Errorf("invalid JSON: %w", ErrMalformed)

// lexer is a cursor over one line.
type lexer struct {
	b []byte
	i int
}

func (l *lexer) ws() {
	if l.i < len(l.b) && l.b[l.i] > ' ' {
		return // the writer puts no spaces between tokens
	}
	for l.i < len(l.b) {
		switch l.b[l.i] {
		case ' ', '\t', '\r', '\n':
			l.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte, or 0 at the end.
func (l *lexer) peek() byte {
	l.ws()
	if l.i < len(l.b) {
		return l.b[l.i]
	}
	return 0
}

func (l *lexer) expect(c byte) error {
	if l.peek() != c {
		return l.errorf("want %q", c)
	}
	l.i++
	return nil
}

func (l *lexer) errorf(format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if l.i >= len(l.b) {
		return fmt.Errorf("%s at end of line: %w", msg, errSyntax)
	}
	return fmt.Errorf("%s at column %d: %w", msg, l.i+1, errSyntax)
}

// object calls field for every key of the object at the cursor; field must consume the value.
func (l *lexer) object(d *decoder, field func(key []byte) error) error {
	if err := l.expect('{'); err != nil {
		return err
	}
	if l.peek() == '}' {
		l.i++
		return nil
	}
	for {
		key, err := l.rawString(d)
		if err != nil {
			return err
		}
		if err := l.expect(':'); err != nil {
			return err
		}
		if err := field(key); err != nil {
			return err
		}
		switch l.peek() {
		case ',':
			l.i++
		case '}':
			l.i++
			return nil
		default:
			return l.errorf("want ',' or '}'")
		}
	}
}

// array calls elem for every element of the array at the cursor.
func (l *lexer) array(elem func() error) error {
	if err := l.expect('['); err != nil {
		return err
	}
	if l.peek() == ']' {
		l.i++
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		switch l.peek() {
		case ',':
			l.i++
		case ']':
			l.i++
			return nil
		default:
			return l.errorf("want ',' or ']'")
		}
	}
}

// rawString returns the string at the cursor, unescaped. The bytes are valid until the next
// call; they alias the line or the decoder's scratch buffer. Raw control characters inside a
// string are accepted (a strict JSON parser refuses them; nothing this package writes has
// them).
func (l *lexer) rawString(d *decoder) ([]byte, error) {
	if l.i >= len(l.b) || l.b[l.i] != '"' {
		if l.peek() != '"' {
			return nil, l.errorf("want a string")
		}
	}
	start := l.i + 1
	b := l.b
	for j := start; j < len(b); j++ {
		switch b[j] {
		case '"':
			l.i = j + 1
			return b[start:j], nil
		case '\\':
			return l.escapedString(d, start)
		}
	}
	l.i = len(b)
	return nil, l.errorf("unterminated string")
}

func (l *lexer) escapedString(d *decoder, start int) ([]byte, error) {
	out := d.scratch[:0]
	l.i = start
	for l.i < len(l.b) {
		c := l.b[l.i]
		switch {
		case c == '"':
			l.i++
			d.scratch = out
			return out, nil
		case c != '\\':
			out = append(out, c)
			l.i++
			continue
		}
		if l.i+1 >= len(l.b) {
			break
		}
		e := l.b[l.i+1]
		l.i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := l.hex4()
			if !ok {
				return nil, l.errorf("bad \\u escape")
			}
			if utf16.IsSurrogate(r) {
				r2 := rune(utf8.RuneError)
				if l.i+1 < len(l.b) && l.b[l.i] == '\\' && l.b[l.i+1] == 'u' {
					save := l.i
					l.i += 2
					if lo, ok := l.hex4(); ok {
						r2 = utf16.DecodeRune(r, lo)
					} else {
						l.i = save
					}
				}
				r = r2
			}
			out = utf8.AppendRune(out, r)
		default:
			return nil, l.errorf("bad escape \\%c", e)
		}
	}
	return nil, l.errorf("unterminated string")
}

func (l *lexer) hex4() (rune, bool) {
	if l.i+4 > len(l.b) {
		return 0, false
	}
	var r rune
	for _, c := range l.b[l.i : l.i+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	l.i += 4
	return r, true
}

// writeID returns the write id at the cursor. Write ids are too many to intern in a map (a
// large table, a cache miss a lookup); a small direct-mapped cache catches the records that
// reads repeat.
func (l *lexer) writeID(d *decoder) (string, error) {
	b, err := l.rawString(d)
	if err != nil {
		return "", err
	}
	return d.writeIDBytes(b), nil
}

// strSlot is one entry of a decoder's string caches: a string and its FNV-1a hash. The hash
// is compared first: write ids and role names are mostly of one length ("w5043",
// "role-4242"), so comparing the strings of a slot that holds another would call the
// runtime's byte comparison every time; comparing hashes rules nearly all of those out.
type strSlot struct {
	hash uint32
	s    string
}

// idSlots and strSlots size the caches of a reader's decoders. A larger strSlots (32,768,
// room for a 10M-operation history's ten thousand role names) saved no CPU: the misses of
// the intern map it removed came back as cache misses of the larger table.
const (
	idSlots  = 1 << 12
	strSlots = 1 << 12
)

// writeIDBytes returns b as a string, from the write id cache when it holds it.
func (d *decoder) writeIDBytes(b []byte) string {
	if d.ids == nil {
		return string(b)
	}
	h := fnv(b)
	slot := &d.ids[h&(idSlots-1)]
	if slot.hash != h || slot.s != string(b) {
		*slot = strSlot{h, string(b)}
	}
	return slot.s
}

// fnv is FNV-1a.
func fnv(b []byte) uint32 {
	h := uint32(2166136261)
	for _, c := range b {
		h = (h ^ uint32(c)) * 16777619
	}
	return h
}

// str returns the string at the cursor, interned.
func (l *lexer) str(d *decoder) (string, error) {
	b, err := l.rawString(d)
	if err != nil {
		return "", err
	}
	return d.internBytes(b), nil
}

func (d *decoder) internBytes(b []byte) string {
	var slot *strSlot
	var h uint32
	if d.strs != nil {
		h = fnv(b)
		slot = &d.strs[h&(strSlots-1)]
		if slot.hash == h && slot.s == string(b) {
			return slot.s
		}
	}
	s, ok := d.intern[string(b)]
	if !ok {
		s = string(b)
		if d.intern == nil {
			d.intern = make(map[string]string)
		}
		d.intern[s] = s
	}
	if slot != nil {
		*slot = strSlot{h, s}
	}
	return s
}

// int32 returns the 32-bit integer at the cursor.
func (l *lexer) int32() (int32, error) {
	v, err := l.int(32)
	return int32(v), err
}

// int returns the integer at the cursor.
func (l *lexer) int(bits int) (int64, error) {
	l.ws()
	start := l.i
	if l.i < len(l.b) && l.b[l.i] == '-' {
		l.i++
	}
	var v uint64
	digits := 0
	for l.i < len(l.b) && l.b[l.i] >= '0' && l.b[l.i] <= '9' {
		if v > (1<<63)/10 {
			return 0, l.errorf("integer overflow")
		}
		v = v*10 + uint64(l.b[l.i]-'0')
		l.i++
		digits++
	}
	if digits == 0 {
		return 0, l.errorf("want an integer")
	}
	if l.i < len(l.b) {
		switch l.b[l.i] {
		case '.', 'e', 'E':
			return 0, l.errorf("want an integer")
		}
	}
	neg := l.b[start] == '-'
	limit := uint64(1) << (bits - 1)
	if (!neg && v >= limit) || (neg && v > limit) {
		return 0, l.errorf("integer overflows int%d", bits)
	}
	if neg {
		return -int64(v), nil
	}
	return int64(v), nil
}

func (l *lexer) bool() (bool, error) {
	l.ws()
	switch {
	case hasPrefix(l.b[l.i:], "true"):
		l.i += 4
		return true, nil
	case hasPrefix(l.b[l.i:], "false"):
		l.i += 5
		return false, nil
	}
	return false, l.errorf("want a boolean")
}

func hasPrefix(b []byte, s string) bool { return len(b) >= len(s) && string(b[:len(s)]) == s }

// null consumes a null and reports whether there was one.
func (l *lexer) null() bool {
	l.ws()
	if hasPrefix(l.b[l.i:], "null") {
		l.i += 4
		return true
	}
	return false
}

// skip consumes one value of any type.
func (l *lexer) skip(d *decoder) error {
	switch c := l.peek(); {
	case c == '{':
		return l.object(d, func([]byte) error { return l.skip(d) })
	case c == '[':
		return l.array(func() error { return l.skip(d) })
	case c == '"':
		_, err := l.rawString(d)
		return err
	case c == 't' || c == 'f':
		_, err := l.bool()
		return err
	case c == 'n':
		if l.null() {
			return nil
		}
	case c == '-' || (c >= '0' && c <= '9'):
		for l.i < len(l.b) && isNumberByte(l.b[l.i]) {
			l.i++
		}
		return nil
	}
	return l.errorf("want a value")
}

// decodeLine decodes one line into e, which must be zero: by the fast path when the writer
// wrote it (see fastLine), else by the lexer.
func (d *decoder) decodeLine(line []byte, e *Event) error {
	if d.fastLine(line, e) {
		return nil
	}
	return d.lexLine(line, e)
}

// lexLine decodes one line into e, which must be zero, with the lexer: any key order, spaces
// and escapes, unknown keys skipped.
func (d *decoder) lexLine(line []byte, e *Event) error {
	l := lexer{b: line}
	var metaRaw []byte
	err := l.object(d, func(key []byte) error {
		var err error
		switch string(key) {
		case "type":
			var b []byte
			if b, err = l.rawString(d); err == nil {
				var ok bool
				if e.Type, ok = parseType(b); !ok {
					// Valid JSON naming a type this reader does not know: say so, not "invalid JSON".
					return fmt.Errorf("unknown event type %q (want one of %s): %w", b, typeList(), ErrMalformed)
				}
			}
		case "time":
			e.Time, err = l.int(64)
		case "id":
			e.ID, err = l.int(64)
		case "client":
			var v int64
			v, err = l.int(64)
			e.Client = int(v)
		case "process":
			e.Process, err = l.str(d)
		case "member":
			e.Member, err = l.str(d)
		case "role":
			e.Role, err = l.str(d)
		case "kind":
			var s string
			s, err = l.str(d)
			e.Kind = Kind(s)
		case "args":
			err = d.args(&l, &e.Args)
		case "result":
			err = d.result(&l, &e.Result)
		case "error":
			e.Error, err = l.str(d)
		case "message":
			e.Message, err = l.str(d)
		case "fault":
			e.Fault, err = l.int(64)
		case "step":
			var v int64
			v, err = l.int(32)
			e.Step = int(v)
		case "spec":
			e.Spec, err = l.str(d)
		case "targets":
			err = l.array(func() error {
				s, err := l.str(d)
				e.Targets = append(e.Targets, s)
				return err
			})
		case "desc":
			e.Desc, err = l.str(d)
		case "took_hold":
			e.TookHold, err = l.bool()
		case "format":
			var v int64
			v, err = l.int(32)
			e.Format = int(v)
		case "meta":
			start := l.i
			if err = l.skip(d); err == nil {
				metaRaw = l.b[start:l.i]
			}
		default:
			err = l.skip(d)
		}
		return err
	})
	if err != nil {
		return err
	}
	if l.peek() != 0 {
		return l.errorf("text after the object")
	}
	if e.Type == 0 {
		return fmt.Errorf("event without a type: %w", ErrMalformed)
	}
	if metaRaw != nil && e.Type == TypeHeader {
		e.Meta = new(Meta)
		if err := json.Unmarshal(metaRaw, e.Meta); err != nil {
			return fmt.Errorf("header meta: %v: %w", err, ErrMalformed)
		}
	}
	return nil
}

func (d *decoder) args(l *lexer, a *Args) error {
	if l.null() {
		return nil
	}
	return l.object(d, func(key []byte) error {
		var err error
		switch string(key) {
		case "token":
			a.Token, err = d.token(l)
		case "write_id":
			a.WriteID, err = l.writeID(d)
		case "work_partition":
			var v int64
			v, err = l.int(32)
			a.Log = WorkLog(int32(v))
		case "records":
			var v uint16
			v, err = recordCount(l, "args.records")
			a.Records = int(v)
		case "pipe":
			a.Pipe = new(PipeArgs)
			err = d.pipeArgs(l, a.Pipe)
		default:
			err = l.skip(d)
		}
		return err
	})
}

// pipeArgs decodes args.pipe with the lexer: a pipeline history's lines are mostly these
// payloads, and encoding/json's reflection made decoding them most of a check's time.
func (d *decoder) pipeArgs(l *lexer, a *PipeArgs) error {
	if l.null() {
		return nil
	}
	return l.object(d, func(key []byte) error {
		var err error
		switch string(key) {
		case "id":
			a.ID, err = l.writeID(d) // unique: not interned
		case "group":
			a.Group, err = l.str(d)
		case "member_id":
			a.MemberID, err = l.str(d)
		case "generation":
			a.Generation, err = l.int32()
		case "txn_id":
			a.TransactionalID, err = l.str(d)
		case "inputs":
			err = l.array(func() error {
				var r PipeRange
				err := l.object(d, func(key []byte) error {
					var err error
					switch string(key) {
					case "partition":
						r.Partition, err = l.int32()
					case "from":
						r.From, err = l.int(64)
					case "to":
						r.To, err = l.int(64)
					default:
						err = l.skip(d)
					}
					return err
				})
				a.Inputs = append(a.Inputs, r)
				return err
			})
		case "offsets":
			a.Offsets, err = d.pipeOffsets(l)
		case "rewind":
			a.Rewind, err = l.bool()
		default:
			err = l.skip(d)
		}
		return err
	})
}

// pipeResult decodes result.pipe with the lexer (see pipeArgs).
func (d *decoder) pipeResult(l *lexer, r *PipeResult) error {
	if l.null() {
		return nil
	}
	return l.object(d, func(key []byte) error {
		var err error
		switch string(key) {
		case "token":
			r.Token, err = d.optToken(l)
		case "sent":
			if l.null() {
				return nil
			}
			var o PipeOffset
			o, err = d.pipeOffset(l)
			r.Sent = &o
		case "outputs":
			r.Outputs = []PipeOutput{}
			err = l.array(func() error {
				var o PipeOutput
				err := l.object(d, func(key []byte) error {
					var err error
					switch string(key) {
					case "partition":
						o.Partition, err = l.int32()
					case "offset":
						o.Offset, err = l.int(64)
					case "in":
						o.In, err = d.pipeOffset(l)
					case "id":
						o.ID, err = l.writeID(d)
					case "txn":
						o.Txn, err = l.int(64)
					case "member":
						o.Member, err = l.str(d)
					case "generation":
						o.Generation, err = l.int32()
					case "count":
						o.Count, err = l.int(64)
					case "sum":
						o.Sum, err = l.int(64)
					default:
						err = l.skip(d)
					}
					return err
				})
				r.Outputs = append(r.Outputs, o)
				return err
			})
		case "offsets":
			r.Offsets, err = d.pipeOffsets(l)
		case "input_ends":
			r.InputEnds, err = d.pipeOffsets(l)
		case "offsets_at":
			r.OffsetsAt, err = l.int(64)
		case "txn_version":
			var v int64
			v, err = l.int(64)
			r.TxnVersion = int(v)
		case "open_txns":
			err = l.array(func() error {
				var t PipeOpenTxn
				err := l.object(d, func(key []byte) error {
					var err error
					switch string(key) {
					case "txn_id":
						t.TransactionalID, err = l.str(d)
					case "state":
						t.State, err = l.str(d)
					case "producer_id":
						t.ProducerID, err = l.int(64)
					default:
						err = l.skip(d)
					}
					return err
				})
				r.OpenTxns = append(r.OpenTxns, t)
				return err
			})
		case "ends":
			err = l.array(func() error {
				var e PipeEnd
				err := l.object(d, func(key []byte) error {
					var err error
					switch string(key) {
					case "topic":
						e.Topic, err = l.str(d)
					case "partition":
						e.Partition, err = l.int32()
					case "stable":
						e.Stable, err = l.int(64)
					case "end":
						e.End, err = l.int(64)
					default:
						err = l.skip(d)
					}
					return err
				})
				r.Ends = append(r.Ends, e)
				return err
			})
		default:
			err = l.skip(d)
		}
		return err
	})
}

// pipeOffset decodes a {partition, offset} object.
func (d *decoder) pipeOffset(l *lexer) (PipeOffset, error) {
	var o PipeOffset
	err := l.object(d, func(key []byte) error {
		var err error
		switch string(key) {
		case "partition":
			o.Partition, err = l.int32()
		case "offset":
			o.Offset, err = l.int(64)
		default:
			err = l.skip(d)
		}
		return err
	})
	return o, err
}

// pipeOffsets decodes an array of {partition, offset} objects.
func (d *decoder) pipeOffsets(l *lexer) ([]PipeOffset, error) {
	out := []PipeOffset{}
	err := l.array(func() error {
		o, err := d.pipeOffset(l)
		out = append(out, o)
		return err
	})
	return out, err
}

// optToken decodes a token that may be null (nil).
func (d *decoder) optToken(l *lexer) (*Token, error) {
	if l.null() {
		return nil, nil
	}
	t, err := d.token(l)
	return &t, err
}

func (d *decoder) token(l *lexer) (Token, error) {
	t := Token{}
	err := l.object(d, func(key []byte) error {
		var err error
		var v int64
		switch string(key) {
		case "producer_id":
			t.ProducerID, err = l.int(64)
		case "epoch":
			v, err = l.int(16)
			t.Epoch = int16(v)
		default:
			err = l.skip(d)
		}
		return err
	})
	return t, err
}

func (d *decoder) result(l *lexer, r *Result) error {
	if l.null() {
		return nil
	}
	return l.object(d, func(key []byte) error {
		var err error
		switch string(key) {
		case "token":
			r.Token, err = d.optToken(l)
		case "held":
			r.Held, err = l.bool()
		case "offset":
			var v int64
			v, err = l.int(64)
			r.Offset = &v
		case "records":
			recs := d.records[:0]
			err = l.array(func() error {
				recs = append(recs, Record{Token: NoToken})
				return d.record(l, &recs[len(recs)-1])
			})
			r.Records = d.keepRecords(recs)
			clear(recs) // drop the strings the scratch would keep alive
			d.records = recs[:0]
		case "pipe":
			r.Pipe = new(PipeResult)
			err = d.pipeResult(l, r.Pipe)
		default:
			err = l.skip(d)
		}
		return err
	})
}

// keepRecords copies a read's records out of the decoder's scratch: into the arena when one
// is set, else into a slice of their own.
func (d *decoder) keepRecords(recs []Record) []Record {
	if d.arena == nil {
		return append(make([]Record, 0, len(recs)), recs...)
	}
	start := len(*d.arena)
	*d.arena = append(*d.arena, recs...)
	return (*d.arena)[start:len(*d.arena):len(*d.arena)]
}

func (d *decoder) record(l *lexer, r *Record) error {
	err := l.object(d, func(key []byte) error {
		var err error
		switch string(key) {
		case "offset":
			r.Offset, err = l.int(64)
		case "kind":
			var b []byte
			if b, err = l.rawString(d); err == nil {
				var ok bool
				if r.Kind, ok = parseRecordKind(b); !ok {
					return fmt.Errorf("unknown record kind %q (want registration, lease or work): %w", b, ErrMalformed)
				}
			}
		case "member":
			r.Member, err = l.str(d)
		case "role":
			r.Role, err = l.str(d)
		case "token":
			r.Token, err = d.token(l)
		case "write_id":
			r.WriteID, err = l.writeID(d)
		case "index":
			r.Index, err = recordCount(l, "a record's index")
		case "count":
			r.Count, err = recordCount(l, "a record's count")
		default:
			err = l.skip(d)
		}
		return err
	})
	if err == nil && r.Kind == 0 {
		err = fmt.Errorf("record without a kind: %w", ErrMalformed)
	}
	return err
}

// recordCount decodes a count of records, or an index among them: 0 to MaxRecords.
func recordCount(l *lexer, what string) (uint16, error) {
	v, err := l.int(64)
	if err == nil && (v < 0 || v > MaxRecords) {
		err = fmt.Errorf("%s %d: want 0 to %d: %w", what, v, MaxRecords, ErrMalformed)
	}
	return uint16(v), err
}

func isNumberByte(c byte) bool {
	return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}
