package nemesis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/cluster/links"
	"github.com/fencecheck/fencecheck/internal/units"
)

// linkSet is the process links a link fault acts on, resolved at Setup.
type linkSet struct {
	n     *Nemesis
	spec  Spec
	links []*links.Link
	paths []path // one per link: the process's dial function and the broker
	desc  string // "p1 from coordinator of role-3 (b2)"
}

// resolve picks the processes and brokers and finds (creating if need be) their links.
// Random picks avoid processes and brokers whose links another injection holds.
func (s *linkSet) resolve(ctx context.Context) error {
	c := s.n.env.Cluster
	net := c.Network()
	free := func(p int, b int32) bool {
		l := net.ProcessLink(p, b)
		return l == nil || !s.n.busy(linkTarget(l))
	}
	procs, err := s.n.pickProcesses(s.spec.Target.Processes, func(p int) bool {
		for _, b := range net.BrokerIDs() {
			if !free(p, b) {
				return false
			}
		}
		return true
	})
	if err != nil {
		return err
	}
	brokers, how, err := s.n.pickBrokers(ctx, s.spec.Target.Brokers, func(b cluster.Broker) bool {
		for _, p := range procs {
			if !free(p, b.ID) {
				return false
			}
		}
		return true
	})
	if err != nil {
		return err
	}
	for _, p := range procs {
		dial, err := c.Links(ctx, p)
		if err != nil {
			return err
		}
		for _, b := range brokers {
			l := net.ProcessLink(p, b.ID)
			if l == nil {
				return fmt.Errorf("no link %s→%s: %w", links.ProcessName(p), b.Name(), ErrNoTarget)
			}
			s.links = append(s.links, l)
			s.paths = append(s.paths, path{name: linkTarget(l), dial: dial, broker: b})
		}
	}
	s.desc = processNames(procs) + " from " + how
	return nil
}

func (s *linkSet) window(desc string) Window {
	targets := make([]string, len(s.links))
	var procs, brokers []int
	for i, l := range s.links {
		targets[i] = linkTarget(l)
		if !slices.Contains(procs, l.Process()) {
			procs = append(procs, l.Process())
		}
		if !slices.Contains(brokers, int(l.Broker())) {
			brokers = append(brokers, int(l.Broker()))
		}
	}
	slices.Sort(procs)
	slices.Sort(brokers)
	return Window{Kind: historyKind(s.spec.Fault), Targets: targets, Desc: desc,
		Target: &Target{Processes: IDs(procs...), Brokers: IDs(brokers...)}}
}

// expectLive probes the paths to brokers that are running until every result satisfies ok.
// Paths to brokers another fault has killed or paused show that fault, not this one, so they
// are not judged.
func (s *linkSet) expectLive(ctx context.Context, wait time.Duration, fail error, ok func(probeResult) bool) error {
	return poll(ctx, fail, func() error {
		bs, _ := s.n.env.Cluster.Brokers(ctx, cluster.RoleQuery{})
		var live []path
		for _, p := range s.paths {
			if b, found := cluster.Find(bs, p.broker.ID); !found || b.State == cluster.StateRunning || b.State == cluster.StateUnknown {
				live = append(live, p)
			}
		}
		return judge(ctx, live, wait, ok)
	})
}

// expectRecovered waits until every path to a running broker answers.
func (s *linkSet) expectRecovered(ctx context.Context) error {
	return s.expectLive(ctx, s.n.env.ProbeTimeout, ErrNotRecovered, isAnswered)
}

// streams are the toxic streams of a direction.
func streams(direction string) []string {
	switch direction {
	case DirUpstream:
		return []string{links.StreamUpstream}
	case DirBoth:
		return []string{links.StreamUpstream, links.StreamDownstream}
	}
	return []string{links.StreamDownstream}
}

// toxicSet is the toxics one injection added, so Recover removes exactly those.
type toxicSet struct {
	added []addedToxic
}

type addedToxic struct {
	link *links.Link
	name string
}

// add adds t on every stream of direction to every link, named uniquely for this injection.
func (ts *toxicSet) add(ctx context.Context, n *Nemesis, links []*links.Link, t links.Toxic, direction string) error {
	seq := n.nextSeq()
	for _, l := range links {
		for _, stream := range streams(direction) {
			t := t
			t.Stream = stream
			t.Name = fmt.Sprintf("fencecheck%d_%s_%s", seq, t.Type, stream)
			if err := l.AddToxic(ctx, t); err != nil {
				return err
			}
			ts.added = append(ts.added, addedToxic{link: l, name: t.Name})
		}
	}
	return nil
}

// remove removes every toxic added, keeping going past failures.
func (ts *toxicSet) remove(ctx context.Context) error {
	var errs []error
	for _, a := range ts.added {
		errs = append(errs, a.link.RemoveToxic(ctx, a.name))
	}
	ts.added = nil
	return errors.Join(errs...)
}

