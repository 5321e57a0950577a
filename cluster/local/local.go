// Package local runs Apache Kafka brokers as JVMs on loopback, from the jars
// `make kafka` fetches from Maven Central (no Docker, no tarball).
//
// The cluster (N combined broker+controller nodes, every client,
// inter-broker and controller connection behind its own toxiproxy link) is
// described in cluster/internal/kraft, which this package shares with the
// containers backend.
//
// Processes. Each JVM runs in its own process group, started from one OS
// thread with PR_SET_PDEATHSIG=SIGKILL, so a crash of this process takes the
// JVMs with it; Close kills the groups and removes the data it owns. Kill is
// SIGKILL, Pause/Resume SIGSTOP/SIGCONT, Restart keeps the data dir. Each
// broker's stdout and stderr go to <LogsDir>/bN.log.
//
// Cleanup after a crash. A temporary cluster folder names its owner (pid
// and start time); a SIGKILL of the owner leaves the folder, and any JVM
// that outlived it, to the next New or ReapOrphans, which kill the JVMs of
// clusters whose owner is gone and remove their folders.
package local

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/cluster/internal/kraft"
	"github.com/fencecheck/fencecheck/cluster/links"
)

// Kind is the backend's name in Info and errors.
const Kind = "local"

// DefaultJVMFlags suit three brokers on a 2-core box (docs/clusters.md, "local"); the
// local and containers backends share them.
var DefaultJVMFlags = kraft.DefaultJVMFlags

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
	// settings or add to them.
	Configs map[string]string
	// StartTimeout bounds New (formatting, starting, readiness) on top of
	// ctx. Default 3 minutes.
	StartTimeout time.Duration
	// Network sets the port range and logger of the links. The local
	// backend always runs toxiproxy in-process (its peer links listen on
	// 127.77.x.y), so Network.Toxiproxy must be empty.
	Network links.NetworkOptions
	// Logger receives the backend's events. Default: discard.
	Logger *slog.Logger
	// Security secures the client listener: "" (plaintext), "tls" (mutual TLS), "sasl-scram"
	// (SASL_PLAINTEXT) or "sasl-ssl" (SASL_SSL), SCRAM-SHA-256 and -512. The certificates
	// and the admin's SCRAM credentials are generated at start; the standard authorizer runs
	// and the admin (ClientSecurity) is a super user. Inter-broker traffic stays plaintext.
	Security string
	// StartCache is a folder kept between clusters that makes starts faster: the storage
	// tool's output per release and settings (a cluster formats by copying it instead of
	// running three tool JVMs), and a class-data archive of the broker JVM, which the first
	// cluster's b0 writes as Close stops it (SIGTERM, a few seconds once). Default
	// StartCacheDir(). A secured cluster formats with the tool.
	StartCache string
	// NoStartCache starts without the cache: every start formats with the tool and loads
	// every class.
	NoStartCache bool
}

// Cluster is a running local cluster. It implements cluster.Cluster; Tag,
// Dir and Processes find its JVMs.
type Cluster struct {
	*kraft.Cluster
	ownDir string // the folder New made, removed by Close; "" if the caller gave one
}

var _ cluster.Cluster = (*Cluster)(nil)

