package transport_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/transport"
)

func benchTransport(b *testing.B) *transport.BrokerTransport {
	b.Helper()
	cfg := transport.NewConfig(newKfake(b), 30*time.Second)
	tr, err := transport.Start(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { tr.Close(context.Background()) })
	return tr
}

// BenchmarkAcquireEpoch: one InitProducerId on a fresh producer per op, the previous one
// closed, against a 3-broker kfake.
func BenchmarkAcquireEpoch(b *testing.B) {
	tr := benchTransport(b)
	ctx := context.Background()
	for b.Loop() {
		if _, err := tr.AcquireEpoch(ctx, "bench"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWriteLease: one committed transaction of one lease record per op.
func BenchmarkWriteLease(b *testing.B) {
	tr := benchTransport(b)
	ctx := context.Background()
	tok, err := tr.AcquireEpoch(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	var seq uint64
	for b.Loop() {
		seq++
		if err := tr.WriteLease(ctx, "bench", tok, transport.Lease{Holder: "m", Seq: seq, Duration: time.Second, WrittenAt: time.Now()}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadRoleRecords: a full committed scan of a role partition holding n leases.
func BenchmarkReadRoleRecords(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("leases=%d", n), func(b *testing.B) {
			tr := benchTransport(b)
			ctx := context.Background()
			tok, err := tr.AcquireEpoch(ctx, "bench")
			if err != nil {
				b.Fatal(err)
			}
			for i := range n {
				if err := tr.WriteLease(ctx, "bench", tok, transport.Lease{Holder: "m", Seq: uint64(i), Duration: time.Second}); err != nil {
					b.Fatal(err)
				}
			}
			for b.Loop() {
				rr, err := tr.ReadRoleRecords(ctx, "bench")
				if err != nil {
					b.Fatal(err)
				}
				if len(rr.Leases) != n {
					b.Fatalf("read %d leases, want %d", len(rr.Leases), n)
				}
			}
		})
	}
}

// BenchmarkDescribe: one Describe of a held role per op, against a 3-broker kfake.
func BenchmarkDescribe(b *testing.B) {
	tr := benchTransport(b)
	ctx := context.Background()
	if _, err := tr.AcquireEpoch(ctx, "bench"); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, held, err := tr.Describe(ctx, "bench"); err != nil || !held {
			b.Fatalf("describe: held %v, %v", held, err)
		}
	}
}