// listed checks with toxiproxy that every added toxic is on its link.
func (ts *toxicSet) listed(ctx context.Context) error {
	var errs []error
	for _, a := range ts.added {
		have, err := a.link.Toxics(ctx)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !slices.ContainsFunc(have, func(t links.Toxic) bool { return t.Name == a.name }) {
			errs = append(errs, fmt.Errorf("link %s lacks toxic %s", a.link, a.name))
		}
	}
	return errors.Join(errs...)
}

// disableAll takes links down, remembering each one it took down in *done.
func disableAll(ctx context.Context, links []*links.Link, done *[]*links.Link) error {
	for _, l := range links {
		if err := l.Disable(ctx); err != nil {
			return err
		}
		*done = append(*done, l)
	}
	return nil
}

// enableAll brings links up, keeping going past failures.
func enableAll(ctx context.Context, links []*links.Link) error {
	var errs []error
	for _, l := range links {
		errs = append(errs, l.Enable(ctx))
	}
	return errors.Join(errs...)
}

// partition cuts processes from brokers: links down (refused) or a black hole.
type partition struct {
	linkSet
	disabled []*links.Link
	toxics   toxicSet
}

func newPartition(n *Nemesis, s Spec) Fault { return &partition{linkSet: linkSet{n: n, spec: s}} }

func (f *partition) blackhole() bool { return f.spec.Params.Mode == ModeBlackhole }

func (f *partition) Setup(ctx context.Context) error { return f.resolve(ctx) }

func (f *partition) Window() Window {
	if f.blackhole() {
		return f.window(fmt.Sprintf("black-hole %s (%s)", f.desc, f.spec.Params.Direction))
	}
	return f.window("cut " + f.desc + " (refused)")
}

func (f *partition) Inject(ctx context.Context) error {
	if f.blackhole() {
		// timeout 0: hold every byte until the toxic is removed, which closes the connections.
		return f.toxics.add(ctx, f.n, f.links, links.Toxic{Type: "timeout", Attributes: map[string]any{"timeout": 0}}, f.spec.Params.Direction)
	}
	return disableAll(ctx, f.links, &f.disabled)
}

// WaitForInjected: a refused link refuses the process's connections; a black-holed one is
// listed with its toxic and leaves a Kafka request unanswered.
func (f *partition) WaitForInjected(ctx context.Context) error {
	if !f.blackhole() {
		return f.expectLive(ctx, f.n.env.ProbeTimeout, ErrNotHeld, func(r probeResult) bool { return r.outcome == refused })
	}
	if err := f.toxics.listed(ctx); err != nil {
		return fmt.Errorf("%w: %w", ErrNotHeld, err)
	}
	return f.expectLive(ctx, f.n.env.ProbeTimeout, ErrNotHeld, func(r probeResult) bool { return r.outcome == silent })
}

func (f *partition) Recover(ctx context.Context) error {
	err := errors.Join(enableAll(ctx, f.disabled), f.toxics.remove(ctx))
	f.disabled = nil
	return err
}

func (f *partition) WaitForRecovered(ctx context.Context) error { return f.expectRecovered(ctx) }
func (f *partition) Cleanup(context.Context) error              { return nil }

// toxicFault adds one toxiproxy toxic to process links: latency, bandwidth, reset_peer,
// slicer, limit_data.
type toxicFault struct {
	linkSet
	typ    string
	toxics toxicSet
}

func newToxicFault(typ string) func(*Nemesis, Spec) Fault {
	return func(n *Nemesis, s Spec) Fault { return &toxicFault{linkSet: linkSet{n: n, spec: s}, typ: typ} }
}

func ms(d units.Duration) int64 { return d.D().Milliseconds() }

// attributes are the toxic's settings in toxiproxy's units.
func (f *toxicFault) attributes() map[string]any {
	p := f.spec.Params
	switch f.typ {
	case "latency":
		return map[string]any{"latency": ms(p.Latency), "jitter": ms(p.Jitter)}
	case "bandwidth":
		return map[string]any{"rate": p.Rate}
	case "reset_peer":
		return map[string]any{"timeout": ms(p.ResetAfter)}
	case "slicer":
		return map[string]any{"average_size": p.SliceSize, "size_variation": p.SliceVariation, "delay": p.SliceDelay.D().Microseconds()}
	case "limit_data":
		return map[string]any{"bytes": p.Bytes}
	}
	return nil
}

func (f *toxicFault) Setup(ctx context.Context) error { return f.resolve(ctx) }

func (f *toxicFault) Window() Window {
	p := f.spec.Params
	var what string
	switch f.typ {
	case "latency":
		what = fmt.Sprintf("latency %v±%v", p.Latency, p.Jitter)
	case "bandwidth":
		what = fmt.Sprintf("bandwidth %d KB/s", p.Rate)
	case "reset_peer":
		what = fmt.Sprintf("reset peer after %v", p.ResetAfter)
	case "slicer":
		what = fmt.Sprintf("slicer %d±%d bytes every %v", p.SliceSize, p.SliceVariation, p.SliceDelay)
	case "limit_data":
		what = fmt.Sprintf("limit data to %d bytes", p.Bytes)
	}
	if p.Toxicity < 1 {
		what += fmt.Sprintf(" on %.0f%% of connections", 100*p.Toxicity)
	}
	return f.window(fmt.Sprintf("%s %s on %s", what, p.Direction, f.desc))
}

