package links

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fencecheck/fencecheck/cluster/internal/ports"
)

// NetworkOptions configures the toxiproxy server that carries the links.
// The zero value runs toxiproxy inside this process.
type NetworkOptions struct {
	// Toxiproxy is the HTTP API address (host:port or URL) of an existing
	// toxiproxy server. Default "": run a toxiproxy server in this process,
	// its API on a random loopback port.
	Toxiproxy string

	// ListenHost is the host proxies listen on (as the toxiproxy server
	// binds it) and that this process dials to reach them. Default
	// 127.0.0.1 in-process; the API's host for an external server.
	ListenHost string

	// NamePrefix goes before every proxy name, so runs that share an
	// external toxiproxy server do not collide. Default "" in-process;
	// "fc<6 hex digits>-" for an external server.
	NamePrefix string

	// PortLow and PortHigh bound the ports [PortLow, PortHigh) proxies
	// listen on when the caller does not fix one. Default: 10000 up to the
	// kernel's ephemeral range, so a disabled link's port is not taken by
	// an outgoing connection before the link comes back.
	PortLow, PortHigh int

	// ProcessLinks says how process links are built: LinkModeProxy (a
	// toxiproxy proxy per link, the default and the reference) or
	// LinkModeConn (toxiproxy's toxic engine inside each process's own
	// connections: no listener, no upstream socket). Admin and peer links
	// are proxies either way.
	ProcessLinks LinkMode

	// ConnDial, if set, makes LinkModeConn links' connections to brokers
	// (upstream addresses) instead of a TCP dial; the embedded backend
	// dials in-memory pipes to its brokers with it.
	ConnDial DialFunc

	// Logger receives link events at debug level. Default: discard.
	Logger *slog.Logger
}

// LinkKind says what a link connects.
type LinkKind int

// Link kinds.
const (
	// LinkProcess is one process's (transport instance's) path to one
	// broker: "p3→b1".
	LinkProcess LinkKind = iota + 1
	// LinkAdmin is the path of clients without links (the harness's admin
	// client, bootstrap users) to one broker: "admin→b1". Only backends
	// that advertise proxy addresses have them (local, containers).
	LinkAdmin
	// LinkPeer carries broker-to-broker traffic (replication, transaction
	// markers, Raft, broker heartbeats) from one broker to another:
	// "b1→b2". Only the local and containers backends have them.
	LinkPeer
)

// String is "process", "admin" or "peer".
func (k LinkKind) String() string {
	switch k {
	case LinkProcess:
		return "process"
	case LinkAdmin:
		return "admin"
	case LinkPeer:
		return "peer"
	}
	return "unknown"
}

// Toxic streams: toxiproxy's direction names.
const (
	// StreamUpstream is data from the dialing side to the broker (requests).
	StreamUpstream = "upstream"
	// StreamDownstream is data from the broker back (responses).
	StreamDownstream = "downstream"
)

// Toxic is a toxiproxy toxic: latency, bandwidth, slow_close, timeout (0 =
// black hole until removed), reset_peer, slicer, limit_data. See toxiproxy's
// README for each type's attributes.
type Toxic struct {
	// Name is unique on a link. Default "<type>_<stream>".
	Name string `json:"name,omitempty"`
	// Type is the toxic type, e.g. "latency".
	Type string `json:"type"`
	// Stream is StreamUpstream or StreamDownstream. Default downstream.
	Stream string `json:"stream,omitempty"`
	// Toxicity is the probability that a connection gets the toxic.
	// 0 means 1 (every connection); toxiproxy itself treats 0 as never.
	Toxicity float32 `json:"toxicity"`
	// Attributes are the type's settings, e.g. {"latency": 500}.
	Attributes map[string]any `json:"attributes,omitempty"`
}

// ProxyInfo is one toxiproxy proxy of a link.
type ProxyInfo struct {
	Name     string // toxiproxy's (ASCII) name, with the NamePrefix
	Listen   string // where the proxy listens, as toxiproxy reports it
	Upstream string // what it connects to
}

