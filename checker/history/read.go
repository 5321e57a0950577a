package history

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
)

// LineError is a decoding error at one line of a history file. It wraps ErrMalformed or
// ErrFormat.
type LineError struct {
	Line int // 1-based
	Err  error
}

// Error formats the error as "line N: cause".
func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }

// Unwrap returns the underlying error.
func (e *LineError) Unwrap() error { return e.Err }

// ReadFile reads the history file at path (see Read).
func ReadFile(path string) (*History, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read history: %w", err)
	}
	defer f.Close()
	h, err := Read(f)
	if err != nil {
		return nil, fmt.Errorf("read history %s: %w", path, err)
	}
	return h, nil
}

// Read decodes a history from r. A last line cut short without its newline (the run was
// killed while writing it) is skipped and reported in History.Truncated. Any other line that
// does not decode, and any event sequence the Builder rejects, is an error: a *LineError that
// wraps ErrMalformed (or ErrFormat for a newer format). Blank lines are ignored.
//
// Lines are decoded in parallel (up to GOMAXPROCS goroutines, in chunks of whole lines) and
// joined in file order. When r can seek (a file), Read first counts its lines, a fast pass,
// so that the operations are allocated once at their exact size: growing a slice of a million
// operations copies it several times, and reserving too much inflates the heap the garbage
// collector works with. The same pass measures the longest line, so that a chunk that meets
// it grows once to hold it (see split).
func Read(r io.Reader) (*History, error) {
	hint, longest := 0, 0
	if rs, ok := r.(io.ReadSeeker); ok {
		if start, err := rs.Seek(0, io.SeekCurrent); err == nil {
			var lines int
			if ra, ok := r.(io.ReaderAt); ok {
				lines, longest, err = countLinesAt(ra, start, rs)
			} else {
				lines, longest, err = countLines(rs)
			}
			if err != nil {
				return nil, err
			}
			if _, err := rs.Seek(start, io.SeekStart); err != nil {
				return nil, err
			}
			hint = lines/2 + 1 // an invoke and (unless pending) a completion line per operation
		}
	}
	return read(r, hint, longest)
}

const chunkSize = 256 << 10

// countLines returns the number of lines in r and the length of the longest: exact when it is
// longer than chunkSize, at most chunkSize otherwise (only the lines that span reads are
// measured).
func countLines(r io.Reader) (lines, longest int, err error) {
	s, err := scanLines(r.Read)
	if err != nil {
		return 0, 0, err
	}
	return s.result()
}

// countLinesAt is countLines over the rest of a file from start (rs's end is its end), its two
// halves scanned on two goroutines with ReadAt: a serial pass over a large history before any
// line is decoded, it took 60-70 ms of the 1M-operation benchmark file's read of about 0.5 s.
func countLinesAt(ra io.ReaderAt, start int64, rs io.Seeker) (lines, longest int, err error) {
	end, err := rs.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, 0, err
	}
	mid := start + (end-start)/2
	var second lineSpan
	var secondErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		second, secondErr = scanLines(sectionReader(ra, mid, end))
	}()
	first, err := scanLines(sectionReader(ra, start, mid))
	<-done
	if err != nil {
		return 0, 0, err
	}
	if secondErr != nil {
		return 0, 0, secondErr
	}
	return first.join(second).result()
}

// sectionReader returns a read function over ra's bytes from off to end, which ends in io.EOF.
func sectionReader(ra io.ReaderAt, off, end int64) func([]byte) (int, error) {
	return func(b []byte) (int, error) {
		if off >= end {
			return 0, io.EOF
		}
		b = b[:min(int64(len(b)), end-off)]
		n, err := ra.ReadAt(b, off)
		off += int64(n)
		if errors.Is(err, io.EOF) || (err == nil && off >= end) {
			return n, io.EOF
		}
		return n, err
	}
}

// lineSpan is what scanLines found in a stretch of bytes: its length, its newlines, the bytes
// before its first newline and after its last (all of it when it holds none), and the longest
// line that starts after one of its newlines and ends at another, measured only where the line
// spans reads (as countLines measures).
type lineSpan struct {
	size, newlines, head, tail, longest int
}

