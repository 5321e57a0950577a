// Package containers runs Apache Kafka brokers in containers through
// testcontainers-go: the same KRaft cluster as the local backend (N combined
// nodes, every client, inter-broker and controller connection behind its
// own toxiproxy link, see cluster/internal/kraft), each JVM in a container
// with host networking.
//
// Host networking keeps the topology identical to the local backend: the
// brokers bind 127.0.0.1 and the peer links listen on 127.77.x.y of the
// host's loopback. No Docker network is created, not even the bridge that
// testcontainers-go creates by default when the engine has none, so no
// traffic leaves loopback. The cluster's folders (configs, data, logs) are
// mounted into every container at their host paths.
//
// Broker faults go through the container API: Kill is `docker kill`
// (SIGKILL), Pause/Resume `docker pause`/`unpause` (the cgroup freezer),
// Restart a new container on the same data folder.
//
// Images. By default fencecheck/kafka:<version> and, with a containerized
// toxiproxy, fencecheck/toxiproxy:<version>, which `make images` builds
// locally with no registry (docker/images.sh). Users with an ordinary Docker
// setup may pass apache/kafka:<version> and ghcr.io/shopify/toxiproxy:<v>.
// A Kafka image must have /bin/sh, java on PATH and the broker jars in
// /opt/kafka/libs (both apache/kafka and fencecheck/kafka do).
//
// Cleanup. testcontainers-go's reaper (Ryuk) is disabled: its image cannot be
// pulled without a registry. The backend removes its containers itself: on
// Close, on a failed start, and, for containers a crashed fencecheck left
// behind, at the next New (each container carries its owner's pid and start
// time in a label).
package containers

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"

	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/cluster/internal/kraft"
	"github.com/fencecheck/fencecheck/cluster/internal/owner"
	"github.com/fencecheck/fencecheck/cluster/internal/ports"
	"github.com/fencecheck/fencecheck/cluster/links"
)

// Kind is the backend's name in Info and errors.
const Kind = "containers"

// Defaults.
const (
	// DefaultVersion is the Kafka release of the default image.
	DefaultVersion = kraft.DefaultVersion
	// KafkaImageRepo and ToxiproxyImageRepo are the repositories of the
	// images `make images` builds; the tag is the version.
	KafkaImageRepo     = "fencecheck/kafka"
	ToxiproxyImageRepo = "fencecheck/toxiproxy"
	// EnvEngineDir, when set, is the folder of the project's private
	// Docker engine (docker/engine.sh reads it too).
	EnvEngineDir = "FENCECHECK_DOCKER_DIR"
)

// Labels on every container of this backend.
const (
	labelSession = "fencecheck.session" // one cluster's containers
	labelOwner   = "fencecheck.owner"   // "<pid>/<start time>" of the fencecheck process
	labelDir     = "fencecheck.dir"     // the temporary cluster folder, removed with an orphan
	labelHost    = "fencecheck.host"    // boot id and pid namespace where the owner's pid means something
)

// DefaultJVMFlags suit three brokers on a 2-core box (docs/clusters.md, "local"); the
// local and containers backends share them.
var DefaultJVMFlags = kraft.DefaultJVMFlags

// ErrNoEngine is matched by the error New returns when no Docker engine
// answers; its message names `make docker-engine`.
var ErrNoEngine = errors.New("no Docker engine answers")

// ErrImageMissing is matched when a fencecheck image is not in the engine;
// its message names `make images`.
var ErrImageMissing = errors.New("image not in the Docker engine")

