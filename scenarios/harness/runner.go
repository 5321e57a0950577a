// Package harness runs one scenario: it is fencecheck's composition root. It starts (or
// connects to) the cluster and checks it can do what fencecheck needs (the preflight), starts
// the transports (in this process, or adapters behind the exec protocol), runs the workload
// and the nemesis together, heals, reads what the logs hold, checks the history and writes the
// run directory. The campaigns (suite, soak, selftest, shrink) call Run for each of their runs.
package harness

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/cluster/links"
	"github.com/fencecheck/fencecheck/internal/adapters"
	"github.com/fencecheck/fencecheck/nemesis"
	"github.com/fencecheck/fencecheck/reports"
	"github.com/fencecheck/fencecheck/scenarios"
	"github.com/fencecheck/fencecheck/transport"
	"github.com/fencecheck/fencecheck/transport/lineproto"
	"github.com/fencecheck/fencecheck/transport/mutant"
	"github.com/fencecheck/fencecheck/workload"
	pipewl "github.com/fencecheck/fencecheck/workload/pipeline"
)

// Options configure one run of a scenario.
type Options struct {
	// Root is the folder of run directories. Default reports.DefaultRoot ("runs").
	Root string
	// Seed is the run's root seed; 0 picks one at random (printed and stored).
	Seed uint64
	// Console receives one line per phase, and the status line (StatusEvery). Default: discard.
	Console io.Writer
	// StatusEvery is how often a status line is printed while the workload runs; 0: never.
	StatusEvery time.Duration
	// Live rewrites the status line in place (a terminal) instead of printing a new one.
	Live bool
	// CheckTimeout bounds each role's porcupine search. Default checker.DefaultTimeout.
	CheckTimeout time.Duration
	// Transport is the transport under test: "" or "real" for transport.BrokerTransport,
	// "mutant:NAME" for one of the deliberately broken transports of package mutant,
	// "exec:COMMAND" for a transport behind the line protocol of package lineproto (an
	// adapter program the harness starts per process; see docs/exec-protocol.md).
	Transport string
	// Cluster, when not nil, is a running cluster the run uses instead of starting one (a
	// cluster shared by several runs, see scenarios.SharesCluster): Run waits until it is healthy, runs
	// on it and heals what it injected, but does not stop it; the caller does. Its kind must be
	// the scenario's. Per-run topic and transactional id names keep runs on one cluster apart.
	// A run on a shared cluster leaves its broker logs in the cluster's own logs folder.
	Cluster cluster.Cluster
	// Observe turns on the links' observation of answers (links.Network.ObserveAnswers) and
	// returns what they saw in Outcome.Answers: the feedback of `fencecheck explore`. Off, a
	// run's connections do not decode answers. On a shared cluster (Cluster) the answers of
	// the cluster's earlier observed runs are included.
	Observe bool
}

// Outcome is what a run produced.
type Outcome struct {
	Dir  reports.Dir
	Seed uint64
	// Command repeats the run: `fencecheck run DIR --seed N`, the run directory (which keeps
	// the scenario as it ran and its transport) with the seed the run used.
	Command     string
	Results     *checker.Results
	Interrupted bool
	// Answers are the (request type, error code) pairs the processes' requests were answered
	// with, through the workload and the final reads, when Options.Observe asked for them.
	Answers []links.Answer
}

// heal, health and final-read bounds: they run even after the run's context is cancelled.
const (
	healTimeout  = 3 * time.Minute
	finalTimeout = 2 * time.Minute
	closeTimeout = time.Minute
)

