package main

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// silentBroker accepts connections and never answers, recording when each was accepted: a
// coordinator that cannot be reached in time.
type silentBroker struct {
	l  net.Listener
	mu sync.Mutex
	at []time.Time
}

func newSilentBroker(t *testing.T) *silentBroker {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &silentBroker{l: l}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			b.mu.Lock()
			b.at = append(b.at, time.Now())
			b.mu.Unlock()
			go func() { _, _ = io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	return b
}

// since counts the connections accepted after t.
func (b *silentBroker) since(t time.Time) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, at := range b.at {
		if at.After(t) {
			n++
		}
	}
	return n
}

// TestTimedOutAcquireStopsItsRetries: an acquire that gets no answer within the request
// timeout is answered unknown, and its producer's transaction manager sends nothing after
// that. Before, the client was left retrying InitProducerId (Transaction.Retry) for minutes:
// each retry a new mint that would fence the role's next holder, and whose answer the
// harness's gateway would take for the next acquire's token.
func TestTimedOutAcquireStopsItsRetries(t *testing.T) {
	b := newSilentBroker(t)
	a := newAdapter(io.Discard)
	a.cfg = &config{Bootstrap: b.l.Addr().String(), ClientID: "test", Topic: "t", LeaseMS: 2000, RequestTimeoutMS: 300}
	a.addrs, a.rt, a.lease = []string{b.l.Addr().String()}, 300*time.Millisecond, 2*time.Second
	err := a.acquire("r")
	answered := time.Now()
	if err == nil || !err.unknown {
		t.Fatalf("acquire against a silent broker = %+v, want an unknown outcome", err)
	}
	if b.since(time.Time{}) == 0 {
		t.Fatal("the acquire never reached the broker")
	}
	// Sarama's retries come every 100 ms plus a read timeout of 300 ms each, for minutes: in
	// the two seconds after the answer they would open several connections. One may still
	// land, a dial already in flight when the answer came (on a loaded machine the accept
	// loop can see it late); a second shows the retries go on. Watching for an absence
	// takes a window; its length only sets how many retries a broken adapter shows.
	time.Sleep(2 * time.Second)
	if n := b.since(answered); n > 1 {
		t.Fatalf("%d connections to the broker after the acquire was answered: its retries go on", n)
	}
}