// Options configures a containers cluster. The zero value is valid once the
// engine runs and the images are built (`make docker-engine images`).
type Options struct {
	// Version is the Kafka release. Default: read from KafkaImage (its
	// org.apache.kafka.version label, else its tag), else DefaultVersion.
	Version string
	// KafkaImage is the broker image. Default fencecheck/kafka:<Version>.
	KafkaImage string
	// ToxiproxyImage, when set, runs the links' toxiproxy server in a
	// container of this image (host networking, API on a free loopback
	// port) instead of inside this process; e.g. fencecheck/toxiproxy:2.12.0.
	ToxiproxyImage string
	// Brokers is the number of nodes, 1..9. Default 3.
	Brokers int
	// TxnVersion is the transaction.version pinned at format time, 1 or 2.
	// Default 2 on Kafka 4.x, 1 on 3.x.
	TxnVersion int
	// Dir holds configs and data (bN/), mounted into the containers.
	// Default: a new temporary folder, removed by Close.
	Dir string
	// LogsDir receives bN.log per broker. Default <Dir>/logs.
	LogsDir string
	// JVMFlags replace DefaultJVMFlags.
	JVMFlags []string
	// Configs are server.properties entries that override the test
	// settings or add to them.
	Configs map[string]string
	// StartTimeout bounds New on top of ctx. Default 3 minutes.
	StartTimeout time.Duration
	// Network sets the port range and logger of the links; its Toxiproxy
	// must be empty (see ToxiproxyImage).
	Network links.NetworkOptions
	// Logger receives the backend's events. Default: discard.
	Logger *slog.Logger
	// Security secures the client listener as local.Options.Security does: "" (plaintext),
	// "tls", "sasl-scram" or "sasl-ssl". The generated files live in the cluster folder,
	// which every container mounts.
	Security string
}

// Cluster is a running containers cluster. It implements cluster.Cluster;
// Tag, Dir and Processes find its JVMs (as host processes).
type Cluster struct {
	*kraft.Cluster
	run *runner
}

var _ cluster.Cluster = (*Cluster)(nil)

// EngineDir is the folder of the private Docker engine `make docker-engine`
// (docker/engine.sh) runs for the checkout at root:
// /tmp/fencecheck-docker-<the first 12 hex digits of the SHA-256 of root>,
// root being a path without symbolic links. One engine per checkout: two
// checkouts testing at once never use, or stop, each other's engine.
func EngineDir(root string) string {
	sum := sha256.Sum256([]byte(root))
	return "/tmp/fencecheck-docker-" + hex.EncodeToString(sum[:])[:12]
}

// DefaultEngineHost is the DOCKER_HOST of the project's engine for this
// process: the socket in $FENCECHECK_DOCKER_DIR if that is set, else the
// engine of the checkout that holds the working directory or, failing that,
// this executable (bin/fencecheck). "" outside any checkout.
func DefaultEngineHost() string {
	if d := os.Getenv(EnvEngineDir); d != "" {
		return "unix://" + filepath.Join(d, "docker.sock")
	}
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if exe, err := os.Executable(); err == nil {
		starts = append(starts, filepath.Dir(exe))
	}
	for _, s := range starts {
		if root := checkoutRoot(s); root != "" {
			return "unix://" + filepath.Join(EngineDir(root), "docker.sock")
		}
	}
	return ""
}

// checkoutRoot returns the nearest folder at or above dir (symbolic links
// resolved, as engine.sh's pwd -P does) that holds docker/engine.sh, or "".
func checkoutRoot(dir string) string {
	dir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return ""
	}
	for {
		if fi, err := os.Stat(filepath.Join(dir, "docker", "engine.sh")); err == nil && !fi.IsDir() {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			return ""
		}
		dir = up
	}
}

// UseEngineDefaults points testcontainers-go at the project's engine
// (DefaultEngineHost) when DOCKER_HOST is unset and that engine's socket
// exists, and disables the reaper unless TESTCONTAINERS_RYUK_DISABLED is
// set. testcontainers-go reads both from the environment once per process,
// so this must run before its first use; New calls it.
func UseEngineDefaults() {
	if os.Getenv("DOCKER_HOST") == "" {
		if h := DefaultEngineHost(); h != "" {
			if _, err := os.Stat(strings.TrimPrefix(h, "unix://")); err == nil {
				os.Setenv("DOCKER_HOST", h)
			}
		}
	}
	if os.Getenv("TESTCONTAINERS_RYUK_DISABLED") == "" {
		os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	}
	// testcontainers-go prints to stderr by default ("Connected to
	// docker: ..."); a fencecheck run's output is its own.
	tclog.SetDefault(tcLogger{slog.Default()})
}

