package nemesis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/cluster/links"
)

// brokerSet is the brokers a broker fault acts on, resolved at Setup.
type brokerSet struct {
	n       *Nemesis
	spec    Spec
	brokers []cluster.Broker
	how     string // "coordinator of role-3 (b2)"
}

// resolve picks the brokers; random picks avoid brokers another injection holds.
func (s *brokerSet) resolve(ctx context.Context) (err error) {
	s.brokers, s.how, err = s.n.pickBrokers(ctx, s.spec.Target.Brokers, func(b cluster.Broker) bool { return !s.n.busy(b.Name()) })
	return err
}

func (s *brokerSet) targets() []string {
	out := make([]string, len(s.brokers))
	for i, b := range s.brokers {
		out[i] = b.Name()
	}
	return out
}

func (s *brokerSet) window(desc string) Window {
	ids := make([]int, len(s.brokers))
	for i, b := range s.brokers {
		ids[i] = int(b.ID)
	}
	return Window{Kind: historyKind(s.spec.Fault), Targets: s.targets(), Desc: desc, Target: &Target{Brokers: IDs(ids...)}}
}

// directPaths are the harness's own paths to the brokers (no process links).
func directPaths(bs []cluster.Broker) []path {
	out := make([]path, len(bs))
	for i, b := range bs {
		out[i] = path{name: b.Name(), dial: direct, broker: b}
	}
	return out
}

// waitStates polls until the cluster reports every broker of ids in state (for
// StateRunning, a backend that knows no states passes too).
func waitStates(ctx context.Context, c cluster.Cluster, ids []int32, state cluster.BrokerState, fail error) error {
	return poll(ctx, fail, func() error {
		// States are what the backend did, known at once; Brokers then
		// asks the cluster for the controller, and that request can sit
		// on a paused broker until the client's timeout. Bounding the
		// call keeps took-hold prompt: the states come back with the
		// lookup's error, which is not needed here.
		bctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		bs, err := c.Brokers(bctx, cluster.RoleQuery{})
		if len(bs) == 0 {
			return err
		}
		var errs []error
		for _, id := range ids {
			b, ok := cluster.Find(bs, id)
			if !ok || b.State != state && !(state == cluster.StateRunning && b.State == cluster.StateUnknown) {
				errs = append(errs, fmt.Errorf("%s is %v, want %v", links.BrokerName(id), b.State, state))
			}
		}
		return errors.Join(errs...)
	})
}

// brokerFault is kill (SIGKILL, restart on recovery) and pause (SIGSTOP, SIGCONT).
type brokerFault struct {
	brokerSet
	verb   string
	do     func(ctx context.Context, id int32) error
	undo   func(ctx context.Context, id int32) error
	state  cluster.BrokerState      // what the cluster reports while the fault holds
	expect func(r probeResult) bool // what a direct probe sees while it holds
	done   []int32                  // brokers do succeeded on
}

func newKill(n *Nemesis, s Spec) Fault {
	c := n.env.Cluster
	return &brokerFault{brokerSet: brokerSet{n: n, spec: s}, verb: "kill", do: c.Kill, undo: c.Restart,
		state: cluster.StateKilled, expect: notAnswered}
}

func newPause(n *Nemesis, s Spec) Fault {
	c := n.env.Cluster
	return &brokerFault{brokerSet: brokerSet{n: n, spec: s}, verb: "pause", do: c.Pause, undo: c.Resume,
		state: cluster.StatePaused, expect: func(r probeResult) bool { return r.outcome == silent }}
}

func (f *brokerFault) Setup(ctx context.Context) error { return f.resolve(ctx) }
func (f *brokerFault) Window() Window                  { return f.window(f.verb + " " + f.how) }

func (f *brokerFault) Inject(ctx context.Context) error {
	for _, b := range f.brokers {
		if err := f.do(ctx, b.ID); err != nil {
			return err
		}
		f.done = append(f.done, b.ID)
	}
	return nil
}

