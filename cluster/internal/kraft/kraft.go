// Package kraft is the Apache Kafka cluster that the local and containers
// backends share: N combined broker+controller nodes on loopback, their
// configs, links and lifecycle. What differs between the backends, how a
// JVM is started, signalled and waited for, is a Runner.
//
// Topology. N nodes (ids 0..N-1), each with three listeners:
//
//   - CLIENT binds 127.0.0.1:K and advertises the admin link admin→bN, a
//     proxy in front of it. Process links pN→bM point straight at K.
//   - REPL (inter-broker) and CONTROLLER bind 127.0.0.1 and are advertised
//     under the name fc-bN. Every JVM gets its own hosts file
//     (-Djdk.net.hosts.file) in which fc-bM is the address of the peer link
//     bN→bM (two proxies on 127.77.<N+1>.<M+1>, same ports as M's
//     listeners), and its own name is 127.0.0.1. So each broker-to-broker
//     connection, replication and Raft alike, crosses the link of that
//     ordered pair, and the nemesis can cut b1→b2 while b1↔b3 works.
//
// Every JVM sees the cluster's folders (configs, data, logs) at their host
// paths, so the same argument list serves a JVM started by exec and one in
// a container with those folders mounted at the same paths and host
// networking.
package kraft

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/cluster/internal/ports"
	"github.com/fencecheck/fencecheck/cluster/links"
	kafkaassets "github.com/fencecheck/fencecheck/docker/kafka"
)

// DefaultVersion is the Kafka release the backends use by default;
// mk/kafka.mk fetches the same one.
const DefaultVersion = "4.1.2"

// DefaultJVMFlags suit three brokers on a 2-core box (docs/clusters.md, "local"); both
// backends use them unless told otherwise.
var DefaultJVMFlags = []string{
	"-Xms256m", "-Xmx512m",
	"-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
	"-XX:+ExitOnOutOfMemoryError",
	"-Djava.awt.headless=true",
}

// startedLine is what a broker logs once it serves.
const startedLine = "Kafka Server started"

// Runner starts a node's JVMs: the storage tool once, the broker at every
// (re)start. It must be safe for concurrent use.
type Runner interface {
	// Classpath is the broker classpath as the JVM sees it, "<libs>/*"
	// (the JVM expands the *).
	Classpath() string
	// Start starts `java <spec.Args>` with spec.Dir as working folder and
	// stdout and stderr appended to spec.LogPath. It returns once the
	// process exists; ctx bounds only the starting.
	Start(ctx context.Context, spec ProcSpec) (Proc, error)
	// Close releases what the runner holds. Every Proc it started has
	// exited (Wait returned) when Close is called.
	Close(ctx context.Context) error
}

// ProcSpec is one JVM to start.
type ProcSpec struct {
	Node    int32    // the node it belongs to
	Mounts  []string // folders the JVM reads and writes, at these paths
	What    string   // "format" or "broker", for names and logs
	Dir     string   // working folder
	LogPath string   // stdout and stderr are appended here
	Args    []string
}

// Proc is a started JVM.
type Proc interface {
	// Wait blocks until the process has exited and returns how it ended.
	// It is called exactly once.
	Wait() error
	// Kill stops the process abruptly (SIGKILL); it also works on a paused
	// process. Calling it after exit is harmless.
	Kill() error
	// Stop asks the process to exit (SIGTERM): a broker shuts down cleanly.
	Stop() error
	// Pause freezes the process; Resume thaws it.
	Pause() error
	Resume() error
	// PID is the JVM's process id on this host, 0 when unknown.
	PID() int
}

// Config describes a cluster to New. Backends validate their options and
// fill every field.
type Config struct {
	Kind         string // the backend's name, for Info and errors
	Version      string // Kafka release
	Brokers      int
	TxnVersion   int
	Dir          string // "" = a new temporary folder, removed by Close
	LogsDir      string // "" = <Dir>/logs
	JVMFlags     []string
	Configs      map[string]string
	StartTimeout time.Duration
	Network      links.NetworkOptions
	Logger       *slog.Logger
	Runner       Runner
	// Security is the CLIENT listener's mode: "" (plaintext), SecurityTLS, SecuritySASLScram
	// or SecuritySASLSSL. A secured cluster also runs the standard authorizer.
	Security string
	// Cache is a folder kept between clusters, "" for none: New formats from the storage
	// tool's output kept there for the same release and settings instead of running the tool,
	// and the broker JVMs share a class-data archive kept there (cache.go). Only a backend
	// whose JVMs run on this host, with these paths, may set it.
	Cache string
	// JVM names the java the Runner starts (its path and build), so that a class-data archive
	// is used only by the JVM that made it.
	JVM string
}