func (o *Options) defaults() error {
	if o.Brokers == 0 {
		o.Brokers = 3
	}
	if o.Brokers < 1 || o.Brokers > 9 {
		return &cluster.OptionError{Field: "Brokers", Value: o.Brokers, Reason: "want 1..9"}
	}
	if o.Network.Toxiproxy != "" {
		return &cluster.OptionError{Field: "Network.Toxiproxy", Value: o.Network.Toxiproxy, Reason: "the containers backend runs toxiproxy itself (in-process, or in a container with ToxiproxyImage); use the external backend for an external toxiproxy"}
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
	if o.KafkaImage == "" {
		v := o.Version
		if v == "" {
			v = DefaultVersion
		}
		o.KafkaImage = KafkaImageRepo + ":" + v
	}
	return nil
}

// New starts a cluster and returns once every broker logged that it
// started and the cluster is healthy. If it fails, or ctx ends first, every
// container it started is removed.
func New(ctx context.Context, opts Options) (_ *Cluster, err error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	UseEngineDefaults()
	r, err := newRunner(ctx, opts.KafkaImage, opts.Logger)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			r.removeAll(context.WithoutCancel(ctx))
			r.cli.Close()
		}
	}()
	r.reapOrphans(ctx)
	if opts.Version == "" {
		if opts.Version, err = r.imageVersion(ctx, opts.KafkaImage); err != nil {
			return nil, err
		}
	}
	if opts.TxnVersion, err = kraft.CheckTxnVersion(opts.Version, opts.TxnVersion); err != nil {
		return nil, err
	}
	if opts.Dir == "" {
		// Made here, not by kraft, so its containers can carry it in a
		// label: the reaper of a crashed owner's containers removes it too.
		if opts.Dir, err = os.MkdirTemp("", "fencecheck-kafka-"); err != nil {
			return nil, err
		}
		r.ownDir = opts.Dir
		defer func() {
			if err != nil {
				os.RemoveAll(opts.Dir)
			}
		}()
	}
	if opts.ToxiproxyImage != "" {
		if opts.Network.Toxiproxy, err = r.startToxiproxy(ctx, opts.ToxiproxyImage, opts.Network); err != nil {
			return nil, err
		}
		opts.Network.ListenHost = "127.0.0.1"
	}
	kc, err := kraft.New(ctx, kraft.Config{
		Kind: Kind, Version: opts.Version, Brokers: opts.Brokers, TxnVersion: opts.TxnVersion,
		Dir: opts.Dir, LogsDir: opts.LogsDir, JVMFlags: opts.JVMFlags, Configs: opts.Configs,
		StartTimeout: opts.StartTimeout, Network: opts.Network, Logger: opts.Logger,
		Security: opts.Security, Runner: r,
	})
	if err != nil {
		return nil, err
	}
	return &Cluster{Cluster: kc, run: r}, nil
}

// Close implements cluster.Cluster: the brokers, the links, the folder it
// owns, then the toxiproxy container if there is one.
func (c *Cluster) Close(ctx context.Context) error {
	err := c.Cluster.Close(ctx)
	// Its own deadline: ctx may have run out waiting for the brokers, and
	// containers left running would hold their ports until the engine stops.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	c.run.removeAll(rctx)
	c.run.cli.Close()
	if c.run.ownDir != "" {
		err = errors.Join(err, os.RemoveAll(c.run.ownDir))
	}
	return err
}

// Containers lists the IDs of this cluster's containers that exist now.
func (c *Cluster) Containers(ctx context.Context) ([]string, error) {
	return c.run.list(ctx, labelSession+"="+c.run.session)
}

