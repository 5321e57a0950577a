package external_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"

	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/cluster/clustertest"
	"github.com/fencecheck/fencecheck/cluster/embedded"
	"github.com/fencecheck/fencecheck/cluster/external"
)

// kfakeCluster stands in for a cluster someone else runs.
func kfakeCluster(t *testing.T) *embedded.Cluster {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	k, err := embedded.New(ctx, embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close(context.Background()) })
	return k
}

// toxiproxyServer runs a toxiproxy server the way a user would (its own
// Listen), standing in for an external one.
func toxiproxyServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	addr := "127.0.0.1:" + strconv.Itoa(port)
	go func() { _ = srv.Listen(addr) }()
	if _, err := clustertest.Eventually(5*time.Second, func() error {
		resp, err := http.Get("http://" + addr + "/version")
		if err == nil {
			resp.Body.Close()
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Collection.Clear(); _ = srv.Shutdown() })
	return addr
}

func TestExternal(t *testing.T) {
	for _, tc := range []struct {
		name      string
		toxiproxy bool
	}{
		{"in-process toxiproxy", false},
		{"external toxiproxy", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := kfakeCluster(t)
			opts := external.Options{Bootstrap: k.Bootstrap()}
			var api string
			if tc.toxiproxy {
				api = toxiproxyServer(t)
				opts.Network.Toxiproxy = api
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, err := external.New(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(context.Background())
			if got := c.Info(); got.Brokers != 3 || got.TxnVersion != 2 {
				t.Errorf("Info() = %+v, want 3 brokers, TV2", got)
			}
			t.Run("link cut - p1 fails, p2 works, p1 recovers", func(t *testing.T) { clustertest.LinkCut(t, c) })
			t.Run("broker faults - unsupported", func(t *testing.T) {
				for name, f := range map[string]func(context.Context, int32) error{"kill": c.Kill, "pause": c.Pause, "resume": c.Resume,
					"restart": c.Restart, "isolate": c.Isolate, "unisolate": c.Unisolate} {
					err := f(ctx, 0)
					var ue *cluster.UnsupportedError
					if !errors.Is(err, cluster.ErrUnsupported) || !errors.As(err, &ue) || ue.Kind != external.Kind {
						t.Errorf("%s = %v, want an UnsupportedError of %s", name, err, external.Kind)
					}
				}
			})
			if tc.toxiproxy {
				if err := c.Close(ctx); err != nil {
					t.Fatal(err)
				}
				resp, err := http.Get("http://" + api + "/proxies")
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				var b strings.Builder
				buf := make([]byte, 4096)
				n, _ := resp.Body.Read(buf)
				b.Write(buf[:n])
				if strings.TrimSpace(b.String()) != "{}" {
					t.Errorf("proxies left on the external toxiproxy after Close: %s", b.String())
				}
			}
		})
	}
}

func TestBootstrapRequired(t *testing.T) {
	_, err := external.New(context.Background(), external.Options{})
	var oe *cluster.OptionError
	if !errors.As(err, &oe) || oe.Field != "Bootstrap" {
		t.Fatalf("err = %v, want an OptionError for Bootstrap", err)
	}
}

// TestCommandFaultsStateAndHealOnStart: broker faults run the commands, Brokers reports
// what fencecheck did, and a start with the state file of a run that crashed mid-fault
// unisolates, resumes and restarts the brokers that run left faulted, restarts last. (kfake
// ignores the commands; the test is of the bookkeeping;
// scenarios.TestScenariosExternalCommands runs real faults.)
func TestCommandFaultsStateAndHealOnStart(t *testing.T) {
	k := kfakeCluster(t)
	dir := t.TempDir()
	record := filepath.Join(dir, "ran")
	cmd := func(a string) string { return "echo " + a + " {name} {port} >> " + record }
	opts := external.Options{Bootstrap: k.Bootstrap(), LogsDir: dir, Commands: external.Commands{
		Kill: cmd("kill"), Pause: cmd("pause"), Resume: cmd("resume"), Restart: cmd("restart"),
		Isolate: cmd("isolate"), Unisolate: cmd("unisolate"), StateFile: filepath.Join(dir, "state.json")}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	first, err := external.New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Kill(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := first.Pause(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := first.Isolate(ctx, 0); err != nil {
		t.Fatal(err)
	}
	bs, _ := first.Brokers(ctx, cluster.RoleQuery{})
	states := map[int32]cluster.BrokerState{}
	for _, b := range bs {
		states[b.ID] = b.State
	}
	if states[0] != cluster.StateIsolated || states[1] != cluster.StateKilled || states[2] != cluster.StatePaused {
		t.Errorf("states after kill b1, pause b2, isolate b0: %v", states)
	}
	first.Close(ctx) // a crash: nothing healed
	second, err := external.New(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close(ctx)
	bs, _ = second.Brokers(ctx, cluster.RoleQuery{})
	for _, b := range bs {
		if b.State != cluster.StateUnknown {
			t.Errorf("%s is %v after the next start", b.Name(), b.State)
		}
	}
	data, _ := os.ReadFile(record)
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		lines = append(lines, strings.Fields(l)[0]+" "+strings.Fields(l)[1])
	}
	if got, want := strings.Join(lines, ", "), "kill b1, pause b2, isolate b0, unisolate b0, resume b2, restart b1"; got != want {
		t.Errorf("commands run: %s, want %s", got, want)
	}
	if _, err := os.Stat(opts.Commands.StateFile); !os.IsNotExist(err) {
		t.Errorf("state file after healing: %v", err)
	}
	if log, _ := os.ReadFile(filepath.Join(dir, external.CommandsLog)); strings.Count(string(log), "===") != 6 {
		t.Errorf("%s should record 6 commands:\n%s", external.CommandsLog, log)
	}
}
