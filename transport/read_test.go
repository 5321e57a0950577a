package transport_test

import (
	"context"
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/transport"
)

// requestCounter counts the requests written on the connections it dials, by API key. kgo
// writes each request with one Write: a 4-byte size, then the request header, whose first
// two bytes are the API key.
type requestCounter struct {
	mu     sync.Mutex
	counts map[int16]int
}

func (c *requestCounter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: conn, c: c}, nil
}

func (c *requestCounter) snapshot() map[int16]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[int16]int, len(c.counts))
	for k, v := range c.counts {
		out[k] = v
	}
	return out
}

type countingConn struct {
	net.Conn
	c *requestCounter
}

func (cc *countingConn) Write(b []byte) (int, error) {
	if len(b) >= 6 {
		key := int16(binary.BigEndian.Uint16(b[4:6]))
		cc.c.mu.Lock()
		cc.c.counts[key]++
		cc.c.mu.Unlock()
	}
	return cc.Conn.Write(b)
}

// TestReadAsksOnlyTheRolesLeader checks what a read costs the brokers: two offset lookups
// (log start, last stable offset) sent to the role partition's leader alone, and metadata
// from the client's cache. A fleet's members each read their role every few seconds; reads
// that listed the offsets of every partition of the topic sent three times the lookups on a
// three-broker cluster (this test: 120 for 20 reads).
func TestReadAsksOnlyTheRolesLeader(t *testing.T) {
	const (
		metadataKey    = 3
		listOffsetsKey = 2
		reads          = 20
	)
	counter := &requestCounter{counts: map[int16]int{}}
	cfg := transport.NewConfig(newKfake(t), 10*time.Second)
	cfg.Dial = counter.dial
	ctx := context.Background()
	tr, err := transport.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close(ctx)
	if _, err := tr.Register(ctx, "r", "m"); err != nil {
		t.Fatal(err)
	}
	tok, err := tr.AcquireEpoch(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.WriteLease(ctx, "r", tok, transport.Lease{Holder: "m", Seq: 1, Duration: time.Second, WrittenAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.ReadRoleRecords(ctx, "r"); err != nil { // warms the metadata cache
		t.Fatal(err)
	}
	before := counter.snapshot()
	start := time.Now()
	for range reads {
		rr, err := tr.ReadRoleRecords(ctx, "r")
		if err != nil {
			t.Fatal(err)
		}
		if len(rr.Registrations) != 1 || len(rr.Leases) != 1 {
			t.Fatalf("read %d registrations and %d leases, want 1 and 1", len(rr.Registrations), len(rr.Leases))
		}
	}
	took := time.Since(start)
	after := counter.snapshot()
	metadata := after[metadataKey] - before[metadataKey]
	lists := after[listOffsetsKey] - before[listOffsetsKey]
	t.Logf("%d reads in %v: %d metadata requests, %d offset lookups", reads, took, metadata, lists)
	if lists != 2*reads {
		t.Errorf("%d reads sent %d ListOffsets requests, want %d (two per read, to the leader only)", reads, lists, 2*reads)
	}
	// kgo refreshes its cache when it is older than MetadataMinAge (RequestTimeout/20), so
	// a few refreshes are allowed while the reads go on, not one per read.
	if allowed := 2 + int(took/(cfg.RequestTimeout/20)); metadata > allowed {
		t.Errorf("%d reads in %v sent %d metadata requests, want at most %d", reads, took, metadata, allowed)
	}
}
