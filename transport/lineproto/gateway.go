package lineproto

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// gateway is the per-process bootstrap an adapter dials. An adapter is another program: it
// cannot be handed the process's dial function, so the harness listens on loopback for it,
// one listener per broker, and makes every connection upstream with that dial function (the
// process's links, with their faults and the commit gate). So that the adapter's client
// never learns the brokers' own addresses, the gateway rewrites the broker addresses of
// Metadata, FindCoordinator and DescribeCluster responses to its listeners; every other
// frame passes unchanged, in order.
//
// It also watches the InitProducerId answers it relays: for a client that does not expose
// the pair it was minted (capability gateway-token), the token of an acquire is the one the
// broker gave that adapter's own request, seen on the wire before the adapter could read it.
type gateway struct {
	dial    func(ctx context.Context, network, addr string) (net.Conn, error)
	timeout time.Duration // bounds each upstream dial

	mu        sync.Mutex
	closed    bool
	listeners map[string]net.Listener // broker's advertised host:port → gateway listener
	conns     map[net.Conn]struct{}
	wg        sync.WaitGroup
	mints     map[string]mint // transactional id → the last pair InitProducerId returned for it
	mintSeq   uint64          // counts the mints seen
	// watch, for a pipeline member's gateway, sees the member's group and offset requests
	// and answers (member.go); nil for a lease transport's.
	watch *memberWatch
}

// mint is a successful InitProducerId answer the gateway relayed.
type mint struct {
	token Token
	seq   uint64 // the gateway's mint counter after it
}

// sent is what the gateway remembers of a request until its answer comes.
type sent struct {
	key, version int16
	txnID        string    // InitProducerId for a new producer: the transactional id asked for
	at           time.Time // when it was sent (a watched request's)
}

// maxFrame bounds a frame the gateway accepts: Kafka's own default socket request limit.
const maxFrame = 100 << 20

// Kafka API keys whose responses name brokers.
const (
	keyMetadata        = 3
	keyFindCoordinator = 10
	keyInitProducerID  = 22
	keyDescribeCluster = 60
)

func newGateway(dial func(ctx context.Context, network, addr string) (net.Conn, error), timeout time.Duration) *gateway {
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	return &gateway{dial: dial, timeout: timeout, listeners: map[string]net.Listener{}, conns: map[net.Conn]struct{}{},
		mints: map[string]mint{}}
}

// addr returns the gateway's address for the broker advertised at upstream, opening a
// listener for it the first time.
func (g *gateway) addr(upstream string) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return "", errors.New("gateway closed")
	}
	if l := g.listeners[upstream]; l != nil {
		return l.Addr().String(), nil
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("gateway for %s: %w", upstream, err)
	}
	g.listeners[upstream] = l
	g.wg.Go(func() { g.accept(l, upstream) })
	return l.Addr().String(), nil
}

func (g *gateway) accept(l net.Listener, upstream string) {
	for {
		c, err := l.Accept()
		if err != nil {
			return // closed
		}
		if !g.track(c) {
			c.Close()
			return
		}
		g.wg.Go(func() { g.serve(c, upstream) })
	}
}

// track registers c so Close can cut it; false once the gateway is closed.
func (g *gateway) track(c net.Conn) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.conns[c] = struct{}{}
	return true
}

func (g *gateway) untrack(c net.Conn) {
	g.mu.Lock()
	delete(g.conns, c)
	g.mu.Unlock()
	c.Close()
}