// WaitForInjected: the cluster reports the brokers killed (paused), and a Kafka request sent
// straight to each gets no answer (for a pause: the connection stays open and silent).
func (f *brokerFault) WaitForInjected(ctx context.Context) error {
	if err := waitStates(ctx, f.n.env.Cluster, f.done, f.state, ErrNotHeld); err != nil {
		return err
	}
	return expectAll(ctx, directPaths(f.brokers), f.n.env.ProbeTimeout, ErrNotHeld, f.expect)
}

func (f *brokerFault) Recover(ctx context.Context) error {
	var errs []error
	for _, id := range f.done {
		errs = append(errs, f.undo(ctx, id))
	}
	f.done = nil
	return errors.Join(errs...)
}

// WaitForRecovered: the brokers run and answer again.
func (f *brokerFault) WaitForRecovered(ctx context.Context) error {
	ids := make([]int32, len(f.brokers))
	for i, b := range f.brokers {
		ids[i] = b.ID
	}
	if err := waitStates(ctx, f.n.env.Cluster, ids, cluster.StateRunning, ErrNotRecovered); err != nil {
		return err
	}
	return expectAll(ctx, directPaths(f.brokers), f.n.env.ProbeTimeout, ErrNotRecovered, isAnswered)
}

func (f *brokerFault) Cleanup(context.Context) error { return nil }

// restart kills brokers and starts them again at once, one after another: each must answer
// again before the next goes down (a rolling restart), with Params.Interval in between.
type restart struct {
	brokerSet
	sentinels map[int32]net.Conn // a connection to each broker opened just before its restart
	restarted []int32
}

func newRestart(n *Nemesis, s Spec) Fault { return &restart{brokerSet: brokerSet{n: n, spec: s}} }

func (f *restart) Setup(ctx context.Context) error { return f.resolve(ctx) }

func (f *restart) Window() Window {
	if len(f.brokers) > 1 {
		return f.window(fmt.Sprintf("rolling restart of %s, %v apart", f.how, f.spec.Params.Interval))
	}
	return f.window("restart " + f.how)
}

func (f *restart) Inject(ctx context.Context) error {
	c := f.n.env.Cluster
	f.sentinels, f.restarted = make(map[int32]net.Conn), nil
	for i, b := range f.brokers {
		if i > 0 {
			if err := sleep(ctx, f.spec.Params.Interval.D()); err != nil {
				return err
			}
		}
		dctx, cancel := context.WithTimeout(ctx, f.n.env.ProbeTimeout)
		if conn, err := direct(dctx, "tcp", b.Addr); err == nil {
			f.sentinels[b.ID] = conn
		}
		cancel()
		if err := c.Restart(ctx, b.ID); err != nil {
			return err
		}
		f.restarted = append(f.restarted, b.ID)
		wctx, cancel := context.WithTimeout(ctx, f.n.env.WaitTimeout)
		err := expectAll(wctx, directPaths([]cluster.Broker{b}), f.n.env.ProbeTimeout, ErrNotRecovered, isAnswered)
		cancel()
		if err != nil {
			return err
		}
	}
	return nil
}

// WaitForInjected: the connection opened before each restart was closed by the broker (a
// process that went away), and the broker answers again.
func (f *restart) WaitForInjected(ctx context.Context) error {
	var errs []error
	for _, id := range f.restarted {
		conn := f.sentinels[id]
		if conn == nil {
			errs = append(errs, fmt.Errorf("%s: no connection was open before the restart", links.BrokerName(id)))
			continue
		}
		_ = conn.SetReadDeadline(time.Now().Add(f.n.env.ProbeTimeout))
		if _, err := conn.Read(make([]byte, 1)); err == nil || readOutcome(err) != closed {
			errs = append(errs, fmt.Errorf("%s: the connection opened before the restart is still open (%v)", links.BrokerName(id), err))
		}
	}
	if len(f.restarted) < len(f.brokers) {
		errs = append(errs, fmt.Errorf("restarted %d of %d brokers", len(f.restarted), len(f.brokers)))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrNotHeld, err)
	}
	return expectAll(ctx, directPaths(f.brokers), f.n.env.ProbeTimeout, ErrNotHeld, isAnswered)
}