// Run executes s: cluster up and healthy → workload and nemesis together for the duration →
// heal everything → health → final reads → stop → check → results and reports. Each phase is
// logged with its duration. When ctx is cancelled (Ctrl-C) or the run panics, Run still heals,
// reads what it can, stops the cluster, closes the history and checks it, marking the run
// interrupted; an interrupted run is at best inconclusive. The error is non-nil only when no
// results could be produced at all; a harness failure after the run directory exists is in
// the results (verdict error).
func Run(ctx context.Context, s *scenarios.Scenario, opts Options) (out *Outcome, err error) {
	if opts.Root == "" {
		opts.Root = reports.DefaultRoot
	}
	if opts.Console == nil {
		opts.Console = io.Discard
	}
	if opts.Seed == 0 {
		opts.Seed = randomSeed()
	}
	s.ApplyTiming()
	if err := s.Supports(s.Cluster.Kind); err != nil {
		return nil, fmt.Errorf("%w: %w", scenarios.ErrScenario, err)
	}
	if opts.Cluster != nil && opts.Cluster.Info().Kind != s.Cluster.Kind {
		return nil, fmt.Errorf("%w: scenario %s runs on a %s cluster, the cluster given is %s", scenarios.ErrScenario,
			s.Name, s.Cluster.Kind, opts.Cluster.Info().Kind)
	}
	var start workload.StartFunc
	if s.Workload.IsPipeline() {
		// A pipeline's members are chosen by the scenario and --transport (pipelineMember),
		// checked here so that a bad flag fails before anything starts.
		cfg, err := s.Workload.PipelineConfig()
		if err == nil {
			_, err = pipelineMember(opts.Transport, cfg)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %w", scenarios.ErrScenario, err)
		}
	} else if start, err = transportStart(opts.Transport); err != nil {
		return nil, fmt.Errorf("%w: %w", scenarios.ErrScenario, err)
	}
	if opts.Transport == "" {
		opts.Transport = "real"
	}
	started := time.Now()
	dir, err := reports.NewDir(opts.Root, s.Name, started, opts.Seed)
	if err != nil {
		return nil, err
	}
	command := "fencecheck run " + scenarios.ShellQuote(string(dir)) + " --seed " + strconv.FormatUint(opts.Seed, 10)
	r := &runner{s: s, opts: opts, dir: dir, started: started, start: start, command: command, cpuAtStart: cpuTime(),
		out: &Outcome{Dir: dir, Seed: opts.Seed, Command: command}}
	logFile, err := os.Create(dir.HarnessLog())
	if err != nil {
		return nil, fmt.Errorf("harness log: %w", err)
	}
	defer logFile.Close()
	r.log = slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelInfo})).
		With("scenario", s.Name, "seed", opts.Seed)
	if s.Workload.IsPipeline() {
		cfg, _ := s.Workload.PipelineConfig() // validated above
		r.say("fencecheck %s: seed %d, %s cluster, a pipeline of %d members on %d processes, %v → %s",
			s.Name, opts.Seed, s.Cluster.Kind, cfg.Members, cfg.Processes, s.Duration, dir)
	} else {
		r.say("fencecheck %s: seed %d, %s cluster, %d processes × %d roles × %d members, %v → %s",
			s.Name, opts.Seed, s.Cluster.Kind, s.Workload.Processes, s.Workload.Roles, s.Workload.MembersPerRole,
			s.Duration, dir)
	}
	for _, w := range s.Warnings() {
		r.log.Warn("scenario: " + w)
	}
	if err := r.writeRunInfo(false); err != nil {
		return nil, err
	}
	if err := r.writeScenario(); err != nil {
		return nil, err
	}
	r.execute(ctx)
	return r.out, nil
}

// runner is one run in progress.
type runner struct {
	s       *scenarios.Scenario
	opts    Options
	dir     reports.Dir
	started time.Time
	command string // repeats this run (Outcome.Command)
	// cpuAtStart is the process's CPU time when the run started; resources what the run
	// cost, once it is checked.
	cpuAtStart time.Duration
	resources  *reports.Resources
	log        *slog.Logger
	out        *Outcome
	start      workload.StartFunc // the transport under test

	cl      cluster.Cluster
	hist    *history.Writer
	wl      *workload.Workload
	pipe    *pipewl.Workload // a pipeline run's workload, instead of wl
	nem     *nemesis.Nemesis
	sched   nemesis.Schedule
	harness []error // harness failures: the verdict becomes error
}

func (r *runner) say(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if r.opts.Live {
		fmt.Fprint(r.opts.Console, "\r\033[K")
	}
	fmt.Fprintln(r.opts.Console, msg)
	if r.log != nil {
		r.log.Info(msg)
	}
}

