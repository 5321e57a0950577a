package kraft

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/cluster"
)

// fakeRunner stands in for exec and containers in these lifecycle tests: a "JVM" is a channel
// that Kill closes, and Start writes the started line to the log. startGate, when set, holds
// every Start until it is closed (a container start takes seconds); entered, when set, is
// sent on as a Start begins to wait there.
type fakeRunner struct {
	startGate chan struct{}
	entered   chan struct{}
	alive     atomic.Int32 // processes started and not yet exited
	mu        sync.Mutex
	started   int
	args      [][]string // of every Start
}

type fakeProc struct {
	r    *fakeRunner
	args []string
	once sync.Once
	dead chan struct{}
}

func (r *fakeRunner) Classpath() string { return "/libs/*" }

func (r *fakeRunner) Start(ctx context.Context, spec ProcSpec) (Proc, error) {
	if r.startGate != nil {
		if r.entered != nil {
			r.entered <- struct{}{}
		}
		<-r.startGate
	}
	f, err := os.OpenFile(spec.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.WriteString(startedLine + "\n"); err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.started++
	r.args = append(r.args, spec.Args)
	r.mu.Unlock()
	r.alive.Add(1)
	return &fakeProc{r: r, args: spec.Args, dead: make(chan struct{})}, nil
}

func (r *fakeRunner) Close(context.Context) error { return nil }

func (p *fakeProc) Wait() error {
	<-p.dead
	p.r.alive.Add(-1)
	return errors.New("killed")
}

func (p *fakeProc) Kill() error {
	p.once.Do(func() { close(p.dead) })
	return nil
}

// Stop exits as a JVM does on SIGTERM, writing the class-data archive its
// -XX:ArchiveClassesAtExit names.
func (p *fakeProc) Stop() error {
	for _, a := range p.args {
		if f, ok := strings.CutPrefix(a, "-XX:ArchiveClassesAtExit="); ok {
			if err := os.WriteFile(f, []byte("classes"), 0o444); err != nil {
				return err
			}
		}
	}
	return p.Kill()
}
func (p *fakeProc) Pause() error  { return nil }
func (p *fakeProc) Resume() error { return nil }
func (p *fakeProc) PID() int      { return 0 }

// oneNode is a started one-node cluster on r, built without New (which needs a real broker
// for its health check).
func oneNode(t *testing.T, r *fakeRunner) *Cluster {
	t.Helper()
	dir := t.TempDir()
	c := &Cluster{cfg: Config{Kind: "fake", Dir: dir, LogsDir: dir, Runner: r}, log: slog.New(slog.DiscardHandler)}
	n := &node{id: 0, dir: dir, props: filepath.Join(dir, "server.properties"), hosts: filepath.Join(dir, "hosts"),
		logPath: filepath.Join(dir, "b0.log"), state: cluster.StateKilled}
	c.nodes = []*node{n}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.start(ctx, n); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCloseDuringRestart: Close while a restart's runner is still starting the new JVM must
// return, and the JVM the runner then hands back must be killed, not left running.
func TestCloseDuringRestart(t *testing.T) {
	r := &fakeRunner{}
	c := oneNode(t, r)
	r.startGate, r.entered = make(chan struct{}), make(chan struct{})
	restarted := make(chan error, 1)
	go func() { restarted <- c.Restart(context.Background(), 0) }()
	select { // the restart killed the old JVM and now waits in Start
	case <-r.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("restart never reached the runner's Start")
	}
	if n := r.alive.Load(); n != 0 {
		t.Fatalf("%d JVMs alive while the restart starts the new one", n)
	}
	closed := make(chan error, 1)
	go func() { closed <- c.Close(context.Background()) }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return while a restart was starting a JVM")
	}
	close(r.startGate)
	select {
	case err := <-restarted:
		if !errors.Is(err, cluster.ErrClosed) {
			t.Fatalf("Restart after Close = %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Restart deadlocked after Close")
	}
	if n := r.alive.Load(); n != 0 {
		t.Fatalf("%d JVMs alive after Close", n)
	}
}

// TestConcurrentRestartsOneJVM: restarts and kills of one broker from many goroutines leave at
// most one JVM for it, and it is the one the cluster tracks.
func TestConcurrentRestartsOneJVM(t *testing.T) {
	r := &fakeRunner{}
	c := oneNode(t, r)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%4 == 3 {
				_ = c.Kill(ctx, 0)
				return
			}
			_ = c.Restart(ctx, 0)
		}()
	}
	wg.Wait()
	if n := r.alive.Load(); n > 1 {
		t.Fatalf("%d JVMs alive for one broker after concurrent restarts", n)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := r.alive.Load(); n != 0 {
		t.Fatalf("%d JVMs alive after Close (one escaped the cluster's tracking)", n)
	}
}
