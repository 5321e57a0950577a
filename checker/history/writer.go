package history

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"time"
)

// ErrClosed is returned by a Writer's methods after Close.
var ErrClosed = errors.New("history writer closed")

// WriterOptions configure a Writer. The zero value is usable.
type WriterOptions struct {
	// BufferSize is the size of the write buffer. Zero means 256 KiB.
	BufferSize int
	// FlushInterval, when positive, makes a background goroutine flush the buffer that often,
	// so a killed run loses at most that much of its history. Zero (the default) flushes only
	// when the buffer fills and on Flush, Sync and Close.
	FlushInterval time.Duration
}

// Writer appends events to a history, one line each. It is safe for concurrent use: events
// are encoded outside the lock (without reflection) and the lock only covers the copy into the
// buffer, so many recording goroutines do not serialize on encoding. The first error sticks:
// every later call returns it.
type Writer struct {
	mu     sync.Mutex
	bw     *bufio.Writer
	dst    io.Writer
	owned  io.Closer // closed by Close when the writer opened it
	err    error
	closed bool

	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// NewWriter returns a Writer that appends to dst. It does not write the header: call
// WriteHeader first. Close flushes but does not close dst.
func NewWriter(dst io.Writer, opts WriterOptions) *Writer {
	size := opts.BufferSize
	if size <= 0 {
		size = 256 << 10
	}
	w := &Writer{bw: bufio.NewWriterSize(dst, size), dst: dst}
	if opts.FlushInterval > 0 {
		w.stop, w.done = make(chan struct{}), make(chan struct{})
		go w.flushLoop(opts.FlushInterval)
	}
	return w
}

// Create creates the history file at path (it must not exist), writes the header with meta
// and flushes it, and returns a Writer that owns the file: Close closes it.
func Create(path string, meta Meta, opts WriterOptions) (*Writer, error) {
	w, err := Open(path, opts)
	if err != nil {
		return nil, err
	}
	if err := w.WriteHeader(meta); err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("create history %s: %w", path, err)
	}
	if err := w.Flush(); err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("create history %s: %w", path, err)
	}
	return w, nil
}

// Open creates the history file at path (it must not exist) and returns a Writer that owns
// it, with nothing written: the caller writes the header first (WriteHeader), once it knows
// the run's metadata. Close closes the file.
func Open(path string, opts WriterOptions) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create history: %w", err)
	}
	w := NewWriter(f, opts)
	w.owned = f
	return w, nil
}

// WriteHeader appends the header line with meta and the format it needs (FormatOf).
func (w *Writer) WriteHeader(meta Meta) error {
	return w.Append(Event{Type: TypeHeader, Format: FormatOf(&meta), Meta: &meta})
}

// Append encodes e and appends it as one line. It does not check the event sequence (the
// reader does); it rejects an event whose type or operation kind is unknown.
func (w *Writer) Append(e Event) error {
	bp := bufPool.Get().(*[]byte)
	buf, err := appendEvent((*bp)[:0], &e)
	if err == nil {
		buf = append(buf, '\n')
		w.mu.Lock()
		switch {
		case w.closed:
			err = ErrClosed
		case w.err != nil:
			err = w.err
		default:
			if _, werr := w.bw.Write(buf); werr != nil {
				w.err = fmt.Errorf("append history: %w", werr)
				err = w.err
			}
		}
		w.mu.Unlock()
	}
	if cap(buf) <= 64<<10 {
		*bp = buf
		bufPool.Put(bp)
	}
	return err
}

// Flush writes the buffered lines to the destination.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.flushLocked()
}

func (w *Writer) flushLocked() error {
	if w.closed {
		return ErrClosed
	}
	if w.err != nil {
		return w.err
	}
	if err := w.bw.Flush(); err != nil {
		w.err = fmt.Errorf("flush history: %w", err)
	}
	return w.err
}

