// Package soak runs scenarios again and again with fresh seeds and tabulates their verdicts:
// the false-alarm rate of a scenario on a cluster kind, and every run that was not valid with
// the command that repeats it. The table (soak.json and soak.md) is rewritten after every run,
// so a soak stopped at any point, or killed, leaves what it learned; naming its folder again
// continues it.
package soak

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/scenarios"
	"github.com/fencecheck/fencecheck/scenarios/campaign"
	"github.com/fencecheck/fencecheck/scenarios/harness"
)

// Options configures a soak.
type Options struct {
	// Out is the soak's folder: its table, and run directories in Out/runs. A table already
	// there is continued: its runs count towards Runs.
	Out string
	// Runs is how many counted runs each scenario gets (at least 1).
	Runs int
	// Max, when positive, is the time after which no run starts.
	Max time.Duration
	// Lock, when set, is a file flocked around each run (campaign.Lock).
	Lock string
	// Transport is the transport under test ("" or "real": fencecheck's own).
	Transport    string
	CheckTimeout time.Duration
	// Command is the command line that started this soak; the table lists every command that
	// added runs to it.
	Command string
	// Console receives a line per run started and ended. Default: discard.
	Console io.Writer
}

// Run soaks the scenarios (each with its cluster and flags applied) until each has opts.Runs
// counted runs, ctx ends (Ctrl-C: the run in progress is healed and checked as usual, recorded
// and not counted) or opts.Max passes. It always takes the scenario with the fewest counted
// runs next (the first on a tie): round robin, so a soak stopped early, or continued, has
// sampled every scenario about as often. The table is returned, and written, whatever
// happened; the error is a scenario's (matching scenarios.ErrScenario: a usage error) or the
// harness's.
func Run(ctx context.Context, list []*scenarios.Scenario, opts Options) (*Table, error) {
	if opts.Runs < 1 {
		return nil, fmt.Errorf("%w: runs %d: want 1 or more", scenarios.ErrScenario, opts.Runs)
	}
	console := opts.Console
	if console == nil {
		console = io.Discard
	}
	if err := os.MkdirAll(opts.Out, 0o755); err != nil {
		return nil, fmt.Errorf("soak folder: %w", err)
	}
	tab, err := Load(opts.Out)
	if err != nil {
		return nil, err
	}
	if len(tab.Runs) > 0 {
		fmt.Fprintf(console, "continuing the soak in %s: %d runs so far\n", opts.Out, len(tab.Runs))
	}
	if opts.Command != "" && !slices.Contains(tab.Commands, opts.Command) {
		tab.Commands = append(tab.Commands, opts.Command)
	}
	if tab.Started.IsZero() {
		tab.Started = time.Now().UTC()
	}
	tab.Stopped = ""

	began := time.Now()
	todo := 0
	for _, s := range list {
		todo += max(0, opts.Runs-tab.counted(s.Name, s.Cluster.Kind))
	}
	fmt.Fprintf(console, "soak: %d scenarios × %d runs, %d to go; table in %s\n", len(list), opts.Runs, todo,
		filepath.Join(opts.Out, MarkdownFile))
	done := 0
	for ctx.Err() == nil {
		next, fewest := -1, opts.Runs
		for i, s := range list {
			if n := tab.counted(s.Name, s.Cluster.Kind); n < fewest {
				next, fewest = i, n
			}
		}
		if next < 0 {
			break
		}
		if opts.Max > 0 && time.Since(began) >= opts.Max {
			tab.Stopped = fmt.Sprintf("time limit --for %v reached", opts.Max)
			break
		}
		s := list[next]
		done++
		seed := campaign.FreshSeed()
		fmt.Fprintf(console, "[%d/%d] %s on %s, seed %d ...\n", done, todo, s.Name, s.Cluster.Kind, seed)
		r, err := one(ctx, s, opts, seed, console)
		if err != nil {
			if ctx.Err() != nil { // interrupted while waiting for the lock: no run started
				break
			}
			return tab, err
		}
		tab.add(r)
		if err := tab.write(opts.Out); err != nil {
			return tab, err
		}
		fmt.Fprintf(console, "[%d/%d] %s\n", done, todo, r.Line())
		fmt.Fprintf(console, "        so far: %s\n", tab.Totals().Summary())
	}
	if ctx.Err() != nil {
		tab.Stopped = stoppedInterrupted
	}
	return tab, tab.write(opts.Out)
}

// one runs s once with seed, holding the lock file (if any) for the run.
func one(ctx context.Context, s *scenarios.Scenario, opts Options, seed uint64, console io.Writer) (Record, error) {
	if opts.Lock != "" {
		unlock, err := campaign.Lock(ctx, opts.Lock, func() { fmt.Fprintf(console, "        waiting for the lock %s\n", opts.Lock) })
		if err != nil {
			return Record{}, err
		}
		defer unlock()
	}
	began := time.Now() // after the lock: the run's own time
	out, err := harness.Run(ctx, s, harness.Options{
		Root: filepath.Join(opts.Out, "runs"), Seed: seed, Console: io.Discard,
		CheckTimeout: opts.CheckTimeout, Transport: opts.Transport,
	})
	if err != nil {
		return Record{}, err
	}
	return Record{
		Scenario: s.Name, Cluster: s.Cluster.Kind, Seed: out.Seed, Dir: string(out.Dir),
		Verdict: out.Results.Verdict, Why: out.Results.NotValid(), Interrupted: out.Interrupted,
		Started: began.UTC(), Seconds: time.Since(began).Seconds(), Command: out.Command,
	}, nil
}

// stoppedInterrupted is Table.Stopped of a soak that Ctrl-C stopped.
const stoppedInterrupted = "interrupted (Ctrl-C)"

// Verdict is the soak's: invalid if any counted run was invalid; inconclusive if any was not
// valid or Ctrl-C stopped the soak; else valid (a soak its time limit ended included).
func (t *Table) Verdict() checker.Verdict {
	tot := t.Totals()
	switch {
	case tot.Invalid > 0:
		return checker.VerdictInvalid
	case tot.Runs != tot.Valid || t.Stopped == stoppedInterrupted:
		return checker.VerdictInconclusive
	}
	return checker.VerdictValid
}
