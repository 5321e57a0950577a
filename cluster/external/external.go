// Package external attaches fencecheck to a Kafka cluster it does not run:
// bootstrap addresses from the user, and optionally the HTTP API of a
// toxiproxy server the user runs (otherwise toxiproxy runs in this process).
//
// Links work as with the other backends: each process reaches each broker
// through its own proxy whose upstream is the broker's advertised address, as
// the toxiproxy server sees it. Broker faults (kill, pause, resume, restart,
// and isolate and unisolate through cluster.Isolator) run the user's command
// templates (Commands); an action without a command is
// refused with cluster.ErrUnsupported. Whether a fault took hold is for the
// caller to see on the cluster: a command's exit status only says it ran.
// Only PLAINTEXT listeners are supported.
package external

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/cluster/links"
)

// Kind is the backend's name in Info and errors.
const Kind = "external"

// Options configures an external cluster.
type Options struct {
	// Bootstrap lists seed brokers, host:port. Required.
	Bootstrap []string
	// Network chooses the toxiproxy server: Network.Toxiproxy is the API
	// address of yours (e.g. "127.0.0.1:8474"); empty runs one in this
	// process. With your own server, Network.ListenHost is the host its
	// proxies listen on and this process dials (default: the API's host).
	Network links.NetworkOptions
	// Logger receives the backend's events. Default: discard.
	Logger *slog.Logger
	// Commands are the broker actions' command templates; the zero value
	// has none, and every broker fault is unsupported.
	Commands Commands
	// LogsDir receives broker-commands.log: every command run, its exit
	// status and output. "" keeps no such log.
	LogsDir string
	// Security is how clients authenticate to the cluster's listener (nil:
	// plaintext). Process links then speak TLS themselves (Network.SetTLS)
	// and the harness's own clients use it on the bootstrap addresses.
	Security *cluster.Security
}

// Cluster is an attached external cluster. It implements cluster.Cluster.
type Cluster struct {
	opts Options
	log  *slog.Logger
	net  *links.Network
	cl   *kgo.Client
	info cluster.Info

	mu      sync.Mutex
	closed  bool
	brokers map[int32]string // id → advertised address, as first seen
	// faults are the brokers a command faulted and nothing healed yet,
	// mirrored in the state file so that a crash leaves them healable.
	faults    map[int32]faultState
	stateFile string
	ops       map[int32]*sync.Mutex // serializes the commands of one broker
}

var (
	_ cluster.Cluster  = (*Cluster)(nil)
	_ cluster.Isolator = (*Cluster)(nil)
)

// ClientSecurity implements cluster.Secured.
func (c *Cluster) ClientSecurity() *cluster.Security { return c.opts.Security }

