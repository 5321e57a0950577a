package external

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/cluster/links"
)

// What the state file says of a faulted broker.
const (
	stateKilled   = "killed"
	statePaused   = "paused"
	stateIsolated = "isolated"
)

// CommandsLog is the file in Options.LogsDir that records every command run.
const CommandsLog = "broker-commands.log"

// stateFilePath is Commands.StateFile, or a file in the user's cache folder
// named by the bootstrap, so that the next run against the same cluster
// finds it.
func stateFilePath(opts Options) (string, error) {
	if opts.Commands.StateFile != "" {
		return opts.Commands.StateFile, nil
	}
	if !opts.Commands.Has(ActKill) && !opts.Commands.Has(ActPause) && !opts.Commands.Has(ActRestart) && !opts.Commands.Has(ActIsolate) {
		return "", nil // no fault can be left behind
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", &cluster.OptionError{Field: "Commands.StateFile", Value: "", Reason: "no user cache folder to default to (" + err.Error() + "); set state_file"}
	}
	bs := append([]string(nil), opts.Bootstrap...)
	sort.Strings(bs)
	sum := sha256.Sum256([]byte(strings.Join(bs, ",")))
	return filepath.Join(dir, "fencecheck", "external", hex.EncodeToString(sum[:8])+".json"), nil
}

// StateFile is where the cluster records brokers it faulted and has not
// healed.
func (c *Cluster) StateFile() string { return c.stateFile }

func (c *Cluster) logPath() string {
	if c.opts.LogsDir == "" {
		return ""
	}
	return filepath.Join(c.opts.LogsDir, CommandsLog)
}

// target returns the placeholders' values of broker id, or an error for a
// broker never seen.
func (c *Cluster) target(id int32) (target, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return target{}, cluster.ErrClosed
	}
	addr, ok := c.brokers[id]
	if !ok {
		if st, ok := c.faults[id]; ok { // from the state file: down since a crash
			return st.target, nil
		}
		return target{}, fmt.Errorf("broker %d: %w", id, cluster.ErrUnknownBroker)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return target{}, fmt.Errorf("broker %d address %q: %w", id, addr, err)
	}
	return target{ID: id, Host: host, Port: port}, nil
}

func (c *Cluster) brokerOps(id int32) *sync.Mutex {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.ops[id]
	if m == nil {
		m = new(sync.Mutex)
		c.ops[id] = m
	}
	return m
}

// setState records (state != "") or clears broker t's fault, in memory and
// in the state file.
func (c *Cluster) setState(t target, state string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if state == "" {
		delete(c.faults, t.ID)
	} else {
		c.faults[t.ID] = faultState{target: t, State: state}
	}
	if c.stateFile == "" {
		return nil
	}
	if err := saveState(c.stateFile, c.faults); err != nil {
		return fmt.Errorf("state file %s: %w", c.stateFile, err)
	}
	return nil
}

// run runs action a's command for broker id.
func (c *Cluster) run(ctx context.Context, a Action, t target) error {
	if !c.opts.Commands.Has(a) {
		return cluster.Unsupported(Kind, string(a)+" "+links.BrokerName(t.ID), "no "+string(a)+" command in the broker commands file")
	}
	res, err := runCommand(ctx, a, c.opts.Commands.template(a), t, c.opts.Commands.timeout(), c.logPath())
	if err != nil {
		c.log.Warn("broker command failed", "action", a, "broker", t.ID, "err", err)
		return err
	}
	c.log.Info("broker command", "action", a, "broker", t.ID, "exit", res.ExitCode, "took", res.Took.Round(time.Millisecond))
	return nil
}

// lockBroker checks that the commands file has a's command and that broker id exists, and
// takes the broker's lock, so that two actions on one broker never run at once.
func (c *Cluster) lockBroker(a Action, id int32) (target, func(), error) {
	if !c.opts.Commands.Has(a) {
		return target{}, nil, cluster.Unsupported(Kind, string(a)+" "+links.BrokerName(id), "no "+string(a)+" command in the broker commands file")
	}
	t, err := c.target(id)
	if err != nil {
		return target{}, nil, err
	}
	ops := c.brokerOps(id)
	ops.Lock()
	return t, ops.Unlock, nil
}

// fault runs a fault's command. The state is recorded before the command
// runs: a command that fails, times out or is interrupted may still have
// taken effect, and heal-all (or the next start) must undo it.
func (c *Cluster) fault(ctx context.Context, a Action, id int32, state string) error {
	t, unlock, err := c.lockBroker(a, id)
	if err != nil {
		return err
	}
	defer unlock()
	if err := c.setState(t, state); err != nil {
		return err
	}
	return c.run(ctx, a, t)
}

// Kill implements cluster.Cluster: the kill command. It returns once the
// command exited; the caller watches the broker stop answering.
func (c *Cluster) Kill(ctx context.Context, id int32) error {
	return c.fault(ctx, ActKill, id, stateKilled)
}