// serve relays one adapter connection to upstream through the process's dial function. A
// refused dial (a cut link) closes the adapter's connection, as a refused TCP connect would.
func (g *gateway) serve(down net.Conn, upstream string) {
	defer g.untrack(down)
	ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
	up, err := g.dial(ctx, "tcp", upstream)
	cancel()
	if err != nil {
		return
	}
	if !g.track(up) {
		up.Close()
		return
	}
	defer g.untrack(up)

	var mu sync.Mutex
	pending := map[int32]sent{} // correlation id → the request, for the answers read or rewritten
	done := make(chan struct{}, 2)
	go func() { // adapter → broker
		defer func() { done <- struct{}{} }()
		r := bufio.NewReader(down)
		for {
			frame, err := readFrame(r)
			if err != nil {
				return
			}
			if len(frame) >= 12 {
				key := int16(binary.BigEndian.Uint16(frame[4:]))
				version := int16(binary.BigEndian.Uint16(frame[6:]))
				if key == keyMetadata || key == keyFindCoordinator || key == keyDescribeCluster || key == keyInitProducerID ||
					g.watch.answers(key) {
					req := sent{key: key, version: version, at: time.Now()}
					if key == keyInitProducerID {
						req.txnID = initProducerIDTxn(frame, req.version)
					}
					mu.Lock()
					pending[int32(binary.BigEndian.Uint32(frame[8:]))] = req
					mu.Unlock()
				}
				// A pause point: the member stops here, before the request goes out.
				g.watch.request(key, version, frame)
			}
			if _, err := up.Write(frame); err != nil {
				return
			}
		}
	}()
	go func() { // broker → adapter
		defer func() { done <- struct{}{} }()
		r := bufio.NewReader(up)
		for {
			frame, err := readFrame(r)
			if err != nil {
				return
			}
			if len(frame) >= 8 {
				corr := int32(binary.BigEndian.Uint32(frame[4:]))
				mu.Lock()
				req, ok := pending[corr]
				delete(pending, corr)
				mu.Unlock()
				switch {
				case ok && req.key == keyInitProducerID:
					// Seen before the adapter gets it: an acquire answered after this frame
					// finds the mint recorded.
					g.observeMint(frame, req)
				case ok:
					if g.watch.answers(req.key) {
						// Seen before the member gets it: it reads from a fetched offset only after.
						g.watch.answer(frame, req)
					}
					if req.key == keyMetadata || req.key == keyFindCoordinator || req.key == keyDescribeCluster {
						if frame, err = g.rewrite(frame, req.key, req.version); err != nil {
							return // an answer the adapter must not see unrewritten: drop the connection
						}
					}
				}
			}
			if _, err := down.Write(frame); err != nil {
				return
			}
		}
	}()
	<-done // either side ending ends both
	down.Close()
	up.Close()
	<-done
}

// readFrame reads one size-prefixed Kafka frame, size included.
func readFrame(r *bufio.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > maxFrame {
		return nil, fmt.Errorf("frame of %d bytes", n)
	}
	frame := make([]byte, 4+n)
	copy(frame, size[:])
	if _, err := io.ReadFull(r, frame[4:]); err != nil {
		return nil, err
	}
	return frame, nil
}

// rewrite replaces every broker address in a response frame of key and version by the
// gateway's address for it.
func (g *gateway) rewrite(frame []byte, key, version int16) ([]byte, error) {
	resp := kmsg.ResponseForKey(key)
	resp.SetVersion(version)
	body := frame[8:] // after size and correlation id
	var tags []byte
	if resp.IsFlexible() {
		n, err := skipTags(body)
		if err != nil {
			return nil, err
		}
		tags, body = body[:n], body[n:]
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decode %s v%d response: %w", kmsg.NameForKey(key), version, err)
	}
	var err error
	set := func(host *string, port *int32) {
		if err != nil || *host == "" || *port < 0 {
			return
		}
		var a string
		if a, err = g.addr(net.JoinHostPort(*host, strconv.Itoa(int(*port)))); err != nil {
			return
		}
		h, p, _ := net.SplitHostPort(a)
		pn, _ := strconv.Atoi(p)
		*host, *port = h, int32(pn)
	}
	switch r := resp.(type) {
	case *kmsg.MetadataResponse:
		for i := range r.Brokers {
			set(&r.Brokers[i].Host, &r.Brokers[i].Port)
		}
	case *kmsg.FindCoordinatorResponse:
		set(&r.Host, &r.Port)
		for i := range r.Coordinators {
			set(&r.Coordinators[i].Host, &r.Coordinators[i].Port)
		}
	case *kmsg.DescribeClusterResponse:
		for i := range r.Brokers {
			set(&r.Brokers[i].Host, &r.Brokers[i].Port)
		}
	}
	if err != nil {
		return nil, err
	}
	out := make([]byte, 8, len(frame)+64)
	copy(out[4:], frame[4:8])
	out = append(out, tags...)
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out, nil
}

