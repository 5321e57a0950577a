package links_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/cluster/internal/ports"
	"github.com/fencecheck/fencecheck/cluster/links"
)

// echoServer stands in for a broker: it echoes what it reads.
func echoServer(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

func newNetwork(t testing.TB, brokers ...string) *links.Network {
	n, err := links.NewNetwork(context.Background(), links.NetworkOptions{})
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

// roundTrip dials addr through dial and checks an echo.
func roundTrip(ctx context.Context, dial links.DialFunc, addr string) error {
	conn, err := dial(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte("ping")); err != nil {
		return err
	}
	b := make([]byte, 4)
	if _, err := io.ReadFull(conn, b); err != nil {
		return err
	}
	if string(b) != "ping" {
		return errors.New("echo mismatch")
	}
	return nil
}

func TestNetwork(t *testing.T) {
	ctx := context.Background()
	b1, b2 := echoServer(t), echoServer(t)
	n := newNetwork(t, b1, b2)
	dial, err := n.Dialer(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("links - one per broker, stable names", func(t *testing.T) {
		p3, err := n.ProcessLinks(ctx, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(p3) != 2 || p3[0].Name() != "p3→b1" || p3[1].Name() != "p3→b2" || p3[0].ID() != "p3-b1" {
			t.Fatalf("links = %v", p3)
		}
		if n.Link("p3→b1") != p3[0] || n.Link("p3-b1") != p3[0] || n.ProcessLink(3, 1) != p3[0] {
			t.Fatal("lookups by display name, ASCII name and (process, broker) disagree")
		}
		if ps := p3[0].Proxies(); len(ps) != 1 || ps[0].Name != "p3-b1" || ps[0].Upstream != b1 {
			t.Fatalf("proxies = %+v", ps)
		}
	})

	t.Run("dial - advertised address goes through the link", func(t *testing.T) {
		for _, a := range []string{b1, b2} {
			if err := roundTrip(ctx, dial, a); err != nil {
				t.Fatalf("dial %s: %v", a, err)
			}
		}
	})

	t.Run("dial unknown address - ErrUnknownAddress", func(t *testing.T) {
		if _, err := dial(ctx, "tcp", "127.0.0.1:1"); !errors.Is(err, links.ErrUnknownAddress) {
			t.Fatalf("err = %v, want ErrUnknownAddress", err)
		}
	})

	t.Run("disable - refused and open connections closed, enable - back", func(t *testing.T) {
		l := n.ProcessLink(3, 1)
		conn, err := dial(ctx, "tcp", b1)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if err := l.Disable(ctx); err != nil {
			t.Fatal(err)
		}
		if err := roundTrip(ctx, dial, b1); err == nil {
			t.Fatal("round trip through a disabled link succeeded")
		}
		_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		var ne net.Error
		if _, err := conn.Read(make([]byte, 1)); err == nil || (errors.As(err, &ne) && ne.Timeout()) {
			t.Fatalf("open connection after disable: read err %v, want closed", err)
		}
		if err := roundTrip(ctx, dial, b2); err != nil {
			t.Fatalf("p3→b2 while p3→b1 is down: %v", err)
		}
		if on, _ := l.Enabled(ctx); on {
			t.Fatal("Enabled() = true after Disable")
		}
		if err := l.Enable(ctx); err != nil {
			t.Fatal(err)
		}
		if err := roundTrip(ctx, dial, b1); err != nil {
			t.Fatalf("after enable: %v", err)
		}
	})

	t.Run("toxics - add, list, remove, heal all", func(t *testing.T) {
		l := n.ProcessLink(3, 2)
		if err := l.AddToxic(ctx, links.Toxic{Type: "latency", Stream: links.StreamUpstream, Attributes: map[string]any{"latency": 300}}); err != nil {
			t.Fatal(err)
		}
		ts, err := l.Toxics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(ts) != 1 || ts[0].Name != "latency_upstream" || ts[0].Toxicity != 1 {
			t.Fatalf("toxics = %+v", ts)
		}
		start := time.Now()
		if err := roundTrip(ctx, dial, b2); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < 300*time.Millisecond {
			t.Fatalf("round trip with 300ms latency took %v", d)
		}
		if err := l.RemoveToxic(ctx, "latency_upstream"); err != nil {
			t.Fatal(err)
		}
		if err := l.RemoveToxic(ctx, "latency_upstream"); err != nil {
			t.Fatalf("removing a missing toxic: %v, want nil", err)
		}
		if err := l.AddToxic(ctx, links.Toxic{Type: "timeout", Attributes: map[string]any{"timeout": 0}}); err != nil {
			t.Fatal(err)
		}
		if err := n.ProcessLink(3, 1).Disable(ctx); err != nil {
			t.Fatal(err)
		}
		if err := n.HealAll(ctx); err != nil {
			t.Fatal(err)
		}
		if ts, _ := l.Toxics(ctx); len(ts) != 0 {
			t.Fatalf("toxics after HealAll: %+v", ts)
		}
		for _, a := range []string{b1, b2} {
			if err := roundTrip(ctx, dial, a); err != nil {
				t.Fatalf("%s after HealAll: %v", a, err)
			}
		}
	})

	t.Run("close - proxies gone", func(t *testing.T) {
		addr := n.ProcessLink(3, 1).Proxies()[0].Listen
		if err := n.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Fatal("proxy still listening after Close")
		}
		if _, err := n.Dialer(ctx, 4); !errors.Is(err, links.ErrClosed) {
			t.Fatalf("Dialer after Close = %v, want ErrClosed", err)
		}
	})
}

// BenchmarkProcessLinks measures creating one process's links to 3 brokers
// (3 toxiproxy proxies over the in-process HTTP API).
func BenchmarkProcessLinks(b *testing.B) {
	n := newNetwork(b, echoServer(b), echoServer(b), echoServer(b))
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		if _, err := n.ProcessLinks(ctx, i); err != nil {
			b.Fatal(err)
		}
	}
}

// A link that is down has closed its listener, yet its port must stay this
// network's until Close: other fencecheck processes pick ports by checking
// that they are free, and one that took the port would make the heal fail
// ("bind: address already in use", seen in CI with the two test lanes).
func TestDownLinkKeepsItsPortClaimed(t *testing.T) {
	ctx := context.Background()
	n, err := links.NewNetwork(ctx, links.NetworkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(ctx)
	b := echoServer(t)
	if err := n.AddBroker(1, b, b); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Dialer(ctx, 1); err != nil {
		t.Fatal(err)
	}
	l := n.ProcessLink(1, 1)
	_, ps, err := net.SplitHostPort(l.Proxies()[0].Listen)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(ps)
	if err := l.Disable(ctx); err != nil {
		t.Fatal(err)
	}
	if ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", ps)); err != nil {
		t.Fatalf("port %d still bound while the link is down: %v", port, err)
	} else {
		ln.Close()
	}
	if ports.Claim(port) {
		ports.Release(port)
		t.Fatalf("port %d of a down link is not claimed", port)
	}
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if !ports.Claim(port) {
		t.Fatalf("port %d still claimed after Close", port)
	}
	ports.Release(port)
}
