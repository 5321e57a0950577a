package links

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/stream"
	"github.com/Shopify/toxiproxy/v2/toxics"
	"github.com/rs/zerolog"
)

// LinkMode says how process links are built.
type LinkMode string

// Link modes.
const (
	// LinkModeProxy makes each process link a toxiproxy proxy: a listener
	// (in this process, or on an external toxiproxy server) that the
	// process dials, and an upstream socket to the broker. It costs about
	// three file descriptors per connection and one per link.
	LinkModeProxy LinkMode = "proxy"
	// LinkModeConn applies a process link's faults inside the process's own
	// connection: the dial function connects straight to the broker and
	// wraps the connection in toxiproxy's toxic engine. No listener and no
	// upstream socket: one file descriptor per connection, none per link.
	// Admin and peer links (which brokers and other clients dial) stay
	// toxiproxy proxies.
	LinkModeConn LinkMode = "conn"
)

// ParseLinkMode reads "proxy" or "conn"; "" is LinkModeProxy.
func ParseLinkMode(s string) (LinkMode, error) {
	switch LinkMode(s) {
	case "", LinkModeProxy:
		return LinkModeProxy, nil
	case LinkModeConn:
		return LinkModeConn, nil
	}
	return "", fmt.Errorf("link mode %q: want %q or %q", s, LinkModeProxy, LinkModeConn)
}

// connResetType is the toxic type the conn links use for toxiproxy's
// reset_peer. toxiproxy's engine sets SO_LINGER on both ends of a new
// connection when a *toxics.ResetToxic is on its chain, asserting that both
// are TCP connections; one end of a conn link is an in-memory pipe, so the
// conn links carry the same behaviour under another Go type.
const connResetType = "fencecheck_reset_peer"

// connResetToxic is toxiproxy's reset_peer (close the connection abruptly
// after Timeout ms of data) under a type the engine does not special-case.
type connResetToxic struct{ toxics.ResetToxic }

func init() { toxics.Register(connResetType, new(connResetToxic)) }

// connEngine is the part of toxiproxy's server that the toxic engine needs
// (metrics, a logger); it listens on nothing.
var connEngine = toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())

// connLink is the state of one LinkModeConn link: its toxics (a toxiproxy
// proxy that is never started, whose toxic collection drives every
// connection's pipelines), whether it is down, and its open connections.
type connLink struct {
	name     string
	upstream string
	proxy    *toxiproxy.Proxy

	mu    sync.Mutex
	down  bool
	seq   int
	conns map[*toxicConn]struct{}
}

func newConnLink(name, upstream string) *connLink {
	return &connLink{
		name:     name,
		upstream: upstream,
		proxy:    toxiproxy.NewProxy(connEngine, name, "", upstream),
		conns:    make(map[*toxicConn]struct{}),
	}
}

// errLinkDown is what dialing a down link returns: a refused connection, as
// from a toxiproxy proxy whose listener is closed.
func errLinkDown(network string) error {
	return &net.OpError{Op: "dial", Net: network, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
}

// dial connects to the broker and wraps the connection in the link's toxics.
func (l *connLink) dial(ctx context.Context, dial DialFunc, network string) (net.Conn, error) {
	l.mu.Lock()
	down := l.down
	l.mu.Unlock()
	if down {
		return nil, errLinkDown(network)
	}
	raw, err := dial(ctx, network, l.upstream)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	if l.down { // taken down while connecting
		l.mu.Unlock()
		raw.Close()
		return nil, errLinkDown(network)
	}
	l.seq++
	c := newToxicConn(l, raw)
	l.conns[c] = struct{}{}
	name := fmt.Sprintf("c%d", l.seq)
	l.mu.Unlock()
	// Outside l.mu: the engine takes its collection's lock, under which its
	// goroutines may wait for a connection ending, which takes l.mu.
	c.start(name)
	return c, nil
}

// setDown takes the link down (closing its connections) or brings it up.
func (l *connLink) setDown(down bool) {
	l.mu.Lock()
	l.down = down
	var open []*toxicConn
	if down {
		for c := range l.conns {
			open = append(open, c)
		}
	}
	l.mu.Unlock()
	for _, c := range open {
		c.shut()
	}
}

func (l *connLink) isDown() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.down
}

func (l *connLink) addToxic(t Toxic) error {
	if t.Type == "reset_peer" {
		t.Type = connResetType
	}
	b, err := json.Marshal(t)
	if err != nil {
		return err
	}
	_, err = l.proxy.Toxics.AddToxicJson(bytes.NewReader(b))
	return err
}