// LinkSpec describes a link to AddLink.
type LinkSpec struct {
	Kind    LinkKind
	Process int         // for LinkProcess
	From    int32       // for LinkPeer: the dialing broker
	Broker  int32       // the broker dialed
	Proxies []ProxySpec // at least one
}

// ProxySpec is one proxy of a LinkSpec.
type ProxySpec struct {
	// Suffix tells a link's proxies apart in their names ("repl",
	// "ctrl"); "" for a link of one proxy.
	Suffix string
	// Listen is host:port to listen on. A port of 0, or "", picks a free
	// port of the range on the host (ListenHost when "").
	Listen string
	// Upstream is the address the proxy dials.
	Upstream string
}

// Network is the set of toxiproxy links of one cluster: per-process links to
// each broker, and, for the local backend, admin and broker-to-broker links.
// One code path (toxiproxy's HTTP API) serves both the in-process and an
// external toxiproxy server.
type Network struct {
	api        *toxiAPI
	inproc     *inProcessToxiproxy // nil for an external server
	listenHost string
	dialHost   string // replaces an unspecified listen host when dialing
	prefix     string
	mode       LinkMode // of process links
	portRange  ports.Range
	log        *slog.Logger

	createMu sync.Mutex // serializes proxy creation (port choice, names)
	claimed  []int      // ports this network picked and claimed (ports.Claim); under createMu

	connDial DialFunc // of conn links; nil: TCP

	kafka kafkaFaults // Kafka-aware faults on the process links (kafkafault.go)
	tls   *tls.Config // set by SetTLS: process links speak TLS to the brokers

	mu       sync.RWMutex
	closed   bool
	targets  map[int32]target // broker id → where process links go
	byAddr   map[string]int32 // advertised address → broker id
	links    map[string]*Link // by ASCII name
	byProc   map[int]map[int32]*Link
	dialFunc map[int]DialFunc
}

// target is where process links to a broker point.
type target struct {
	advertised string
	upstream   string
}

// NewNetwork starts an in-process toxiproxy server, or checks that the
// external one answers.
func NewNetwork(ctx context.Context, opts NetworkOptions) (*Network, error) {
	n := &Network{
		log:      opts.Logger,
		prefix:   opts.NamePrefix,
		targets:  make(map[int32]target),
		byAddr:   make(map[string]int32),
		links:    make(map[string]*Link),
		byProc:   make(map[int]map[int32]*Link),
		dialFunc: make(map[int]DialFunc),
	}
	if n.log == nil {
		n.log = slog.New(slog.DiscardHandler)
	}
	mode, err := ParseLinkMode(string(opts.ProcessLinks))
	if err != nil {
		return nil, &OptionError{Field: "ProcessLinks", Value: string(opts.ProcessLinks), Reason: err.Error()}
	}
	n.mode = mode
	n.connDial = opts.ConnDial
	n.portRange = ports.Default()
	if opts.PortLow != 0 || opts.PortHigh != 0 {
		if opts.PortLow <= 0 || opts.PortHigh <= opts.PortLow || opts.PortHigh > 65536 {
			return nil, &OptionError{Field: "PortLow/PortHigh", Value: fmt.Sprintf("[%d,%d)", opts.PortLow, opts.PortHigh), Reason: "want 0 < PortLow < PortHigh <= 65536"}
		}
		n.portRange = ports.Range{Low: opts.PortLow, High: opts.PortHigh}
	}
	if opts.Toxiproxy == "" {
		p, err := startInProcessToxiproxy()
		if err != nil {
			return nil, err
		}
		api, err := newToxiAPI(p.addr())
		if err != nil {
			p.close()
			return nil, err
		}
		n.inproc, n.api = p, api
		n.listenHost = "127.0.0.1"
		if opts.ListenHost != "" {
			n.listenHost = opts.ListenHost
		}
		n.dialHost = "127.0.0.1"
		return n, nil
	}
	api, err := newToxiAPI(opts.Toxiproxy)
	if err != nil {
		return nil, &OptionError{Field: "Toxiproxy", Value: opts.Toxiproxy, Reason: err.Error()}
	}
	if err := api.version(ctx); err != nil {
		return nil, fmt.Errorf("toxiproxy at %s: %w", opts.Toxiproxy, err)
	}
	n.api = api
	u, _ := url.Parse(api.base)
	n.dialHost = u.Hostname()
	n.listenHost = n.dialHost
	if opts.ListenHost != "" {
		n.listenHost = opts.ListenHost
	}
	if n.prefix == "" {
		var b [3]byte
		_, _ = rand.Read(b[:])
		n.prefix = "fc" + hex.EncodeToString(b[:]) + "-"
	}
	return n, nil
}