// initProducerIDTxn returns the transactional id an InitProducerId request frame asks a new
// producer id or epoch for; "" when it asks for none (an idempotent producer), when it does
// not decode, and when it names the producer id it has (KIP-360: an existing producer bumping
// its epoch after an abortable error, or a client's recovery). Only the first is an acquire's
// mint: a bump by the previous producer of the role, arriving during the next acquire, must
// not be taken for that acquire's token.
func initProducerIDTxn(frame []byte, version int16) string {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.SetVersion(version)
	// After size, key, version and correlation id: the client id (a nullable int16-length
	// string in every header version), then the flexible header's tagged fields.
	body := frame[12:]
	if len(body) < 2 {
		return ""
	}
	n := int(int16(binary.BigEndian.Uint16(body)))
	body = body[2:]
	if n > 0 {
		if n > len(body) {
			return ""
		}
		body = body[n:]
	}
	if req.IsFlexible() {
		n, err := skipTags(body)
		if err != nil {
			return ""
		}
		body = body[n:]
	}
	if err := req.ReadFrom(body); err != nil || req.TransactionalID == nil || req.ProducerID >= 0 {
		return ""
	}
	return *req.TransactionalID
}

// observeMint records the pair of a successful InitProducerId answer to req.
func (g *gateway) observeMint(frame []byte, req sent) {
	if req.txnID == "" {
		return
	}
	resp := kmsg.NewPtrInitProducerIDResponse()
	resp.SetVersion(req.version)
	body := frame[8:]
	if resp.IsFlexible() {
		n, err := skipTags(body)
		if err != nil {
			return
		}
		body = body[n:]
	}
	if err := resp.ReadFrom(body); err != nil || resp.ErrorCode != 0 {
		return
	}
	g.mu.Lock()
	g.mintSeq++
	g.mints[req.txnID] = mint{token: Token{ProducerID: resp.ProducerID, Epoch: resp.ProducerEpoch}, seq: g.mintSeq}
	g.mu.Unlock()
}

// mintMark returns the gateway's mint counter: mintedSince(id, mark) then says what was minted
// for id after this moment.
func (g *gateway) mintMark() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mintSeq
}

// mintedSince returns the last pair InitProducerId returned for txnID on this gateway's
// connections after mark (mintMark), false when none did.
func (g *gateway) mintedSince(txnID string, mark uint64) (Token, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m, ok := g.mints[txnID]
	if !ok || m.seq <= mark {
		return Token{}, false
	}
	return m.token, true
}

// skipTags returns the length of the tagged fields at the start of b (a flexible header's).
func skipTags(b []byte) (int, error) {
	n, l := binary.Uvarint(b)
	if l <= 0 {
		return 0, errors.New("bad tagged field count")
	}
	off := l
	for range n {
		_, l := binary.Uvarint(b[off:])
		if l <= 0 {
			return 0, errors.New("bad tag")
		}
		off += l
		size, l := binary.Uvarint(b[off:])
		if l <= 0 || uint64(len(b)-off-l) < size {
			return 0, errors.New("bad tag size")
		}
		off += l + int(size)
	}
	return off, nil
}

// bootstrap returns the gateway's addresses for the comma-separated seed list.
func (g *gateway) bootstrap(seeds []string) (string, error) {
	var out string
	for i, s := range seeds {
		a, err := g.addr(s)
		if err != nil {
			return "", err
		}
		if i > 0 {
			out += ","
		}
		out += a
	}
	return out, nil
}

// Close stops every listener and cuts every connection, and waits for the relays to end.
func (g *gateway) Close() {
	g.mu.Lock()
	if !g.closed {
		g.closed = true
		for _, l := range g.listeners {
			l.Close()
		}
		for c := range g.conns {
			c.Close()
		}
	}
	g.mu.Unlock()
	g.wg.Wait()
}