// Available reports whether a Docker engine answers and holds the given
// images (default: fencecheck/kafka:DefaultVersion). The error matches
// ErrNoEngine or ErrImageMissing and names the make target that fixes it.
func Available(ctx context.Context, images ...string) error {
	UseEngineDefaults()
	if len(images) == 0 {
		images = []string{KafkaImageRepo + ":" + DefaultVersion}
	}
	r, err := newRunner(ctx, "", slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	defer r.cli.Close()
	for _, img := range images {
		if err := r.ensureImage(ctx, img); err != nil {
			return err
		}
	}
	return nil
}

// ReapOrphans removes the containers of fencecheck processes that are gone
// (killed before they could close their clusters) and returns their names.
// New does the same before it starts a cluster.
func ReapOrphans(ctx context.Context) ([]string, error) {
	UseEngineDefaults()
	r, err := newRunner(ctx, "", slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	defer r.cli.Close()
	return r.reapOrphans(ctx), nil
}

// Leftovers lists the names of every container of this backend in the
// engine, any cluster's, running or not: after every cluster is closed it
// must be empty.
func Leftovers(ctx context.Context) ([]string, error) {
	UseEngineDefaults()
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return nil, engineError(err)
	}
	defer cli.Close()
	res, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", labelOwner)})
	if err != nil {
		return nil, engineError(err)
	}
	var names []string
	for _, c := range res.Items {
		names = append(names, strings.TrimPrefix(strings.Join(c.Names, ","), "/"))
	}
	return names, nil
}

// ToxiproxyVersion is the version of the toxiproxy module in go.mod (a
// test keeps them equal): the tag `make images` gives fencecheck/toxiproxy.
const ToxiproxyVersion = "2.12.0"

// Session is the random id in this cluster's container names and labels.
func (c *Cluster) Session() string { return c.run.session }

// runner implements kraft.Runner with one container per JVM.
type runner struct {
	cli     *testcontainers.DockerClient
	prov    *testcontainers.DockerProvider
	image   string
	session string // random, names and labels this cluster's containers
	owner   string
	ownDir  string // the cluster folder New made, "" if the caller gave one
	log     *slog.Logger
	apiPort int // the toxiproxy container's API port, claimed until removeAll

	mu       sync.Mutex
	idle     *sync.Cond // signalled when inflight drops to 0
	seq      int
	inflight int  // Starts under way
	closed   bool // Close was called: no Start begins
}

func newRunner(ctx context.Context, image string, log *slog.Logger) (*runner, error) {
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return nil, engineError(err)
	}
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		cli.Close()
		return nil, engineError(err)
	}
	// "host" as the default network: testcontainers-go otherwise creates a
	// bridge network (reaper_default) on an engine that has no default
	// bridge, as ours (dockerd --bridge=none) has not.
	prov, err := testcontainers.NewDockerProvider(testcontainers.WithDefaultBridgeNetwork("host"),
		testcontainers.WithLogger(tcLogger{log}))
	if err != nil {
		cli.Close()
		return nil, engineError(err)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	r := &runner{cli: cli, prov: prov, image: image, session: hex.EncodeToString(b[:]), owner: owner.Self(), log: log}
	r.idle = sync.NewCond(&r.mu)
	return r, nil
}

func engineError(err error) error {
	return fmt.Errorf("containers cluster: %w (DOCKER_HOST=%q): %v; start the project's engine with `make docker-engine`, or point DOCKER_HOST at yours", ErrNoEngine, os.Getenv("DOCKER_HOST"), err)
}

