//go:build kafka

package nemesis_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/cluster/links"
	"github.com/fencecheck/fencecheck/cluster/local"
	"github.com/fencecheck/fencecheck/internal/testenv"
	"github.com/fencecheck/fencecheck/nemesis"
)

// localTiming: a real broker answers in milliseconds, but a call that hits a leader change
// waits for metadata, and leadership moves ~10s after a broker dies (the controller fences it
// when its 9s session runs out).
var localTiming = timing{request: 5 * time.Second, recover: 45 * time.Second}

// localEnv gives the nemesis room for JVMs on 2 cores: a restart takes 5–10s.
func localEnv(e *nemesis.Env) {
	e.ProbeTimeout = 2 * time.Second
	e.WaitTimeout = 30 * time.Second
	e.HealTimeout = 90 * time.Second
}

// TestBrokerFaultsLocalKafka runs the broker faults of TestBrokerFaults (their bodies, on a
// fixture of its own per subtest) against one local cluster of 3 Apache Kafka JVMs, with the
// checks only real brokers pass: a killed coordinator moves, a paused JVM is stopped, an
// isolated leader cannot replicate, a restart is a new process. Subtests run one after
// another on the same cluster; each ends with HealAll and a clean cluster.
func TestBrokerFaultsLocalKafka(t *testing.T) {
	c := startLocalKafka(t)

	t.Run("kill - the coordinator of role-1 - its broker answers nothing, the coordinator moves, acquire+write work while it is down and after", func(t *testing.T) {
		f := newFixtureOn(t, c, localTiming, 1, localEnv)
		f.recovers(t, "p1 acquire+write before", f.acquireWrite(1, "role-1"))
		f.recovers(t, "p2 acquire+write before", f.acquireWrite(2, "role-1"))
		killCoordinator(t, f, "role-1", func(t *testing.T, inj *nemesis.Injection, coord cluster.Broker) {
			to, took := eventually(t, "the coordinator of role-1 moves off "+coord.Name(), localTiming.recover, func(ctx context.Context) (cluster.Broker, error) {
				b, err := f.findCoordinator(ctx, "role-1")
				if err == nil && b.ID == coord.ID {
					err = fmt.Errorf("the coordinator is still %s", b.Name())
				}
				return b, err
			})
			t.Logf("coordinator of role-1 moved %s → %s %v after the fault took hold", coord.Name(), to.Name(), took.Round(time.Millisecond))
			f.recovers(t, "p2 acquire+write on the new coordinator", f.acquireWrite(2, "role-1"))
		})
		f.recovers(t, "p1 acquire+write after the restart", f.acquireWrite(1, "role-1"))
	})

	t.Run("move-coordinator - role-3, by killing its broker - the nemesis waits for another broker to coordinate, acquire works there", func(t *testing.T) {
		f := newFixtureOn(t, c, localTiming, 1, localEnv)
		began := time.Now()
		moveCoordinator(t, f, "role-3")
		ws := f.rec.windows(t)
		if w := ws[len(ws)-1]; len(w.Targets) != 2 || !strings.HasSuffix(w.Desc, "kill its broker") {
			t.Fatalf("window %+v, want the transactional id and the killed broker", w)
		}
		t.Logf("moved and healed in %v", time.Since(began).Round(time.Millisecond))
		f.recovers(t, "p1 acquire+write after the restart", f.acquireWrite(1, "role-3"))
	})

	t.Run("pause - the leader of role-2 - its JVM is stopped, register through it fails fast, resume restores", func(t *testing.T) {
		f := newFixtureOn(t, c, localTiming, 1, localEnv)
		leader := f.leader("role-2")
		pauseLeader(t, f, "role-2", func(t *testing.T, inj *nemesis.Injection) {
			if got := inj.Window().Targets; !slices.Equal(got, []string{leader.Name()}) {
				t.Fatalf("targets %v, want %s", got, leader.Name())
			}
			if st := procState(t, c, leader.ID); st != "T" {
				t.Fatalf("%s's JVM is in state %q, want T (stopped)", leader.Name(), st)
			}
		})
		if st := procState(t, c, leader.ID); st == "T" {
			t.Fatalf("%s's JVM is still stopped after healing", leader.Name())
		}
	})

	t.Run("isolate - the leader of role-3 from its peers - its peer links refuse, a produce it leads times out; heal: links up, cluster healthy", func(t *testing.T) {
		f := newFixtureOn(t, c, localTiming, 1, localEnv)
		f.recovers(t, "p1 register before", f.register(1, "role-3", 8))
		leader := f.leader("role-3")
		isolateBroker(t, f, leader.ID, nemesis.LeaderOf("role-3"), func(t *testing.T, inj *nemesis.Injection) {
			// 2 brokers × 2 directions of peer links, after the broker itself.
			if w := inj.Window(); len(w.Targets) != 5 || w.Targets[0] != leader.Name() || !inj.TookHold() {
				t.Fatalf("window %+v (took hold %v), want %s and its 4 peer links, held", w, inj.TookHold(), leader.Name())
			}
			f.failsFast(t, "p1 register (acks=all; the isolated leader's followers cannot fetch)", f.register(1, "role-3", 8))
		})
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, l := range f.c.Network().Links() {
			if up, err := l.Enabled(ctx); err != nil || !up {
				t.Errorf("link %s is down after healing (%v)", l, err)
			}
		}
		if err := cluster.WaitHealthy(ctx, c, nil); err != nil {
			t.Fatal(err)
		}
		f.recovers(t, "p1 register", f.register(1, "role-3", 8))
	})

	t.Run("restart - the leader of role-1 - a new JVM, connections to it cut, others kept, service continues", func(t *testing.T) {
		f := newFixtureOn(t, c, localTiming, 1, localEnv)
		before := pids(c)
		restartBrokers(t, f, nemesis.LeaderOf("role-1"), 1, nemesis.Params{})
		ws := f.rec.windows(t)
		restarted := ws[len(ws)-1].Targets[0]
		for id, pid := range pids(c) {
			switch changed := pid != before[id]; {
			case links.BrokerName(id) == restarted && !changed:
				t.Errorf("%s was restarted but runs the same JVM (pid %d)", restarted, pid)
			case links.BrokerName(id) != restarted && changed:
				t.Errorf("%s was not restarted but its JVM changed (pid %d → %d)", links.BrokerName(id), before[id], pid)
			}
		}
		f.recovers(t, "p1 acquire+write", f.acquireWrite(1, "role-1"))
	})
}

