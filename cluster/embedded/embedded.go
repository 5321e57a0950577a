// Package embedded runs a kfake cluster (franz-go's Kafka-compatible fake) in
// this process: the default for a first run and for fast tests.
//
// kfake is not Kafka. It shares one state across its "brokers", so a broker
// fault here only moves coordinators and leaders and breaks connections; no
// data is lost or fenced by replication. The deviations a conformance run
// shows side by side with Apache Kafka are listed in docs/clusters.md ("embedded"). Those that
// shape this backend:
//
//   - Kill removes the node (kfake.RemoveNode) and closes its connections;
//     Restart re-adds it with the same id and port (kfake.AddNode). Removing
//     a node rehashes every transaction and group coordinator, not only the
//     removed node's.
//   - kfake's controller is fixed at start (the highest id) and metadata
//     keeps naming it after it is killed, so requests kgo sends to the
//     controller (CreateTopics and the like) fail until it is restarted.
//   - Pause is simulated: the broker's connections stop delivering bytes
//     both ways until Resume; new connections are accepted and stall too,
//     as with a SIGSTOPped process.
//   - TxnVersion 1 is the transaction.version feature finalized at 1 (kfake
//     starts at 2), so kgo takes the pre-KIP-890 path; kfake itself still
//     accepts either.
package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/cluster/internal/ports"
	"github.com/fencecheck/fencecheck/cluster/links"
)

// Kind is the backend's name in Info and errors.
const Kind = "embedded"

// Options configures an embedded cluster. The zero value is valid.
type Options struct {
	// Brokers is the number of brokers. Default 3.
	Brokers int
	// TxnVersion is the transaction.version in effect, 1 or 2. Default 2.
	TxnVersion int
	// Network configures the toxiproxy links. Default: in-process.
	Network links.NetworkOptions
	// Logger receives the backend's events, and kfake's at warn and above.
	// Default: discard.
	Logger *slog.Logger
	// KfakeOpts are passed to kfake.NewCluster after ours (e.g.
	// kfake.SeedTopics). Do not pass NumBrokers, Ports or ListenFn.
	KfakeOpts []kfake.Opt
}

