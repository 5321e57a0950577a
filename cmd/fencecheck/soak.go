package main

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/scenarios"
	"github.com/spf13/cobra"
)

func init() { extraCommands = append(extraCommands, newSoak) }

// soakFlags are soak's own flags; the run overrides it shares with `run` are in runFlags.
type soakFlags struct {
	runs int
	max  time.Duration
	lock string
}

func newSoak() *cobra.Command {
	var f runFlags
	var sf soakFlags
	c := &cobra.Command{
		Use:   "soak [SCENARIO|FILE]...",
		Short: "Run scenarios again and again with fresh seeds and tabulate the verdicts (the false-alarm rate)",
		Long: `soak runs each scenario (default: every built-in scenario the cluster kind supports) --runs
times, each run with a fresh random seed, taking the scenarios in turn so that a soak stopped
early has sampled all of them evenly. After every run it rewrites soak.md and soak.json in
--out: per scenario and cluster kind the runs, valid, invalid, inconclusive, unknown and error
counts, and the seed, verdict, failing checks, run directory and repeat command of every run
that was not valid. Run directories go to <out>/runs/.

Naming an --out that already holds a soak.json continues that soak: its runs count towards
--runs, so repeating a stopped soak's command completes it.

--lock FILE takes an exclusive flock(2) on FILE for each run (not for the whole soak), so a
soak can share a machine with other heavy jobs that take the same lock.

Ctrl-C stops the run in progress (it is healed and checked as usual, but not counted), writes
the table so far and exits. Exit code: 1 if any run was invalid, else 2 if any was not valid
or the soak was interrupted, else 0.`,
		Example: `  fencecheck soak --runs 10
  fencecheck soak chaos holder-partition kill-coordinator pause-broker --cluster local --runs 5 --lock /tmp/heavy.lock
  fencecheck soak steady --transport mutant:ack-fenced --runs 3`,
		RunE: func(c *cobra.Command, args []string) error {
			return runSoak(c, args, f, sf)
		},
	}
	fl := c.Flags()
	fl.IntVar(&sf.runs, "runs", 10, "runs per scenario (counting those an existing soak.json in --out already holds)")
	fl.DurationVar(&sf.max, "for", 0, "start no run after this long (0: no limit)")
	fl.StringVar(&sf.lock, "lock", "", "hold an exclusive flock on this file during each run")
	fl.StringVar(&f.out, "out", "", "folder of the soak's table and run directories (default soaks/<UTC time>)")
	fl.StringVar(&f.cluster, "cluster", "", "cluster kind: "+strings.Join(scenarios.ClusterKinds, ", ")+" (default: each scenario's)")
	fl.DurationVar(&f.duration, "duration", 0, "how long each run's workload runs (default: the scenario's)")
	fl.IntVar(&f.txnVersion, "txn-version", 0, "transaction.version of the cluster: 1 or 2 (default: the scenario's)")
	fl.StringVar(&f.kafkaVersion, "kafka-version", "", "Kafka release for a local cluster (default: what make kafka fetched)")
	fl.StringVar(&f.kafkaImage, "kafka-image", "", "broker image of a containers cluster")
	fl.StringVar(&f.transport, "transport", "real", "transport under test: real, mutant:NAME, or exec:COMMAND (see docs/exec-protocol.md)")
	fl.DurationVar(&f.checkTimeout, "check-timeout", checker.DefaultTimeout, "bound of each role's linearizability search")
	f.count, f.repeat = 1, 1
	return c
}

func runSoak(c *cobra.Command, args []string, f runFlags, sf soakFlags) error {
	if sf.runs < 1 {
		return usageErr("--runs %d: want 1 or more", sf.runs)
	}
	if sf.max < 0 {
		return usageErr("--for %v: want a positive duration", sf.max)
	}
	list, err := soakScenarios(c, args, &f)
	if err != nil {
		return err
	}
	if f.out == "" {
		f.out = filepath.Join("soaks", time.Now().UTC().Format("20060102T150405Z"))
	}
	if err := os.MkdirAll(f.out, 0o755); err != nil {
		return harnessErr(fmt.Errorf("soak folder: %w", err))
	}
	tab, err := loadSoak(f.out)
	if err != nil {
		return harnessErr(err)
	}
	out := c.OutOrStdout()
	if len(tab.Runs) > 0 {
		fmt.Fprintf(out, "continuing the soak in %s: %d runs so far\n", f.out, len(tab.Runs))
	}
	if command := "fencecheck " + strings.Join(os.Args[1:], " "); !slices.Contains(tab.Commands, command) {
		tab.Commands = append(tab.Commands, command)
	}
	if tab.Started.IsZero() {
		tab.Started = time.Now().UTC()
	}
	tab.Stopped = ""

	ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	began := time.Now()
	todo := 0
	for _, s := range list {
		todo += max(0, sf.runs-tab.counted(s.Name, s.Cluster.Kind))
	}
	fmt.Fprintf(out, "soak: %d scenarios × %d runs, %d to go; table in %s\n", len(list), sf.runs, todo,
		filepath.Join(f.out, soakMarkdown))
	done := 0
	// Always the scenario with the fewest counted runs next (the first in the list on a tie):
	// round robin, so a soak stopped early, or continued, has sampled every scenario about as
	// often.
	for ctx.Err() == nil {
		next, fewest := -1, sf.runs
		for i, s := range list {
			if n := tab.counted(s.Name, s.Cluster.Kind); n < fewest {
				next, fewest = i, n
			}
		}
		if next < 0 {
			break
		}
		if sf.max > 0 && time.Since(began) >= sf.max {
			tab.Stopped = fmt.Sprintf("time limit --for %v reached", sf.max)
			break
		}
		s := list[next]
		done++
		seed := soakSeed()
		fmt.Fprintf(out, "[%d/%d] %s on %s, seed %d ...\n", done, todo, s.Name, s.Cluster.Kind, seed)
		r, err := soakOne(ctx, s, f, sf.lock, seed, out)
		if err != nil {
			if errors.Is(err, scenarios.ErrScenario) {
				return usageErr("%v", err)
			}
			if ctx.Err() != nil { // interrupted while waiting for the lock: no run started
				break
			}
			return harnessErr(err)
		}
		tab.add(r)
		if err := tab.write(f.out); err != nil {
			return harnessErr(err)
		}
		fmt.Fprintf(out, "[%d/%d] %s\n", done, todo, r.line())
		fmt.Fprintf(out, "        so far: %s\n", tab.totals().summary())
	}
	if ctx.Err() != nil {
		tab.Stopped = "interrupted (Ctrl-C)"
	}
	if err := tab.write(f.out); err != nil {
		return harnessErr(err)
	}
	fmt.Fprintln(out)
	if err := tab.writeMarkdown(out); err != nil {
		return harnessErr(err)
	}
	fmt.Fprintf(out, "\ntable: %s and %s\n", filepath.Join(f.out, soakMarkdown), filepath.Join(f.out, soakJSON))
	return soakExit(tab, ctx.Err() != nil)
}

