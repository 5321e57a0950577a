package scenarios_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/cluster/external"
	"github.com/fencecheck/fencecheck/cluster/local"
	"github.com/fencecheck/fencecheck/scenarios"
)

// posingCluster is a local Kafka cluster presented as an external one: the broker commands
// run testdata/broker.sh, which signals the JVMs by their pid files and asks this test to
// restart one (the test owns the JVMs).
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
	dir := t.TempDir()
	file := filepath.Join(dir, "broker-commands.yaml")
	yaml := fmt.Sprintf(`# signals the local cluster's JVMs
kill: sh %[1]s kill {id}
pause: sh %[1]s pause {id}
resume: sh %[1]s resume {id}
restart: sh %[1]s restart {id}
timeout: 3m
state_file: state.json
`, script)
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return &posingCluster{lc: lc, commands: file}
}

// TestScenariosExternalCommands runs holder-partition, kill-coordinator and pause-broker on a
// local Kafka cluster posing as external, with broker faults through command templates, and
// requires them valid with their promises (fault-took-hold included). Then it crashes an
// external cluster mid-fault (one broker paused, one killed) and requires the next start to
// heal both.
func TestScenariosExternalCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Kafka cluster")
	}
	if _, err := local.FindHome("", ""); err != nil {
		if os.Getenv("FENCECHECK_REQUIRE_KAFKA") == "1" {
			t.Fatalf("FENCECHECK_REQUIRE_KAFKA=1 and the Kafka jars are missing: %v", err)
		}
		t.Skipf("local Kafka not installed (%v); run make kafka", err)
	}
	pc := startPosing(t)
	bootstrap := strings.Join(pc.lc.Bootstrap(), ",")
	for _, name := range []string{"holder-partition", "kill-coordinator", "pause-broker"} {
		t.Run(name, func(t *testing.T) {
			runExternal(t, name, bootstrap, pc.commands)
		})
	}

	t.Run("crash mid-fault, the next start heals", func(t *testing.T) {
		cmds, err := external.LoadCommands(pc.commands)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		opts := external.Options{Bootstrap: pc.lc.Bootstrap(), Commands: cmds, LogsDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)}
		first, err := external.New(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := first.Pause(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if err := first.Kill(ctx, 2); err != nil {
			t.Fatal(err)
		}
		// The crash: the process goes away without healing. Close only drops the
		// proxies; it leaves the brokers as they are.
		first.Close(ctx)
		if _, err := os.Stat(first.StateFile()); err != nil {
			t.Fatalf("no state file after faults: %v", err)
		}
		second, err := external.New(ctx, opts)
		if err != nil {
			t.Fatalf("the next start did not heal: %v", err)
		}
		defer second.Close(ctx)
		bs, err := second.Brokers(ctx, cluster.RoleQuery{})
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bs {
			if b.State == cluster.StatePaused || b.State == cluster.StateKilled {
				t.Errorf("%s is %v after the next start", b.Name(), b.State)
			}
		}
		for _, p := range pc.lc.Processes() {
			if p.PID == 0 {
				t.Errorf("b%d has no JVM after the next start", p.ID)
			} else if st := procState(p.PID); st == "T" {
				t.Errorf("b%d's JVM is still stopped after the next start", p.ID)
			}
		}
		if _, err := os.Stat(first.StateFile()); !os.IsNotExist(err) {
			t.Errorf("state file left after healing: %v", err)
		}
		data, _ := os.ReadFile(filepath.Join(opts.LogsDir, external.CommandsLog))
		for _, want := range []string{"pause b1", "kill b2", "resume b1", "restart b2"} {
			if !strings.Contains(string(data), want) {
				t.Errorf("%s does not record %q:\n%s", external.CommandsLog, want, data)
			}
		}
	})
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
	out, err := scenarios.Run(context.Background(), s, scenarios.Options{Root: root, Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	requireValid(t, name, out)
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

// requireValid fails t unless the run's verdict is valid, listing what was not.
func requireValid(t *testing.T, name string, out *scenarios.Outcome) {
	t.Helper()
	res := out.Results
	if res.Verdict != checker.VerdictValid {
		for _, r := range append(res.Checks, res.Coverage...) {
			if r.Verdict != checker.VerdictValid {
				t.Errorf("%s: %s %v %v", r.Name, r.Verdict, r.Anomalies, r.Details)
			}
		}
		t.Fatalf("%s on a posing external cluster: %s %s; run directory %s", name, res.Verdict, res.Error, out.Dir)
	}
}

// TestExternalSupportsFollowsCommands: on an external cluster, a broker-fault scenario runs
// only with the commands its faults need, and the refusal names the missing command and
// the option.
func TestExternalSupportsFollowsCommands(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "cmds.yaml")
	if err := os.WriteFile(file, []byte("kill: k {id}\nrestart: r {id}\npause: p {id}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	load := func(name, commands string) *scenarios.Scenario {
		s, _, err := scenarios.Builtin(name)
		if err != nil {
			t.Fatal(err)
		}
		s.Cluster.Kind, s.Cluster.Bootstrap, s.Cluster.BrokerCommands = scenarios.KindExternal, "127.0.0.1:9092", commands
		return s
	}
	if err := load("pause-broker", "").Supports(scenarios.KindExternal); err == nil || !strings.Contains(err.Error(), "--broker-commands") {
		t.Errorf("pause-broker without commands: %v, want a refusal naming --broker-commands", err)
	}
	if err := load("kill-coordinator", file).Supports(scenarios.KindExternal); err != nil {
		t.Errorf("kill-coordinator with kill and restart: %v", err)
	}
	if err := load("holder-partition", file).Supports(scenarios.KindExternal); err != nil {
		t.Errorf("holder-partition needs no command: %v", err)
	}
	err := load("pause-broker", file).Supports(scenarios.KindExternal)
	if err == nil || !strings.Contains(err.Error(), "resume command") || !strings.Contains(err.Error(), "--broker-commands") {
		t.Errorf("pause-broker without resume: %v, want a refusal naming the resume command", err)
	}
	if err := load("pause-broker", filepath.Join(dir, "missing.yaml")).Supports(scenarios.KindExternal); err == nil || !strings.Contains(err.Error(), "cluster.broker_commands") {
		t.Errorf("a missing commands file: %v", err)
	}
	s := load("holder-partition", file)
	s.Cluster.Kind = scenarios.KindLocal
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "cluster.broker_commands") {
		t.Errorf("broker commands on a local cluster: %v", err)
	}
}