// phase runs one phase and logs its duration.
func (r *runner) phase(name string, fn func() error) error {
	began := time.Now()
	err := fn()
	took := time.Since(began).Round(time.Millisecond)
	if err != nil {
		r.say("%-12s failed after %v: %v", name, took, err)
		return err
	}
	r.say("%-12s %v", name, took)
	return nil
}

// execute runs the phases. Everything after the workload runs on a context that ignores
// cancellation, each step with its own bound, so a Ctrl-C still leaves a healed cluster, a
// closed history and checked results.
func (r *runner) execute(ctx context.Context) {
	after := context.WithoutCancel(ctx)
	defer func() {
		if p := recover(); p != nil {
			r.harness = append(r.harness, fmt.Errorf("panic: %v\n%s", p, debug.Stack()))
			r.out.Interrupted = true
			r.cleanup(after)
			r.check(after)
		}
	}()
	for _, p := range []struct {
		name string
		fn   func(context.Context) error
	}{{"cluster up", r.startCluster}, {"workload up", r.openWorkload}} {
		if err := r.phase(p.name, func() error { return p.fn(ctx) }); err != nil {
			r.harness = append(r.harness, fmt.Errorf("%s: %w", p.name, err))
			r.out.Interrupted = ctx.Err() != nil
			r.cleanup(after)
			r.check(after)
			return
		}
	}
	if err := r.phase("workload", func() error { return r.runLoad(ctx) }); err != nil && ctx.Err() == nil {
		r.harness = append(r.harness, err)
	}
	r.out.Interrupted = r.out.Interrupted || ctx.Err() != nil
	if r.out.Interrupted {
		r.say("interrupted: healing, reading and checking what the run has")
	}
	r.cleanup(after)
	r.check(after)
}

// startCluster brings the cluster up and opens the history and the workload on it.
func (r *runner) startCluster(ctx context.Context) error {
	cl := r.opts.Cluster
	if err := r.preflightRun(ctx, cl); err != nil {
		return err
	}
	if cl != nil {
		// A shared cluster: the previous run healed it, but a broker may still be settling.
		// Bounded: a shared cluster that died must fail this run, not hang the suite.
		hctx, cancel := context.WithTimeout(ctx, finalTimeout)
		err := cluster.WaitHealthy(hctx, cl, r.log)
		cancel()
		if err != nil {
			return fmt.Errorf("shared cluster not healthy: %w", err)
		}
	} else {
		var err error
		if cl, err = StartCluster(ctx, r.s.Cluster, r.dir.Logs(), r.log.With("component", "cluster")); err != nil {
			return err
		}
	}
	r.cl = cl
	if r.opts.Observe {
		cl.Network().ObserveAnswers()
	}
	return nil
}