// ProcessLinkMode says how process links are built.
func (n *Network) ProcessLinkMode() LinkMode { return n.mode }

// External reports whether the links live on an external toxiproxy server.
func (n *Network) External() bool { return n.inproc == nil }

// API returns the toxiproxy HTTP API address (the in-process one too), for
// tools that want to talk to it directly.
func (n *Network) API() string { return n.api.base }

// AddBroker registers a broker as a target of process links: a dial function
// maps advertised (the address clients learn from metadata) to the process's
// proxy, which connects to upstream. Registering an id again replaces its
// addresses for links created afterwards.
func (n *Network) AddBroker(id int32, advertised, upstream string) error {
	key, err := addrKey(advertised)
	if err != nil {
		return fmt.Errorf("broker %d advertised address: %w", id, err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return ErrClosed
	}
	if old, ok := n.targets[id]; ok {
		if k, err := addrKey(old.advertised); err == nil {
			delete(n.byAddr, k)
		}
	}
	n.targets[id] = target{advertised: advertised, upstream: upstream}
	n.byAddr[key] = id
	return nil
}

// BrokerIDs returns the ids registered with AddBroker, sorted.
func (n *Network) BrokerIDs() []int32 {
	n.mu.RLock()
	defer n.mu.RUnlock()
	ids := make([]int32, 0, len(n.targets))
	for id := range n.targets {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids
}

// Dialer returns the dial function of process, creating its links to every
// registered broker first (so a bad toxiproxy shows up here, not on the first
// request). A link to a broker registered later is created on first dial.
// Calling it again returns the same function.
func (n *Network) Dialer(ctx context.Context, process int) (DialFunc, error) {
	if _, err := n.ProcessLinks(ctx, process); err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if f, ok := n.dialFunc[process]; ok {
		return f, nil
	}
	d := &net.Dialer{KeepAlive: 30 * time.Second}
	var base DialFunc
	base = func(ctx context.Context, network, host string) (net.Conn, error) {
		n.mu.RLock()
		id, ok := n.lookupLocked(host)
		l := n.byProc[process][id]
		n.mu.RUnlock()
		if !ok {
			return nil, fmt.Errorf("%s dial %s: %w", ProcessName(process), host, ErrUnknownAddress)
		}
		if l == nil {
			var err error
			if l, err = n.processLink(ctx, process, id); err != nil {
				return nil, err
			}
		}
		var conn net.Conn
		var err error
		if l.conn != nil {
			raw := n.connDial
			if raw == nil {
				raw = d.DialContext
			}
			conn, err = l.conn.dial(ctx, raw, network)
		} else {
			conn, err = d.DialContext(ctx, network, l.dialAddr(0))
		}
		if err != nil {
			return nil, err
		}
		n.mu.RLock()
		conf := n.tls
		n.mu.RUnlock()
		if conf == nil {
			return conn, nil
		}
		// TLS runs end to end, client to broker: the link (a proxy, or the toxics inside the
		// connection) carries the TLS bytes unchanged, and the Kafka-aware faults above it see
		// the plaintext frames inside it.
		return tlsClient(ctx, conn, conf, host)
	}
	// Every connection is seen as Kafka frames, so Kafka-aware faults act in the client's
	// path on every backend; held requests are delivered later along the same link.
	f := func(ctx context.Context, network, host string) (net.Conn, error) {
		c, err := base(ctx, network, host)
		if err != nil {
			return nil, err
		}
		return newKafkaConn(c, &n.kafka, process, func(ctx context.Context) (net.Conn, error) {
			return base(ctx, network, host)
		}), nil
	}
	n.dialFunc[process] = f
	return f, nil
}

// SetTLS makes every process link connection speak TLS with conf (the brokers' client
// listener is SSL or SASL_SSL): the dial functions of Dialer return the TLS connection, so
// a client given one must not add TLS itself, and Kafka-aware faults act on the Kafka frames
// inside TLS. The handshake's server name is the host of the broker's advertised address
// unless conf sets one. Call it before the first dial.
func (n *Network) SetTLS(conf *tls.Config) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.tls = conf
}

// ProcessLinks returns the links of process to every registered broker,
// sorted by broker, creating missing ones.
func (n *Network) ProcessLinks(ctx context.Context, process int) ([]*Link, error) {
	ids := n.BrokerIDs()
	out := make([]*Link, 0, len(ids))
	for _, id := range ids {
		l, err := n.processLink(ctx, process, id)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

func (n *Network) processLink(ctx context.Context, process int, id int32) (*Link, error) {
	n.mu.RLock()
	l := n.byProc[process][id]
	t, ok := n.targets[id]
	n.mu.RUnlock()
	if l != nil {
		return l, nil
	}
	if !ok {
		return nil, fmt.Errorf("link %s→%s: %w", ProcessName(process), BrokerName(id), ErrUnknownBroker)
	}
	if n.mode == LinkModeConn {
		return n.addConnLink(process, id, t.upstream)
	}
	return n.AddLink(ctx, LinkSpec{
		Kind: LinkProcess, Process: process, Broker: id,
		Proxies: []ProxySpec{{Upstream: t.upstream}},
	})
}

func (n *Network) lookupLocked(host string) (int32, bool) {
	k, err := addrKey(host)
	if err != nil {
		return 0, false
	}
	id, ok := n.byAddr[k]
	return id, ok
}

// AddLink creates a link's proxies on the toxiproxy server. Adding a link
// whose name exists returns the existing link.
func (n *Network) AddLink(ctx context.Context, spec LinkSpec) (*Link, error) {
	if len(spec.Proxies) == 0 {
		return nil, errors.New("add link: no proxies")
	}
	l := &Link{n: n, kind: spec.Kind, process: spec.Process, from: spec.From, broker: spec.Broker}
	switch spec.Kind {
	case LinkProcess:
		l.name = ProcessName(spec.Process) + "→" + BrokerName(spec.Broker)
		l.id = ProcessName(spec.Process) + "-" + BrokerName(spec.Broker)
	case LinkAdmin:
		l.name = "admin→" + BrokerName(spec.Broker)
		l.id = "admin-" + BrokerName(spec.Broker)
	case LinkPeer:
		l.name = BrokerName(spec.From) + "→" + BrokerName(spec.Broker)
		l.id = BrokerName(spec.From) + "-" + BrokerName(spec.Broker)
	default:
		return nil, fmt.Errorf("add link: unknown kind %d", spec.Kind)
	}

	n.createMu.Lock()
	defer n.createMu.Unlock()
	n.mu.RLock()
	closed, existing := n.closed, n.links[l.id]
	n.mu.RUnlock()
	if closed {
		return nil, ErrClosed
	}
	if existing != nil {
		return existing, nil
	}
	for _, ps := range spec.Proxies {
		name := n.prefix + l.id
		if ps.Suffix != "" {
			name += "-" + ps.Suffix
		}
		p, err := n.createProxy(ctx, name, ps.Listen, ps.Upstream)
		if err != nil {
			// Leave nothing half-made behind.
			for _, made := range l.proxies {
				_ = n.api.deleteProxy(context.WithoutCancel(ctx), made.Name)
			}
			return nil, fmt.Errorf("link %s: %w", l.name, err)
		}
		l.proxies = append(l.proxies, p)
	}
	n.mu.Lock()
	n.links[l.id] = l
	if spec.Kind == LinkProcess {
		if n.byProc[spec.Process] == nil {
			n.byProc[spec.Process] = make(map[int32]*Link)
		}
		n.byProc[spec.Process][spec.Broker] = l
	}
	n.mu.Unlock()
	n.log.Debug("link created", "link", l.name, "proxies", l.proxies)
	return l, nil
}

// addConnLink creates the LinkModeConn link process→broker, or returns the
// existing one.
func (n *Network) addConnLink(process int, broker int32, upstream string) (*Link, error) {
	l := &Link{n: n, kind: LinkProcess, process: process, broker: broker,
		name: ProcessName(process) + "→" + BrokerName(broker),
		id:   ProcessName(process) + "-" + BrokerName(broker)}
	l.conn = newConnLink(l.id, upstream)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, ErrClosed
	}
	if existing := n.links[l.id]; existing != nil {
		return existing, nil
	}
	n.links[l.id] = l
	if n.byProc[process] == nil {
		n.byProc[process] = make(map[int32]*Link)
	}
	n.byProc[process][broker] = l
	n.log.Debug("link created", "link", l.name, "mode", LinkModeConn)
	return l, nil
}

func (n *Network) createProxy(ctx context.Context, name, listen, upstream string) (ProxyInfo, error) {
	host, port := n.listenHost, "0"
	if listen != "" {
		h, p, err := net.SplitHostPort(listen)
		if err != nil {
			return ProxyInfo{}, fmt.Errorf("proxy %s listen %q: %w", name, listen, err)
		}
		if h != "" {
			host = h
		}
		port = p
	}
	pick := port == "0"
	var lastErr error
	for range 30 {
		var picked int
		if pick {
			// Claimed, not only bound: while the link is down its listener
			// is closed, and another fencecheck process must not take the
			// port before the link comes back up on it.
			picked = ports.Random(n.portRange)
			if !ports.Claim(picked) {
				lastErr = fmt.Errorf("port %d is claimed by another fencecheck process", picked)
				continue
			}
			port = strconv.Itoa(picked)
		}
		p, err := n.api.createProxy(ctx, name, net.JoinHostPort(host, port), upstream)
		if err == nil {
			if pick {
				n.claimed = append(n.claimed, picked)
			}
			return ProxyInfo{Name: p.Name, Listen: p.Listen, Upstream: p.Upstream}, nil
		}
		if pick {
			ports.Release(picked)
		}
		lastErr = err
		// A taken port comes back as a 500 naming the bind error; any
		// other failure will not get better by trying another port.
		if !pick || !isStatus(err, http.StatusInternalServerError) || ctx.Err() != nil {
			break
		}
	}
	return ProxyInfo{}, fmt.Errorf("proxy %s: %w", name, lastErr)
}

// Link returns a link by its display name ("p3→b1") or ASCII name ("p3-b1"),
// or nil.
func (n *Network) Link(name string) *Link {
	id := strings.ReplaceAll(name, "→", "-")
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.links[id]
}

// ProcessLink returns the link process→broker, or nil if it was not created.
func (n *Network) ProcessLink(process int, broker int32) *Link {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.byProc[process][broker]
}

// PeerLink returns the broker-to-broker link from→to, or nil.
func (n *Network) PeerLink(from, to int32) *Link {
	return n.Link(BrokerName(from) + "-" + BrokerName(to))
}

// AdminLink returns the admin link to broker, or nil.
func (n *Network) AdminLink(broker int32) *Link {
	return n.Link("admin-" + BrokerName(broker))
}

// Links returns every link, sorted by kind then name.
func (n *Network) Links() []*Link {
	n.mu.RLock()
	out := make([]*Link, 0, len(n.links))
	for _, l := range n.links {
		out = append(out, l)
	}
	n.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.kind != b.kind {
			return a.kind < b.kind
		}
		if a.process != b.process {
			return a.process < b.process
		}
		if a.from != b.from {
			return a.from < b.from
		}
		return a.broker < b.broker
	})
	return out
}

