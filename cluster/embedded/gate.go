package embedded

import (
	"net"
	"sync"
)

// gate freezes a broker's connections while it is paused.
type gate struct {
	mu sync.Mutex
	ch chan struct{} // closed while open
}

func newGate() *gate {
	ch := make(chan struct{})
	close(ch)
	return &gate{ch: ch}
}

func (g *gate) pause() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.ch:
		g.ch = make(chan struct{})
	default: // already paused
	}
}

func (g *gate) resume() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.ch:
	default:
		close(g.ch)
	}
}

// wait blocks while the gate is closed; false if done closed first.
func (g *gate) wait(done <-chan struct{}) bool {
	g.mu.Lock()
	ch := g.ch
	g.mu.Unlock()
	select {
	case <-ch:
		return true
	case <-done:
		return false
	}
}

// gatedConn is a broker-side connection that holds bytes in both directions
// while its broker is paused, like the socket of a stopped process.
type gatedConn struct {
	net.Conn
	gate    *gate
	done    chan struct{}
	once    sync.Once
	untrack func()
}

func (c *gatedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if !c.gate.wait(c.done) {
		return 0, net.ErrClosed
	}
	return n, err
}

func (c *gatedConn) Write(b []byte) (int, error) {
	if !c.gate.wait(c.done) {
		return 0, net.ErrClosed
	}
	return c.Conn.Write(b)
}

func (c *gatedConn) Close() error {
	c.once.Do(func() {
		close(c.done)
		if c.untrack != nil {
			c.untrack()
		}
	})
	return c.Conn.Close()
}
