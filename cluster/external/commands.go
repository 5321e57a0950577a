package external

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	yaml "go.yaml.in/yaml/v3"

	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/internal/atomicfile"
)

// Action is a broker action an external cluster can run a command for.
type Action string

// The broker actions. Health is not a fault: it says when a broker is back.
// Isolate cuts a broker from its peers (inter-broker and controller traffic)
// by the user's means: the cluster's peer traffic is not behind fencecheck's
// proxies, as it is on a local cluster.
const (
	ActKill      Action = "kill"
	ActPause     Action = "pause"
	ActResume    Action = "resume"
	ActRestart   Action = "restart"
	ActIsolate   Action = "isolate"
	ActUnisolate Action = "unisolate"
	ActHealth    Action = "health"
)

// actions lists every action with a template, in the file's order.
var actions = []Action{ActKill, ActPause, ActResume, ActRestart, ActIsolate, ActUnisolate, ActHealth}

// Commands are the user's command templates for broker actions, loaded from
// a YAML file (LoadCommands). An empty template means the action is not
// available; the faults that need it are refused.
//
// A template is run by `sh -c`. Placeholders {id} (Kafka node id), {name}
// (b0), {host} and {port} (the broker's advertised client address) are
// replaced by their values single-quoted for the shell, so a value can never
// add words or commands; `{{` and `}}` stand for literal braces. The same
// values are in the environment as FENCECHECK_BROKER_ID, _NAME, _HOST and
// _PORT.
type Commands struct {
	Kill    string `yaml:"kill"`
	Pause   string `yaml:"pause"`
	Resume  string `yaml:"resume"`
	Restart string `yaml:"restart"`
	// Isolate cuts the broker from its peers, leaving its client listener
	// reachable; Unisolate undoes it. fencecheck counts the isolation as
	// taken hold once the other brokers drop the broker from their
	// metadata (the controller fenced it).
	Isolate   string `yaml:"isolate"`
	Unisolate string `yaml:"unisolate"`
	// Health exits 0 when the broker is back. Empty: the broker is back
	// when it answers a Kafka request sent straight to it.
	Health string `yaml:"health"`
	// Timeout bounds each command. Default 2m.
	Timeout Duration `yaml:"timeout"`
	// HealthTimeout bounds the wait for a broker to be back after restart.
	// Default 5m.
	HealthTimeout Duration `yaml:"health_timeout"`
	// StateFile records the brokers fencecheck has faulted and not yet
	// healed, so that the next start heals them after a crash. Default:
	// <user cache dir>/fencecheck/external/<hash of the bootstrap>.json.
	// A relative path is relative to the commands file.
	StateFile string `yaml:"state_file"`
}

// Duration is a time.Duration written as "30s" in YAML.
type Duration time.Duration

// UnmarshalYAML parses a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil || v < 0 {
		return fmt.Errorf("line %d: %q is not a duration like 30s", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// Default bounds of a command and of the wait for a broker to be back.
const (
	DefaultCommandTimeout = 2 * time.Minute
	DefaultHealthTimeout  = 5 * time.Minute
)

// LoadCommands reads a commands file. Errors name the file and the field or
// line at fault.
func LoadCommands(path string) (Commands, error) {
	var c Commands
	data, err := os.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("broker commands: %w", err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("broker commands %s: %w", path, err)
	}
	if c.StateFile != "" && !filepath.IsAbs(c.StateFile) {
		c.StateFile = filepath.Join(filepath.Dir(path), c.StateFile)
	}
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("broker commands %s: %w", path, err)
	}
	return c, nil
}

// Validate checks every template's placeholders, naming the field.
func (c Commands) Validate() error {
	for _, a := range actions {
		if _, err := expand(c.template(a), target{}); err != nil {
			return fmt.Errorf("%s: %w", a, err)
		}
	}
	return nil
}

func (c Commands) template(a Action) string {
	switch a {
	case ActKill:
		return c.Kill
	case ActPause:
		return c.Pause
	case ActResume:
		return c.Resume
	case ActRestart:
		return c.Restart
	case ActIsolate:
		return c.Isolate
	case ActUnisolate:
		return c.Unisolate
	case ActHealth:
		return c.Health
	}
	return ""
}

// Has reports whether a command is given for a.
func (c Commands) Has(a Action) bool { return strings.TrimSpace(c.template(a)) != "" }

// CheckFault returns an error naming the commands fault lacks: those of the broker
// operations it needs (the nemesis's registry says which) that have no template. A fault
// that needs none, such as a link fault, always passes.
func (c Commands) CheckFault(fault string, needs []cluster.BrokerOp) error {
	var names []string
	for _, op := range needs {
		if !c.Has(Action(op)) {
			names = append(names, string(op))
		}
	}
	switch len(names) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("fault %s needs the external cluster's %s command (give it in the --broker-commands file, field %s)",
			fault, names[0], names[0])
	}
	return fmt.Errorf("fault %s needs the external cluster's %s commands (give them in the --broker-commands file, fields %s)",
		fault, strings.Join(names, " and "), strings.Join(names, ", "))
}

