package nemesis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/cluster"
)

// rngStream tells the nemesis's random stream apart from other components seeded with the
// same root seed ("nemesis" in ASCII).
const rngStream = 0x6e656d65736973

// Nemesis injects faults into one run's cluster and records them. Its methods are safe for
// concurrent use.
type Nemesis struct {
	env Env
	rec Recorder
	log *slog.Logger

	mu      sync.Mutex
	rng     *rand.Rand
	claims  map[string]*Injection // target → the injection holding it
	active  []*Injection          // set up and not cleaned up, in setup order
	frozen  map[Member]bool       // every member a freeze touched: HealAll thaws them
	healing int                   // HealAll calls running
	running bool                  // Run is running
	lastID  int64                 // window ids when Env.NextFaultID is nil
	seq     int                   // names toxics uniquely
}

// New returns a nemesis acting on env, recording windows to rec and logging to log (nil:
// discard) as given: the caller names the component and the run. Every random choice comes
// from seed.
func New(env Env, rec Recorder, log *slog.Logger, seed uint64) (*Nemesis, error) {
	if err := env.defaults(); err != nil {
		return nil, err
	}
	if rec == nil {
		return nil, errors.New("nemesis: a Recorder is required")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Nemesis{
		env:    env,
		rec:    rec,
		log:    log,
		rng:    rand.New(rand.NewPCG(seed, rngStream)),
		claims: make(map[string]*Injection),
		frozen: make(map[Member]bool),
	}, nil
}

// Prepare validates spec and returns its injection, not yet set up.
func (n *Nemesis) Prepare(spec Spec) (*Injection, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	d, _ := lookup(spec.Fault)
	eff := d.withDefaults(spec)
	if eff.For == 0 && d.defaultFor != nil {
		eff.For = d.defaultFor(&n.env)
	}
	return &Injection{n: n, name: d.name, spec: eff, f: d.build(n, eff)}, nil
}

// Track returns an injection for a fault implemented elsewhere (the runner's, say), so that
// its windows are recorded, its targets claimed and HealAll heals it.
func (n *Nemesis) Track(name string, f Fault) *Injection {
	return &Injection{n: n, name: name, f: f}
}

// Inject prepares, sets up and injects spec, then waits (Env.WaitTimeout) until it holds.
// Whenever the fault may have been applied, the injection is returned, with the error if it
// did not hold: Heal it (or leave it to HealAll).
func (n *Nemesis) Inject(ctx context.Context, spec Spec) (*Injection, error) {
	inj, err := n.Prepare(spec)
	if err != nil {
		return nil, err
	}
	if err := inj.Setup(ctx); err != nil {
		return nil, err
	}
	if err := inj.Inject(ctx); err != nil {
		return inj, err
	}
	wctx, cancel := context.WithTimeout(ctx, n.env.WaitTimeout)
	defer cancel()
	return inj, inj.WaitForInjected(wctx)
}

// Active returns the injections that are set up and not cleaned up, in setup order.
func (n *Nemesis) Active() []Status {
	n.mu.Lock()
	active := slices.Clone(n.active)
	n.mu.Unlock()
	out := make([]Status, 0, len(active))
	for _, i := range active {
		out = append(out, i.status())
	}
	return out
}

// HealAll heals everything, even when ctx is cancelled (it runs on context.WithoutCancel with
// Env.HealTimeout): it heals every active injection (newest first), then sweeps the whole
// cluster (removes every toxic and enables every link, resumes paused and restarts killed
// brokers, unisolates brokers a cluster.Isolator isolated, thaws every member a freeze
// touched), then confirms: no link down, no toxic, no broker paused, killed or isolated, no
// member frozen, and the cluster healthy (cluster.WaitHealthy).
// Nothing new is injected while it runs. It returns every problem joined.
func (n *Nemesis) HealAll(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), n.env.HealTimeout)
	defer cancel()
	start := time.Now()
	n.mu.Lock()
	n.healing++
	active := slices.Clone(n.active)
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		n.healing--
		n.mu.Unlock()
	}()
	var errs []error
	for i := len(active) - 1; i >= 0; i-- {
		errs = append(errs, active[i].Heal(ctx))
	}
	errs = append(errs, n.sweep(ctx), n.confirmHealed(ctx))
	err := errors.Join(errs...)
	if err != nil {
		n.log.Error("heal all", "healed", len(active), "took", time.Since(start).Round(time.Millisecond), "err", err)
		return fmt.Errorf("heal all: %w", err)
	}
	n.log.Info("healed all", "healed", len(active), "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// sweep undoes every fault the cluster shows, whoever injected it.
func (n *Nemesis) sweep(ctx context.Context) error {
	c := n.env.Cluster
	errs := []error{c.Network().HealAll(ctx)}
	bs, err := c.Brokers(ctx, cluster.RoleQuery{})
	if len(bs) == 0 && err != nil {
		errs = append(errs, err)
	}
	for _, b := range bs {
		switch b.State {
		case cluster.StatePaused:
			errs = append(errs, c.Resume(ctx, b.ID))
		case cluster.StateKilled:
			errs = append(errs, c.Restart(ctx, b.ID))
		case cluster.StateIsolated:
			if iso, ok := c.(cluster.Isolator); ok {
				errs = append(errs, iso.Unisolate(ctx, b.ID))
			}
		}
	}
	for _, m := range n.frozenMembers() {
		errs = append(errs, n.env.Freezer.Thaw(ctx, m))
	}
	return errors.Join(errs...)
}

// confirmHealed checks what sweep promises, then waits for the cluster to be healthy.
func (n *Nemesis) confirmHealed(ctx context.Context) error {
	c := n.env.Cluster
	var errs []error
	for _, l := range c.Network().Links() {
		if ok, err := l.Enabled(ctx); err != nil || !ok {
			errs = append(errs, errors.Join(fmt.Errorf("link %s is down", l), err))
		}
		if ts, err := l.Toxics(ctx); err != nil || len(ts) > 0 {
			errs = append(errs, errors.Join(fmt.Errorf("link %s has toxics %v", l, ts), err))
		}
	}
	bs, err := c.Brokers(ctx, cluster.RoleQuery{})
	if len(bs) == 0 && err != nil {
		errs = append(errs, err)
	}
	for _, b := range bs {
		if b.State == cluster.StatePaused || b.State == cluster.StateKilled || b.State == cluster.StateIsolated {
			errs = append(errs, fmt.Errorf("broker %s is %s", b.Name(), b.State))
		}
	}
	for _, m := range n.frozenMembers() {
		if n.env.Freezer.Frozen(m) {
			errs = append(errs, fmt.Errorf("member %s is frozen", m))
		}
	}
	if len(errs) == 0 {
		errs = append(errs, cluster.WaitHealthy(ctx, c, n.log))
	}
	return errors.Join(errs...)
}

func (n *Nemesis) frozenMembers() []Member {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]Member, 0, len(n.frozen))
	for m := range n.frozen {
		out = append(out, m)
	}
	return out
}