// openWorkload opens the history, the workload's transports and the nemesis on r.cl.
func (r *runner) openWorkload(ctx context.Context) error {
	cl := r.cl
	var err error
	info := cl.Info()
	cfg := r.s.Workload.Config
	// Per-run topics: an external or reused cluster never mixes two runs' records.
	runID := fmt.Sprintf("%d-%d", r.started.Unix(), r.opts.Seed)
	if cfg.Topic == "" {
		cfg.Topic = "fencecheck." + runID + ".coordination"
	}
	if cfg.WorkTopic == "" {
		cfg.WorkTopic = "fencecheck." + runID + ".work"
	}
	meta := cfg.Meta(info)
	if r.s.Workload.IsPipeline() {
		// The lease workload's settings (the lease, the producer-id order) mean nothing here.
		meta = history.Meta{Cluster: info.Kind, TransactionVersion: info.TxnVersion}
	}
	meta.Run = string(r.dir)
	meta.Scenario = r.s.Name
	meta.Seed = r.opts.Seed
	meta.Started = r.started.UTC().Format(time.RFC3339)
	meta.Promises = r.s.Promises
	switch {
	case r.s.Nemesis.Random != nil:
		meta.Schedule = history.ScheduleRandom
	case len(r.s.Nemesis.Script) > 0:
		meta.Schedule = history.ScheduleScript
		for _, line := range r.s.Nemesis.Script {
			meta.Script = append(meta.Script, strings.Join(strings.Fields(line), " "))
		}
	}
	if r.s.Workload.IsPipeline() {
		return r.openPipeline(ctx, meta)
	}
	// Flushed every second: a run killed with SIGKILL keeps all but its last second of
	// history, which `fencecheck check` can still judge. The header waits for the
	// transports: they say which transaction version they speak and what they cannot do.
	if r.hist, err = history.Open(r.dir.History(), history.WriterOptions{FlushInterval: time.Second}); err != nil {
		return err
	}
	var faultIDs atomic.Int64
	next := func() int64 { return faultIDs.Add(1) }
	wlOpts := []workload.Option{workload.WithStart(r.started), workload.WithFaultIDs(next), workload.WithoutPauseWindows(),
		workload.WithTransport(r.start)}
	if procs := r.s.Cluster.UnauthorizedProcesses; len(procs) > 0 {
		for _, p := range procs {
			if p < 1 || p > cfg.Processes {
				return fmt.Errorf("%w: cluster.unauthorized_processes: process %d, want 1 to %d", scenarios.ErrScenario, p, cfg.Processes)
			}
		}
		sec, err := unauthorizedPrincipal(ctx, cl, r.log.With("component", "cluster"))
		if err != nil {
			return err
		}
		wlOpts = append(wlOpts, workload.WithProcessSecurity(func(n int) *cluster.Security {
			if slices.Contains(procs, n) {
				return sec
			}
			return nil
		}))
	}
	if r.wl, err = workload.New(ctx, cfg, cl, r.hist, r.log.With("component", "workload"), r.opts.Seed, wlOpts...); err != nil {
		return err
	}
	r.wl.ProcessMeta(&meta)
	roles := make([]string, cfg.Roles)
	for i := range roles {
		roles[i] = workload.RoleName(i)
	}
	err = r.headerAndNemesis(meta, func() nemesis.Env {
		return nemesis.Env{
			Cluster:   cl,
			Processes: cfg.Processes,
			Roles:     roles,
			Resolve: func(role string) (nemesis.RoleKeys, error) {
				return nemesis.RoleKeys{TransactionalID: transport.TransactionalID(cfg.Topic, transport.Role(role)),
					Topic: cfg.Topic, Partition: transport.PartitionFor(transport.Role(role), cfg.TopicPartitions)}, nil
			},
			Freezer:     newFreezer(r.wl, cfg.RequestTimeout.D()),
			Lease:       cfg.Lease.D(),
			Start:       r.wl.Start(),
			NextFaultID: next,
		}
	})
	if err != nil {
		return err
	}
	r.say("cluster      %s %s, TV%d, bootstrap %s", info.Kind, info.Version, info.TxnVersion, strings.Join(cl.Bootstrap(), ","))
	if meta.TransactionVersion != info.TxnVersion || len(meta.ProcessTransactionVersions) > 0 {
		r.say("client       speaks TV%d%s", meta.TransactionVersion, processVersions(meta.ProcessTransactionVersions))
	}
	switch n := len(meta.NoDescribe); {
	case n == cfg.Processes:
		r.say("client       cannot describe: describe-consistent is not covered")
	case n > 0:
		r.say("client       cannot describe on %s: they read instead", strings.Join(meta.NoDescribe, ", "))
	}
	return nil
}

// headerAndNemesis writes the history's header (meta) and, when the scenario schedules faults,
// makes the nemesis on the env that env returns.
func (r *runner) headerAndNemesis(meta history.Meta, env func() nemesis.Env) error {
	if err := r.hist.WriteHeader(meta); err != nil {
		return err
	}
	if err := r.hist.Flush(); err != nil {
		return err
	}
	sched, hasFaults, err := r.s.Nemesis.Schedule()
	if err != nil || !hasFaults {
		return err
	}
	if r.nem, err = nemesis.New(env(), r.hist, r.log.With("component", "nemesis"), r.opts.Seed); err != nil {
		return err
	}
	r.sched = sched
	return nil
}