func (o *Options) defaults() error {
	if o.Brokers == 0 {
		o.Brokers = 3
	}
	if o.TxnVersion == 0 {
		o.TxnVersion = 2
	}
	if o.Brokers < 1 || o.Brokers > 64 {
		return &cluster.OptionError{Field: "Brokers", Value: o.Brokers, Reason: "want 1..64"}
	}
	if o.TxnVersion != 1 && o.TxnVersion != 2 {
		return &cluster.OptionError{Field: "TxnVersion", Value: o.TxnVersion, Reason: "want 1 or 2"}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Network.Logger == nil {
		o.Network.Logger = o.Logger
	}
	return nil
}

// Cluster is a running kfake cluster. It implements cluster.Cluster.
type Cluster struct {
	opts Options
	log  *slog.Logger
	kc   *kfake.Cluster
	net  *links.Network
	cl   *kgo.Client // admin, on Bootstrap
	adm  *kadm.Client

	controller int32

	mu      sync.Mutex
	closed  bool
	brokers map[int32]*broker
	byAddr  map[string]*broker           // listener address → broker
	lns     map[string]*trackingListener // listener address → its current listener
	ports   []int                        // broker ports, claimed (ports.Free) until Close
}

type broker struct {
	id    int32
	addr  string // 127.0.0.1:port, listened on and advertised
	port  int
	state cluster.BrokerState
	gate  *gate
	conns map[*gatedConn]struct{}
}

var _ cluster.Cluster = (*Cluster)(nil)

// New starts an embedded cluster and returns once it is healthy
// (cluster.WaitHealthy) or ctx ends; on error nothing is left running.
func New(ctx context.Context, opts Options) (_ *Cluster, err error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	start := time.Now()
	c := &Cluster{
		opts:    opts,
		log:     opts.Logger.With("cluster", Kind),
		brokers: make(map[int32]*broker),
		byAddr:  make(map[string]*broker),
		lns:     make(map[string]*trackingListener),
	}
	defer func() {
		if err != nil {
			_ = c.Close(context.WithoutCancel(ctx))
		}
	}()

	// Ports below the ephemeral range, so Restart can re-bind them.
	pts := make([]int, opts.Brokers)
	c.ports = pts // released by Close, also on a failed start
	for i := range pts {
		p, err := ports.Free(ports.Default())
		if err != nil {
			return nil, err
		}
		for slices.Contains(pts[:i], p) {
			if p, err = ports.Free(ports.Default()); err != nil {
				return nil, err
			}
		}
		pts[i] = p
	}
	kopts := []kfake.Opt{
		kfake.Ports(pts...),
		kfake.ListenFn(c.listen),
		kfake.WithLogger(kfakeLogger{c.log}),
		// Group timing short enough for a pipeline run's zombies to be noticed within seconds,
		// as the local clusters' (docs/clusters.md): the classic protocol's minimum session
		// below the members' own, and the consumer protocol's session, which is the group's.
		kfake.BrokerConfigs(map[string]string{
			"group.min.session.timeout.ms":         "500",
			"group.consumer.session.timeout.ms":    "2000",
			"group.consumer.heartbeat.interval.ms": "500",
		}),
	}
	c.kc, err = kfake.NewCluster(append(kopts, opts.KfakeOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("kfake: %w", err)
	}
	addrs := c.kc.ListenAddrs()
	c.mu.Lock()
	for i, a := range addrs {
		// kfake numbers nodes 0..n-1 in listener order.
		b := c.brokerLocked(a)
		b.id, b.port, b.state = int32(i), pts[i], cluster.StateRunning
		c.brokers[b.id] = b
	}
	c.mu.Unlock()
	c.controller = int32(len(addrs) - 1)

	if opts.Network.ConnDial == nil {
		// Both ends of a conn link's connection live in this process: an in-memory pipe
		// (no file descriptor) to the broker's listener.
		opts.Network.ConnDial = c.dialMemory
	}
	if c.net, err = links.NewNetwork(ctx, opts.Network); err != nil {
		return nil, err
	}
	for _, b := range c.sortedBrokers() {
		if err := c.net.AddBroker(b.id, b.addr, b.addr); err != nil {
			return nil, err
		}
	}
	if c.cl, err = cluster.NewAdminClient(c.Bootstrap(), c.log); err != nil {
		return nil, err
	}
	c.adm = kadm.NewClient(c.cl)
	if opts.TxnVersion == 1 {
		if err := c.pinTxnVersion(ctx, 1); err != nil {
			return nil, err
		}
	}
	if err := cluster.WaitHealthy(ctx, c, c.log); err != nil {
		return nil, err
	}
	c.log.Info("cluster ready", "brokers", opts.Brokers, "txn_version", opts.TxnVersion, "took", time.Since(start).Round(time.Millisecond))
	return c, nil
}

// pinTxnVersion finalizes transaction.version at v; kgo reads the finalized
// level from ApiVersions to choose the KIP-890 path.
func (c *Cluster) pinTxnVersion(ctx context.Context, v int16) error {
	res, err := c.adm.UpdateFeatures(ctx, false, kadm.FeatureUpdate{Feature: "transaction.version", MaxVersionLevel: v, UpgradeType: 2})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		return fmt.Errorf("set transaction.version=%d: %w", v, err)
	}
	return nil
}

// Info implements cluster.Cluster.
func (c *Cluster) Info() cluster.Info {
	return cluster.Info{Kind: Kind, Version: "kfake", TxnVersion: c.opts.TxnVersion, Brokers: c.opts.Brokers, ClusterID: "kfake"}
}

// Kfake returns the kfake cluster, for its fault hooks (Fault, ControlKey,
// SleepControl, ...). Do not RemoveNode/AddNode behind the backend's back.
func (c *Cluster) Kfake() *kfake.Cluster { return c.kc }

// Bootstrap implements cluster.Cluster: every broker's listener address.
func (c *Cluster) Bootstrap() []string {
	var out []string
	for _, b := range c.sortedBrokers() {
		out = append(out, b.addr)
	}
	return out
}

func (c *Cluster) sortedBrokers() []*broker {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*broker, 0, len(c.brokers))
	for _, b := range c.brokers {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// Brokers implements cluster.Cluster. Roles come from kfake directly
// (CoordinatorFor, LeaderFor), which is what its FindCoordinator and Metadata
// answer; the controller is the fixed kfake controller.
func (c *Cluster) Brokers(ctx context.Context, q cluster.RoleQuery) ([]cluster.Broker, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	var out []cluster.Broker
	c.mu.Lock()
	for _, b := range c.brokers {
		out = append(out, cluster.Broker{ID: b.id, Addr: b.addr, State: b.state})
	}
	c.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	add := func(id int32, r cluster.BrokerRole) {
		for i := range out {
			if out[i].ID == id {
				out[i].Roles = append(out[i].Roles, r)
			}
		}
	}
	add(c.controller, cluster.BrokerRole{Kind: cluster.RoleController})
	for _, k := range q.TransactionalIDs {
		add(c.kc.CoordinatorFor(k), cluster.BrokerRole{Kind: cluster.RoleTxnCoordinator, Key: k})
	}
	for _, k := range q.Groups {
		add(c.kc.CoordinatorFor(k), cluster.BrokerRole{Kind: cluster.RoleGroupCoordinator, Key: k})
	}
	var errs []error
	for _, tp := range q.Partitions {
		id := c.kc.LeaderFor(tp.Topic, tp.Partition)
		if id < 0 {
			errs = append(errs, fmt.Errorf("leader of %s/%d: no such partition", tp.Topic, tp.Partition))
			continue
		}
		add(id, cluster.BrokerRole{Kind: cluster.RoleLeader, Topic: tp.Topic, Partition: tp.Partition})
	}
	return out, errors.Join(errs...)
}

// Links implements cluster.Cluster.
func (c *Cluster) Links(ctx context.Context, process int) (cluster.DialFunc, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	return c.net.Dialer(ctx, process)
}

// Network implements cluster.Cluster.
func (c *Cluster) Network() *links.Network { return c.net }

// Kill implements cluster.Cluster: the node leaves the cluster (its
// partitions and coordinators move to the others) and its connections close.
func (c *Cluster) Kill(ctx context.Context, id int32) error {
	b, err := c.get(id)
	if err != nil {
		return err
	}
	c.mu.Lock()
	st := b.state
	c.mu.Unlock()
	if st == cluster.StateKilled {
		return nil
	}
	if err := c.kc.RemoveNode(id); err != nil {
		return fmt.Errorf("kill %s: %w", links.BrokerName(id), err)
	}
	c.mu.Lock()
	b.state = cluster.StateKilled
	conns := b.takeConns()
	b.gate.resume() // a restarted node starts unpaused
	c.mu.Unlock()
	for _, gc := range conns {
		gc.Close()
	}
	c.log.Info("broker killed", "broker", id)
	return nil
}

// Restart implements cluster.Cluster: a killed node is re-added with its id
// and port; a running or paused one is killed first.
func (c *Cluster) Restart(ctx context.Context, id int32) error {
	b, err := c.get(id)
	if err != nil {
		return err
	}
	c.mu.Lock()
	st := b.state
	c.mu.Unlock()
	if st != cluster.StateKilled {
		if err := c.Kill(ctx, id); err != nil {
			return err
		}
	}
	var addErr error
	for {
		// The port was ours a moment ago; retry briefly if the kernel has
		// not let go of it.
		if _, _, addErr = c.kc.AddNode(id, b.port); addErr == nil {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("restart %s: %w (%w)", links.BrokerName(id), addErr, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	c.mu.Lock()
	b.state = cluster.StateRunning
	c.mu.Unlock()
	c.log.Info("broker restarted", "broker", id)
	return nil
}

// Pause implements cluster.Cluster (simulated: see the package comment).
func (c *Cluster) Pause(ctx context.Context, id int32) error {
	return c.setPaused(id, true)
}

// Resume implements cluster.Cluster.
func (c *Cluster) Resume(ctx context.Context, id int32) error {
	return c.setPaused(id, false)
}

func (c *Cluster) setPaused(id int32, paused bool) error {
	b, err := c.get(id)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case b.state == cluster.StateKilled:
		return fmt.Errorf("pause/resume %s: broker is killed", links.BrokerName(id))
	case paused:
		b.gate.pause()
		b.state = cluster.StatePaused
	default:
		b.gate.resume()
		b.state = cluster.StateRunning
	}
	c.log.Info("broker "+map[bool]string{true: "paused", false: "resumed"}[paused], "broker", id)
	return nil
}

// Close implements cluster.Cluster.
func (c *Cluster) Close(ctx context.Context) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	var conns []*gatedConn
	for _, b := range c.brokers {
		b.gate.resume()
		conns = append(conns, b.takeConns()...)
	}
	c.mu.Unlock()
	var errs []error
	if c.cl != nil {
		c.cl.Close()
	}
	if c.net != nil {
		errs = append(errs, c.net.Close(ctx))
	}
	if c.kc != nil {
		c.kc.Close()
	}
	for _, gc := range conns {
		gc.Close()
	}
	ports.Release(c.ports...)
	return errors.Join(errs...)
}

func (c *Cluster) check() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return cluster.ErrClosed
	}
	return nil
}

func (c *Cluster) get(id int32) (*broker, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, cluster.ErrClosed
	}
	b, ok := c.brokers[id]
	if !ok {
		return nil, fmt.Errorf("broker %d: %w", id, cluster.ErrUnknownBroker)
	}
	return b, nil
}

