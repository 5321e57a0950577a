package links_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/cluster/links"
)

func newConnNetwork(t testing.TB, brokers ...string) *links.Network {
	n, err := links.NewNetwork(context.Background(), links.NetworkOptions{ProcessLinks: links.LinkModeConn})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close(context.Background()) })
	for i, b := range brokers {
		if err := n.AddBroker(int32(i+1), b, b); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

// TestConnLinks shows a process link built inside the process's connections: no proxy,
// refused while down (open connections cut), toxics acting on new and open connections,
// healed by HealAll.
func TestConnLinks(t *testing.T) {
	ctx := context.Background()
	b1 := echoServer(t)
	n := newConnNetwork(t, b1)
	dial, err := n.Dialer(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	l := n.ProcessLink(3, 1)
	if l == nil || l.Mode() != links.LinkModeConn || len(l.Proxies()) != 0 {
		t.Fatalf("link p3→b1 = %v, want a conn link without proxies", l)
	}
	if err := roundTrip(ctx, dial, b1); err != nil {
		t.Fatalf("round trip over a healthy link: %v", err)
	}

	open, err := dial(ctx, "tcp", b1)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if err := l.Disable(ctx); err != nil {
		t.Fatal(err)
	}
	if err := roundTrip(ctx, dial, b1); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial over a down link: %v, want connection refused", err)
	}
	_ = open.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := open.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("read on a connection open when the link went down: %v, want it closed", err)
	}
	if up, _ := l.Enabled(ctx); up {
		t.Fatal("Enabled is true while down")
	}
	if err := l.Enable(ctx); err != nil {
		t.Fatal(err)
	}
	if err := roundTrip(ctx, dial, b1); err != nil {
		t.Fatalf("round trip after Enable: %v", err)
	}

	// reset_peer on the chain when a connection starts (toxiproxy's engine would assert TCP
	// on both ends of a connection that starts with its own reset toxic).
	if err := l.AddToxic(ctx, links.Toxic{Type: "reset_peer", Attributes: map[string]any{"timeout": 0}}); err != nil {
		t.Fatal(err)
	}
	ts, err := l.Toxics(ctx)
	if err != nil || len(ts) != 1 || ts[0].Type != "reset_peer" || ts[0].Name != "reset_peer_downstream" {
		t.Fatalf("toxics %+v, %v; want reset_peer_downstream", ts, err)
	}
	if err := roundTrip(ctx, dial, b1); err == nil || isTimeout(err) {
		t.Fatalf("round trip with reset_peer: %v, want the connection closed", err)
	}
	if err := l.RemoveToxic(ctx, "reset_peer_downstream"); err != nil {
		t.Fatal(err)
	}
	if err := l.RemoveToxic(ctx, "reset_peer_downstream"); err != nil {
		t.Fatalf("removing a missing toxic: %v, want nil", err)
	}

	// A black hole added while a connection is open holds its bytes; HealAll lets new ones through.
	open2, err := dial(ctx, "tcp", b1)
	if err != nil {
		t.Fatal(err)
	}
	defer open2.Close()
	if err := l.AddToxic(ctx, links.Toxic{Type: "timeout", Attributes: map[string]any{"timeout": 0}}); err != nil {
		t.Fatal(err)
	}
	_ = open2.SetDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := open2.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(open2, make([]byte, 4)); !isTimeout(err) {
		t.Fatalf("read through a black hole: %v, want a timeout", err)
	}
	if err := l.AddToxic(ctx, links.Toxic{Type: "no_such_toxic"}); err == nil {
		t.Fatal("an unknown toxic type was accepted")
	}
	if err := n.HealAll(ctx); err != nil {
		t.Fatal(err)
	}
	if ts, _ := l.Toxics(ctx); len(ts) != 0 {
		t.Fatalf("toxics after HealAll: %+v", ts)
	}
	if err := roundTrip(ctx, dial, b1); err != nil {
		t.Fatalf("round trip after HealAll: %v", err)
	}
}

func TestParseLinkMode(t *testing.T) {
	if _, err := links.NewNetwork(context.Background(), links.NetworkOptions{ProcessLinks: "pipes"}); err == nil ||
		!errors.As(err, new(*links.OptionError)) {
		t.Fatalf("NewNetwork with ProcessLinks \"pipes\": %v, want an OptionError", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// BenchmarkLinkRoundTrip measures a request and its answer (size bytes each way, as a small
// Kafka request) over one open connection: straight to the echo server, through a toxiproxy
// proxy link, and through a conn link, both without toxics.
func BenchmarkLinkRoundTrip(b *testing.B) {
	ctx := context.Background()
	echo := echoServer(b)
	plain := func(ctx context.Context, network, addr string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	proxyDial, err := newNetwork(b, echo).Dialer(ctx, 1)
	if err != nil {
		b.Fatal(err)
	}
	connDial, err := newConnNetwork(b, echo).Dialer(ctx, 1)
	if err != nil {
		b.Fatal(err)
	}
	for _, size := range []int{100, 16 << 10} {
		for _, c := range []struct {
			name string
			dial links.DialFunc
		}{{"plain", plain}, {"proxy", proxyDial}, {"conn", connDial}} {
			b.Run(fmt.Sprintf("%s/%dB", c.name, size), func(b *testing.B) {
				conn, err := c.dial(ctx, "tcp", echo)
				if err != nil {
					b.Fatal(err)
				}
				defer conn.Close()
				msg, got := make([]byte, size), make([]byte, size)
				b.SetBytes(int64(2 * size))
				b.ResetTimer()
				for range b.N {
					if _, err := conn.Write(msg); err != nil {
						b.Fatal(err)
					}
					if _, err := io.ReadFull(conn, got); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