// runLoad runs the workload and the nemesis together for the scenario's duration, with a
// status line.
func (r *runner) runLoad(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var nemErr error
	if r.nem != nil {
		wg.Go(func() {
			// The nemesis's own Run heals what it injected when ctx ends.
			nemErr = r.nem.Run(ctx, r.sched)
			if ctx.Err() != nil {
				nemErr = nil // stopped with the workload: not a failure
			}
		})
	}
	if r.opts.StatusEvery > 0 {
		wg.Go(func() { r.statusLoop(ctx) })
	}
	var err error
	if r.pipe != nil {
		err = r.pipe.Run(ctx, r.s.Duration.D())
	} else {
		err = r.wl.Run(ctx, r.s.Duration.D())
	}
	cancel()
	wg.Wait()
	if r.opts.Live {
		fmt.Fprint(r.opts.Console, "\r\033[K")
	}
	if r.pipe != nil {
		st := r.pipe.Stats()
		abortedInput := ""
		if st.Aborted > 0 {
			abortedInput = fmt.Sprintf(" (and %d in aborted transactions)", st.Aborted)
		}
		r.say("copied       %d input records sent%s; %d transactions committed, %d aborted, %d unknown; %d member restarts",
			st.Sent, abortedInput, st.Committed, st.Failed, st.Unknown, st.Restarts)
	} else {
		st := r.wl.Stats()
		r.say("held         %.1f%% of the time on average, the least held role %.1f%%; %d handoffs, %d fences",
			100*st.HeldFraction, 100*st.MinHeldFraction, st.Handoffs, st.Fences)
	}
	if nemErr != nil {
		err = errors.Join(err, fmt.Errorf("nemesis: %w", nemErr))
	}
	return err
}

func (r *runner) statusLoop(ctx context.Context) {
	t := time.NewTicker(r.opts.StatusEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var faults []string // nil: the run has no nemesis
		if r.nem != nil {
			faults = []string{}
			for _, a := range r.nem.Active() {
				faults = append(faults, a.String())
			}
		}
		var line string
		if r.pipe != nil {
			line = pipelineStatus(r.pipe.Stats(), time.Since(r.pipe.Start()), r.s.Duration.D(), faults)
		} else {
			line = statusLine(r.wl.Stats(), r.s.Workload.Roles, r.s.Duration.D(), faults)
		}
		if r.opts.Live {
			fmt.Fprint(r.opts.Console, "\r\033[K"+line)
		} else {
			fmt.Fprintln(r.opts.Console, line)
		}
	}
}

// statusLine is the line shown while the workload runs: progress, load, the roles held (a
// role is held when a member believes it holds it; when more members believe than roles are
// held, a deposed holder has not noticed yet, and the line says how many believe), handoffs,
// fences, and the active faults unless faults is nil (no nemesis).
func statusLine(st workload.Stats, roles int, duration time.Duration, faults []string) string {
	line := fmt.Sprintf("  %v/%v  %.0f ops/s", st.Elapsed.Round(time.Second), duration, st.OpsPerSecond)
	if st.Elapsed >= duration {
		// The members are finishing their calls and stepping down: what they hold now says
		// nothing of the run.
		line += "  stopping"
	} else {
		line += fmt.Sprintf("  roles held %d/%d", st.RolesHeld, roles)
		if st.Believers != st.RolesHeld {
			line += fmt.Sprintf(" (%d members believe they hold)", st.Believers)
		}
	}
	line += fmt.Sprintf("  handoffs %d  fences %d", st.Handoffs, st.Fences)
	return line + faultsSuffix(faults)
}

// faultsSuffix is the status line's end: the active faults, none, or nothing when faults is
// nil (the run has no nemesis).
func faultsSuffix(faults []string) string {
	switch {
	case faults == nil:
		return ""
	case len(faults) == 0:
		return "  faults: none"
	}
	return "  faults: " + strings.Join(faults, ", ")
}