// imageVersion reads the Kafka version of an image: our label, else its
// tag. The image must be in the engine or pullable.
func (r *runner) imageVersion(ctx context.Context, image string) (string, error) {
	if err := r.ensureImage(ctx, image); err != nil {
		return "", err
	}
	res, err := r.cli.ImageInspect(ctx, image)
	if err == nil && res.Config != nil {
		if v := res.Config.Labels["org.apache.kafka.version"]; v != "" {
			return v, nil
		}
	}
	if i := strings.LastIndex(image, ":"); i >= 0 && !strings.Contains(image[i:], "/") {
		if v := image[i+1:]; len(v) > 0 && v[0] >= '0' && v[0] <= '9' {
			return v, nil
		}
	}
	return "", &cluster.OptionError{Field: "Version", Value: "", Reason: "cannot tell the Kafka version of image " + image + "; set it"}
}

// ensureImage fails clearly for a missing fencecheck image (no registry
// has it); other images are left to testcontainers-go to pull.
func (r *runner) ensureImage(ctx context.Context, image string) error {
	if !strings.HasPrefix(image, "fencecheck/") {
		return nil
	}
	if _, err := r.cli.ImageInspect(ctx, image); err != nil {
		return fmt.Errorf("%s: %w; build it with `make images` (or pick a public image: --kafka-image apache/kafka:<version>): %v", image, ErrImageMissing, err)
	}
	return nil
}

func (r *runner) Classpath() string { return "/opt/kafka/libs/*" }

func (r *runner) name(what string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	return fmt.Sprintf("fencecheck-%s-%s-%d", r.session, what, r.seq)
}

func (r *runner) labels() map[string]string {
	l := map[string]string{labelSession: r.session, labelOwner: r.owner, labelHost: owner.Host()}
	if r.ownDir != "" {
		l[labelDir] = r.ownDir
	}
	return l
}

// run creates and starts a container with host networking and the given
// folders mounted at their host paths.
func (r *runner) run(ctx context.Context, image, name string, entrypoint, cmd, env []string, mounts []string, workDir string) (*testcontainers.DockerContainer, error) {
	if err := r.ensureImage(ctx, image); err != nil {
		return nil, err
	}
	// Bind mounts of the Mount kind: unlike -v binds, the engine refuses a
	// missing source instead of creating it, so a start that races Close
	// cannot bring back a folder Close removed.
	var binds []mount.Mount
	for _, m := range mounts {
		binds = append(binds, mount.Mount{Type: mount.TypeBind, Source: m, Target: m})
	}
	envMap := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		envMap[k] = v
	}
	req := testcontainers.ContainerRequest{
		Image:      image,
		Name:       name,
		Entrypoint: entrypoint,
		Cmd:        cmd,
		Env:        envMap,
		Labels:     r.labels(),
		ConfigModifier: func(c *container.Config) {
			// This process's user, not the image's (apache/kafka runs
			// as appuser): the JVM writes into folders this process
			// made and must remove.
			c.User = fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid())
			c.WorkingDir = workDir
		},
		HostConfigModifier: func(hc *container.HostConfig) {
			hc.NetworkMode = "host"
			hc.Mounts = append(hc.Mounts, binds...)
		},
	}
	ctr, err := r.prov.RunContainer(ctx, req)
	dc, _ := ctr.(*testcontainers.DockerContainer)
	if err != nil {
		if dc != nil {
			_ = dc.Terminate(context.WithoutCancel(ctx))
		}
		return nil, fmt.Errorf("run container %s: %w", name, err)
	}
	return dc, nil
}

func (r *runner) Start(ctx context.Context, spec kraft.ProcSpec) (kraft.Proc, error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, cluster.ErrClosed
	}
	r.inflight++
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		if r.inflight--; r.inflight == 0 {
			r.idle.Broadcast()
		}
		r.mu.Unlock()
	}()
	name := r.name(fmt.Sprintf("%s-%s", links.BrokerName(spec.Node), spec.What))
	// The shell appends the JVM's output to the node's log (where the
	// cluster reads "Kafka Server started"), then becomes the JVM.
	ctr, err := r.run(ctx, r.image, name,
		[]string{"/bin/sh", "-c", `exec "$0" "$@" >>"$FENCECHECK_LOG" 2>&1`},
		append([]string{"java"}, spec.Args...),
		[]string{"FENCECHECK_LOG=" + spec.LogPath},
		spec.Mounts, spec.Dir)
	if err != nil {
		return nil, err
	}
	p := &proc{r: r, ctr: ctr, id: ctr.GetContainerID(), name: name}
	if st, err := ctr.State(ctx); err == nil {
		p.pid = st.Pid
	}
	r.log.Debug("container started", "name", name, "pid", p.pid)
	return p, nil
}

