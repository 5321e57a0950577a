package transport_test

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencecheck/fencecheck/transport"
)

// requestCounter counts the requests written on the connections it dials, by API key and by
// dialed address. kgo writes each request with one Write: a 4-byte size, then the request
// header, whose first two bytes are the API key.
type requestCounter struct {
	mu     sync.Mutex
	counts map[int16]int
	byAddr map[string]map[int16]int
}

func (c *requestCounter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: conn, c: c, addr: addr}, nil
}

func (c *requestCounter) snapshot() (map[int16]int, map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[int16]int, len(c.counts))
	for k, v := range c.counts {
		out[k] = v
	}
	lists := map[string]int{} // ListOffsets requests by address
	for addr, m := range c.byAddr {
		lists[addr] = m[2]
	}
	return out, lists
}

type countingConn struct {
	net.Conn
	c    *requestCounter
	addr string
}

func (cc *countingConn) Write(b []byte) (int, error) {
	if len(b) >= 6 {
		key := int16(binary.BigEndian.Uint16(b[4:6]))
		cc.c.mu.Lock()
		cc.c.counts[key]++
		if cc.c.byAddr[cc.addr] == nil {
			cc.c.byAddr[cc.addr] = map[int16]int{}
		}
		cc.c.byAddr[cc.addr][key]++
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
	counter := &requestCounter{counts: map[int16]int{}, byAddr: map[string]map[int16]int{}}
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
	before, listsBefore := counter.snapshot()
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
	after, listsAfter := counter.snapshot()
	metadata := after[metadataKey] - before[metadataKey]
	lists := after[listOffsetsKey] - before[listOffsetsKey]
	t.Logf("%d reads in %v: %d metadata requests, %d offset lookups", reads, took, metadata, lists)
	if lists != 2*reads {
		t.Errorf("%d reads sent %d ListOffsets requests, want %d (two per read, to the leader only)", reads, lists, 2*reads)
	}
	var asked []string
	for addr, n := range listsAfter {
		if n > listsBefore[addr] {
			asked = append(asked, addr)
		}
	}
	if len(asked) != 1 {
		t.Errorf("the reads' offset lookups went to %v, want the role partition's leader alone", asked)
	}
	// kgo refreshes its cache when it is older than MetadataMinAge (RequestTimeout/20), so
	// a few refreshes are allowed while the reads go on, not one per read.
	if allowed := 2 + int(took/(cfg.RequestTimeout/20)); metadata > allowed {
		t.Errorf("%d reads in %v sent %d metadata requests, want at most %d", reads, took, metadata, allowed)
	}
}

// TestWaitStableAsksAgainAfterARetriableError: a leader that has just taken over answers
// OFFSET_NOT_AVAILABLE until its high watermark catches up, and kgo hands that answer back
// rather than retrying it; WaitStable must ask again, and end only on an error that is not
// retriable.
func TestWaitStableAsksAgainAfterARetriableError(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cfg := transport.NewConfig(strings.Join(c.ListenAddrs(), ","), 10*time.Second)
	cfg.TopicPartitions = 1
	ctx := context.Background()
	tr, err := transport.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close(ctx)
	if _, err := tr.Register(ctx, "r", "m"); err != nil { // creates the topic
		t.Fatal(err)
	}
	topic := tr.Config().Topic

	// answer makes the next n ListOffsets answers carry code for every partition.
	answer := func(code int16, n int) *atomic.Int32 {
		var answered atomic.Int32
		c.ControlKey(int16(kmsg.ListOffsets), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
			c.KeepControl() // sticky: past n answers the function passes requests on unhandled
			if answered.Load() >= int32(n) {
				return nil, nil, false
			}
			answered.Add(1)
			req := kreq.(*kmsg.ListOffsetsRequest)
			resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
			for _, rt := range req.Topics {
				st := kmsg.NewListOffsetsResponseTopic()
				st.Topic = rt.Topic
				for _, rp := range rt.Partitions {
					sp := kmsg.NewListOffsetsResponseTopicPartition()
					sp.Partition, sp.ErrorCode, sp.Offset = rp.Partition, code, -1
					st.Partitions = append(st.Partitions, sp)
				}
				resp.Topics = append(resp.Topics, st)
			}
			return resp, nil, true
		})
		return &answered
	}

	answered := answer(kerr.OffsetNotAvailable.Code, 3)
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := tr.WaitStable(wctx, topic, 0); err != nil {
		t.Fatalf("WaitStable after %d OFFSET_NOT_AVAILABLE answers: %v, want nil", answered.Load(), err)
	}
	if n := answered.Load(); n != 3 {
		t.Fatalf("%d ListOffsets answered OFFSET_NOT_AVAILABLE, want 3 (WaitStable asked again until it knew)", n)
	}

	answer(kerr.TopicAuthorizationFailed.Code, 1)
	err = tr.WaitStable(wctx, topic, 0)
	if !errors.Is(err, transport.ErrClient) || !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("WaitStable after TOPIC_AUTHORIZATION_FAILED: %v, want that error at once", err)
	}
}