// cleanup heals every fault, waits for health, performs the final reads, stops the workload
// and the cluster, and closes the history. Each step runs whatever happened before it.
func (r *runner) cleanup(ctx context.Context) {
	if r.nem != nil {
		_ = r.phase("heal", func() error {
			hctx, cancel := context.WithTimeout(ctx, healTimeout)
			defer cancel()
			err := r.nem.HealAll(hctx)
			if err != nil {
				r.harness = append(r.harness, fmt.Errorf("heal: %w", err))
			}
			return err
		})
	}
	if r.pipe != nil {
		r.finalReads(ctx, r.pipe.FinalReads)
		r.pipe.Close()
	}
	if r.wl != nil {
		r.finalReads(ctx, r.wl.FinalReads)
		cctx, cancel := context.WithTimeout(ctx, closeTimeout)
		if err := r.wl.Close(cctx); err != nil {
			r.log.Warn("close workload", "err", err)
		}
		cancel()
	}
	if r.hist != nil {
		if err := r.hist.Close(); err != nil {
			r.harness = append(r.harness, fmt.Errorf("history: %w", err))
		}
	}
	if r.cl != nil && r.opts.Observe {
		r.out.Answers = r.cl.Network().Answers()
	}
	if r.cl != nil && r.opts.Cluster == nil { // a shared cluster is its owner's to stop
		_ = r.phase("cluster down", func() error {
			cctx, cancel := context.WithTimeout(ctx, closeTimeout)
			defer cancel()
			return r.cl.Close(cctx)
		})
	}
}

// finalReads is the final reads phase: once the cluster is healthy, read (bounded by
// finalTimeout). A cluster that does not get healthy leaves the checker no final read: the
// run is inconclusive.
func (r *runner) finalReads(ctx context.Context, read func(context.Context) error) {
	_ = r.phase("final reads", func() error {
		fctx, cancel := context.WithTimeout(ctx, finalTimeout)
		defer cancel()
		if r.cl != nil {
			if err := cluster.WaitHealthy(fctx, r.cl, r.log); err != nil {
				return fmt.Errorf("cluster not healthy: %w", err)
			}
		}
		return read(fctx)
	})
}

// check writes run.json once more (it says whether the run was interrupted, which Check
// reads), then judges the history and writes results.json, the visualizations, report.html
// and junit.xml (Check).
func (r *runner) check(ctx context.Context) {
	var res *checker.Results
	_ = r.phase("check", func() error {
		if err := r.writeRunInfo(r.out.Interrupted); err != nil {
			r.harness = append(r.harness, err)
		}
		var err error
		res, err = Check(ctx, r.dir, CheckOptions{Timeout: r.opts.CheckTimeout, Logger: r.log.With("component", "checker"),
			Harness: r.harness, NoHistory: r.hist == nil})
		return err
	})
	r.out.Results = res
	if res != nil && res.Run.Workload == history.WorkloadPipeline && res.Run.ClusterTransactionVersion != 0 {
		if tv := res.Run.TransactionVersion; tv != 0 {
			r.say("client       spoke TV%d (its EndTxn requests, on the wire) on a TV%d cluster", tv, res.Run.ClusterTransactionVersion)
		}
	}
	if res != nil {
		r.say("verdict      %s (exit %d); report: %s", res.Verdict, res.ExitCode, r.dir.Report())
	}
	r.resources = measureResources(r.started, r.cpuAtStart)
	if rs := r.resources; rs.WallSeconds > 0 {
		r.say("resources    %.2f cores over %.0fs, peak RSS %s (this process)", rs.CPUSeconds/rs.WallSeconds, rs.WallSeconds, bytesIEC(rs.PeakRSSBytes))
	}
	if err := r.writeRunInfo(r.out.Interrupted); err != nil {
		r.log.Error("run.json with the run's resources", "err", err)
	}
}

// writeRunInfo writes run.json: first before the cluster starts, again at the end.
func (r *runner) writeRunInfo(interrupted bool) error {
	expanded, err := json.Marshal(scenarios.AsRan(r.s))
	if err != nil {
		return err
	}
	info := &reports.RunInfo{
		Scenario: r.s.Name, Description: strings.TrimSpace(r.s.Description), Seed: r.opts.Seed,
		Started: r.started, Command: r.command, Revision: revision(), Cluster: r.s.Cluster.Kind,
		Kafka: r.s.Cluster.KafkaVersion, TxnVersion: r.s.Cluster.TransactionVersion,
		Processes: r.s.Workload.Processes, Roles: r.s.Workload.Roles, Members: r.s.Workload.MembersPerRole,
		Workload: r.s.Workload.Kind,
		Duration: r.s.Duration.D(), Transport: r.opts.Transport, Interrupted: interrupted, Expanded: expanded,
		Resources: r.resources,
	}
	if r.s.Workload.IsPipeline() {
		cfg, _ := r.s.Workload.PipelineConfig() // validated by Run
		info.Processes, info.Roles, info.Members = cfg.Processes, 0, cfg.Members
	}
	if r.cl != nil {
		ci := r.cl.Info()
		info.Kafka, info.TxnVersion = ci.Version, ci.TxnVersion
	}
	return r.dir.WriteRunInfo(info)
}