// Close waits for Starts under way, so that every container this runner
// makes exists before Cluster.Close removes the session's containers. The
// procs have exited and removed their containers; the toxiproxy container
// goes in Cluster.Close, after the links.
func (r *runner) Close(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	for r.inflight > 0 {
		r.idle.Wait()
	}
	return nil
}

// startToxiproxy runs a toxiproxy server container with its API on a free
// loopback port and returns the API address.
func (r *runner) startToxiproxy(ctx context.Context, image string, nopts links.NetworkOptions) (string, error) {
	rg := ports.Default()
	if nopts.PortLow != 0 {
		rg = ports.Range{Low: nopts.PortLow, High: nopts.PortHigh}
	}
	port, err := ports.Free(rg, "127.0.0.1")
	if err != nil {
		return "", err
	}
	r.apiPort = port
	name := r.name("toxiproxy")
	ctr, err := r.run(ctx, image, name, nil, []string{"-host", "127.0.0.1", "-port", strconv.Itoa(port)}, nil, nil, "")
	if err != nil {
		return "", err
	}
	api := "127.0.0.1:" + strconv.Itoa(port)
	// links.NewNetwork asks the API for its version at once; wait until
	// the server listens, or fail if its container stops.
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		var d net.Dialer
		if conn, err := d.DialContext(ctx, "tcp", api); err == nil {
			conn.Close()
			return api, nil
		}
		if st, err := ctr.State(ctx); err == nil && !st.Running {
			return "", fmt.Errorf("toxiproxy container %s stopped (exit %d) before serving its API on %s", name, st.ExitCode, api)
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("toxiproxy container %s: API %s: %w", name, api, context.Cause(ctx))
		case <-tick.C:
		}
	}
}

// list returns the IDs of containers (running or not) with label filter f.
func (r *runner) list(ctx context.Context, f string) ([]string, error) {
	res, err := r.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", f)})
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, c := range res.Items {
		ids = append(ids, c.ID)
	}
	return ids, nil
}

// removeAll force-removes every container of this runner's session.
func (r *runner) removeAll(ctx context.Context) {
	ids, err := r.list(ctx, labelSession+"="+r.session)
	if err != nil {
		r.log.Warn("list containers for cleanup", "err", err)
	}
	for _, id := range ids {
		if _, err := r.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true}); err != nil && !isNotFound(err) {
			r.log.Warn("remove container", "id", id, "err", err)
		}
	}
	ports.Release(r.apiPort)
}

// reapOrphans removes containers whose owning fencecheck process is gone
// (without testcontainers' reaper, a fencecheck killed by SIGKILL leaves them
// running) and returns their names.
func (r *runner) reapOrphans(ctx context.Context) (reaped []string) {
	res, err := r.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", labelOwner)})
	if err != nil {
		return
	}
	for _, c := range res.Items {
		if !owner.Gone(c.Labels[labelOwner], c.Labels[labelHost]) {
			continue // alive, or in another pid namespace or boot where its pid says nothing
		}
		name := strings.TrimPrefix(strings.Join(c.Names, ","), "/")
		r.log.Info("removing container of a fencecheck process that is gone", "name", name, "owner", c.Labels[labelOwner])
		if _, err := r.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true}); err == nil || isNotFound(err) {
			reaped = append(reaped, name)
		}
		// Only a folder New made (a temporary one) is removed; one the
		// user gave stays theirs.
		if d := c.Labels[labelDir]; d != "" && strings.HasPrefix(filepath.Base(d), "fencecheck-kafka-") {
			_ = os.RemoveAll(d)
		}
	}
	return reaped
}

