// Package local runs Apache Kafka brokers as JVMs on loopback, from the jars
// `make kafka` fetches from Maven Central (no Docker, no tarball).
//
// Topology. N combined broker+controller nodes (ids 0..N-1), each with three
// listeners:
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
// Processes. Each JVM runs in its own process group, started from one OS
// thread with PR_SET_PDEATHSIG=SIGKILL, so a crash of this process takes the
// JVMs with it; Close kills the groups and removes the data it owns. Kill is
// SIGKILL, Pause/Resume SIGSTOP/SIGCONT, Restart keeps the data dir. Each
// broker's stdout and stderr go to <LogsDir>/bN.log.
package local

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/cluster/internal/ports"
	kafkaassets "github.com/fencecheck/fencecheck/docker/kafka"
)

// Kind is the backend's name in Info and errors.
const Kind = "local"

// DefaultJVMFlags suit three brokers on a 2-core box (KAFKA.md §1).
var DefaultJVMFlags = []string{
	"-Xms256m", "-Xmx512m",
	"-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
	"-XX:+ExitOnOutOfMemoryError",
	"-Djava.awt.headless=true",
}

// startedLine is what a broker logs once it serves.
const startedLine = "Kafka Server started"

// Options configures a local cluster. The zero value is valid once the jars
// are installed (`make kafka`).
type Options struct {
	// Version is the Kafka release, e.g. "4.1.2" or "3.9.1". Default: the
	// one in Home or $FENCECHECK_KAFKA_HOME, else DefaultVersion.
	Version string
	// Home is a folder whose libs/ holds the broker jars. Default:
	// $FENCECHECK_KAFKA_HOME if it holds Version, else
	// ~/.cache/fencecheck/kafka/<Version> (where `make kafka` puts them).
	Home string
	// Brokers is the number of nodes, 1..9. Default 3. Replication factors
	// are min(3, Brokers) and min.insync.replicas min(2, that).
	Brokers int
	// TxnVersion is the transaction.version pinned at format time, 1 or 2.
	// Default 2 on Kafka 4.x; 3.x has only 1 (TV2 is refused there).
	TxnVersion int
	// Dir holds configs and data (bN/). Default: a new temporary folder,
	// removed by Close. A given Dir is kept.
	Dir string
	// LogsDir receives bN.log per broker (format output and every start).
	// Default <Dir>/logs.
	LogsDir string
	// Java is the java command. Default "java" on PATH (Java 17+ for 4.x).
	Java string
	// JVMFlags replace DefaultJVMFlags.
	JVMFlags []string
	// Configs are server.properties entries that override the test
	// settings (see testSettings) or add to them.
	Configs map[string]string
	// StartTimeout bounds New (formatting, starting, readiness) on top of
	// ctx. Default 3 minutes.
	StartTimeout time.Duration
	// Network sets the port range and logger of the links. The local
	// backend always runs toxiproxy in-process (its peer links listen on
	// 127.77.x.y), so Network.Toxiproxy must be empty.
	Network cluster.NetworkOptions
	// Logger receives the backend's events. Default: discard.
	Logger *slog.Logger
}

// Cluster is a running local cluster. It implements cluster.Cluster.
type Cluster struct {
	opts      Options
	home      Home
	log       *slog.Logger
	ownDir    bool
	clusterID string
	tag       string // -Dfencecheck.cluster=<tag> marks our JVMs
	net       *cluster.Network
	cl        *kgo.Client // admin, on Bootstrap; set once started (mu)
	spawn     *spawner

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

	// Guarded by Cluster.mu.
	state  cluster.BrokerState
	pid    int
	exited chan struct{} // closed when the current JVM has exited
	exit   error
}

var _ cluster.Cluster = (*Cluster)(nil)