// scanLines reads with read until io.EOF, a chunk at a time.
func scanLines(read func([]byte) (int, error)) (lineSpan, error) {
	buf := make([]byte, chunkSize)
	var s lineSpan
	run := 0 // the length of the line the reads so far end in
	for {
		m, err := read(buf)
		b := buf[:m]
		s.size += m
		if first := bytes.IndexByte(b, '\n'); first < 0 {
			run += m
		} else {
			if s.newlines == 0 {
				s.head = run + first
			} else {
				s.longest = max(s.longest, run+first)
			}
			s.newlines += bytes.Count(b, []byte{'\n'})
			run = m - bytes.LastIndexByte(b, '\n') - 1
		}
		if errors.Is(err, io.EOF) {
			if s.newlines == 0 {
				s.head = run
			}
			s.tail = run
			return s, nil
		}
		if err != nil {
			return lineSpan{}, err
		}
	}
}

// join is the span of a followed by b: the line a ends in continues into b.
func (a lineSpan) join(b lineSpan) lineSpan {
	switch {
	case a.newlines == 0 && b.newlines == 0:
		n := a.size + b.size
		return lineSpan{size: n, head: n, tail: n}
	case a.newlines == 0:
		b.size += a.size
		b.head += a.size
		return b
	case b.newlines == 0:
		a.size += b.size
		a.tail += b.size
		return a
	}
	return lineSpan{size: a.size + b.size, newlines: a.newlines + b.newlines, head: a.head, tail: b.tail,
		longest: max(a.longest, b.longest, a.tail+b.head)}
}

// result is countLines' answer for a whole input that is s: a line more than its newlines (the
// last, perhaps empty, after the last newline), the first and last lines measured too.
func (s lineSpan) result() (lines, longest int, err error) {
	return s.newlines + 1, max(s.longest, s.head, s.tail), nil
}

// chunk is a run of whole lines, decoded by one worker.
type chunk struct {
	data      []byte
	firstLine int  // number of the chunk's first line
	eof       bool // the input ends with this chunk (its last line may lack the newline)

	events    []Event
	records   []Record // the records of the chunk's reads, which the Builder copies
	lines     []int    // line number of each event
	err       error    // a *LineError that stops the read
	truncated int      // line number of a cut-short last line that was skipped
	done      chan struct{}
}

// readHook, when set (by tests), sees the Builder of every read that succeeds.
var readHook func(*Builder)

func read(r io.Reader, hint, longest int) (*History, error) {
	defer pauseGC()()
	workers := max(1, min(runtime.GOMAXPROCS(0), 4))
	// On an early return, quit stops the reader; the workers then run out of work. Nothing
	// waits for them: the reader may be blocked in r.Read.
	quit := make(chan struct{})
	defer close(quit)
	// ordered carries every chunk in input order; work hands them to the workers. Its capacity
	// bounds the memory in flight.
	ordered := make(chan *chunk, 2*workers)
	work := make(chan *chunk, 2*workers)
	// free holds the chunks not in use. There are a fixed number, and each comes back when
	// the Builder is done with it: their buffers are allocated once, not once a chunk (with
	// the collector paused, every fresh buffer would be fresh memory to fault in).
	free := make(chan *chunk, 3*workers)
	for range cap(free) {
		free <- &chunk{}
	}
	var readErr error
	go func() {
		defer close(work)
		defer close(ordered)
		readErr = split(r, longest, quit, free, func(c *chunk) bool {
			select {
			case ordered <- c:
			case <-quit:
				return false
			}
			select {
			case work <- c:
				return true
			case <-quit:
				return false
			}
		})
	}()
	for range workers {
		go func() {
			d := decoder{intern: make(map[string]string, 256), ids: new([idSlots]strSlot), strs: new([strSlots]strSlot), repeats: true}
			for c := range work {
				d.decodeChunk(c)
				close(c.done)
			}
		}()
	}

	b := NewBuilder(hint)
	for c := range ordered {
		<-c.done
		// The lines before the one that stopped the worker, if one did, come first: the
		// Builder may find one of them wrong.
		for i := range c.events {
			if err := b.Add(&c.events[i]); err != nil {
				return nil, &LineError{Line: c.lines[i], Err: err}
			}
		}
		if c.err != nil {
			return nil, c.err
		}
		if c.truncated > 0 {
			h := b.History()
			h.Truncated, h.TruncatedLine = true, c.truncated
		}
		free <- c
	}
	if readErr != nil {
		return nil, readErr
	}
	if !b.sawHeader {
		return nil, fmt.Errorf("no header line: %w", ErrMalformed)
	}
	if readHook != nil {
		readHook(b)
	}
	return b.History(), nil
}