// Major is the major version of Config.Version (3 or 4).
func (c Config) Major() int {
	m, _ := strconv.Atoi(strings.SplitN(c.Version, ".", 2)[0])
	return m
}

// Cluster is a running KRaft cluster. It implements cluster.Cluster.
type Cluster struct {
	cfg       Config
	log       *slog.Logger
	ownDir    bool
	clusterID string
	net       *links.Network
	cl        *kgo.Client // admin, on Bootstrap; set once started (mu)
	sec       *material   // nil for a plaintext cluster
	claimed   []int       // broker ports picked by makeLinks (ports.Claim), released by Close
	formatted string      // how New formatted: "tool", "tool, cached" or "cache"

	// The class-data archive (cache.go), fixed by New: its path, "used" or "training" (node 0
	// writes it at exit to the file training names), "" when there is none.
	archive, archiveState, training string

	mu     sync.Mutex
	closed bool
	nodes  []*node
}

type node struct {
	id         int32
	dir        string
	dataDir    string
	props      string
	hosts      string
	logPath    string
	clientBind string // 127.0.0.1:K
	clientAdv  string // the admin link's address
	replPort   int
	ctrlPort   int

	// ops serializes what the harness does to the node (Kill, Restart,
	// Pause, Resume), so that two restarts cannot start two JVMs for it.
	// Close does not take it: it must not wait behind a restart.
	ops sync.Mutex

	// Guarded by Cluster.mu.
	state  cluster.BrokerState
	proc   Proc
	exited chan struct{} // closed when the current JVM has exited
	exit   error
}

var _ cluster.Cluster = (*Cluster)(nil)

// New formats and starts a cluster and returns once every broker logged
// that it started and the cluster is healthy (cluster.WaitHealthy). If it
// fails, or ctx ends first, everything it started is stopped and removed,
// and the runner is closed.
func New(ctx context.Context, cfg Config) (_ *Cluster, err error) {
	began := time.Now()
	ctx, cancel := context.WithTimeoutCause(ctx, cfg.StartTimeout, fmt.Errorf("%s cluster start timed out (Options.StartTimeout %v)", cfg.Kind, cfg.StartTimeout))
	defer cancel()

	c := &Cluster{cfg: cfg, log: cfg.Logger.With("cluster", cfg.Kind)}
	defer func() {
		if err != nil {
			if cerr := c.Close(context.WithoutCancel(ctx)); cerr != nil {
				c.log.Warn("cleanup after failed start", "err", cerr)
			}
		}
	}()
	if c.clusterID, err = newClusterID(); err != nil {
		return nil, err
	}
	if err := c.makeDirs(); err != nil {
		return nil, err
	}
	c.archiveFlags()
	if err := CheckSecurity(cfg.Security); err != nil {
		return nil, err
	}
	if cfg.Security != "" {
		if c.sec, err = newMaterial(cfg.Security, c.cfg.Dir); err != nil {
			return nil, fmt.Errorf("security material: %w", err)
		}
	}
	if c.net, err = links.NewNetwork(ctx, cfg.Network); err != nil {
		return nil, err
	}
	if c.sec != nil {
		c.net.SetTLS(c.sec.clientTLS())
	}
	if err := c.makeLinks(ctx); err != nil {
		return nil, err
	}
	if err := c.writeFiles(); err != nil {
		return nil, err
	}
	if err := c.format(ctx); err != nil {
		return nil, err
	}
	formatted := time.Now()
	for _, n := range c.nodes {
		if err := c.start(ctx, n); err != nil {
			return nil, err
		}
	}
	for _, n := range c.nodes {
		if err := c.waitStarted(ctx, n); err != nil {
			return nil, err
		}
	}
	started := time.Now()
	cl, err := cluster.AdminClient(c, c.log)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.cl = cl
	c.mu.Unlock()
	if err := cluster.WaitHealthy(ctx, c, c.log); err != nil {
		return nil, err
	}
	c.log.Info("cluster ready", "version", cfg.Version, "brokers", cfg.Brokers, "txn_version", cfg.TxnVersion,
		"client_security", c.ClientSecurity(),
		"dir", c.cfg.Dir, "format", formatted.Sub(began).Round(time.Millisecond), "formatted_by", c.formatted,
		"class_archive", c.archiveState,
		"started", started.Sub(formatted).Round(time.Millisecond),
		"healthy", time.Since(started).Round(time.Millisecond))
	return c, nil
}