// brokerLocked returns the broker listening on addr, creating its record.
func (c *Cluster) brokerLocked(addr string) *broker {
	b := c.byAddr[addr]
	if b == nil {
		b = &broker{addr: addr, id: -1, gate: newGate(), conns: make(map[*gatedConn]struct{})}
		c.byAddr[addr] = b
	}
	return b
}

func (b *broker) takeConns() []*gatedConn {
	out := make([]*gatedConn, 0, len(b.conns))
	for gc := range b.conns {
		out = append(out, gc)
	}
	clear(b.conns)
	return out
}

// listen is kfake's ListenFn: it tracks each broker's connections so Kill can
// close them and Pause can freeze them. Its listeners also accept in-memory
// connections (dialMemory).
func (c *Cluster) listen(network, address string) (net.Listener, error) {
	ln, err := net.Listen(network, address)
	if err != nil {
		return nil, err
	}
	tl := &trackingListener{Listener: ln, c: c, accepted: make(chan accepted), pipes: make(chan net.Conn), done: make(chan struct{})}
	go tl.acceptTCP()
	c.mu.Lock()
	c.lns[ln.Addr().String()] = tl
	c.mu.Unlock()
	return tl, nil
}

// dialMemory connects to the broker listening on addr over an in-memory pipe:
// kfake serves it as any connection, and neither end holds a file descriptor.
// A broker that does not listen (killed) refuses it.
func (c *Cluster) dialMemory(ctx context.Context, network, addr string) (net.Conn, error) {
	c.mu.Lock()
	tl := c.lns[addr]
	c.mu.Unlock()
	refused := &net.OpError{Op: "dial", Net: network, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	if tl == nil {
		return nil, refused
	}
	client, server := net.Pipe()
	select {
	case tl.pipes <- server:
		return client, nil
	case <-tl.done:
		return nil, refused
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type accepted struct {
	conn net.Conn
	err  error
}

type trackingListener struct {
	net.Listener
	c        *Cluster
	accepted chan accepted // from the TCP listener
	pipes    chan net.Conn // server ends of dialMemory's pipes
	done     chan struct{}
	once     sync.Once
}

// acceptTCP hands the TCP listener's connections to Accept until it closes.
func (l *trackingListener) acceptTCP() {
	for {
		conn, err := l.Listener.Accept()
		select {
		case l.accepted <- accepted{conn, err}:
		case <-l.done:
			if conn != nil {
				conn.Close()
			}
			return
		}
		if err != nil {
			return
		}
	}
}

func (l *trackingListener) Close() error {
	l.once.Do(func() {
		close(l.done)
		l.c.mu.Lock()
		if l.c.lns[l.Addr().String()] == l {
			delete(l.c.lns, l.Addr().String())
		}
		l.c.mu.Unlock()
	})
	return l.Listener.Close()
}

func (l *trackingListener) Accept() (net.Conn, error) {
	var conn net.Conn
	select {
	case a := <-l.accepted:
		if a.err != nil {
			return nil, a.err
		}
		conn = a.conn
	case conn = <-l.pipes:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c := l.c
	c.mu.Lock()
	defer c.mu.Unlock()
	// The select above may pick a connection after Close: when both are ready it chooses at
	// random. Kill closes the listener (done) before it takes the broker's connections under
	// c.mu, so checking done under c.mu here means a connection is either tracked before
	// Kill takes them, and closed by it, or refused now; otherwise the removed broker would go
	// on serving it.
	select {
	case <-l.done:
		conn.Close()
		return nil, net.ErrClosed
	default:
	}
	b := c.brokerLocked(l.Addr().String())
	gc := &gatedConn{Conn: conn, gate: b.gate, done: make(chan struct{})}
	gc.untrack = func() {
		c.mu.Lock()
		delete(b.conns, gc)
		c.mu.Unlock()
	}
	b.conns[gc] = struct{}{}
	return gc, nil
}

// kfakeLogger forwards kfake's warnings and errors.
type kfakeLogger struct{ l *slog.Logger }

func (k kfakeLogger) Logf(level kfake.LogLevel, msg string, args ...any) {
	switch level {
	case kfake.LogLevelError:
		k.l.Error("kfake: " + fmt.Sprintf(msg, args...))
	case kfake.LogLevelWarn:
		k.l.Warn("kfake: " + fmt.Sprintf(msg, args...))
	}
}
