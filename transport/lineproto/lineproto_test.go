package lineproto_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/fencecheck/fencecheck/transport"
	"github.com/fencecheck/fencecheck/transport/lineproto"
	"github.com/fencecheck/fencecheck/transport/transporttest"
)

// adapterEnv makes this test binary an adapter: the harness side of the tests starts it
// again with the variable set, and it serves the protocol on stdin and stdout.
const adapterEnv = "FENCECHECK_LINEPROTO_TEST_ADAPTER"

func TestMain(m *testing.M) {
	switch os.Getenv(adapterEnv) {
	case "":
		os.Exit(m.Run())
	case "real":
		serve(lineproto.StartReal)
	case "slow-boot":
		time.Sleep(3 * time.Second) // a runtime that takes long to start, as a JVM under load does
		serve(lineproto.StartReal)
	case "hang-write":
		serve(func(ctx context.Context, cfg transport.Config) (lineproto.Subject, error) {
			t, err := transport.Start(ctx, cfg)
			if err != nil {
				return nil, err
			}
			return hangingWrites{t}, nil
		})
	}
	os.Exit(0)
}

func serve(start lineproto.SubjectStart) {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := lineproto.Serve(context.Background(), os.Stdin, os.Stdout, log, "test adapter", start); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// hangingWrites never answers a lease write: an adapter stuck in a call.
type hangingWrites struct{ *transport.BrokerTransport }

func (hangingWrites) WriteLease(ctx context.Context, _ transport.Role, _ transport.FencingToken, _ transport.Lease) error {
	select {} // until the harness kills the process
}

// start returns an Env.New that runs this binary as the adapter in mode.
func start(t testing.TB, mode string) func(ctx context.Context, cfg transport.Config) (transporttest.Transport, error) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return func(ctx context.Context, cfg transport.Config) (transporttest.Transport, error) {
		tr, err := lineproto.Start(ctx, []string{"env", adapterEnv + "=" + mode, self}, cfg)
		if err != nil {
			return nil, err
		}
		return tr, nil
	}
}

func newKfake(t testing.TB, opts ...kfake.Opt) string {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(3)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return strings.Join(c.ListenAddrs(), ",")
}

// countingDial counts the connections made through the process's links: the adapter must make
// every one of its connections through them.
type countingDial struct{ n atomic.Int64 }

func (c *countingDial) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c.n.Add(1)
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// TestConformanceThroughTheProtocol runs the conformance suite on fencecheck's own transport
// behind the protocol, in another process, on kfake.
func TestConformanceThroughTheProtocol(t *testing.T) {
	t.Run("TV2 negotiated", func(t *testing.T) {
		t.Parallel()
		// The suite's "links cut" test cuts the connections its dialer made: an adapter that
		// reached a broker around the gateway would write through the cut.
		var links countingDial
		transporttest.Run(t, transporttest.Env{Bootstrap: newKfake(t), Dial: links.dial, TransactionVersion: 2, New: start(t, "real")})
		if links.n.Load() == 0 {
			t.Fatal("no connection went through the links")
		}
	})
	t.Run("TV1 pinned by the client", func(t *testing.T) {
		t.Parallel()
		transporttest.Run(t, transporttest.Env{Bootstrap: newKfake(t), TransactionVersion: 1,
			PinTransactionVersion: true, New: start(t, "real")})
	})
}

// TestHungCallIsUnknownAndTheAdapterReplaced: a lease write the adapter never answers ends at
// the harness's bound as unknown; the adapter is killed and the next call runs on a new one,
// which holds nothing.
func TestHungCallIsUnknownAndTheAdapterReplaced(t *testing.T) {
	cfg := transport.NewConfig(newKfake(t), 10*time.Second)
	cfg.RequestTimeout = time.Second
	cfg.TopicPartitions = 1
	ctx := context.Background()
	tr, err := lineprotoStart(t, "hang-write", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close(ctx)
	pid := tr.Pid()
	tok, err := tr.AcquireEpoch(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	err = tr.WriteLease(ctx, "r", tok, transport.Lease{Holder: "m", Seq: 1, Duration: time.Second, WrittenAt: time.Now()})
	took := time.Since(began)
	if err == nil || transport.Classify(err) != transport.Unknown {
		t.Fatalf("hung write = %v (Classify %v), want an unknown outcome", err, transport.Classify(err))
	}
	if took > 3*time.Second {
		t.Errorf("hung write took %v; the bound is the request timeout %v plus a margin", took, cfg.RequestTimeout)
	}
	if tr.Restarts() != 1 {
		t.Fatalf("restarts = %d, want 1", tr.Restarts())
	}
	if _, held := tr.HeldToken("r"); held {
		t.Fatal("the replacement adapter reports a holding")
	}
	if tr.Pid() == pid || tr.Pid() == 0 {
		t.Fatalf("adapter pid %d after the restart, was %d", tr.Pid(), pid)
	}
	tok2, err := tr.AcquireEpoch(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if tok2.Compare(tok) <= 0 {
		t.Fatalf("token after the restart %v does not sort after %v", tok2, tok)
	}
}

// TestSlowBootIsNotAHang: an adapter that takes longer than a call's bound to boot still
// starts: hello and start have the startup bound, not a call's.
func TestSlowBootIsNotAHang(t *testing.T) {
	cfg := transport.NewConfig(newKfake(t), 10*time.Second)
	cfg.RequestTimeout = time.Second // a call's bound: 1 s plus a 1 s margin, under the 3 s boot
	tr, err := lineprotoStart(t, "slow-boot", cfg)
	if err != nil {
		t.Fatalf("an adapter that boots in 3 s did not start: %v", err)
	}
	defer tr.Close(context.Background())
	if _, err := tr.AcquireEpoch(context.Background(), "r"); err != nil {
		t.Fatal(err)
	}
}

func lineprotoStart(t *testing.T, mode string, cfg transport.Config) (*lineproto.Transport, error) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return lineproto.Start(context.Background(), []string{"env", adapterEnv + "=" + mode, self}, cfg)
}

// BenchmarkLeaseWrite measures the protocol's overhead on the lease-write rate: one holder
// renewing its lease as fast as it can, in-process and through the reference adapter, on kfake.
func BenchmarkLeaseWrite(b *testing.B) {
	bootstrap := newKfake(b)
	for _, via := range []string{"in-process", "exec"} {
		b.Run(via, func(b *testing.B) {
			cfg := transport.NewConfig(bootstrap, 10*time.Second)
			cfg.Topic = "bench-" + via
			cfg.TopicPartitions = 1
			ctx := context.Background()
			var tr transporttest.Transport
			var err error
			if via == "exec" {
				tr, err = start(b, "real")(ctx, cfg)
			} else {
				tr, err = transporttest.Start(ctx, cfg)
			}
			if err != nil {
				b.Fatal(err)
			}
			defer tr.Close(ctx)
			tok, err := tr.AcquireEpoch(ctx, "r")
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := range b.N {
				if err := tr.WriteLease(ctx, "r", tok, transport.Lease{Holder: "m", Seq: uint64(i), Duration: time.Second, WrittenAt: time.Now()}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
		})
	}
}
