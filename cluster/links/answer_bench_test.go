package links_test

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"slices"
	"testing"

	"github.com/fencecheck/fencecheck/cluster/links"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// kafkaServer answers every request frame with an EndTxn v4 response (a flexible one, with an
// error code of code) carrying the request's correlation id: a broker as small as the links'
// Kafka path needs, so a benchmark measures that path and not a broker.
func kafkaServer(t testing.TB, code int16) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	resp := kmsg.NewPtrEndTxnResponse()
	resp.SetVersion(4)
	resp.ErrorCode = code
	body := append([]byte{0}, resp.AppendTo(nil)...) // the flexible response header's tags
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var size [4]byte
				for {
					if _, err := io.ReadFull(c, size[:]); err != nil {
						return
					}
					req := make([]byte, binary.BigEndian.Uint32(size[:]))
					if _, err := io.ReadFull(c, req); err != nil || len(req) < 8 {
						return
					}
					out := binary.BigEndian.AppendUint32(nil, uint32(4+len(body)))
					out = append(out, req[4:8]...) // the correlation id
					out = append(out, body...)
					if _, err := c.Write(out); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// endTxnFrame is a whole EndTxn v4 request frame with correlation id corr.
func endTxnFrame(corr int32) []byte {
	req := kmsg.NewPtrEndTxnRequest()
	req.SetVersion(4)
	req.TransactionalID = "fencecheck.bench.r1"
	req.ProducerID, req.ProducerEpoch, req.Commit = 7, 1, true
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("p1")).AppendRequest(nil, req, corr)
}

// BenchmarkLinkKafkaRoundTrip is BenchmarkLinkRoundTrip with Kafka frames: one EndTxn request
// and its answer per round trip through a process's connection with no fault active, the
// path every request of a run takes. BenchmarkLinkRoundTrip's frames are not Kafka requests,
// so its connections pass bytes through untouched and never reach this path.
func BenchmarkLinkKafkaRoundTrip(b *testing.B) { benchLinkKafka(b, false) }

func benchKafkaRoundTrips(b *testing.B, ctx context.Context, dialer func(context.Context, int) (func(context.Context, string, string) (net.Conn, error), error), srv string) {
	dial, err := dialer(ctx, 1)
	if err != nil {
		b.Fatal(err)
	}
	conn, err := dial(ctx, "tcp", srv)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	frames := make([][]byte, 64)
	for i := range frames {
		frames[i] = endTxnFrame(int32(i))
	}
	got := make([]byte, 64)
	b.ResetTimer()
	for i := range b.N {
		if _, err := conn.Write(frames[i%len(frames)]); err != nil {
			b.Fatal(err)
		}
		var size [4]byte
		if _, err := io.ReadFull(conn, size[:]); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(conn, got[:binary.BigEndian.Uint32(size[:])]); err != nil {
			b.Fatal(err)
		}
	}
}

// roundTrips sends n EndTxn requests through conn and reads their answers.
func roundTrips(t testing.TB, conn net.Conn, n int) {
	t.Helper()
	for i := range n {
		if _, err := conn.Write(endTxnFrame(int32(i))); err != nil {
			t.Fatal(err)
		}
		var size [4]byte
		if _, err := io.ReadFull(conn, size[:]); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(conn, make([]byte, binary.BigEndian.Uint32(size[:]))); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAnswersObserved: with ObserveAnswers, the links record each (request type, error code)
// pair a process was answered with, a code an error-response fault put in the answer
// included, in both link modes; without it they record nothing.
func TestAnswersObserved(t *testing.T) {
	ctx := context.Background()
	srv := kafkaServer(t, 15) // COORDINATOR_NOT_AVAILABLE
	for _, mode := range []string{"proxy", "conn"} {
		t.Run(mode, func(t *testing.T) {
			n := newNetwork(t, srv)
			if mode == "conn" {
				n = newConnNetwork(t, srv)
			}
			dial, err := n.Dialer(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			conn, err := dial(ctx, "tcp", srv)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			roundTrips(t, conn, 3)
			if got := n.Answers(); len(got) != 0 {
				t.Fatalf("answers observed before ObserveAnswers: %v", got)
			}
			n.ObserveAnswers()
			roundTrips(t, conn, 3)
			want := []links.Answer{{API: "endtxn", Error: "COORDINATOR_NOT_AVAILABLE"}}
			if got := n.Answers(); !slices.Equal(got, want) {
				t.Fatalf("answers %v, want %v", got, want)
			}
			f, err := n.AddKafkaFault(links.KafkaFaultSpec{Action: links.KafkaErrorResponse, API: "endtxn", ErrorCode: 51, Count: 1})
			if err != nil {
				t.Fatal(err)
			}
			roundTrips(t, conn, 2)
			if err := f.Remove(ctx); err != nil {
				t.Fatal(err)
			}
			want = append(want, links.Answer{API: "endtxn", Error: "CONCURRENT_TRANSACTIONS"})
			if got := n.Answers(); !slices.Equal(got, want) {
				t.Fatalf("answers %v, want %v (the injected error is what the client saw)", got, want)
			}
		})
	}
}

// BenchmarkLinkKafkaRoundTripObserved is BenchmarkLinkKafkaRoundTrip with the answers
// observed (Network.ObserveAnswers), what `fencecheck explore` pays per request.
func BenchmarkLinkKafkaRoundTripObserved(b *testing.B) { benchLinkKafka(b, true) }

// benchLinkKafka runs the Kafka round trips through a proxy link and a conn link, with the
// answers observed or not.
func benchLinkKafka(b *testing.B, observe bool) {
	ctx := context.Background()
	srv := kafkaServer(b, 0)
	for _, c := range []struct {
		name string
		conn bool
	}{{"proxy", false}, {"conn", true}} {
		b.Run(c.name, func(b *testing.B) {
			n := newNetwork(b, srv)
			if c.conn {
				n = newConnNetwork(b, srv)
			}
			if observe {
				n.ObserveAnswers()
			}
			benchKafkaRoundTrips(b, ctx, n.Dialer, srv)
		})
	}
}