// newClusterID returns 16 random bytes in unpadded base64url, as Kafka's
// Uuid prints them; one starting with '-' would read as a flag.
func newClusterID() (string, error) {
	for {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", err
		}
		id := base64.RawURLEncoding.EncodeToString(b[:])
		if id[0] != '-' {
			return id, nil
		}
	}
}

func (c *Cluster) makeDirs() error {
	if c.cfg.Dir == "" {
		d, err := os.MkdirTemp("", "fencecheck-kafka-")
		if err != nil {
			return err
		}
		c.cfg.Dir, c.ownDir = d, true
	}
	if c.cfg.LogsDir == "" {
		c.cfg.LogsDir = filepath.Join(c.cfg.Dir, "logs")
	}
	// Absolute paths: a containerized JVM sees these folders mounted at
	// the same paths.
	for _, p := range []*string{&c.cfg.Dir, &c.cfg.LogsDir} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			return err
		}
		*p = abs
	}
	for _, d := range []string{c.cfg.Dir, c.cfg.LogsDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	for i := range c.cfg.Brokers {
		id := int32(i)
		dir := filepath.Join(c.cfg.Dir, links.BrokerName(id))
		if _, err := os.Stat(filepath.Join(dir, "data", "meta.properties")); err == nil {
			return &cluster.OptionError{Field: "Dir", Value: c.cfg.Dir, Reason: "holds a formatted broker already; give an empty folder"}
		}
		n := &node{
			id:      id,
			dir:     dir,
			dataDir: filepath.Join(dir, "data"),
			props:   filepath.Join(dir, "server.properties"),
			hosts:   filepath.Join(dir, "hosts"),
			logPath: filepath.Join(c.cfg.LogsDir, links.BrokerName(id)+".log"),
			state:   cluster.StateKilled, // not started yet
		}
		if err := os.MkdirAll(n.dataDir, 0o755); err != nil {
			return err
		}
		c.nodes = append(c.nodes, n)
	}
	return nil
}