// HealAll enables every link, removes every toxic and removes every Kafka-aware fault
// (delivering the requests they hold). It runs on
// context.WithoutCancel-style contexts in heal paths, so it keeps going past
// a failing link and returns all errors joined.
func (n *Network) HealAll(ctx context.Context) error {
	var errs []error
	if n.inproc != nil {
		// One call: the in-process server holds only our proxies.
		errs = append(errs, n.api.do(ctx, http.MethodPost, "/reset", nil, nil, http.StatusNoContent))
	}
	for _, l := range n.Links() {
		if l.conn != nil || n.inproc == nil {
			errs = append(errs, l.Heal(ctx))
		}
	}
	// After the links are up, so that held requests reach their brokers.
	errs = append(errs, n.kafka.removeAll(ctx))
	return errors.Join(errs...)
}

// Close removes every proxy (closing its connections) and stops the
// in-process server. It is idempotent.
func (n *Network) Close(ctx context.Context) error {
	n.createMu.Lock()
	defer n.createMu.Unlock()
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	defer func() { ports.Release(n.claimed...); n.claimed = nil }()
	links := make([]*Link, 0, len(n.links))
	for _, l := range n.links {
		links = append(links, l)
	}
	n.mu.Unlock()
	for _, l := range links {
		if l.conn != nil {
			l.conn.close()
		}
	}
	if n.inproc != nil {
		n.inproc.close()
		return nil
	}
	var errs []error
	for _, l := range links {
		for _, p := range l.proxies {
			if err := n.api.deleteProxy(ctx, p.Name); err != nil && !isStatus(err, http.StatusNotFound) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// addrKey normalizes host:port for lookups.
func addrKey(hostport string) (string, error) {
	h, p, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(strings.ToLower(h), p), nil
}

// Link is one path through toxiproxy: one proxy, or several that fail
// together (a peer link has one per broker listener). Its fault methods act
// on every proxy of the link.
type Link struct {
	n       *Network
	name    string // display name: "p3→b1"
	id      string // ASCII name: "p3-b1"
	kind    LinkKind
	process int
	from    int32
	broker  int32
	proxies []ProxyInfo
	conn    *connLink // a LinkModeConn link: no proxies
}

// Name is the human-readable name: "p3→b1", "admin→b1", "b1→b2".
func (l *Link) Name() string { return l.name }

// ID is the ASCII name, "p3-b1"; toxiproxy's proxy names are it with the
// network's NamePrefix and, for multi-proxy links, a suffix.
func (l *Link) ID() string { return l.id }

// Kind says what the link connects.
func (l *Link) Kind() LinkKind { return l.kind }

// Process is the process of a LinkProcess link.
func (l *Link) Process() int { return l.process }

// From is the dialing broker of a LinkPeer link.
func (l *Link) From() int32 { return l.from }

// Broker is the broker the link leads to.
func (l *Link) Broker() int32 { return l.broker }

// Mode is LinkModeConn for a link inside its process's connections,
// LinkModeProxy for one of toxiproxy proxies.
func (l *Link) Mode() LinkMode {
	if l.conn != nil {
		return LinkModeConn
	}
	return LinkModeProxy
}

// Proxies returns the link's toxiproxy proxies (none for a LinkModeConn link).
func (l *Link) Proxies() []ProxyInfo { return append([]ProxyInfo(nil), l.proxies...) }

// String is Name.
func (l *Link) String() string { return l.name }

// dialAddr is where this process reaches proxy i.
func (l *Link) dialAddr(i int) string {
	h, p, err := net.SplitHostPort(l.proxies[i].Listen)
	if err != nil {
		return l.proxies[i].Listen
	}
	if ip := net.ParseIP(h); ip != nil && ip.IsUnspecified() {
		h = l.n.dialHost
	}
	return net.JoinHostPort(h, p)
}

func (l *Link) each(ctx context.Context, what string, fn func(ctx context.Context, proxy string) error) error {
	if l.conn != nil {
		l.n.log.Debug("link "+what, "link", l.name)
		return nil
	}
	var errs []error
	for _, p := range l.proxies {
		if err := fn(ctx, p.Name); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%s link %s: %w", what, l.name, err)
	}
	l.n.log.Debug("link "+what, "link", l.name)
	return nil
}

// Disable takes the link down: its listeners close (a conn link refuses its
// process's dials), so connecting is refused, and its open connections are
// closed. (For a black hole, where connecting succeeds and nothing passes,
// add a "timeout" toxic with timeout 0 instead.)
func (l *Link) Disable(ctx context.Context) error {
	if l.conn != nil {
		l.conn.setDown(true)
	}
	return l.each(ctx, "disable", func(ctx context.Context, p string) error { return l.n.api.setEnabled(ctx, p, false) })
}

// Enable brings the link back up on the same addresses.
func (l *Link) Enable(ctx context.Context) error {
	if l.conn != nil {
		l.conn.setDown(false)
	}
	return l.each(ctx, "enable", func(ctx context.Context, p string) error { return l.n.api.setEnabled(ctx, p, true) })
}

// Enabled reports whether every proxy of the link is up.
func (l *Link) Enabled(ctx context.Context) (bool, error) {
	if l.conn != nil {
		return !l.conn.isDown(), nil
	}
	for _, p := range l.proxies {
		pj, err := l.n.api.getProxy(ctx, p.Name)
		if err != nil {
			return false, fmt.Errorf("link %s: %w", l.name, err)
		}
		if !pj.Enabled {
			return false, nil
		}
	}
	return true, nil
}

// AddToxic adds t to every proxy of the link. If one fails, the toxic is
// removed from those that took it.
func (l *Link) AddToxic(ctx context.Context, t Toxic) error {
	if t.Toxicity == 0 {
		t.Toxicity = 1
	}
	if t.Stream == "" {
		t.Stream = StreamDownstream
	}
	if t.Name == "" {
		t.Name = t.Type + "_" + t.Stream
	}
	if l.conn != nil {
		if err := l.conn.addToxic(t); err != nil {
			return fmt.Errorf("link %s: add toxic %s: %w", l.name, t.Name, err)
		}
		l.n.log.Debug("link toxic added", "link", l.name, "toxic", t.Name, "type", t.Type)
		return nil
	}
	for i, p := range l.proxies {
		if err := l.n.api.addToxic(ctx, p.Name, t); err != nil {
			for _, q := range l.proxies[:i] {
				_ = l.n.api.removeToxic(context.WithoutCancel(ctx), q.Name, t.Name)
			}
			return fmt.Errorf("link %s: add toxic %s: %w", l.name, t.Name, err)
		}
	}
	l.n.log.Debug("link toxic added", "link", l.name, "toxic", t.Name, "type", t.Type)
	return nil
}

// RemoveToxic removes the toxic named name from every proxy of the link; a
// proxy without it is not an error.
func (l *Link) RemoveToxic(ctx context.Context, name string) error {
	if l.conn != nil {
		if err := l.conn.removeToxic(ctx, name); err != nil {
			return fmt.Errorf("remove toxic %s link %s: %w", name, l.name, err)
		}
	}
	return l.each(ctx, "remove toxic "+name, func(ctx context.Context, p string) error {
		err := l.n.api.removeToxic(ctx, p, name)
		if isStatus(err, http.StatusNotFound) {
			return nil
		}
		return err
	})
}

// Toxics returns the toxics of the link's first proxy (AddToxic keeps them
// alike on all).
func (l *Link) Toxics(ctx context.Context) ([]Toxic, error) {
	if l.conn != nil {
		return l.conn.toxics()
	}
	ts, err := l.n.api.toxics(ctx, l.proxies[0].Name)
	if err != nil {
		return nil, fmt.Errorf("link %s: %w", l.name, err)
	}
	return ts, nil
}

// Heal enables the link and removes all its toxics.
func (l *Link) Heal(ctx context.Context) error {
	if l.conn != nil {
		l.conn.heal(ctx)
	}
	return l.each(ctx, "heal", func(ctx context.Context, p string) error {
		if err := l.n.api.setEnabled(ctx, p, true); err != nil {
			return err
		}
		ts, err := l.n.api.toxics(ctx, p)
		if err != nil {
			return err
		}
		for _, t := range ts {
			if err := l.n.api.removeToxic(ctx, p, t.Name); err != nil && !isStatus(err, http.StatusNotFound) {
				return err
			}
		}
		return nil
	})
}

// tlsClient runs a TLS client handshake on conn for the broker at addr (host:port); conn is
// closed if the handshake fails.
func tlsClient(ctx context.Context, conn net.Conn, conf *tls.Config, addr string) (net.Conn, error) {
	c := conf.Clone()
	if c.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		c.ServerName = host
	}
	tc := tls.Client(conn, c)
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	return tc, nil
}