// soakScenario is a scenario to soak and the argument that named it (a built-in name or a
// file), which the repeat command must name too.
type soakScenario struct {
	*scenarios.Scenario
	arg string
}

// soakScenarios resolves the arguments (default: every built-in scenario the cluster kind
// supports) and applies the flags to each.
func soakScenarios(c *cobra.Command, args []string, f *runFlags) ([]soakScenario, error) {
	explicit := len(args) > 0
	if !explicit {
		args = scenarios.Names()
	}
	var list []soakScenario
	for _, a := range args {
		s, err := scenarios.Find(a)
		if err != nil {
			return nil, usageErr("%v", err)
		}
		if err := f.apply(c, s); err != nil {
			if !explicit && s.Supports(s.Cluster.Kind) != nil && s.Validate() == nil {
				continue // a catalogue scenario this cluster kind cannot run (isolate-broker on embedded)
			}
			return nil, usageErr("%s: %v", s.Name, err)
		}
		list = append(list, soakScenario{s, a})
	}
	return list, nil
}

// soakOne runs s once with seed, holding the lock file (if any) for the run.
func soakOne(ctx context.Context, s soakScenario, f runFlags, lock string, seed uint64, console io.Writer) (soakRun, error) {
	if lock != "" {
		unlock, err := flockWait(ctx, lock, func() { fmt.Fprintf(console, "        waiting for the lock %s\n", lock) })
		if err != nil {
			return soakRun{}, err
		}
		defer unlock()
	}
	began := time.Now() // after the lock: the run's own time
	out, err := scenarios.Run(ctx, s.Scenario, scenarios.Options{
		Root: filepath.Join(f.out, "runs"), Seed: seed, Console: io.Discard,
		CheckTimeout: f.checkTimeout, Transport: f.transport,
	})
	if err != nil {
		return soakRun{}, err
	}
	r := soakRun{
		Scenario: s.Name, Cluster: s.Cluster.Kind, Seed: out.Seed, Dir: string(out.Dir),
		Verdict: out.Results.Verdict, Why: out.Results.NotValid(), Interrupted: out.Interrupted,
		Started: began.UTC(), Seconds: time.Since(began).Seconds(), Command: out.Command,
	}
	return r, nil
}

// soakSeed is a fresh random root seed, chosen here so it can be printed before the run.
func soakSeed() uint64 {
	var b [8]byte
	_, _ = crand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:])>>1 + 1
}

// flockWait takes an exclusive flock on path, waiting for it, or returns ctx's error when ctx
// ends first. The flock blocks in the kernel, so the soak queues with other jobs that block on
// the same lock (polling would lose every race to them); a wait abandoned on Ctrl-C releases
// the lock as soon as it is granted. The file is opened close-on-exec, so the brokers a run
// starts never inherit, and never keep, the lock.
// waiting (if not nil) is called when the lock is not free at once.
func flockWait(ctx context.Context, path string, waiting func()) (unlock func(), err error) {
	fh, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return nil, fmt.Errorf("--lock: %w", err)
	}
	fd := int(fh.Fd())
	if syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB) == nil {
		return func() { fh.Close() }, nil
	}
	if waiting != nil {
		waiting()
	}
	got := make(chan error, 1)
	go func() { got <- syscall.Flock(fd, syscall.LOCK_EX) }()
	select {
	case err := <-got:
		if err != nil {
			fh.Close()
			return nil, fmt.Errorf("--lock %s: %w", path, err)
		}
		return func() { fh.Close() }, nil // closing the file releases the lock
	case <-ctx.Done():
		go func() {
			<-got
			fh.Close()
		}()
		return nil, ctx.Err()
	}
}

// soakExit: 1 if any counted run was invalid, 2 if any was not valid or the soak was
// interrupted, else 0.
func soakExit(tab *soakTable, interrupted bool) error {
	t := tab.totals()
	switch {
	case t.Invalid > 0:
		return &exitError{code: checker.ExitCode(checker.VerdictInvalid)}
	case t.Runs != t.Valid || interrupted:
		return &exitError{code: checker.ExitCode(checker.VerdictInconclusive)}
	}
	return nil
}