func (c Commands) timeout() time.Duration {
	if c.Timeout > 0 {
		return time.Duration(c.Timeout)
	}
	return DefaultCommandTimeout
}

func (c Commands) healthTimeout() time.Duration {
	if c.HealthTimeout > 0 {
		return time.Duration(c.HealthTimeout)
	}
	return DefaultHealthTimeout
}

// target is what a template's placeholders are filled from.
type target struct {
	ID   int32  `json:"id"`
	Host string `json:"host"`
	Port string `json:"port"`
}

func (t target) values() map[string]string {
	return map[string]string{"id": strconv.Itoa(int(t.ID)), "name": fmt.Sprintf("b%d", t.ID), "host": t.Host, "port": t.Port}
}

// shellQuote single-quotes s for sh: inside single quotes nothing is special,
// and a quote inside is closed, escaped and reopened.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// expand fills tmpl's placeholders with t's values, each shell-quoted.
func expand(tmpl string, t target) (string, error) {
	vals := t.values()
	var b strings.Builder
	for i := 0; i < len(tmpl); {
		switch {
		case strings.HasPrefix(tmpl[i:], "{{"):
			b.WriteByte('{')
			i += 2
		case strings.HasPrefix(tmpl[i:], "}}"):
			b.WriteByte('}')
			i += 2
		case tmpl[i] == '{':
			end := strings.IndexByte(tmpl[i:], '}')
			if end < 0 {
				return "", fmt.Errorf("unclosed { at byte %d of %q (write {{ for a literal brace)", i, tmpl)
			}
			name := tmpl[i+1 : i+end]
			v, ok := vals[name]
			if !ok {
				return "", fmt.Errorf("unknown placeholder {%s} in %q: use {id}, {name}, {host} or {port} ({{ for a literal brace)", name, tmpl)
			}
			b.WriteString(shellQuote(v))
			i += end + 1
		default:
			b.WriteByte(tmpl[i])
			i++
		}
	}
	return b.String(), nil
}

// commandResult is one command's run, for the log.
type commandResult struct {
	Output   string
	ExitCode int
	Took     time.Duration
}

// runCommand runs tmpl for t with sh -c, bounded by timeout, and appends its
// command line and output to logPath (when set). The error says how it
// failed and carries the output's tail.
func runCommand(ctx context.Context, a Action, tmpl string, t target, timeout time.Duration, logPath string) (commandResult, error) {
	line, err := expand(tmpl, t)
	if err != nil {
		return commandResult{}, fmt.Errorf("%s b%d: %w", a, t.ID, err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", line)
	v := t.values()
	cmd.Env = append(os.Environ(), "FENCECHECK_BROKER_ID="+v["id"], "FENCECHECK_BROKER_NAME="+v["name"],
		"FENCECHECK_BROKER_HOST="+v["host"], "FENCECHECK_BROKER_PORT="+v["port"], "FENCECHECK_ACTION="+string(a))
	// Its own process group, so that a timeout kills what the shell started
	// too, not only the shell.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	began := time.Now()
	runErr := cmd.Run()
	res := commandResult{Output: out.String(), ExitCode: cmd.ProcessState.ExitCode(), Took: time.Since(began)}
	if runErr != nil && ctx.Err() != nil {
		runErr = fmt.Errorf("timed out after %v (timeout in the commands file)", timeout)
	}
	if logPath != "" {
		appendLog(logPath, a, t, line, res, runErr)
	}
	if runErr != nil {
		return res, fmt.Errorf("%s b%d: command %q: %w; output: %s", a, t.ID, line, runErr, tailLines(res.Output, 5))
	}
	return res, nil
}

func appendLog(path string, a Action, t target, line string, res commandResult, err error) {
	f, ferr := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if ferr != nil {
		return
	}
	defer f.Close()
	status := fmt.Sprintf("exit %d", res.ExitCode)
	if err != nil {
		status = err.Error()
	}
	fmt.Fprintf(f, "=== %s %s b%d: %s (%s, %v)\n%s", time.Now().UTC().Format(time.RFC3339Nano), a, t.ID, line, status, res.Took.Round(time.Millisecond), res.Output)
	if res.Output != "" && !strings.HasSuffix(res.Output, "\n") {
		fmt.Fprintln(f)
	}
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	if out := strings.Join(lines, " | "); out != "" {
		return out
	}
	return "(none)"
}

// faultState is what the state file records of one broker: the fault
// fencecheck put on it and has not healed, and where it is.
type faultState struct {
	target
	State string `json:"state"` // "killed", "paused" or "isolated"
}

// loadState reads the state file; a missing file is no state.
func loadState(path string) (map[int32]faultState, error) {
	out := make(map[int32]faultState)
	if path == "" {
		return out, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state file: %w", err)
	}
	var list []faultState
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, fmt.Errorf("state file %s: %w", path, err)
	}
	for _, s := range list {
		out[s.ID] = s
	}
	return out, nil
}

// saveState writes the state file atomically; an empty state removes it.
func saveState(path string, st map[int32]faultState) error {
	if len(st) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	list := make([]faultState, 0, len(st))
	for _, s := range st {
		list = append(list, s)
	}
	data, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(path, data)
}
