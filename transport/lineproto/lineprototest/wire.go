// Package lineprototest holds wire tests of exec-protocol adapters that run on more than one
// cluster: on kfake in transport/lineproto's tests and on Apache Kafka in cluster/local's. It
// records, and can hold, the Kafka frames between an adapter and its brokers, below the
// member's gateway (the member's Conn.Dial), so a test sees the order in which the client
// wrote its requests and read its answers on each connection, and what the broker answered.
package lineprototest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Event is one frame on a connection between an adapter and a broker, in the order the
// recorder saw them all (Seq).
type Event struct {
	Seq     int
	Conn    int  // the connection, numbered from 1 in the order they were dialed
	Answer  bool // a broker's answer (read by the client); otherwise a request the client wrote
	Key     int16
	Version int16
	Corr    int32
	Code    int16 // an answer's first error code (EndTxn's, or AddPartitionsToTxn's first partition's)
	// Held is a request the recorder held back and sent later (Wire.HoldNext); Sent is the
	// Seq at which it went to the broker.
	Held bool
	Sent int
}

func (e Event) String() string {
	if e.Key < 0 {
		return fmt.Sprintf("#%d conn %d the held requests go to the broker", e.Seq, e.Conn)
	}
	what := "request"
	if e.Answer {
		what = "answer"
	}
	s := fmt.Sprintf("#%d conn %d %s %s v%d corr %d", e.Seq, e.Conn, what, kmsg.NameForKey(e.Key), e.Version, e.Corr)
	if e.Answer {
		s += " " + codeName(e.Code)
	}
	if e.Held {
		s += fmt.Sprintf(" (held, sent to the broker at #%d)", e.Sent)
	}
	return s
}

func codeName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	if err := kerr.ErrorForCode(code); err != nil {
		var ke *kerr.Error
		if errors.As(err, &ke) {
			return ke.Message
		}
	}
	return fmt.Sprintf("error %d", code)
}

// Wire records the frames of every connection its Dial opens.
type Wire struct {
	mu     sync.Mutex
	conns  int
	events []Event
	hold   int16 // HoldNext's key; -1 none
	until  int16 // the request that releases the hold
	held   *wireConn
	saw    chan struct{} // closed and replaced at every event
}

// NewWire returns a recorder that holds nothing.
func NewWire() *Wire { return &Wire{hold: -1, until: -1, saw: make(chan struct{})} }

// Dial dials addr and records the connection's frames.
func (w *Wire) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	w.conns++
	id := w.conns
	w.mu.Unlock()
	return &wireConn{Conn: c, w: w, id: id, asked: map[int32]Event{}}, nil
}

// HoldNext holds the next request of key the client writes, and everything the client writes
// after it on that connection, until it writes a request of key until on that connection or
// Release is called; then it all goes to the broker in the order written. The client sees its
// writes succeed: to it the held request is sent and not yet answered.
func (w *Wire) HoldNext(key, until int16) {
	w.mu.Lock()
	w.hold, w.until = key, until
	w.mu.Unlock()
}

// Release sends what is held, if anything, and holds nothing more.
func (w *Wire) Release() {
	w.mu.Lock()
	w.hold, w.until = -1, -1
	c := w.held
	w.held = nil
	w.mu.Unlock()
	if c != nil {
		c.flush()
	}
}

// Events returns what was recorded so far.
func (w *Wire) Events() []Event {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Event(nil), w.events...)
}

// Await returns the first event that ok accepts, waiting for it until ctx ends.
func (w *Wire) Await(ctx context.Context, ok func(Event) bool) (Event, bool) {
	seen := 0
	for {
		w.mu.Lock()
		evs, saw := w.events[seen:], w.saw
		seen = len(w.events)
		for _, e := range evs {
			if ok(e) {
				w.mu.Unlock()
				return e, true
			}
		}
		w.mu.Unlock()
		select {
		case <-saw:
		case <-ctx.Done():
			return Event{}, false
		}
	}
}

func (w *Wire) record(e Event) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	e.Seq = len(w.events) + 1
	w.events = append(w.events, e)
	close(w.saw)
	w.saw = make(chan struct{})
	return e.Seq
}

func (w *Wire) markSent(seq, at int) {
	w.mu.Lock()
	w.events[seq-1].Sent = at
	w.mu.Unlock()
}

// Log is the recorded events, one a line, those of keys only (all when none given).
func (w *Wire) Log(keys ...int16) string { return logOf(w.Events(), keys) }

// Tail is w's log from the event after mark on, those of keys only.
func Tail(w *Wire, mark int, keys ...int16) string { return logOf(w.Events()[mark:], keys) }