// makeLinks picks ports and creates the admin and peer links, which fixes
// the addresses the configs advertise.
func (c *Cluster) makeLinks(ctx context.Context) error {
	r := ports.Default()
	if c.cfg.Network.PortLow != 0 {
		r = ports.Range{Low: c.cfg.Network.PortLow, High: c.cfg.Network.PortHigh}
	}
	used := map[int]bool{}
	pick := func(hosts ...string) (int, error) {
		for {
			p, err := ports.Free(r, hosts...)
			if err != nil {
				return 0, err
			}
			c.claimed = append(c.claimed, p)
			if !used[p] {
				used[p] = true
				return p, nil
			}
		}
	}
	for _, n := range c.nodes {
		// REPL and CONTROLLER ports must be free on loopback, where the
		// broker binds, and on every peer-link address toward it.
		hosts := []string{"127.0.0.1"}
		for _, m := range c.nodes {
			if m.id != n.id {
				hosts = append(hosts, peerIP(m.id, n.id))
			}
		}
		k, err := pick("127.0.0.1")
		if err != nil {
			return err
		}
		n.clientBind = "127.0.0.1:" + strconv.Itoa(k)
		if n.replPort, err = pick(hosts...); err != nil {
			return err
		}
		if n.ctrlPort, err = pick(hosts...); err != nil {
			return err
		}
		l, err := c.net.AddLink(ctx, links.LinkSpec{
			Kind: links.LinkAdmin, Broker: n.id,
			Proxies: []links.ProxySpec{{Listen: "127.0.0.1:0", Upstream: n.clientBind}},
		})
		if err != nil {
			return err
		}
		n.clientAdv = l.Proxies()[0].Listen
		if err := c.net.AddBroker(n.id, n.clientAdv, n.clientBind); err != nil {
			return err
		}
	}
	for _, from := range c.nodes {
		for _, to := range c.nodes {
			if from.id == to.id {
				continue
			}
			ip := peerIP(from.id, to.id)
			_, err := c.net.AddLink(ctx, links.LinkSpec{
				Kind: links.LinkPeer, From: from.id, Broker: to.id,
				Proxies: []links.ProxySpec{
					{Suffix: "repl", Listen: ip + ":" + strconv.Itoa(to.replPort), Upstream: "127.0.0.1:" + strconv.Itoa(to.replPort)},
					{Suffix: "ctrl", Listen: ip + ":" + strconv.Itoa(to.ctrlPort), Upstream: "127.0.0.1:" + strconv.Itoa(to.ctrlPort)},
				},
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *Cluster) logConfig() (path string, flag string) {
	if c.cfg.Major() >= 4 {
		p := filepath.Join(c.cfg.Dir, "log4j2.properties")
		return p, "-Dlog4j2.configurationFile=" + p
	}
	p := filepath.Join(c.cfg.Dir, "log4j.properties")
	return p, "-Dlog4j.configuration=file:" + p
}

func (c *Cluster) writeFiles() error {
	p, _ := c.logConfig()
	data := kafkaassets.Log4j2Properties
	if c.cfg.Major() < 4 {
		data = kafkaassets.Log4jProperties
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		return err
	}
	for _, n := range c.nodes {
		if err := os.WriteFile(n.props, []byte(c.serverProperties(n)), 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(n.hosts, []byte(c.hostsFile(n)), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// javaArgs are the JVM arguments common to the storage tool and the broker.
func (c *Cluster) javaArgs(n *node, flags []string) []string {
	_, logFlag := c.logConfig()
	args := append([]string(nil), flags...)
	return append(args,
		"-Dfencecheck.cluster="+c.clusterID,
		"-Djdk.net.hosts.file="+n.hosts,
		logFlag,
		"-cp", c.cfg.Runner.Classpath(),
	)
}

// format runs the storage tool for every node, in parallel, pinning
// transaction.version on 4.x.
func (c *Cluster) format(ctx context.Context) error {
	var scram []string
	if c.sec != nil {
		var err error
		if scram, err = c.sec.formatArgs(); err != nil {
			return err
		}
	}
	var features []string
	if c.cfg.Major() >= 4 {
		features = []string{"-f", "transaction.version=" + strconv.Itoa(c.cfg.TxnVersion)}
	}
	entry := c.formatEntry(features)
	if entry != "" {
		ok, err := c.formatFromCache(entry)
		if err != nil {
			return err
		}
		if ok {
			c.formatted = "cache"
			return nil
		}
	}
	errs := make([]error, len(c.nodes))
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		args := c.javaArgs(n, []string{"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"})
		args = append(args, "kafka.tools.StorageTool", "format", "-t", c.clusterID, "-c", n.props)
		args = append(append(args, features...), scram...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.runTool(ctx, n, "format", args)
		}()
	}
	wg.Wait()
	c.formatted = "tool"
	if err := errors.Join(errs...); err != nil || entry == "" {
		return err
	}
	if err := c.saveFormat(entry); err != nil {
		c.log.Warn("keep the format for the next clusters", "entry", entry, "err", err)
		return nil
	}
	c.formatted = "tool, cached"
	return nil
}

// runTool runs a short-lived JVM to completion, its output appended to the
// node's log, killed if ctx ends.
func (c *Cluster) runTool(ctx context.Context, n *node, what string, args []string) error {
	if err := c.logMarker(n, what); err != nil {
		return err
	}
	p, err := c.cfg.Runner.Start(ctx, ProcSpec{Node: n.id, Mounts: c.mounts(), What: what, Dir: n.dir, LogPath: n.logPath, Args: args})
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, links.BrokerName(n.id), err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = p.Kill()
		<-done
		err = context.Cause(ctx)
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", what, links.BrokerName(n.id), err, tail(n.logPath, 15))
	}
	return nil
}

// mounts are the folders every JVM uses: configs and data, and logs.
func (c *Cluster) mounts() []string { return []string{c.cfg.Dir, c.cfg.LogsDir} }

// logMarker appends a marker line to the node's log; waitStarted reads
// only what follows the last "start" marker.
func (c *Cluster) logMarker(n *node, what string) error {
	f, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "=== fencecheck: %s %s at %s ===\n", what, links.BrokerName(n.id), time.Now().UTC().Format(time.RFC3339Nano))
	return f.Close()
}

// start launches node's broker JVM. The caller holds n.ops (or is New).
func (c *Cluster) start(ctx context.Context, n *node) error {
	c.mu.Lock()
	closed, alive := c.closed, aliveLocked(n)
	c.mu.Unlock()
	switch {
	case closed:
		return cluster.ErrClosed
	case alive:
		return fmt.Errorf("start %s: its JVM is still running", links.BrokerName(n.id))
	}
	if err := c.logMarker(n, "start"); err != nil {
		return err
	}
	args := append(c.javaArgs(n, c.brokerFlags(n)), "kafka.Kafka", n.props)
	p, err := c.cfg.Runner.Start(ctx, ProcSpec{Node: n.id, Mounts: c.mounts(), What: "broker", Dir: n.dir, LogPath: n.logPath, Args: args})
	if err != nil {
		return fmt.Errorf("start %s: %w", links.BrokerName(n.id), err)
	}
	exited := make(chan struct{})
	go func() {
		err := p.Wait()
		c.mu.Lock()
		n.exit = err
		c.mu.Unlock()
		close(exited)
	}()
	c.mu.Lock()
	if c.closed { // Close ran while the runner was starting it
		c.mu.Unlock() // the goroutine above needs mu to close exited
		_ = p.Kill()
		<-exited
		return cluster.ErrClosed
	}
	n.proc, n.exited, n.exit, n.state = p, exited, nil, cluster.StateRunning
	c.mu.Unlock()
	c.log.Info("broker started", "broker", n.id, "pid", p.PID(), "log", n.logPath)
	return nil
}

// waitStarted waits until node's log shows the started line after the last
// start marker. It fails early if the JVM exits.
func (c *Cluster) waitStarted(ctx context.Context, n *node) error {
	c.mu.Lock()
	exited := n.exited
	c.mu.Unlock()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if startedSinceLastStart(n.logPath) {
			return nil
		}
		select {
		case <-exited:
			c.mu.Lock()
			e := n.exit
			c.mu.Unlock()
			return fmt.Errorf("broker %s exited while starting (%v); %s:\n%s", links.BrokerName(n.id), e, n.logPath, tail(n.logPath, 25))
		case <-ctx.Done():
			return fmt.Errorf("broker %s not started: %w; %s:\n%s", links.BrokerName(n.id), context.Cause(ctx), n.logPath, tail(n.logPath, 15))
		case <-tick.C:
		}
	}
}

// startedSinceLastStart scans the log after the last start marker.
func startedSinceLastStart(path string) bool {
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	if i := bytes.LastIndex(data, []byte("=== fencecheck: start ")); i >= 0 {
		data = data[i:]
	}
	return bytes.Contains(data, []byte(startedLine))
}

// tail returns the last n lines of a file, for error messages.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// Info implements cluster.Cluster.
func (c *Cluster) Info() cluster.Info {
	return cluster.Info{Kind: c.cfg.Kind, Version: c.cfg.Version, TxnVersion: c.cfg.TxnVersion, Brokers: c.cfg.Brokers, LogsDir: c.cfg.LogsDir, ClusterID: c.clusterID}
}

// ClientSecurity implements cluster.Secured: the admin's credentials on the CLIENT
// listener, nil for a plaintext cluster. The admin is a super user.
func (c *Cluster) ClientSecurity() *cluster.Security {
	if c.sec == nil {
		return nil
	}
	return c.sec.security()
}

// SecurityFiles names the generated files a client outside fencecheck needs, "" for a
// plaintext cluster or one the mode does not use: the CA certificate, the admin's client
// certificate and key (mutual TLS), and the file holding the admin's SCRAM password.
func (c *Cluster) SecurityFiles() (ca, cert, key, passwordFile string) {
	if c.sec == nil {
		return "", "", "", ""
	}
	if c.sec.tls() {
		ca = c.sec.path(caFile)
	}
	if c.sec.mode == SecurityTLS {
		cert, key = c.sec.path(clientCertFile), c.sec.path(clientKeyFile)
	}
	if c.sec.sasl() {
		passwordFile = c.sec.path(adminPasswordFil)
	}
	return ca, cert, key, passwordFile
}

// ClientCertificate signs a client certificate for principal name (its CN) with the
// cluster's CA, valid from notBefore to notAfter, for mutual TLS as another principal than
// the admin. It fails on a cluster without TLS.
func (c *Cluster) ClientCertificate(name string, notBefore, notAfter time.Time) (tls.Certificate, error) {
	if c.sec == nil || !c.sec.tls() {
		return tls.Certificate{}, errors.New("client certificate: the cluster does not speak TLS")
	}
	certPEM, keyPEM, err := c.sec.Issue(name, nil, notBefore, notAfter)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}

// Dir returns the folder holding configs and data.
func (c *Cluster) Dir() string { return c.cfg.Dir }

// Tag is the value of -Dfencecheck.cluster=… on this cluster's JVMs (its
// cluster id), so tests and operators can find them (ps, /proc/*/cmdline).
func (c *Cluster) Tag() string { return c.clusterID }

// Bootstrap implements cluster.Cluster: the admin links' addresses, which
// the brokers advertise.
func (c *Cluster) Bootstrap() []string {
	var out []string
	for _, n := range c.nodes {
		out = append(out, n.clientAdv)
	}
	return out
}

// Brokers implements cluster.Cluster.
func (c *Cluster) Brokers(ctx context.Context, q cluster.RoleQuery) ([]cluster.Broker, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, cluster.ErrClosed
	}
	out := make([]cluster.Broker, 0, len(c.nodes))
	for _, n := range c.nodes {
		st := n.state
		if !aliveLocked(n) {
			st = cluster.StateKilled // also a JVM that died by itself
		}
		out = append(out, cluster.Broker{ID: n.id, Addr: n.clientAdv, State: st})
	}
	cl := c.cl
	c.mu.Unlock()
	if cl == nil { // still starting
		return out, nil
	}
	return out, cluster.DescribeRoles(ctx, cl, out, q)
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

// BrokerProcess is a broker's JVM, for measurements.
type BrokerProcess struct {
	ID       int32
	PID      int   // 0 when not running
	RSSBytes int64 // resident set size from /proc, 0 when unknown
}

// Processes returns each broker's JVM pid and resident memory.
func (c *Cluster) Processes() []BrokerProcess {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []BrokerProcess
	for _, n := range c.nodes {
		bp := BrokerProcess{ID: n.id}
		if aliveLocked(n) {
			bp.PID = n.proc.PID()
			bp.RSSBytes = rss(bp.PID)
		}
		out = append(out, bp)
	}
	return out
}

func rss(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}

func (c *Cluster) check() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return cluster.ErrClosed
	}
	return nil
}

func (c *Cluster) node(id int32) (*node, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, cluster.ErrClosed
	}
	for _, n := range c.nodes {
		if n.id == id {
			return n, nil
		}
	}
	return nil, fmt.Errorf("broker %d: %w", id, cluster.ErrUnknownBroker)
}

// aliveLocked reports whether node's JVM runs (or is paused).
func aliveLocked(n *node) bool {
	if n.exited == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// Kill implements cluster.Cluster: the runner's abrupt stop (SIGKILL), then
// wait for the JVM to exit.
func (c *Cluster) Kill(ctx context.Context, id int32) error {
	n, err := c.node(id)
	if err != nil {
		return err
	}
	n.ops.Lock()
	defer n.ops.Unlock()
	return c.kill(ctx, n)
}

// kill stops node's JVM and waits for it to exit. The caller holds n.ops.
func (c *Cluster) kill(ctx context.Context, n *node) error {
	id := n.id
	c.mu.Lock()
	if aliveLocked(n) {
		if err := n.proc.Kill(); err != nil {
			c.mu.Unlock()
			return fmt.Errorf("kill %s: %w", links.BrokerName(id), err)
		}
	}
	n.state = cluster.StateKilled
	exited := n.exited
	c.mu.Unlock()
	if exited != nil {
		select {
		case <-exited:
		case <-ctx.Done():
			return fmt.Errorf("kill %s: %w", links.BrokerName(id), ctx.Err())
		}
	}
	c.log.Info("broker killed", "broker", id)
	return nil
}

// Pause implements cluster.Cluster (SIGSTOP, or the container's freezer).
func (c *Cluster) Pause(ctx context.Context, id int32) error {
	return c.freeze(id, true)
}

// Resume implements cluster.Cluster.
func (c *Cluster) Resume(ctx context.Context, id int32) error {
	return c.freeze(id, false)
}

func (c *Cluster) freeze(id int32, pause bool) error {
	n, err := c.node(id)
	if err != nil {
		return err
	}
	op, to := "resume", cluster.StateRunning
	if pause {
		op, to = "pause", cluster.StatePaused
	}
	n.ops.Lock()
	defer n.ops.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !aliveLocked(n) {
		return fmt.Errorf("%s %s: broker is not running", op, links.BrokerName(id))
	}
	if n.state == to {
		return nil // pausing a paused broker changes nothing
	}
	if pause {
		err = n.proc.Pause()
	} else {
		err = n.proc.Resume()
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", op, links.BrokerName(id), err)
	}
	n.state = to
	c.log.Info("broker "+to.String(), "broker", id)
	return nil
}

// Restart implements cluster.Cluster: a running or paused broker is killed,
// then started again on its data dir; it returns once the broker logs that
// it started.
func (c *Cluster) Restart(ctx context.Context, id int32) error {
	n, err := c.node(id)
	if err != nil {
		return err
	}
	n.ops.Lock()
	err = c.kill(ctx, n)
	if err == nil {
		err = c.start(ctx, n)
	}
	n.ops.Unlock()
	if err != nil {
		return err
	}
	return c.waitStarted(ctx, n)
}

// Close implements cluster.Cluster: every broker is killed (a controlled
// shutdown can hang while a quorum is cut off, and the data is thrown away
// anyway), then the runner, the links, and the folder if Close owns it.
func (c *Cluster) Close(ctx context.Context) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.stopTraining(ctx)
	c.mu.Lock()
	var waits []chan struct{}
	var errs []error
	for _, n := range c.nodes {
		if aliveLocked(n) {
			if err := n.proc.Kill(); err != nil {
				errs = append(errs, fmt.Errorf("close: kill %s: %w", links.BrokerName(n.id), err))
			}
			waits = append(waits, n.exited)
		}
		n.state = cluster.StateKilled
	}
	c.mu.Unlock()
	for _, w := range waits {
		select {
		case <-w:
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("close: waiting for brokers to exit: %w", ctx.Err()))
		}
	}
	errs = append(errs, c.cfg.Runner.Close(ctx))
	if c.cl != nil {
		c.cl.Close()
	}
	if c.net != nil {
		errs = append(errs, c.net.Close(ctx))
	}
	if c.ownDir {
		errs = append(errs, os.RemoveAll(c.cfg.Dir))
	}
	// After the brokers exited: until then a killed broker may come back.
	ports.Release(c.claimed...)
	return errors.Join(errs...)
}

// CheckTxnVersion validates a transaction.version for Kafka version v and
// fills the default (2 on 4.x, 1 on 3.x); tv 0 asks for the default.
// Errors name the Options fields Version and TxnVersion.
func CheckTxnVersion(v string, tv int) (int, error) {
	major := Config{Version: v}.Major()
	switch {
	case major < 3:
		return 0, &cluster.OptionError{Field: "Version", Value: v, Reason: "want Kafka 3.9 or later (KRaft combined nodes)"}
	case tv == 0 && major == 3:
		return 1, nil
	case tv == 0:
		return 2, nil
	case tv == 2 && major == 3:
		return 0, &cluster.OptionError{Field: "TxnVersion", Value: 2, Reason: "Kafka " + v + " has no transaction.version 2 (KIP-890 part 2 ships in 4.0)"}
	case tv != 1 && tv != 2:
		return 0, &cluster.OptionError{Field: "TxnVersion", Value: tv, Reason: "want 1 or 2"}
	}
	return tv, nil
}