func (o *Options) defaults() (Home, error) {
	if o.Brokers == 0 {
		o.Brokers = 3
	}
	if o.Brokers < 1 || o.Brokers > 9 {
		return Home{}, &cluster.OptionError{Field: "Brokers", Value: o.Brokers, Reason: "want 1..9"}
	}
	if o.Network.Toxiproxy != "" {
		return Home{}, &cluster.OptionError{Field: "Network.Toxiproxy", Value: o.Network.Toxiproxy, Reason: "the local backend runs toxiproxy in-process; use the external backend for an external toxiproxy"}
	}
	if o.Java == "" {
		o.Java = "java"
	}
	if _, err := exec.LookPath(o.Java); err != nil {
		return Home{}, &cluster.OptionError{Field: "Java", Value: o.Java, Reason: err.Error()}
	}
	if o.JVMFlags == nil {
		o.JVMFlags = DefaultJVMFlags
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 3 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Network.Logger == nil {
		o.Network.Logger = o.Logger
	}
	home, err := FindHome(o.Home, o.Version)
	if err != nil {
		return Home{}, err
	}
	o.Version = home.Version
	switch {
	case home.Major() < 3:
		return Home{}, &cluster.OptionError{Field: "Version", Value: home.Version, Reason: "want Kafka 3.9 or later (KRaft combined nodes)"}
	case o.TxnVersion == 0 && home.Major() == 3:
		o.TxnVersion = 1
	case o.TxnVersion == 0:
		o.TxnVersion = 2
	case o.TxnVersion == 2 && home.Major() == 3:
		return Home{}, &cluster.OptionError{Field: "TxnVersion", Value: 2, Reason: "Kafka " + home.Version + " has no transaction.version 2 (KIP-890 part 2 ships in 4.0)"}
	case o.TxnVersion != 1 && o.TxnVersion != 2:
		return Home{}, &cluster.OptionError{Field: "TxnVersion", Value: o.TxnVersion, Reason: "want 1 or 2"}
	}
	return home, nil
}

// New formats and starts a cluster and returns once every broker logged
// that it started and the cluster is healthy (cluster.WaitHealthy). If it
// fails, or ctx ends first, everything it started is stopped and removed.
func New(ctx context.Context, opts Options) (_ *Cluster, err error) {
	home, err := opts.defaults()
	if err != nil {
		return nil, err
	}
	began := time.Now()
	ctx, cancel := context.WithTimeoutCause(ctx, opts.StartTimeout, errors.New("local cluster start timed out (Options.StartTimeout)"))
	defer cancel()

	c := &Cluster{opts: opts, home: home, log: opts.Logger.With("cluster", Kind), spawn: newSpawner()}
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
	c.tag = c.clusterID
	if err := c.makeDirs(); err != nil {
		return nil, err
	}
	if c.net, err = cluster.NewNetwork(ctx, opts.Network); err != nil {
		return nil, err
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
		if err := c.start(n); err != nil {
			return nil, err
		}
	}
	for _, n := range c.nodes {
		if err := c.waitStarted(ctx, n); err != nil {
			return nil, err
		}
	}
	started := time.Now()
	cl, err := cluster.NewAdminClient(c.Bootstrap(), c.log)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.cl = cl
	c.mu.Unlock()
	if err := cluster.WaitHealthy(ctx, c, c.log); err != nil {
		return nil, err
	}
	c.log.Info("cluster ready", "version", home.Version, "brokers", opts.Brokers, "txn_version", opts.TxnVersion,
		"dir", opts.Dir, "format", formatted.Sub(began).Round(time.Millisecond),
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
	if c.opts.Dir == "" {
		d, err := os.MkdirTemp("", "fencecheck-kafka-")
		if err != nil {
			return err
		}
		c.opts.Dir, c.ownDir = d, true
	}
	if c.opts.LogsDir == "" {
		c.opts.LogsDir = filepath.Join(c.opts.Dir, "logs")
	}
	for _, d := range []string{c.opts.Dir, c.opts.LogsDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	for i := range c.opts.Brokers {
		id := int32(i)
		dir := filepath.Join(c.opts.Dir, cluster.BrokerName(id))
		if _, err := os.Stat(filepath.Join(dir, "data", "meta.properties")); err == nil {
			return &cluster.OptionError{Field: "Dir", Value: c.opts.Dir, Reason: "holds a formatted broker already; give an empty folder"}
		}
		n := &node{
			id:      id,
			dir:     dir,
			dataDir: filepath.Join(dir, "data"),
			props:   filepath.Join(dir, "server.properties"),
			hosts:   filepath.Join(dir, "hosts"),
			logPath: filepath.Join(c.opts.LogsDir, cluster.BrokerName(id)+".log"),
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
	if c.opts.Network.PortLow != 0 {
		r = ports.Range{Low: c.opts.Network.PortLow, High: c.opts.Network.PortHigh}
	}
	used := map[int]bool{}
	pick := func(hosts ...string) (int, error) {
		for {
			p, err := ports.Free(r, hosts...)
			if err != nil || !used[p] {
				used[p] = true
				return p, err
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
		l, err := c.net.AddLink(ctx, cluster.LinkSpec{
			Kind: cluster.LinkAdmin, Broker: n.id,
			Proxies: []cluster.ProxySpec{{Listen: "127.0.0.1:0", Upstream: n.clientBind}},
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
			_, err := c.net.AddLink(ctx, cluster.LinkSpec{
				Kind: cluster.LinkPeer, From: from.id, Broker: to.id,
				Proxies: []cluster.ProxySpec{
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
	if c.home.Major() >= 4 {
		p := filepath.Join(c.opts.Dir, "log4j2.properties")
		return p, "-Dlog4j2.configurationFile=" + p
	}
	p := filepath.Join(c.opts.Dir, "log4j.properties")
	return p, "-Dlog4j.configuration=file:" + p
}

func (c *Cluster) writeFiles() error {
	p, _ := c.logConfig()
	data := kafkaassets.Log4j2Properties
	if c.home.Major() < 4 {
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
		"-Dfencecheck.cluster="+c.tag,
		"-Djdk.net.hosts.file="+n.hosts,
		logFlag,
		// exec passes the * through untouched; the JVM expands it.
		"-cp", filepath.Join(c.home.Libs(), "*"),
	)
}

// format runs the storage tool for every node, in parallel, pinning
// transaction.version on 4.x.
func (c *Cluster) format(ctx context.Context) error {
	errs := make([]error, len(c.nodes))
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		args := c.javaArgs(n, []string{"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"})
		args = append(args, "kafka.tools.StorageTool", "format", "-t", c.clusterID, "-c", n.props)
		if c.home.Major() >= 4 {
			args = append(args, "-f", "transaction.version="+strconv.Itoa(c.opts.TxnVersion))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.runTool(ctx, n, "format", args)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// runTool runs a short-lived JVM to completion, its output appended to the
// node's log, killed with its group if ctx ends.
func (c *Cluster) runTool(ctx context.Context, n *node, what string, args []string) error {
	logf, err := c.openLog(n, what)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(c.opts.Java, args...)
	cmd.Dir = n.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := c.spawn.start(cmd); err != nil {
		return fmt.Errorf("%s %s: %w", what, cluster.BrokerName(n.id), err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		err = context.Cause(ctx)
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", what, cluster.BrokerName(n.id), err, tail(n.logPath, 15))
	}
	return nil
}

// openLog opens the node's log for appending and writes a marker line.
func (c *Cluster) openLog(n *node, what string) (*os.File, error) {
	f, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(f, "=== fencecheck: %s %s at %s ===\n", what, cluster.BrokerName(n.id), time.Now().UTC().Format(time.RFC3339Nano))
	return f, nil
}

// start launches node's JVM. The caller holds no lock.
func (c *Cluster) start(n *node) error {
	logf, err := c.openLog(n, "start")
	if err != nil {
		return err
	}
	defer logf.Close() // the child has its own copy
	args := append(c.javaArgs(n, c.opts.JVMFlags), "kafka.Kafka", n.props)
	cmd := exec.Command(c.opts.Java, args...)
	cmd.Dir = n.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return cluster.ErrClosed
	}
	if err := c.spawn.start(cmd); err != nil {
		return fmt.Errorf("start %s: %w", cluster.BrokerName(n.id), err)
	}
	exited := make(chan struct{})
	n.pid, n.exited, n.exit, n.state = cmd.Process.Pid, exited, nil, cluster.StateRunning
	go func() {
		err := cmd.Wait()
		c.mu.Lock()
		n.exit = err
		c.mu.Unlock()
		close(exited)
	}()
	c.log.Info("broker started", "broker", n.id, "pid", n.pid, "log", n.logPath)
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
			return fmt.Errorf("broker %s exited while starting (%v); %s:\n%s", cluster.BrokerName(n.id), e, n.logPath, tail(n.logPath, 25))
		case <-ctx.Done():
			return fmt.Errorf("broker %s not started: %w; %s:\n%s", cluster.BrokerName(n.id), context.Cause(ctx), n.logPath, tail(n.logPath, 15))
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
	return cluster.Info{Kind: Kind, Version: c.home.Version, TxnVersion: c.opts.TxnVersion, Brokers: c.opts.Brokers, LogsDir: c.opts.LogsDir, ClusterID: c.clusterID}
}

// Dir returns the folder holding configs and data.
func (c *Cluster) Dir() string { return c.opts.Dir }

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
		if !c.aliveLocked(n) {
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
func (c *Cluster) Network() *cluster.Network { return c.net }

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
		if c.aliveLocked(n) {
			bp.PID = n.pid
			bp.RSSBytes = rss(n.pid)
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

// Tag is the value of -Dfencecheck.cluster=… on this cluster's JVMs, so tests
// and operators can find them (ps, /proc/*/cmdline).
func (c *Cluster) Tag() string { return c.tag }

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

// aliveLocked reports whether node's JVM runs (or is stopped).
func (c *Cluster) aliveLocked(n *node) bool {
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

// signalLocked sends sig to node's process group; false if it is not
// running.
func (c *Cluster) signalLocked(n *node, sig syscall.Signal) bool {
	if !c.aliveLocked(n) {
		return false
	}
	_ = syscall.Kill(-n.pid, sig)
	return true
}

// Kill implements cluster.Cluster: SIGKILL to the broker's process group,
// then wait for it to exit.
func (c *Cluster) Kill(ctx context.Context, id int32) error {
	n, err := c.node(id)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.signalLocked(n, syscall.SIGKILL)
	n.state = cluster.StateKilled
	exited := n.exited
	c.mu.Unlock()
	if exited != nil {
		select {
		case <-exited:
		case <-ctx.Done():
			return fmt.Errorf("kill %s: %w", cluster.BrokerName(id), ctx.Err())
		}
	}
	c.log.Info("broker killed", "broker", id)
	return nil
}

// Pause implements cluster.Cluster: SIGSTOP to the process group.
func (c *Cluster) Pause(ctx context.Context, id int32) error {
	return c.stopCont(id, syscall.SIGSTOP, cluster.StatePaused)
}

// Resume implements cluster.Cluster: SIGCONT to the process group.
func (c *Cluster) Resume(ctx context.Context, id int32) error {
	return c.stopCont(id, syscall.SIGCONT, cluster.StateRunning)
}

func (c *Cluster) stopCont(id int32, sig syscall.Signal, to cluster.BrokerState) error {
	n, err := c.node(id)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.signalLocked(n, sig) {
		return fmt.Errorf("%v %s: broker is not running", sig, cluster.BrokerName(id))
	}
	n.state = to
	c.log.Info("broker "+to.String(), "broker", id)
	return nil
}

// Restart implements cluster.Cluster: a running or paused broker is killed
// (SIGKILL), then started again on its data dir; it returns once the broker
// logs that it started.
func (c *Cluster) Restart(ctx context.Context, id int32) error {
	if err := c.Kill(ctx, id); err != nil {
		return err
	}
	n, err := c.node(id)
	if err != nil {
		return err
	}
	if err := c.start(n); err != nil {
		return err
	}
	return c.waitStarted(ctx, n)
}

// Close implements cluster.Cluster: SIGKILL to every broker's process group
// (a controlled shutdown can hang while a quorum is cut off, and the data is
// thrown away anyway), then the links, then the folder if Close owns it.
func (c *Cluster) Close(ctx context.Context) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	var waits []chan struct{}
	for _, n := range c.nodes {
		if c.signalLocked(n, syscall.SIGKILL) {
			waits = append(waits, n.exited)
		}
		n.state = cluster.StateKilled
	}
	c.mu.Unlock()
	var errs []error
	for _, w := range waits {
		select {
		case <-w:
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("close: waiting for JVMs to exit: %w", ctx.Err()))
		}
	}
	c.spawn.stop()
	if c.cl != nil {
		c.cl.Close()
	}
	if c.net != nil {
		errs = append(errs, c.net.Close(ctx))
	}
	if c.ownDir {
		errs = append(errs, os.RemoveAll(c.opts.Dir))
	}
	return errors.Join(errs...)
}

// spawner starts every child process from one locked OS thread.
// PR_SET_PDEATHSIG fires when the *thread* that forked the child exits, and
// Go may end a thread (when a goroutine locked to it returns); from a thread
// that lives as long as the cluster, the signal means "this process died".
type spawner struct {
	mu     sync.Mutex
	closed bool
	reqs   chan func()
}

func newSpawner() *spawner {
	s := &spawner{reqs: make(chan func())}
	go func() {
		runtime.LockOSThread()
		// Never unlocked: when this goroutine returns (stop), the
		// thread ends, and with it any child still alive gets SIGKILL.
		for f := range s.reqs {
			f()
		}
	}()
	return s
}

func (s *spawner) start(cmd *exec.Cmd) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return cluster.ErrClosed
	}
	var err error
	done := make(chan struct{})
	s.reqs <- func() { err = cmd.Start(); close(done) }
	<-done
	return err
}

func (s *spawner) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.reqs)
	}
}