// removeToxic removes a toxic; a missing one is not an error.
func (l *connLink) removeToxic(ctx context.Context, name string) error {
	err := l.proxy.Toxics.RemoveToxic(ctx, name)
	if errors.Is(err, toxiproxy.ErrToxicNotFound) {
		return nil
	}
	return err
}

func (l *connLink) toxics() ([]Toxic, error) {
	var out []Toxic
	for _, w := range l.proxy.Toxics.GetToxicArray() {
		b, err := json.Marshal(w)
		if err != nil {
			return nil, err
		}
		var t Toxic
		if err := json.Unmarshal(b, &t); err != nil {
			return nil, err
		}
		if t.Type == connResetType {
			t.Type = "reset_peer"
		}
		out = append(out, t)
	}
	return out, nil
}

func (l *connLink) heal(ctx context.Context) {
	l.setDown(false)
	l.proxy.Toxics.ResetToxics(ctx)
}

// close takes the link down for good.
func (l *connLink) close() { l.setDown(true) }

// toxicConn is a process's connection over a conn link. Bytes the process
// writes go through the link's upstream toxics to the broker; bytes from the
// broker go through its downstream toxics to the process. Each direction is
// toxiproxy's ToxicLink between the raw connection and an in-memory pipe
// (net.Pipe: no file descriptor), so toxics added or removed later act on open
// connections as they do on a proxy. Bytes pass unchanged, so TLS and the
// Kafka-aware faults above it are unaffected.
type toxicConn struct {
	raw        net.Conn
	up         net.Conn // the process writes here
	upEngine   net.Conn // the upstream pipeline reads here
	down       net.Conn // the process reads here
	downEngine net.Conn // the downstream pipeline writes here
	link       *connLink
	once       sync.Once
}

func newToxicConn(l *connLink, raw net.Conn) *toxicConn {
	up, upEngine := net.Pipe()
	down, downEngine := net.Pipe()
	return &toxicConn{raw: raw, up: up, upEngine: upEngine, down: down, downEngine: downEngine, link: l}
}

// start runs both directions' pipelines. Either direction ending (a reset
// or limit-data toxic, the broker or the process closing) ends the
// connection, as through a proxy.
func (c *toxicConn) start(name string) {
	t := c.link.proxy.Toxics
	t.StartLink(connEngine, name+"upstream", c.upEngine, shutWriter{c.raw, c}, stream.Upstream)
	t.StartLink(connEngine, name+"downstream", c.raw, shutWriter{c.downEngine, c}, stream.Downstream)
}

// shutWriter is a pipeline's destination: closing it ends the connection.
type shutWriter struct {
	w io.Writer
	c *toxicConn
}

// Write writes to the destination. Once that fails, the connection is shut (both pipelines'
// sources end, so each drains and closes) and the rest is discarded, not refused: toxiproxy's
// link stops reading its pipeline at the first write error, and a toxic still sending into it
// then blocks a RemoveToxic that waits for it under the collection's lock, and with it every
// later dial and heal (toxiproxy v2.12.0, its issue 558; a CI run's nemesis test hung so, a
// slicer's removal waiting on a link whose broker side had closed).
func (s shutWriter) Write(b []byte) (int, error) {
	if _, err := s.w.Write(b); err != nil {
		s.c.shut()
	}
	return len(b), nil
}

func (s shutWriter) Close() error { s.c.shut(); return nil }

// shut closes both pipes and the raw connection, once.
func (c *toxicConn) shut() {
	c.once.Do(func() {
		for _, e := range []io.Closer{c.up, c.upEngine, c.down, c.downEngine, c.raw} {
			_ = e.Close()
		}
		c.link.mu.Lock()
		delete(c.link.conns, c)
		c.link.mu.Unlock()
	})
}

func (c *toxicConn) Read(b []byte) (int, error)  { return c.down.Read(b) }
func (c *toxicConn) Write(b []byte) (int, error) { return c.up.Write(b) }
func (c *toxicConn) Close() error                { c.shut(); return nil }
func (c *toxicConn) LocalAddr() net.Addr         { return c.raw.LocalAddr() }
func (c *toxicConn) RemoteAddr() net.Addr        { return c.raw.RemoteAddr() }

func (c *toxicConn) SetDeadline(t time.Time) error {
	return errors.Join(c.up.SetDeadline(t), c.down.SetDeadline(t))
}
func (c *toxicConn) SetReadDeadline(t time.Time) error  { return c.down.SetReadDeadline(t) }
func (c *toxicConn) SetWriteDeadline(t time.Time) error { return c.up.SetWriteDeadline(t) }