// Recover starts any broker of the fault that is down: a restart cut short by an error or a
// cancelled context leaves a broker killed.
func (f *restart) Recover(ctx context.Context) error {
	c := f.n.env.Cluster
	bs, err := c.Brokers(ctx, cluster.RoleQuery{})
	if len(bs) == 0 {
		return err
	}
	var errs []error
	for _, b := range bs {
		if b.State == cluster.StateKilled && slices.ContainsFunc(f.brokers, func(x cluster.Broker) bool { return x.ID == b.ID }) {
			errs = append(errs, c.Restart(ctx, b.ID))
		}
	}
	return errors.Join(errs...)
}

func (f *restart) WaitForRecovered(ctx context.Context) error {
	return expectAll(ctx, directPaths(f.brokers), f.n.env.ProbeTimeout, ErrNotRecovered, isAnswered)
}

func (f *restart) Cleanup(context.Context) error {
	for _, c := range f.sentinels {
		c.Close()
	}
	f.sentinels = nil
	return nil
}

// isolate cuts brokers from their peers (replication, transaction markers, Raft): on a cluster
// with peer links, each link from or to one of them; on a cluster.Isolator without them (an
// external cluster), by the cluster's own isolate command.
type isolate struct {
	brokerSet
	links    []*links.Link
	disabled []*links.Link
	toxics   toxicSet
	iso      cluster.Isolator // set when the cluster isolates by its own means
	done     []int32          // brokers iso.Isolate was called for
}

func newIsolate(n *Nemesis, s Spec) Fault { return &isolate{brokerSet: brokerSet{n: n, spec: s}} }

func (f *isolate) blackhole() bool { return f.spec.Params.Mode == ModeBlackhole }

func (f *isolate) ids() []int32 {
	ids := make([]int32, len(f.brokers))
	for i, b := range f.brokers {
		ids[i] = b.ID
	}
	return ids
}

func (f *isolate) Setup(ctx context.Context) error {
	if err := f.resolve(ctx); err != nil {
		return err
	}
	ids := f.ids()
	for _, l := range f.n.env.Cluster.Network().Links() {
		if l.Kind() == links.LinkPeer && (slices.Contains(ids, l.From()) || slices.Contains(ids, l.Broker())) {
			f.links = append(f.links, l)
		}
	}
	if len(f.links) > 0 {
		return nil
	}
	if iso, ok := f.n.env.Cluster.(cluster.Isolator); ok {
		f.iso = iso
		return nil
	}
	return cluster.Unsupported(f.n.env.Cluster.Info().Kind, "isolate "+brokerNames(f.brokers),
		"the cluster routes no broker-to-broker traffic through proxies")
}

func (f *isolate) Window() Window {
	how := f.spec.Params.Mode
	if f.iso != nil {
		how = "the cluster's isolate command"
	}
	w := f.window(fmt.Sprintf("isolate %s from its peers (%s)", f.how, how))
	for _, l := range f.links {
		w.Targets = append(w.Targets, linkTarget(l))
	}
	return w
}

func (f *isolate) Inject(ctx context.Context) error {
	if f.iso != nil {
		for _, id := range f.ids() {
			if err := f.iso.Isolate(ctx, id); err != nil {
				return err
			}
			f.done = append(f.done, id)
		}
		return nil
	}
	if f.blackhole() {
		return f.toxics.add(ctx, f.n, f.links, links.Toxic{Type: "timeout", Attributes: map[string]any{"timeout": 0}}, DirBoth)
	}
	return disableAll(ctx, f.links, &f.disabled)
}