func (f *toxicFault) Inject(ctx context.Context) error {
	t := links.Toxic{Type: f.typ, Toxicity: float32(f.spec.Params.Toxicity), Attributes: f.attributes()}
	return f.toxics.add(ctx, f.n, f.links, t, f.spec.Params.Direction)
}

// WaitForInjected: toxiproxy lists the toxic on every link. Where the effect on one request
// is certain, a probe shows it too: latency delays the answer by at least latency − jitter
// per direction; an immediate reset-peer cuts the connection.
func (f *toxicFault) WaitForInjected(ctx context.Context) error {
	if err := f.toxics.listed(ctx); err != nil {
		return fmt.Errorf("%w: %w", ErrNotHeld, err)
	}
	p := f.spec.Params
	if p.Toxicity < 1 {
		return nil // a probe's connection may be spared
	}
	switch {
	case f.typ == "latency":
		least := (p.Latency - p.Jitter).D() * time.Duration(len(streams(p.Direction)))
		wait := f.n.env.ProbeTimeout + 2*least
		return f.expectLive(ctx, wait, ErrNotHeld, func(r probeResult) bool {
			return r.outcome == answered && r.rtt >= least || r.outcome == silent
		})
	case f.typ == "reset_peer" && p.ResetAfter == 0:
		return f.expectLive(ctx, f.n.env.ProbeTimeout, ErrNotHeld, func(r probeResult) bool { return r.outcome == closed })
	}
	return nil
}

func (f *toxicFault) Recover(ctx context.Context) error { return f.toxics.remove(ctx) }

func (f *toxicFault) WaitForRecovered(ctx context.Context) error { return f.expectRecovered(ctx) }
func (f *toxicFault) Cleanup(context.Context) error              { return nil }

// flapping takes links down and up again at random intervals until recovered.
type flapping struct {
	linkSet
	rng      *rand.Rand // its own stream, drawn from the nemesis's at Setup
	disabled []*links.Link
	stop     chan struct{}
	done     chan struct{}

	mu     sync.Mutex
	toggle int   // toggles done, the first down included
	err    error // the last toggle's error
}

func newFlapping(n *Nemesis, s Spec) Fault { return &flapping{linkSet: linkSet{n: n, spec: s}} }

func (f *flapping) Setup(ctx context.Context) error {
	var seed uint64
	f.n.rand(func(r *rand.Rand) { seed = r.Uint64() })
	f.rng = rand.New(rand.NewPCG(seed, rngStream))
	return f.resolve(ctx)
}

func (f *flapping) Window() Window {
	return f.window(fmt.Sprintf("flap %s about every %v", f.desc, f.spec.Params.Interval))
}

// Inject takes the links down now and leaves a goroutine toggling them.
func (f *flapping) Inject(ctx context.Context) error {
	if err := disableAll(ctx, f.links, &f.disabled); err != nil {
		return err
	}
	f.toggle = 1
	f.stop, f.done = make(chan struct{}), make(chan struct{})
	go f.loop()
	return nil
}

// loop toggles the links after waits uniform in [interval/2, 3·interval/2).
func (f *flapping) loop() {
	defer close(f.done)
	iv := int64(f.spec.Params.Interval)
	for up := true; ; up = !up {
		t := time.NewTimer(time.Duration(iv/2 + f.rng.Int64N(max(iv, 1))))
		select {
		case <-f.stop:
			t.Stop()
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var err error
		if up {
			err = enableAll(ctx, f.links)
		} else {
			err = disableAll(ctx, f.links, new([]*links.Link))
		}
		cancel()
		f.mu.Lock()
		f.toggle++
		f.err = err
		f.mu.Unlock()
		if err != nil {
			f.n.log.Warn("flapping toggle failed", "links", f.desc, "up", up, "err", err)
		}
	}
}

// WaitForInjected: a probe over every link was refused while it was down (Inject took them
// down; a link that came up meanwhile is probed again until it is down).
func (f *flapping) WaitForInjected(ctx context.Context) error {
	return f.expectLive(ctx, f.n.env.ProbeTimeout, ErrNotHeld, func(r probeResult) bool { return r.outcome == refused })
}

// Recover stops the toggling first, then brings every link up.
func (f *flapping) Recover(ctx context.Context) error {
	if f.stop != nil {
		close(f.stop)
		<-f.done
		f.stop = nil
	}
	f.mu.Lock()
	n, err := f.toggle, f.err
	f.mu.Unlock()
	f.n.log.Debug("flapping stopped", "links", f.desc, "toggles", n, "last_err", err)
	err = enableAll(ctx, f.disabled)
	f.disabled = nil
	return err
}

func (f *flapping) WaitForRecovered(ctx context.Context) error { return f.expectRecovered(ctx) }
func (f *flapping) Cleanup(context.Context) error              { return nil }
