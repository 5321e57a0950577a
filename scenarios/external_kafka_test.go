//go:build kafka

package scenarios_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/cluster/external"
	"github.com/fencecheck/fencecheck/cluster/links"
	"github.com/fencecheck/fencecheck/cluster/local"
	"github.com/fencecheck/fencecheck/internal/testenv"
	"github.com/fencecheck/fencecheck/scenarios"
	"github.com/fencecheck/fencecheck/scenarios/harness"
)

// posingCluster is a local Kafka cluster presented as an external one: the broker commands
// run testdata/broker.sh, which signals the JVMs by their pid files, asks this test to
// restart one (the test owns the JVMs), and isolates one by taking down the local cluster's
// proxies of its inter-broker and controller traffic.
type posingCluster struct {
	lc       *local.Cluster
	commands string // the broker commands file
	env      []string
}

func startPosing(t *testing.T) *posingCluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	lc, err := local.New(ctx, local.Options{Brokers: 3, LogsDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lc.Close(context.Background()) })
	pids := t.TempDir()
	writePids := func() error {
		for _, p := range lc.Processes() {
			if p.PID != 0 {
				if err := os.WriteFile(filepath.Join(pids, strconv.Itoa(int(p.ID))), []byte(strconv.Itoa(p.PID)), 0o644); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := writePids(); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/restart/"))
		if err != nil || r.Method != http.MethodPost {
			http.Error(w, "POST /restart/ID", http.StatusBadRequest)
			return
		}
		if err := lc.Restart(r.Context(), int32(id)); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if err := writePids(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintf(w, "restarted b%d\n", id)
	}))
	t.Cleanup(srv.Close)
	script, err := filepath.Abs("testdata/broker.sh")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("FENCECHECK_PIDS", pids)
	t.Setenv("FENCECHECK_CONTROL", srv.URL)
	// isolate and unisolate act on the local cluster's own peer links, through its
	// toxiproxy API, as a user's commands would on proxies in front of their brokers' inter-broker
	// and controller listeners; fencecheck's external cluster knows nothing of them.
	t.Setenv("FENCECHECK_TOXIPROXY", lc.Network().API())
	dir := t.TempDir()
	file := filepath.Join(dir, "broker-commands.yaml")
	yaml := fmt.Sprintf(`# signals the local cluster's JVMs
kill: sh %[1]s kill {id}
pause: sh %[1]s pause {id}
resume: sh %[1]s resume {id}
restart: sh %[1]s restart {id}
isolate: sh %[1]s isolate {id}
unisolate: sh %[1]s unisolate {id}
timeout: 3m
state_file: state.json
`, script)
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return &posingCluster{lc: lc, commands: file}
}

// TestScenariosExternalCommands runs holder-partition, and kill-coordinator, pause-broker and
// isolate-broker (long tests), on a local Kafka cluster posing as external, with broker faults
// through command templates, and requires them valid with their promises (fault-took-hold
// included: for isolate-broker, the other brokers dropped the isolated one from their
// metadata). Then it kills `fencecheck run` with SIGKILL while one broker is isolated, one
// paused and one killed, and requires `fencecheck heal` to heal all three from the state file
// the run left: every broker command runs in make test.
func TestScenariosExternalCommands(t *testing.T) {
	testenv.NeedKafka(t, "starts a Kafka cluster")
	pc := startPosing(t)
	bootstrap := strings.Join(pc.lc.Bootstrap(), ",")
	for _, name := range []string{"holder-partition", "kill-coordinator", "pause-broker", "isolate-broker"} {
		t.Run(name, func(t *testing.T) {
			switch name {
			case "kill-coordinator":
				// 60 s on Kafka; the kill and restart commands are also run by the crash
				// below, and the scenario itself by TestScenariosLocalKafka.
				testenv.Long(t)
			case "pause-broker":
				// 26 s; the pause and resume commands are also run by the crash below, the
				// scenario itself on Kafka JVMs by TestScenariosLocalKafka (through three
				// adapters), and fencecheck's transport against a paused Kafka broker by
				// nemesis' TestBrokerFaultsLocalKafka.
				testenv.Long(t)
			case "isolate-broker":
				// Kafka itself sometimes makes it invalid: a coordinator cut off from its
				// peers can answer a Describe from its old state around the heal (README,
				// Findings; seen here in CI once). The isolate and unisolate commands run in
				// the crash below, and the isolation's effect in nemesis' own tests.
				testenv.Long(t)
			}
			runExternal(t, name, bootstrap, pc.commands)
		})
	}

	t.Run("kill -9 mid-fault, fencecheck heal heals", func(t *testing.T) {
		crashMidFault(t, pc, bootstrap)
	})
}

// pid is broker id's JVM process id, 0 when it has none.
func (pc *posingCluster) pid(id int32) int {
	for _, p := range pc.lc.Processes() {
		if p.ID == id {
			return p.PID
		}
	}
	return 0
}

// peerLinksDown counts the local cluster's peer links (bX→bY, each a repl and a ctrl proxy)
// that are not up.
func (pc *posingCluster) peerLinksDown(t *testing.T) int {
	t.Helper()
	n := 0
	for _, l := range pc.lc.Network().Links() {
		if l.Kind() != links.LinkPeer {
			continue
		}
		if up, err := l.Enabled(context.Background()); err != nil {
			t.Fatal(err)
		} else if !up {
			n++
		}
	}
	return n
}