// gcPause turns the garbage collector off while histories are read. Nearly all that a read
// allocates stays live (the operations and their records), so a collection during it frees
// little and costs a mark of the whole growing history, and in a fresh process the faults of
// pages it had freed: on the 1M-operation benchmark history `checkbench check` read in
// 1.23-1.30 s with the collector on and 0.82-0.90 s with it paused, and its peak RSS fell from
// 589 to 568 MB. The first read to start turns it off, the last to end restores it; a memory
// limit (GOMEMLIMIT) still holds. The pause is the whole process's: what other goroutines
// allocate meanwhile waits for the next collection too, which in fencecheck is at most a
// read's length (0.9 s for a million operations, 11 s for ten million).
var gcPause struct {
	sync.Mutex
	reads   int
	percent int
}

// pauseGC turns the collector off until the function it returns is called.
func pauseGC() (resume func()) {
	gcPause.Lock()
	if gcPause.reads == 0 {
		gcPause.percent = debug.SetGCPercent(-1)
	}
	gcPause.reads++
	gcPause.Unlock()
	return func() {
		gcPause.Lock()
		if gcPause.reads--; gcPause.reads == 0 {
			debug.SetGCPercent(gcPause.percent)
		}
		gcPause.Unlock()
	}
}

// split reads r into chunks of whole lines, taken from free, and passes them to emit in
// order, until emit returns false, quit closes or r ends. longest, when not 0, is the length
// of r's longest line (see countLines).
func split(r io.Reader, longest int, quit <-chan struct{}, free <-chan *chunk, emit func(*chunk) bool) error {
	line := 1
	var carry []byte // the start of a line the previous chunk could not finish
	for {
		var c *chunk
		select {
		case c = <-free:
		case <-quit:
			return nil
		}
		clear(c.records) // drop the strings a recycled arena would keep alive
		*c = chunk{data: c.data[:0], events: c.events[:0], records: c.records[:0], lines: c.lines[:0], firstLine: line, done: make(chan struct{})}
		buf := append(c.data, carry...)
		var err error
		newline := false // whether buf holds the end of a line
		for {
			if cap(buf)-len(buf) < chunkSize/2 {
				// Double: a line longer than a chunk (a read of a large log) would otherwise
				// be copied over and over as it grows.
				n := max(chunkSize, len(buf))
				if !newline && len(buf) >= chunkSize/2 {
					// The chunk is one long line so far: room for the longest at once. A
					// pipeline history's final read of the output is one line of 100 MB at a
					// million operations; doubling up to it allocated 250 MB.
					n = max(n, longest+chunkSize/2-len(buf))
				}
				buf = slices.Grow(buf, n)
			}
			n, rerr := r.Read(buf[len(buf):cap(buf)])
			newline = newline || bytes.IndexByte(buf[len(buf):len(buf)+n], '\n') >= 0
			buf = buf[:len(buf)+n]
			if rerr != nil {
				err = rerr
				break
			}
			if len(buf) >= chunkSize && newline {
				break
			}
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("line %d: %w", line, err)
		}
		if err == nil {
			end := bytes.LastIndexByte(buf, '\n') + 1
			carry = append(carry[:0], buf[end:]...)
			buf = buf[:end]
		} else {
			c.eof = true
		}
		c.data = buf
		line += bytes.Count(buf, []byte{'\n'})
		select {
		case <-quit:
			return nil
		default:
		}
		if !emit(c) || c.eof {
			return nil
		}
	}
}

// decodeChunk decodes every line of c into c.events, and the records of reads into
// c.records.
func (d *decoder) decodeChunk(c *chunk) {
	d.arena = &c.records
	defer func() { d.arena = nil }()
	data, line := c.data, c.firstLine
	for len(data) > 0 {
		nl := bytes.IndexByte(data, '\n')
		text := data
		if nl >= 0 {
			text, data = data[:nl], data[nl+1:]
		} else {
			data = nil
		}
		if body := bytes.TrimSpace(text); len(body) > 0 {
			if len(c.events) == cap(c.events) {
				c.events = append(c.events, Event{})
			} else {
				c.events = c.events[:len(c.events)+1]
				c.events[len(c.events)-1] = Event{}
			}
			if err := d.decodeLine(body, &c.events[len(c.events)-1]); err != nil {
				c.events = c.events[:len(c.events)-1]
				if nl < 0 && c.eof && errors.Is(err, errSyntax) {
					// The run was killed while writing this line. Only a syntax error can
					// come of a cut: a complete line naming, say, an unknown event type is
					// malformed wherever it is.
					c.truncated = line
				} else {
					c.err = &LineError{Line: line, Err: err}
				}
				return
			}
			c.lines = append(c.lines, line)
		}
		line++
	}
}