func revision() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, kv := range bi.Settings {
		if kv.Key == "vcs.revision" {
			return kv.Value
		}
	}
	return ""
}

// randomSeed picks a root seed when none was given; it is printed and stored, so the run can
// be repeated.
func randomSeed() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:])>>1 + 1 // positive and non-zero: prints the same everywhere
}

// adapterArgv splits an exec transport's command and finds its program, now, before a cluster
// starts, rather than once per process (or member) when each fails; name is the transport as
// given, for the errors.
func adapterArgv(name, command string) ([]string, error) {
	argv, err := lineproto.SplitCommand(command)
	if err != nil {
		return nil, fmt.Errorf("transport %q: %w", name, err)
	}
	if _, err := exec.LookPath(argv[0]); err != nil {
		return nil, fmt.Errorf("transport %q: adapter %s: %w (the adapters in adapters/ are built by make NAME-adapter)",
			name, argv[0], errors.Unwrap(err))
	}
	if err := adapters.CheckBuilt(argv[0]); err != nil {
		return nil, fmt.Errorf("transport %q: %w", name, err)
	}
	return argv, nil
}

// transportStart returns how to start the transport named by name ("", "real",
// "mutant:NAME" or "exec:COMMAND").
func transportStart(name string) (workload.StartFunc, error) {
	mname, isMutant := strings.CutPrefix(name, "mutant:")
	command, isExec := strings.CutPrefix(name, "exec:")
	switch {
	case name == "" || name == "real":
		return nil, nil // the workload's default: transport.Start
	case isExec:
		argv, err := adapterArgv(name, command)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, cfg transport.Config) (workload.Transport, error) {
			t, err := lineproto.Start(ctx, argv, cfg)
			if err != nil {
				return nil, err
			}
			return t, nil
		}, nil
	case !isMutant:
		return nil, fmt.Errorf("transport %q: want real, mutant:NAME or exec:COMMAND", name)
	}
	if !mutant.Known(mname) {
		var names []string
		for _, n := range mutant.Names() {
			names = append(names, "mutant:"+n)
		}
		return nil, fmt.Errorf("transport %q: no such mutant (mutants: %s)", name, strings.Join(names, ", "))
	}
	return func(ctx context.Context, cfg transport.Config) (workload.Transport, error) {
		m, err := mutant.Start(ctx, mname, cfg)
		if err != nil {
			return nil, err
		}
		return m, nil
	}, nil
}

// processVersions lists the processes that speak another transaction version, " (p2 TV2, p5
// TV2)", or "" when there are none.
func processVersions(m map[string]int) string {
	if len(m) == 0 {
		return ""
	}
	var parts []string
	for _, p := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s TV%d", p, m[p]))
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// usage is the process's CPU time so far (user and system) and its peak resident memory.
func usage() (cpu time.Duration, peakRSS int64) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), ru.Maxrss * 1024 // Linux reports kilobytes
}

// cpuTime is the process's CPU time so far.
func cpuTime() time.Duration {
	cpu, _ := usage()
	return cpu
}

// measureResources is what the run that started at started, with the process's CPU time at
// cpu0, cost up to now.
func measureResources(started time.Time, cpu0 time.Duration) *reports.Resources {
	cpu, rss := usage()
	return &reports.Resources{WallSeconds: time.Since(started).Seconds(), CPUSeconds: (cpu - cpu0).Seconds(), PeakRSSBytes: rss}
}

// bytesIEC is n bytes as "61 MiB" or "5.3 GiB".
func bytesIEC(n int64) string {
	if n >= 1<<30 {
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	}
	return fmt.Sprintf("%d MiB", n>>20)
}
