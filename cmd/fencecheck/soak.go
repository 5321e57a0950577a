package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/scenarios"
	"github.com/fencecheck/fencecheck/scenarios/soak"
	"github.com/spf13/cobra"
)

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
	ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	out := c.OutOrStdout()
	tab, err := soak.Run(ctx, list, soak.Options{
		Out: f.out, Runs: sf.runs, Max: sf.max, Lock: sf.lock, Transport: f.transport, CheckTimeout: f.checkTimeout,
		Command: "fencecheck " + strings.Join(os.Args[1:], " "), Console: out,
	})
	if errors.Is(err, scenarios.ErrScenario) {
		return usageErr("%v", err)
	}
	if err != nil {
		return harnessErr(err)
	}
	fmt.Fprintln(out)
	if err := tab.WriteMarkdown(out); err != nil {
		return harnessErr(err)
	}
	fmt.Fprintf(out, "\ntable: %s and %s\n", filepath.Join(f.out, soak.MarkdownFile), filepath.Join(f.out, soak.JSONFile))
	if v := tab.Verdict(); v != checker.VerdictValid {
		return &exitError{code: checker.ExitCode(v)}
	}
	return nil
}

// soakScenarios resolves the arguments (default: every built-in scenario the cluster kind
// supports) and applies the flags to each.
func soakScenarios(c *cobra.Command, args []string, f *runFlags) ([]*scenarios.Scenario, error) {
	explicit := len(args) > 0
	if !explicit {
		args = scenarios.Names()
	}
	var list []*scenarios.Scenario
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
		list = append(list, s)
	}
	return list, nil
}