func isNotFound(err error) bool {
	return err != nil && strings.Contains(strings.ToLower(err.Error()), "no such container")
}

// proc is one JVM's container.
type proc struct {
	r    *runner
	ctr  *testcontainers.DockerContainer
	id   string
	name string
	pid  int
}

// Wait waits for the container to stop, then removes it.
func (p *proc) Wait() error {
	ctx := context.Background()
	res := p.r.cli.ContainerWait(ctx, p.id, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	var werr error
	select {
	case w := <-res.Result:
		if w.Error != nil {
			werr = errors.New(w.Error.Message)
		} else if w.StatusCode != 0 {
			werr = fmt.Errorf("container %s: exit status %d", p.name, w.StatusCode)
		}
	case err := <-res.Error:
		werr = fmt.Errorf("container %s: wait: %w", p.name, err)
	}
	if _, err := p.r.cli.ContainerRemove(ctx, p.id, client.ContainerRemoveOptions{Force: true}); err != nil && !isNotFound(err) {
		p.r.log.Warn("remove container", "name", p.name, "err", err)
	}
	return werr
}

// Kill sends SIGKILL. A frozen container is thawed after the signal is
// queued, so the JVM dies without running a single instruction more.
func (p *proc) Kill() error {
	ctx := context.Background()
	_, err := p.r.cli.ContainerKill(ctx, p.id, client.ContainerKillOptions{Signal: "KILL"})
	if err != nil && strings.Contains(err.Error(), "is paused") {
		if _, uerr := p.r.cli.ContainerUnpause(ctx, p.id, client.ContainerUnpauseOptions{}); uerr == nil {
			_, err = p.r.cli.ContainerKill(ctx, p.id, client.ContainerKillOptions{Signal: "KILL"})
		}
	}
	if err != nil && (isNotFound(err) || strings.Contains(err.Error(), "is not running")) {
		return nil // already gone: what Kill wanted
	}
	return err
}

// Stop sends SIGTERM: the broker shuts down cleanly.
func (p *proc) Stop() error {
	_, err := p.r.cli.ContainerKill(context.Background(), p.id, client.ContainerKillOptions{Signal: "TERM"})
	return err
}

// Pause freezes the container (docker pause). On cgroup v1 runc's freezer can give up while
// the cgroup is still FREEZING, a thread not yet stopped: it thaws the cgroup again and docker
// answers "OCI runtime pause failed: unable to freeze" (runc issue 2753; its fix, PR 2791,
// makes it rarer, "still a game of chances"). A loaded machine makes it likelier: seen in
// make test's Kafka lane at load average 30 on 2 cores. The container is left running, so the
// pause is tried again, a few times.
func (p *proc) Pause() error {
	var err error
	for try := 1; ; try++ {
		_, err = p.r.cli.ContainerPause(context.Background(), p.id, client.ContainerPauseOptions{})
		if err == nil || !strings.Contains(err.Error(), "unable to freeze") || try == pauseTries {
			return err
		}
		p.r.log.Warn("docker pause did not freeze the container; trying again", "name", p.name, "try", try, "err", err)
		time.Sleep(time.Duration(try) * 100 * time.Millisecond)
	}
}

// pauseTries bounds Pause's tries when the freezer gives up.
const pauseTries = 5

func (p *proc) Resume() error {
	_, err := p.r.cli.ContainerUnpause(context.Background(), p.id, client.ContainerUnpauseOptions{})
	return err
}

func (p *proc) PID() int { return p.pid }

// tcLogger sends testcontainers-go's messages to the backend's logger at
// debug level (by default they go to stderr).
type tcLogger struct{ log *slog.Logger }

func (l tcLogger) Printf(format string, v ...any) {
	l.log.Debug(strings.TrimSpace(fmt.Sprintf(format, v...)), "from", "testcontainers")
}