// New attaches to the cluster: it learns the brokers from a Metadata request,
// creates the link layer and returns once the cluster is healthy
// (cluster.WaitHealthy) or ctx ends.
func New(ctx context.Context, opts Options) (_ *Cluster, err error) {
	if len(opts.Bootstrap) == 0 {
		return nil, &cluster.OptionError{Field: "Bootstrap", Value: opts.Bootstrap, Reason: "give at least one host:port"}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Network.Logger == nil {
		opts.Network.Logger = opts.Logger
	}
	if err := opts.Commands.Validate(); err != nil {
		return nil, &cluster.OptionError{Field: "Commands", Value: "", Reason: err.Error()}
	}
	c := &Cluster{opts: opts, log: opts.Logger.With("cluster", Kind), brokers: make(map[int32]string),
		ops: make(map[int32]*sync.Mutex)}
	if c.stateFile, err = stateFilePath(opts); err != nil {
		return nil, err
	}
	if c.faults, err = loadState(c.stateFile); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = c.Close(context.WithoutCancel(ctx))
		}
	}()
	if c.net, err = links.NewNetwork(ctx, opts.Network); err != nil {
		return nil, err
	}
	if opts.Security != nil && opts.Security.TLS != nil {
		c.net.SetTLS(opts.Security.TLS)
	}
	if c.cl, err = cluster.NewAdminClient(opts.Bootstrap, c.log, opts.Security.KgoOpts()...); err != nil {
		return nil, err
	}
	for {
		err = c.refresh(ctx)
		if err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("external cluster %v: %w (%w)", opts.Bootstrap, err, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
	// A previous run that crashed mid-fault left brokers down: heal them
	// before anything else.
	if err := c.healLeftovers(ctx); err != nil {
		return nil, err
	}
	if err := cluster.WaitHealthy(ctx, c, c.log); err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.info.Kind, c.info.Brokers = Kind, len(c.brokers)
	c.mu.Unlock()
	c.describe(ctx)
	c.log.Info("attached", "brokers", c.info.Brokers, "version", c.info.Version, "txn_version", c.info.TxnVersion)
	return c, nil
}

// refresh records the brokers of a fresh Metadata response and gives new
// ones links.
func (c *Cluster) refresh(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{}
	resp, err := req.RequestWith(rctx, c.cl)
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	if len(resp.Brokers) == 0 {
		return errors.New("metadata lists no brokers")
	}
	if resp.ClusterID != nil {
		c.mu.Lock()
		c.info.ClusterID = *resp.ClusterID
		c.mu.Unlock()
	}
	for _, b := range resp.Brokers {
		addr := fmt.Sprintf("%s:%d", b.Host, b.Port)
		c.mu.Lock()
		_, known := c.brokers[b.NodeID]
		if !known {
			c.brokers[b.NodeID] = addr
		}
		c.mu.Unlock()
		if !known {
			if err := c.net.AddBroker(b.NodeID, addr, addr); err != nil {
				return err
			}
		}
	}
	return nil
}

// describe fills in the version guess and the finalized transaction.version.
func (c *Cluster) describe(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	vs, err := kadm.NewClient(c.cl).ApiVersions(rctx)
	if err != nil {
		c.log.Warn("api versions", "err", err)
		return
	}
	for _, v := range vs.Sorted() {
		if v.Err != nil {
			continue
		}
		tv := 1
		for _, f := range v.Raw().FinalizedFeatures {
			if f.Name == "transaction.version" && f.MaxVersionLevel >= 2 {
				tv = 2
			}
		}
		c.mu.Lock()
		c.info.Version, c.info.TxnVersion = v.VersionGuess(), tv
		c.mu.Unlock()
		return
	}
}

// Info implements cluster.Cluster. TxnVersion is 2 when the cluster
// finalized transaction.version 2, else 1 (classic transactions).
func (c *Cluster) Info() cluster.Info {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.info
}

// Bootstrap implements cluster.Cluster: the addresses given in Options.
func (c *Cluster) Bootstrap() []string { return append([]string(nil), c.opts.Bootstrap...) }

// Brokers implements cluster.Cluster. Brokers are those seen since New, in
// StateUnknown; one seen for the first time gets its links here.
func (c *Cluster) Brokers(ctx context.Context, q cluster.RoleQuery) ([]cluster.Broker, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, cluster.ErrClosed
	}
	c.mu.Unlock()
	refreshErr := c.refresh(ctx)
	c.mu.Lock()
	out := make([]cluster.Broker, 0, len(c.brokers))
	for id, addr := range c.brokers {
		st := cluster.StateUnknown
		switch c.faults[id].State {
		case stateKilled:
			st = cluster.StateKilled
		case statePaused:
			st = cluster.StatePaused
		case stateIsolated:
			st = cluster.StateIsolated
		}
		out = append(out, cluster.Broker{ID: id, Addr: addr, State: st})
	}
	c.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	if refreshErr != nil {
		return out, refreshErr
	}
	return out, cluster.DescribeRoles(ctx, c.cl, out, q)
}

// Links implements cluster.Cluster.
func (c *Cluster) Links(ctx context.Context, process int) (cluster.DialFunc, error) {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return nil, cluster.ErrClosed
	}
	return c.net.Dialer(ctx, process)
}

// Network implements cluster.Cluster.
func (c *Cluster) Network() *links.Network { return c.net }

// Close implements cluster.Cluster: it removes the proxies it created (on an
// external toxiproxy server too) and leaves the brokers alone.
func (c *Cluster) Close(ctx context.Context) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	if c.cl != nil {
		c.cl.Close()
	}
	if c.net != nil {
		return c.net.Close(ctx)
	}
	return nil
}