func (n *Nemesis) noteFrozen(m Member) {
	n.mu.Lock()
	n.frozen[m] = true
	n.mu.Unlock()
}

// claim gives targets to i and makes i active, or fails with ErrTargetBusy.
func (n *Nemesis) claim(i *Injection, targets []string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.healing > 0 {
		return ErrHealing
	}
	for _, t := range targets {
		if other := n.claims[t]; other != nil {
			return fmt.Errorf("%s is held by %s: %w", t, other.name, ErrTargetBusy)
		}
	}
	for _, t := range targets {
		n.claims[t] = i
	}
	n.active = append(n.active, i)
	return nil
}

func (n *Nemesis) release(i *Injection, targets []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, t := range targets {
		if n.claims[t] == i {
			delete(n.claims, t)
		}
	}
	n.active = slices.DeleteFunc(n.active, func(x *Injection) bool { return x == i })
}

// reclaim moves i's claims from old targets to new ones (a fault that changed its target).
func (n *Nemesis) reclaim(i *Injection, old, new []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, t := range old {
		if n.claims[t] == i {
			delete(n.claims, t)
		}
	}
	for _, t := range new {
		if n.claims[t] == nil {
			n.claims[t] = i
		}
	}
}

// busy reports whether another injection holds target.
func (n *Nemesis) busy(target string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.claims[target] != nil
}

// rand runs fn with the nemesis's RNG, serialized.
func (n *Nemesis) rand(fn func(r *rand.Rand)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	fn(n.rng)
}

// nextSeq returns a number unique within this nemesis, for toxic names.
func (n *Nemesis) nextSeq() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.seq++
	return n.seq
}

func (n *Nemesis) now() int64 { return time.Since(n.env.Start).Nanoseconds() }

func (n *Nemesis) nextWindowID() int64 {
	if n.env.NextFaultID != nil {
		return n.env.NextFaultID()
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.lastID++
	return n.lastID
}

// startWindow opens a window for i at history time at (i.mu held).
func (n *Nemesis) startWindow(i *Injection, at int64) error {
	i.wid = n.nextWindowID()
	if err := n.rec.Append(i.windowEvent(i.wid, at)); err != nil {
		return fmt.Errorf("record fault-start: %w", err)
	}
	return nil
}

// endWindow closes i's open window at history time at (i.mu held).
func (n *Nemesis) endWindow(i *Injection, at int64) error {
	if i.wid == 0 {
		return nil
	}
	id := i.wid
	i.wid = 0
	if err := n.rec.Append(history.Event{Type: history.TypeFaultEnd, Time: at, Fault: id, TookHold: i.tookHold}); err != nil {
		return fmt.Errorf("record fault-end: %w", err)
	}
	return nil
}