// WaitForInjected: toxiproxy reports every peer link of the brokers down, or lists the
// black-hole toxic on it. Isolated by the cluster's command: every other broker's metadata
// leaves them out (the controller fenced them), whatever the command's exit status said.
func (f *isolate) WaitForInjected(ctx context.Context) error {
	if f.iso != nil {
		return f.waitSeen(ctx, false, ErrNotHeld)
	}
	return poll(ctx, ErrNotHeld, func() error {
		if f.blackhole() {
			return f.toxics.listed(ctx)
		}
		var errs []error
		for _, l := range f.links {
			if up, err := l.Enabled(ctx); err != nil || up {
				errs = append(errs, errors.Join(fmt.Errorf("link %s is up", l), err))
			}
		}
		return errors.Join(errs...)
	})
}

// waitSeen polls until every broker outside the fault lists each of the fault's brokers in
// its metadata (seen) or none of them (!seen), asking each broker itself.
func (f *isolate) waitSeen(ctx context.Context, seen bool, fail error) error {
	c := f.n.env.Cluster
	cl, err := cluster.NewAdminClient(c.Bootstrap(), f.n.log)
	if err != nil {
		return fmt.Errorf("%w: %w", fail, err)
	}
	defer cl.Close()
	ids := f.ids()
	return poll(ctx, fail, func() error {
		bctx, cancel := context.WithTimeout(ctx, time.Second)
		bs, _ := c.Brokers(bctx, cluster.RoleQuery{})
		cancel()
		var errs []error
		asked := 0
		for _, b := range bs {
			if slices.Contains(ids, b.ID) || b.State == cluster.StatePaused || b.State == cluster.StateKilled || b.State == cluster.StateIsolated {
				continue
			}
			asked++
			listed, err := brokersSeenBy(ctx, cl, b.ID, f.n.env.ProbeTimeout)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", b.Name(), err))
				continue
			}
			for _, id := range ids {
				if slices.Contains(listed, id) != seen {
					errs = append(errs, fmt.Errorf("%s lists %v", b.Name(), listed))
					break
				}
			}
		}
		if asked == 0 {
			errs = append(errs, errors.New("no broker outside the fault to ask"))
		}
		return errors.Join(errs...)
	})
}

// brokersSeenBy returns the broker ids in a Metadata response of broker id, asked directly.
func brokersSeenBy(ctx context.Context, cl *kgo.Client, id int32, timeout time.Duration) ([]int32, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{}
	resp, err := req.RequestWith(ctx, cl.Broker(int(id)))
	if err != nil {
		return nil, err
	}
	out := make([]int32, 0, len(resp.Brokers))
	for _, b := range resp.Brokers {
		out = append(out, b.NodeID)
	}
	slices.Sort(out)
	return out, nil
}

func (f *isolate) Recover(ctx context.Context) error {
	if f.iso != nil {
		var errs []error
		for _, id := range f.done {
			errs = append(errs, f.iso.Unisolate(ctx, id))
		}
		f.done = nil
		return errors.Join(errs...)
	}
	err := errors.Join(enableAll(ctx, f.disabled), f.toxics.remove(ctx))
	f.disabled = nil
	return err
}

// WaitForRecovered: the peer links are up and clean (isolated by command: every other broker
// lists the brokers again), and the cluster is healthy again.
func (f *isolate) WaitForRecovered(ctx context.Context) error {
	var err error
	if f.iso != nil {
		err = f.waitSeen(ctx, true, ErrNotRecovered)
	} else {
		err = poll(ctx, ErrNotRecovered, func() error {
			var errs []error
			for _, l := range f.links {
				up, err := l.Enabled(ctx)
				if err != nil || !up {
					errs = append(errs, errors.Join(fmt.Errorf("link %s is down", l), err))
				}
			}
			return errors.Join(errs...)
		})
	}
	if err != nil {
		return err
	}
	if err := cluster.WaitHealthy(ctx, f.n.env.Cluster, f.n.log); err != nil {
		return fmt.Errorf("%w: %w", ErrNotRecovered, err)
	}
	return nil
}

func (f *isolate) Cleanup(context.Context) error { return nil }

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
