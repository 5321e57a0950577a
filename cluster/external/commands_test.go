package external

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/cluster"
)

func TestExpandQuotesValues(t *testing.T) {
	got, err := expand("ssh {host} kill -STOP $(cat /run/kafka-{id}.pid) # {name}:{port} {{x}}", target{ID: 2, Host: "k2.example", Port: "9092"})
	if err != nil {
		t.Fatal(err)
	}
	want := "ssh 'k2.example' kill -STOP $(cat /run/kafka-'2'.pid) # 'b2':'9092' {x}"
	if got != want {
		t.Errorf("expand = %q, want %q", got, want)
	}
}

// A value with shell syntax in it stays one word: a host name cannot run a command.
func TestExpandNoInjection(t *testing.T) {
	dir := t.TempDir()
	evil := "h'; touch " + filepath.Join(dir, "pwned") + "; echo '"
	res, err := runCommand(context.Background(), ActKill, "echo {host}", target{ID: 1, Host: evil, Port: "1"}, 10*time.Second, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
		t.Fatal("the host value ran a command")
	}
	if strings.TrimSpace(res.Output) != evil {
		t.Errorf("output %q, want the host verbatim %q", res.Output, evil)
	}
}

func TestExpandErrors(t *testing.T) {
	for _, tmpl := range []string{"kill {pid}", "kill {id"} {
		if _, err := expand(tmpl, target{}); err == nil {
			t.Errorf("expand(%q) succeeded", tmpl)
		}
	}
}

func TestRunCommandLogsAndTimesOut(t *testing.T) {
	log := filepath.Join(t.TempDir(), CommandsLog)
	tg := target{ID: 3, Host: "h", Port: "9"}
	if _, err := runCommand(context.Background(), ActPause, "echo paused $FENCECHECK_BROKER_NAME; exit 3", tg, 10*time.Second, log); err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("a failing command: err = %v, want exit status 3", err)
	}
	began := time.Now()
	_, err := runCommand(context.Background(), ActResume, "sleep 30 & sleep 30", tg, 300*time.Millisecond, log)
	if err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Errorf("a slow command: err = %v, want a timeout", err)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("the timeout took %v to end the command", took)
	}
	data, _ := os.ReadFile(log)
	for _, want := range []string{"pause b3: echo paused", "paused b3", "exit status 3", "resume b3", "timed out"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("log lacks %q:\n%s", want, data)
		}
	}
}

func TestLoadCommands(t *testing.T) {
	dir := t.TempDir()
	write := func(s string) string {
		p := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	c, err := LoadCommands(write("kill: k {id}\nrestart: r {id}\ntimeout: 5s\nstate_file: s.json\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.timeout() != 5*time.Second || c.StateFile != filepath.Join(dir, "s.json") || !c.Has(ActKill) || c.Has(ActPause) {
		t.Errorf("loaded %+v", c)
	}
	for file, want := range map[string]string{
		"kill: k {pid}\n":   "kill: unknown placeholder {pid}",
		"kil: k\n":          "field kil not found",
		"timeout: soon\n":   `"soon" is not a duration`,
		"pause: [a, b]\n":   "cannot unmarshal",
		"resume: r {host\n": "resume: unclosed {",
	} {
		if _, err := LoadCommands(write(file)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err = %v, want it to say %q", file, err, want)
		}
	}
}

func TestCheckFaultNamesTheMissingCommand(t *testing.T) {
	c := Commands{Kill: "k", Pause: "p"}
	if err := c.CheckFault("partition", nil); err != nil {
		t.Errorf("a fault that needs no broker operation needs no command: %v", err)
	}
	err := c.CheckFault("pause", []cluster.BrokerOp{cluster.OpPause, cluster.OpResume})
	if err == nil || !strings.Contains(err.Error(), "pause needs the external cluster's resume command") || !strings.Contains(err.Error(), "--broker-commands") {
		t.Errorf("pause without resume: %v", err)
	}
	if err := c.CheckFault("kill", []cluster.BrokerOp{cluster.OpKill, cluster.OpRestart}); err == nil || !strings.Contains(err.Error(), "restart") {
		t.Errorf("kill without restart: %v", err)
	}
	err = Commands{}.CheckFault("isolate", []cluster.BrokerOp{cluster.OpIsolate, cluster.OpUnisolate})
	if err == nil || !strings.Contains(err.Error(), "isolate needs the external cluster's isolate and unisolate commands (give them in the --broker-commands file, fields isolate, unisolate)") {
		t.Errorf("isolate without either: %v", err)
	}
}