// startLocalKafka starts a 3-broker local cluster for the test and closes it when the test
// ends, checking that no JVM of it is left. Without the Kafka jars it skips, or fails under
// FENCECHECK_REQUIRE_KAFKA=1.
func startLocalKafka(t *testing.T) *local.Cluster {
	t.Helper()
	testenv.NeedKafka(t, "starts a Kafka cluster")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	began := time.Now()
	c, err := local.New(ctx, local.Options{Logger: testLogger()})
	if err != nil {
		t.Fatalf("start local cluster: %v", err)
	}
	t.Logf("local cluster %s (TV%d) ready in %v", c.Info().Version, c.Info().TxnVersion, time.Since(began).Round(time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			logTails(t, c.Info().LogsDir, 30)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			t.Errorf("close the local cluster: %v", err)
		}
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			left := jvmsTagged(c.Tag())
			if len(left) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("JVMs left behind by Close: pids %v", left)
				break
			}
		}
	})
	return c
}

// eventually retries fn, each try within the request timeout, until it succeeds or d has
// passed (then it fails the test); it returns fn's value and how long it took.
func eventually[T any](t *testing.T, what string, d time.Duration, fn func(context.Context) (T, error)) (T, time.Duration) {
	t.Helper()
	start := time.Now()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), localTiming.request)
		v, err := fn(ctx)
		cancel()
		if err == nil {
			return v, time.Since(start)
		}
		if time.Since(start) > d {
			t.Fatalf("%s: not after %v: %v", what, d, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// pids returns each broker's JVM pid (0: not running).
func pids(c *local.Cluster) map[int32]int {
	out := map[int32]int{}
	for _, p := range c.Processes() {
		out[p.ID] = p.PID
	}
	return out
}

// procState returns the state letter of broker id's JVM in /proc (R, S, T for stopped, ...).
func procState(t *testing.T, c *local.Cluster, id int32) string {
	t.Helper()
	pid := pids(c)[id]
	if pid == 0 {
		t.Fatalf("%s has no JVM", links.BrokerName(id))
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// pid (comm) state ...; comm may hold spaces and parentheses.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) == 0 {
		t.Fatalf("/proc/%d/stat: %q", pid, b)
	}
	return f[0]
}

// jvmsTagged returns the pids of java processes whose command line holds tag.
func jvmsTagged(tag string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(tag)) && bytes.Contains(b, []byte("java")) {
			out = append(out, pid)
		}
	}
	return out
}

// logTails logs the last n lines of each broker log in dir, for a failed test.
func logTails(t *testing.T, dir string, n int) {
	logs, _ := filepath.Glob(filepath.Join(dir, "b*.log"))
	for _, p := range logs {
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		var lines []string
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if lines = append(lines, sc.Text()); len(lines) > n {
				lines = lines[1:]
			}
		}
		f.Close()
		t.Logf("last %d lines of %s:\n%s", n, p, strings.Join(lines, "\n"))
	}
}