// crashScenario faults all three brokers at once, one fault of each kind, and lasts far longer
// than the test waits: the test kills fencecheck with SIGKILL while they hold.
const crashScenario = `name: crash-mid-fault
description: a broker isolated, one paused, one killed at once; killed with SIGKILL mid-fault
cluster:
  kind: local
workload:
  preset: low
  processes: 2
  roles: 1
  members_per_role: 2
nemesis:
  script:
    - at 1s isolate b0 for 5m
    - at 1s pause b1 for 5m
    - at 1s kill b2 for 5m
duration: 10m
`

// crashMidFault runs `fencecheck run` against the posing cluster with a broker isolated, one
// paused and one killed, kills fencecheck with SIGKILL while they hold, then requires
// `fencecheck heal` to unisolate, resume and restart them from the state file the killed run
// left, and the cluster healthy.
func crashMidFault(t *testing.T, pc *posingCluster, bootstrap string) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "fencecheck")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "../cmd/fencecheck").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	file := filepath.Join(dir, "crash-mid-fault.yaml")
	if err := os.WriteFile(file, []byte(crashScenario), 0o644); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(filepath.Dir(pc.commands), "state.json")
	cmd := exec.Command(bin, "run", file, "--cluster", "external", "--bootstrap", bootstrap,
		"--broker-commands", pc.commands, "--seed", "11", "--out", filepath.Join(dir, "runs"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // only if the test fails first

	// Mid-fault: the state file lists all three, and the cluster shows them: b0's peer links
	// down, b1's JVM stopped, b2's gone.
	faulted := func() error {
		data, _ := os.ReadFile(state)
		for _, s := range []string{`"isolated"`, `"paused"`, `"killed"`} {
			if !strings.Contains(string(data), s) {
				return fmt.Errorf("the state file lists no %s broker: %s", s, data)
			}
		}
		if down := pc.peerLinksDown(t); down != 4 {
			return fmt.Errorf("%d peer links down, want b0's 4", down)
		}
		if st := procState(pc.pid(1)); st != "T" {
			return fmt.Errorf("b1's JVM is in state %q, want stopped", st)
		}
		if st := procState(pc.pid(2)); st != "" && st != "Z" {
			return fmt.Errorf("b2's JVM is in state %q, want gone", st)
		}
		return nil
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for err := faulted(); err != nil; err = faulted() {
		select {
		case err := <-exited:
			t.Fatalf("fencecheck run exited before the faults held: %v\n%s", err, output.String())
		case <-ctx.Done():
			t.Fatalf("the faults did not hold: %v\n%s", err, output.String())
		case <-tick.C:
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	if err := faulted(); err != nil {
		t.Fatalf("after the crash: %v", err)
	}

	heal := exec.CommandContext(ctx, bin, "heal", "--bootstrap", bootstrap, "--broker-commands", pc.commands)
	heal.Env = append(os.Environ(), "TMPDIR="+t.TempDir()) // heal keeps its command output in a temporary folder
	out, err := heal.CombinedOutput()
	if err != nil {
		t.Fatalf("fencecheck heal: %v\n%s", err, out)
	}
	if n := strings.Count(string(out), "healing a fault a previous run left"); n != 3 {
		t.Errorf("fencecheck heal healed %d leftover faults, want 3:\n%s", n, out)
	}
	if down := pc.peerLinksDown(t); down != 0 {
		t.Errorf("%d peer links down after fencecheck heal", down)
	}
	for _, p := range pc.lc.Processes() {
		if p.PID == 0 {
			t.Errorf("b%d has no JVM after fencecheck heal", p.ID)
		} else if st := procState(p.PID); st == "T" {
			t.Errorf("b%d's JVM is still stopped after fencecheck heal", p.ID)
		}
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("state file left after fencecheck heal: %v", err)
	}
	if err := cluster.WaitHealthy(ctx, pc.lc, nil); err != nil {
		t.Errorf("after fencecheck heal: %v", err)
	}
}

func runExternal(t *testing.T, name, bootstrap, commands string) {
	t.Helper()
	s, _, err := scenarios.Builtin(name)
	if err != nil {
		t.Fatal(err)
	}
	s.Cluster.Kind, s.Cluster.Bootstrap, s.Cluster.BrokerCommands = scenarios.KindExternal, bootstrap, commands
	if err := s.Supports(s.Cluster.Kind); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	start := func() (*harness.Outcome, error) {
		return harness.Run(context.Background(), s, harness.Options{Root: root, Seed: 11})
	}
	out, err := start()
	out = mustBeValid(t, name, "a posing "+scenarios.KindExternal, 11, out, err, start)
	if log, err := os.ReadFile(out.Dir.HarnessLog()); err == nil {
		for _, line := range strings.Split(string(log), "\n") {
			if strings.Contains(line, "fault took hold") {
				t.Log(line)
			}
		}
	}
	if s.Requires != nil { // a broker-fault scenario: the commands ran and are in the run's logs
		data, err := os.ReadFile(filepath.Join(out.Dir.Logs(), external.CommandsLog))
		if err != nil || !strings.Contains(string(data), "done") {
			t.Errorf("%s in the run's logs: %v\n%s", external.CommandsLog, err, data)
		}
	}
}

// procState is the state letter of /proc/PID/stat ("T" when stopped), "" when unknown.
func procState(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(data)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2 : i+3]
	}
	return ""
}