// logOf is events one a line, those of keys only (all when none given); the marks of held
// requests sent (key -1) always.
func logOf(events []Event, keys []int16) string {
	var b strings.Builder
	for _, e := range events {
		if len(keys) > 0 && e.Key >= 0 && !slices.Contains(keys, e.Key) {
			continue
		}
		b.WriteString(e.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// wireConn is one recorded connection. The member's gateway writes whole frames, one a
// Write; the writes are parsed through a buffer all the same.
type wireConn struct {
	net.Conn
	w  *Wire
	id int

	wmu     sync.Mutex // the writes, and the hold
	wbuf    []byte
	pending []byte // held bytes, not yet sent
	heldSeq []int  // the held requests' events

	mu    sync.Mutex
	asked map[int32]Event // correlation id → request, until answered
	rbuf  []byte
}

func (c *wireConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.wbuf = append(c.wbuf, p...)
	for {
		n := frameLen(c.wbuf)
		if n < 0 {
			break
		}
		frame := c.wbuf[:n]
		c.wbuf = c.wbuf[n:]
		if err := c.writeFrame(frame); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// writeFrame records a request and sends it, or holds it; wmu is held.
func (c *wireConn) writeFrame(frame []byte) error {
	if len(frame) < 12 {
		return c.send(frame)
	}
	e := Event{Conn: c.id, Key: int16(binary.BigEndian.Uint16(frame[4:])), Version: int16(binary.BigEndian.Uint16(frame[6:])),
		Corr: int32(binary.BigEndian.Uint32(frame[8:]))}
	c.mu.Lock()
	c.asked[e.Corr] = e
	c.mu.Unlock()
	w := c.w
	w.mu.Lock()
	holding := w.held == c
	startHold := !holding && w.held == nil && w.hold == e.Key
	release := holding && e.Key == w.until
	if startHold {
		w.held, w.hold = c, -1
	}
	if release {
		w.held, w.hold, w.until = nil, -1, -1
	}
	w.mu.Unlock()
	if startHold || holding {
		e.Held = true
	}
	seq := w.record(e)
	if startHold || holding {
		c.pending = append(c.pending, frame...)
		c.heldSeq = append(c.heldSeq, seq)
		if release {
			return c.flushLocked()
		}
		return nil
	}
	return c.send(frame)
}

func (c *wireConn) send(frame []byte) error {
	_, err := c.Conn.Write(frame)
	return err
}

// flush sends the held bytes (Release).
func (c *wireConn) flush() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.flushLocked()
}

func (c *wireConn) flushLocked() error {
	if len(c.pending) == 0 {
		return nil
	}
	// One mark for the flush: every held request went to the broker at this point.
	at := c.w.record(Event{Conn: c.id, Key: -1, Corr: -1})
	for _, s := range c.heldSeq {
		c.w.markSent(s, at)
	}
	p := c.pending
	c.pending, c.heldSeq = nil, nil
	_, err := c.Conn.Write(p)
	return err
}

func (c *wireConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		c.rbuf = append(c.rbuf, p[:n]...)
		var answers []Event
		for {
			l := frameLen(c.rbuf)
			if l < 0 {
				break
			}
			frame := c.rbuf[:l]
			c.rbuf = c.rbuf[l:]
			if len(frame) < 8 {
				continue
			}
			corr := int32(binary.BigEndian.Uint32(frame[4:]))
			req, ok := c.asked[corr]
			if !ok {
				continue
			}
			delete(c.asked, corr)
			answers = append(answers, Event{Conn: c.id, Answer: true, Key: req.Key, Version: req.Version, Corr: corr,
				Code: answerCode(frame, req.Key, req.Version)})
		}
		c.mu.Unlock()
		for _, a := range answers {
			c.w.record(a)
		}
	}
	return n, err
}

// frameLen is the length of the first whole size-prefixed frame in b, size included, or -1.
func frameLen(b []byte) int {
	if len(b) < 4 {
		return -1
	}
	n := 4 + int(binary.BigEndian.Uint32(b))
	if n > len(b) {
		return -1
	}
	return n
}

// answerCode decodes an EndTxn or AddPartitionsToTxn answer's error code (the first
// partition's, for AddPartitionsToTxn); 0 for other keys or an answer it cannot read.
func answerCode(frame []byte, key, version int16) int16 {
	var resp kmsg.Response
	switch key {
	case int16(kmsg.EndTxn), int16(kmsg.AddPartitionsToTxn):
		resp = kmsg.ResponseForKey(key)
	default:
		return 0
	}
	resp.SetVersion(version)
	rd := kbin.Reader{Src: frame[8:]}
	if resp.IsFlexible() {
		kmsg.SkipTags(&rd) // the response header's tagged fields
	}
	if rd.Complete() != nil || resp.ReadFrom(rd.Src) != nil {
		return -1
	}
	switch r := resp.(type) {
	case *kmsg.EndTxnResponse:
		return r.ErrorCode
	case *kmsg.AddPartitionsToTxnResponse:
		if r.ErrorCode != 0 {
			return r.ErrorCode
		}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				return p.ErrorCode
			}
		}
		for _, tx := range r.Transactions {
			for _, t := range tx.Topics {
				for _, p := range t.Partitions {
					return p.ErrorCode
				}
			}
		}
	}
	return 0
}