// Sync flushes and then, when the destination has a Sync method (an *os.File), commits it to
// stable storage.
func (w *Writer) Sync() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.flushLocked(); err != nil {
		return err
	}
	if s, ok := w.dst.(interface{ Sync() error }); ok {
		if err := s.Sync(); err != nil {
			w.err = fmt.Errorf("sync history: %w", err)
			return w.err
		}
	}
	return nil
}

// Close stops the background flusher, flushes, and closes the file if Create opened it.
// Later calls return ErrClosed.
func (w *Writer) Close() error {
	if w.stop != nil {
		w.stopOnce.Do(func() {
			close(w.stop)
			<-w.done
		})
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	err := w.err
	if err == nil {
		if ferr := w.bw.Flush(); ferr != nil {
			err = fmt.Errorf("flush history: %w", ferr)
		}
	}
	w.closed = true
	if w.owned != nil {
		if cerr := w.owned.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close history: %w", cerr)
		}
	}
	return err
}

func (w *Writer) flushLoop(every time.Duration) {
	defer close(w.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
			w.mu.Lock()
			if !w.closed && w.err == nil && w.bw.Buffered() > 0 {
				_ = w.flushLocked()
			}
			w.mu.Unlock()
		}
	}
}

// Encode writes h as a history file: the header, then every invoke, completion and fault
// event in time order (an invoke before its own completion). Pending operations get no
// completion and open windows no end, so Read gives back an equal History (except Truncated).
func Encode(dst io.Writer, h *History) error {
	type ev struct {
		time  int64
		phase uint8 // 0 start, 1 end: an operation's invoke sorts before its completion
		fault bool
		i     int32
	}
	evs := make([]ev, 0, 2*h.Len()+2*len(h.Faults))
	for i, op := range h.All() {
		evs = append(evs, ev{time: op.Invoke, i: int32(i)})
		if !op.Pending {
			evs = append(evs, ev{time: max(op.Return, op.Invoke), phase: 1, i: int32(i)})
		}
	}
	for i := range h.Faults {
		f := &h.Faults[i]
		evs = append(evs, ev{time: f.Start, fault: true, i: int32(i)})
		if f.End != Never {
			evs = append(evs, ev{time: max(f.End, f.Start), phase: 1, fault: true, i: int32(i)})
		}
	}
	slices.SortStableFunc(evs, func(a, b ev) int {
		if a.time != b.time {
			if a.time < b.time {
				return -1
			}
			return 1
		}
		return int(a.phase) - int(b.phase)
	})
	w := NewWriter(dst, WriterOptions{})
	format := h.Format
	if format == 0 {
		format = FormatOf(&h.Meta)
	}
	meta := h.Meta
	if err := w.Append(Event{Type: TypeHeader, Format: format, Meta: &meta}); err != nil {
		return err
	}
	for _, x := range evs {
		var e Event
		switch {
		case x.fault && x.phase == 0:
			f := &h.Faults[x.i]
			e = Event{Type: TypeFaultStart, Time: f.Start, Fault: f.ID, Kind: f.Kind, Targets: f.Targets,
				Desc: f.Desc, Process: f.Process, Role: f.Role, Member: f.Member, Step: f.Step, Spec: f.Spec}
		case x.fault:
			f := &h.Faults[x.i]
			e = Event{Type: TypeFaultEnd, Time: f.End, Fault: f.ID, TookHold: f.TookHold}
		case x.phase == 0:
			op := h.Op(int(x.i))
			e = Event{Type: TypeInvoke, Time: op.Invoke, ID: op.ID, Client: op.Client, Process: op.Process,
				Member: op.Member, Role: op.Role, Kind: op.Kind, Args: op.Args}
		default:
			op := h.Op(int(x.i))
			e = Event{Type: op.Type, Time: op.Return, ID: op.ID, Result: op.Result, Error: op.Error, Message: op.Message}
		}
		if err := w.Append(e); err != nil {
			return err
		}
	}
	return w.Close()
}