// BrokerProcess is a broker's JVM, for measurements.
type BrokerProcess = kraft.BrokerProcess

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
	if err := kraft.CheckSecurity(o.Security); err != nil {
		return Home{}, err
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
	switch {
	case o.NoStartCache:
		o.StartCache = ""
	case o.StartCache == "":
		o.StartCache = StartCacheDir()
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
	o.TxnVersion, err = kraft.CheckTxnVersion(home.Version, o.TxnVersion)
	return home, err
}

// New formats and starts a cluster and returns once every broker logged
// that it started and the cluster is healthy (cluster.WaitHealthy). If it
// fails, or ctx ends first, everything it started is stopped and removed.
func New(ctx context.Context, opts Options) (*Cluster, error) {
	home, err := opts.defaults()
	if err != nil {
		return nil, err
	}
	// Best effort: what a killed run left must not stop this one.
	if _, err := reapOrphans(ctx, opts.Logger); err != nil {
		opts.Logger.Warn("removing what killed fencecheck processes left", "err", err)
	}
	var ownDir string
	if opts.Dir == "" {
		// Made here, not by kraft, so that it names its owner before any
		// JVM runs in it.
		if ownDir, err = makeOwnedDir(); err != nil {
			return nil, err
		}
		opts.Dir = ownDir
	}
	kc, err := kraft.New(ctx, kraft.Config{
		Kind: Kind, Version: home.Version, Brokers: opts.Brokers, TxnVersion: opts.TxnVersion,
		Dir: opts.Dir, LogsDir: opts.LogsDir, JVMFlags: opts.JVMFlags, Configs: opts.Configs,
		StartTimeout: opts.StartTimeout, Network: opts.Network, Logger: opts.Logger, Security: opts.Security,
		Runner: &execRunner{java: opts.Java, libs: home.Libs(), spawn: newSpawner()},
		Cache:  opts.StartCache, JVM: javaID(opts.Java),
	})
	if err != nil {
		if ownDir != "" {
			os.RemoveAll(ownDir)
		}
		return nil, err
	}
	return &Cluster{Cluster: kc, ownDir: ownDir}, nil
}

// Close implements cluster.Cluster: the brokers, the links, then the folder
// New made.
func (c *Cluster) Close(ctx context.Context) error {
	err := c.Cluster.Close(ctx)
	if c.ownDir != "" {
		err = errors.Join(err, os.RemoveAll(c.ownDir))
	}
	return err
}

// execRunner starts JVMs as child processes, each in its own process group.
type execRunner struct {
	java  string
	libs  string
	spawn *spawner
}

// javaID names the java binary the command runs: its resolved path, size and modification
// time, which change when the JDK does (a class-data archive is only good for the JVM that
// wrote it).
func javaID(java string) string {
	p, err := exec.LookPath(java)
	if err == nil {
		p, err = filepath.EvalSymlinks(p)
	}
	if err != nil {
		return java
	}
	st, err := os.Stat(p)
	if err != nil {
		return p
	}
	return fmt.Sprintf("%s %d %d", p, st.Size(), st.ModTime().UnixNano())
}

func (r *execRunner) Classpath() string { return filepath.Join(r.libs, "*") }

func (r *execRunner) Start(_ context.Context, spec kraft.ProcSpec) (kraft.Proc, error) {
	logf, err := os.OpenFile(spec.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child has its own copy
	// exec passes the classpath's * through untouched; the JVM expands it.
	cmd := exec.Command(r.java, spec.Args...)
	cmd.Dir = spec.Dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := r.spawn.start(cmd); err != nil {
		return nil, err
	}
	return &proc{cmd: cmd}, nil
}

func (r *execRunner) Close(context.Context) error {
	r.spawn.stop()
	return nil
}

// proc is a JVM and its process group. After Wait returns the pid may be
// reused, so no signal is sent then.
type proc struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	done bool
}

func (p *proc) Wait() error {
	err := p.cmd.Wait()
	p.mu.Lock()
	p.done = true
	p.mu.Unlock()
	return err
}

func (p *proc) signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return nil
	}
	return syscall.Kill(-p.cmd.Process.Pid, sig)
}

func (p *proc) Kill() error   { return p.signal(syscall.SIGKILL) }
func (p *proc) Stop() error   { return p.signal(syscall.SIGTERM) }
func (p *proc) Pause() error  { return p.signal(syscall.SIGSTOP) }
func (p *proc) Resume() error { return p.signal(syscall.SIGCONT) }
func (p *proc) PID() int      { return p.cmd.Process.Pid }

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