// Pause implements cluster.Cluster: the pause command.
func (c *Cluster) Pause(ctx context.Context, id int32) error {
	return c.fault(ctx, ActPause, id, statePaused)
}

// Resume implements cluster.Cluster: the resume command. The broker counts
// as healed once the command succeeded.
func (c *Cluster) Resume(ctx context.Context, id int32) error {
	return c.undo(ctx, ActResume, id)
}

// Isolate implements cluster.Isolator: the isolate command. It returns once
// the command exited; the caller watches the other brokers fence this one.
func (c *Cluster) Isolate(ctx context.Context, id int32) error {
	return c.fault(ctx, ActIsolate, id, stateIsolated)
}

// Unisolate implements cluster.Isolator: the unisolate command. The broker
// counts as healed once the command succeeded; the caller watches it rejoin.
func (c *Cluster) Unisolate(ctx context.Context, id int32) error {
	return c.undo(ctx, ActUnisolate, id)
}

// undo runs a recovery command that needs no wait of its own (resume,
// unisolate) and clears the broker's fault once it succeeded.
func (c *Cluster) undo(ctx context.Context, a Action, id int32) error {
	t, unlock, err := c.lockBroker(a, id)
	if err != nil {
		return err
	}
	defer unlock()
	if err := c.run(ctx, a, t); err != nil {
		return err
	}
	return c.setState(t, "")
}

// Restart implements cluster.Cluster: the restart command, then the wait
// until the broker is back (the health command, or a Kafka request sent
// straight to it is answered), bounded by the health timeout.
func (c *Cluster) Restart(ctx context.Context, id int32) error {
	t, unlock, err := c.lockBroker(ActRestart, id)
	if err != nil {
		return err
	}
	defer unlock()
	// A restart takes the broker down first: until it is back, it counts
	// as killed, so that a crash in between leaves it to be restarted.
	if err := c.setState(t, stateKilled); err != nil {
		return err
	}
	if err := c.run(ctx, ActRestart, t); err != nil {
		return err
	}
	if err := c.waitBack(ctx, t); err != nil {
		return err
	}
	return c.setState(t, "")
}

// waitBack waits until broker t is back: the health command exits 0, or,
// without one, the broker answers a Metadata request on its own address.
func (c *Cluster) waitBack(ctx context.Context, t target) error {
	limit := c.opts.Commands.healthTimeout()
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var last error
	for {
		if c.opts.Commands.Has(ActHealth) {
			_, last = runCommand(ctx, ActHealth, c.opts.Commands.Health, t, c.opts.Commands.timeout(), c.logPath())
		} else {
			last = c.answers(ctx, t)
		}
		if last == nil {
			c.log.Info("broker back", "broker", t.ID)
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not back within %v (health_timeout): %w", links.BrokerName(t.ID), limit, last)
		case <-time.After(time.Second):
		}
	}
}

// answers sends a Metadata request straight to broker t's address, on a
// connection of its own.
func (c *Cluster) answers(ctx context.Context, t target) error {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cl, err := cluster.NewAdminClient([]string{net.JoinHostPort(t.Host, t.Port)}, c.log, c.opts.Security.KgoOpts()...)
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{}
	resp, err := req.RequestWith(rctx, cl)
	if err != nil {
		return err
	}
	for _, b := range resp.Brokers {
		if b.NodeID == t.ID {
			return nil
		}
	}
	return fmt.Errorf("%s answers but is not in its own metadata yet", links.BrokerName(t.ID))
}

// healLeftovers undoes the faults the state file lists: a run that crashed
// mid-fault left them. Paused brokers are resumed, isolated ones unisolated,
// killed ones restarted.
func (c *Cluster) healLeftovers(ctx context.Context) error {
	c.mu.Lock()
	var left []faultState
	for _, s := range c.faults {
		left = append(left, s)
	}
	c.mu.Unlock()
	// Resume and unisolate first: a restarted broker may need those peers
	// to form a quorum before it counts as started.
	last := func(s faultState) bool { return s.State == stateKilled }
	sort.Slice(left, func(i, j int) bool {
		if last(left[i]) != last(left[j]) {
			return !last(left[i])
		}
		return left[i].ID < left[j].ID
	})
	var errs []error
	for _, s := range left {
		c.log.Warn("healing a fault a previous run left", "broker", s.ID, "state", s.State, "state_file", c.stateFile)
		switch s.State {
		case statePaused:
			errs = append(errs, c.Resume(ctx, s.ID))
		case stateIsolated:
			errs = append(errs, c.Unisolate(ctx, s.ID))
		default:
			errs = append(errs, c.Restart(ctx, s.ID))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("healing the faults a previous run left (state file %s): %w", c.stateFile, err)
	}
	return nil
}
