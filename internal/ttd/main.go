// Command ttd measures the time to detect: how long each method takes to give its first
// invalid verdict on a mutant transport, at the same machine budget (issue 43, item 4;
// docs/measurements.md, "Time to detect").
//
//	go run ./internal/ttd --mutants unknown-commit-fails,split-txn --seeds 1000,2000,3000,4000,5000 \
//	    --methods catalogue,chaos,explore --budget 10m --parallel 6 --out /tmp/ttd-1
//	go run ./internal/ttd --table /tmp/ttd-1/attempts.tsv /tmp/ttd-2/attempts.tsv
//
// It drives the fencecheck binary (--fencecheck) as a user would, one command per run, so
// that what it measures is what a user waits for. An attempt is one (mutant, method, seed):
//
//   - catalogue: the catalogue's scripted scenarios of the mutant's workload (lease or
//     pipeline) that run on the cluster kind, random mixes left out, in the order
//     `fencecheck scenarios list` prints them, run one after another and over again, run i
//     with seed S+i, until the first invalid run or the budget;
//   - chaos: the random mix (chaos for a lease mutant, pipeline-chaos-kafka for a pipeline
//     one), run i with seed S+i, until the first invalid run or the budget;
//   - explore: `fencecheck explore steady` (pipeline-steady) with --budget and --seed S, no
//     shrink;
//   - own: the scenario made for the mutant (selftest's), repeated as the catalogue is: the
//     reference a method that knows the bug would reach.
//
// No run starts after the budget (as explore's rule); a run started before it finishes, and
// an invalid verdict after the budget counts as not found. The time to detect is the wall
// time from the attempt's first command to the end of the command that gave the invalid
// verdict. Attempts run --parallel at a time, the methods of one (mutant, seed) next to each
// other, so the methods share the machine's load. Every finished attempt is appended to
// attempts.tsv at once (a killed measurement keeps what it had), and table.md is rewritten;
// the same command on the same --out continues it, skipping the attempts it holds.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The methods an attempt can use.
const (
	methodCatalogue = "catalogue"
	methodChaos     = "chaos"
	methodExplore   = "explore"
	methodOwn       = "own"
)

var methods = []string{methodCatalogue, methodChaos, methodExplore, methodOwn}

// Exit codes of fencecheck run and explore.
const (
	exitValid   = 0
	exitInvalid = 1
	exitUnknown = 2
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "ttd:", err)
		os.Exit(1)
	}
}

// config is the command line.
type config struct {
	fencecheck string
	mutants    []string
	methods    []string
	seeds      []uint64
	budget     time.Duration
	parallel   int
	out        string
	cluster    string
	tables     []string
}

func parse(args []string) (*config, error) {
	fs := flag.NewFlagSet("ttd", flag.ContinueOnError)
	c := &config{}
	var mutants, meths, seeds string
	fs.StringVar(&c.fencecheck, "fencecheck", "bin/fencecheck", "the fencecheck binary")
	fs.StringVar(&mutants, "mutants", "", "mutants, comma-separated (fencecheck selftest --list names them, the regressions' too)")
	fs.StringVar(&meths, "methods", "catalogue,chaos,explore", "methods, comma-separated: "+strings.Join(methods, ", "))
	fs.StringVar(&seeds, "seeds", "1000,2000,3000,4000,5000", "first seeds, comma-separated: one attempt per mutant, method and seed")
	fs.DurationVar(&c.budget, "budget", 10*time.Minute, "each attempt's budget: no run starts after it")
	fs.IntVar(&c.parallel, "parallel", 3, "attempts at a time")
	fs.StringVar(&c.out, "out", "", "output folder: attempts.tsv, table.md and every run (required unless --table)")
	fs.StringVar(&c.cluster, "cluster", "embedded", "cluster kind of every run")
	table := fs.Bool("table", false, "only write the table of the attempts.tsv files given as arguments, to stdout")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if *table {
		if fs.NArg() == 0 {
			return nil, errors.New("--table: name one or more attempts.tsv files")
		}
		c.tables = fs.Args()
		return c, nil
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q (flags only)", fs.Args())
	}
	if c.out == "" {
		return nil, errors.New("--out: required")
	}
	for _, m := range split(mutants) {
		c.mutants = append(c.mutants, m)
	}
	if len(c.mutants) == 0 {
		return nil, errors.New("--mutants: name at least one")
	}
	for _, m := range split(meths) {
		if !slices.Contains(methods, m) {
			return nil, fmt.Errorf("--methods: %q is not one of %s", m, strings.Join(methods, ", "))
		}
		c.methods = append(c.methods, m)
	}
	if len(c.methods) == 0 {
		return nil, errors.New("--methods: name at least one")
	}
	for _, s := range split(seeds) {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || n == 0 {
			return nil, fmt.Errorf("--seeds: %q is not a seed (a positive integer)", s)
		}
		c.seeds = append(c.seeds, n)
	}
	if len(c.seeds) == 0 {
		return nil, errors.New("--seeds: name at least one")
	}
	if c.budget <= 0 {
		return nil, fmt.Errorf("--budget %v: want more than 0", c.budget)
	}
	if c.parallel < 1 {
		return nil, fmt.Errorf("--parallel %d: want 1 or more", c.parallel)
	}
	return c, nil
}

func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	c, err := parse(args)
	if err != nil {
		return err
	}
	if c.tables != nil {
		var all []attempt
		for _, f := range c.tables {
			a, err := readAttempts(f)
			if err != nil {
				return err
			}
			all = append(all, a...)
		}
		writeTable(stdout, all)
		return nil
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return err
	}
	kinds, err := mutantKinds(ctx, c.fencecheck)
	if err != nil {
		return err
	}
	list, err := scenarioList(ctx, c.fencecheck)
	if err != nil {
		return err
	}
	tsv := filepath.Join(c.out, "attempts.tsv")
	var done []attempt
	if prev, err := readAttempts(tsv); err == nil {
		done = prev // a measurement continued in the same folder keeps its table
	}
	var jobs []job
	for _, m := range c.mutants {
		k, ok := kinds[m]
		if !ok {
			return fmt.Errorf("--mutants: %q is not a mutant fencecheck knows (fencecheck selftest --list)", m)
		}
		for _, s := range c.seeds {
			for _, meth := range c.methods {
				if slices.ContainsFunc(done, func(a attempt) bool { return a.Mutant == m && a.Method == meth && a.Seed == s }) {
					continue // measured before in this folder: continuing does not measure it twice
				}
				jobs = append(jobs, job{mutant: m, kind: k.kind, own: k.scenario, method: meth, seed: s})
			}
		}
	}
	d := &driver{c: c, list: list, kinds: kinds, log: stdout}
	var mu sync.Mutex
	work := make(chan job)
	var wg sync.WaitGroup
	for range c.parallel {
		wg.Go(func() {
			for j := range work {
				a := d.attempt(ctx, j)
				if ctx.Err() != nil {
					continue // cut short: not a measurement
				}
				mu.Lock()
				done = append(done, a)
				err := appendAttempt(tsv, a)
				if err == nil {
					err = writeTableFile(filepath.Join(c.out, "table.md"), done)
				}
				fmt.Fprintf(stdout, "%s\n", a.line())
				if err != nil {
					fmt.Fprintf(stdout, "ttd: %v\n", err)
				}
				mu.Unlock()
			}
		})
	}
	for _, j := range jobs {
		select {
		case work <- j:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(work)
	wg.Wait()
	return ctx.Err()
}

// job is one attempt to make: a mutant, a method, a first seed.
type job struct {
	mutant, kind, method string
	own                  string // the scenario made for the mutant
	seed                 uint64
}

// attempt is one attempt's outcome: a row of attempts.tsv.
type attempt struct {
	Mutant, Method string
	Seed           uint64
	Found          bool
	Wall           time.Duration // to the invalid verdict, or to the attempt's end
	Runs           int           // runs made (the invalid one included)
	Invalid        string        // the scenario of the invalid run and the guarantees it broke
	Verdicts       string        // how many runs gave each exit code, e.g. "0:12 2:1"
	Budget         time.Duration
	Load           string // the 1-minute load average at the start and at the end
	Dir            string
}

var tsvHeader = []string{"mutant", "method", "seed", "found", "wall_s", "runs", "invalid", "verdicts", "budget_s", "load", "dir"}

// fields is the attempt's row, with no tab or line break inside a field (an error's text may
// hold both).
func (a attempt) fields() []string {
	f := []string{a.Mutant, a.Method, strconv.FormatUint(a.Seed, 10), strconv.FormatBool(a.Found),
		strconv.FormatFloat(a.Wall.Seconds(), 'f', 1, 64), strconv.Itoa(a.Runs), a.Invalid, a.Verdicts,
		strconv.FormatFloat(a.Budget.Seconds(), 'f', 0, 64), a.Load, a.Dir}
	for i := range f {
		f[i] = strings.Join(strings.Fields(f[i]), " ")
	}
	return f
}

func (a attempt) line() string {
	what := "not found"
	if a.Found {
		what = "found: " + a.Invalid
	}
	return fmt.Sprintf("%-22s %-9s seed %-6d %6.1fs %3d runs  load %s  %s", a.Mutant, a.Method, a.Seed, a.Wall.Seconds(), a.Runs, a.Load, what)
}

func appendAttempt(path string, a attempt) error {
	_, err := os.Stat(path)
	fresh := errors.Is(err, os.ErrNotExist)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if fresh {
		fmt.Fprintln(f, strings.Join(tsvHeader, "\t"))
	}
	fmt.Fprintln(f, strings.Join(a.fields(), "\t"))
	return f.Close()
}

func readAttempts(path string) ([]attempt, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []attempt
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		fs := strings.Split(sc.Text(), "\t")
		if n == 1 && len(fs) > 0 && fs[0] == tsvHeader[0] {
			continue
		}
		if len(fs) != len(tsvHeader) {
			return nil, fmt.Errorf("%s:%d: %d fields, want %d (%s)", path, n, len(fs), len(tsvHeader), strings.Join(tsvHeader, ", "))
		}
		a := attempt{Mutant: fs[0], Method: fs[1], Invalid: fs[6], Verdicts: fs[7], Load: fs[9], Dir: fs[10]}
		var errs []error
		var e error
		a.Seed, e = strconv.ParseUint(fs[2], 10, 64)
		errs = append(errs, e)
		a.Found, e = strconv.ParseBool(fs[3])
		errs = append(errs, e)
		w, e := strconv.ParseFloat(fs[4], 64)
		errs = append(errs, e)
		a.Wall = time.Duration(w * float64(time.Second))
		a.Runs, e = strconv.Atoi(fs[5])
		errs = append(errs, e)
		b, e := strconv.ParseFloat(fs[8], 64)
		errs = append(errs, e)
		a.Budget = time.Duration(b * float64(time.Second))
		if err := errors.Join(errs...); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		out = append(out, a)
	}
	return out, sc.Err()
}

// driver makes attempts.
type driver struct {
	c     *config
	list  []listed
	kinds map[string]mutantInfo
	log   io.Writer
}

// listed is one line of `fencecheck scenarios list`.
type listed struct{ name, cluster string }

// scenarioList reads `fencecheck scenarios list`: every scenario with its cluster kind, in
// the order it prints them.
func scenarioList(ctx context.Context, bin string) ([]listed, error) {
	out, err := exec.CommandContext(ctx, bin, "scenarios", "list").Output()
	if err != nil {
		return nil, fmt.Errorf("%s scenarios list: %w", bin, err)
	}
	return parseList(string(out)), nil
}

func parseList(out string) []listed {
	var l []listed
	for i, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if i == 0 || len(f) < 2 {
			continue // the header
		}
		l = append(l, listed{name: f[0], cluster: f[1]})
	}
	return l
}

// catalogue is the scenarios method (a) runs for a mutant of kind ("lease" or "pipeline") on
// cluster: the built-in catalogue's, not the regressions, not the random mixes (method (b)),
// of that workload, that run on that cluster kind (a scenario made for another kind is left
// out: on the embedded cluster, isolate-broker and the pipeline kills need a local one), in
// list order.
func catalogue(list []listed, kind, cluster string) []string {
	var out []string
	for _, s := range list {
		pipeline := strings.HasPrefix(s.name, "pipeline-")
		switch {
		case strings.HasPrefix(s.name, "regression/"), strings.Contains(s.name, "chaos"):
		case pipeline != (kind == "pipeline"):
		case cluster == "embedded" && s.cluster != "embedded":
		default:
			out = append(out, s.name)
		}
	}
	return out
}

// mutantInfo is what selftest --list says of a mutant: its workload and its scenario.
type mutantInfo struct{ kind, scenario string }

// mutantKinds reads `fencecheck selftest --list`: every mutant, the regressions' included,
// keyed by its name, or by pipeline:NAME for a pipeline mutant whose name a lease mutant has
// too (read-uncommitted: --transport mutant:NAME picks by the scenario's workload).
func mutantKinds(ctx context.Context, bin string) (map[string]mutantInfo, error) {
	out, err := exec.CommandContext(ctx, bin, "selftest", "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("%s selftest --list: %w", bin, err)
	}
	return parseMutants(string(out)), nil
}

// parseMutants reads selftest --list: a mutant's line starts with its name, and the next line
// names its scenario ("(scenario NAME)"); a pipeline mutant's scenario is a pipeline one.
func parseMutants(out string) map[string]mutantInfo {
	m := map[string]mutantInfo{}
	name := ""
	for _, line := range strings.Split(out, "\n") {
		if line == "" || strings.HasPrefix(line, "made for") {
			continue
		}
		if !strings.HasPrefix(line, " ") {
			name = strings.Fields(line)[0]
			continue
		}
		if _, sc, ok := strings.Cut(line, "(scenario "); ok && name != "" {
			info := mutantInfo{kind: "lease", scenario: strings.TrimSuffix(strings.TrimSpace(sc), ")")}
			if strings.HasPrefix(info.scenario, "pipeline-") {
				info.kind = "pipeline"
			}
			key := name
			if _, seen := m[name]; seen {
				key = info.kind + ":" + name
			}
			m[key] = info
			name = ""
		}
	}
	return m
}

// attempt makes one attempt.
func (d *driver) attempt(ctx context.Context, j job) (a attempt) {
	dir := filepath.Join(d.c.out, "runs", fmt.Sprintf("%s-%s-%d", strings.ReplaceAll(j.mutant, ":", "-"), j.method, j.seed))
	a = attempt{Mutant: j.mutant, Method: j.method, Seed: j.seed, Budget: d.c.budget, Dir: dir}
	start := time.Now()
	load0 := loadavg()
	defer func() { a.Load = load0 + "-" + loadavg() }()
	name := j.mutant // pipeline:NAME is mutant NAME in a pipeline scenario
	if i := strings.LastIndex(j.mutant, ":"); i >= 0 {
		name = j.mutant[i+1:]
	}
	transport := "mutant:" + name
	if j.method == methodExplore {
		base := "steady"
		if j.kind == "pipeline" {
			base = "pipeline-steady"
		}
		code, err := d.fc(ctx, "explore", base, "--budget", d.c.budget.String(), "--seed", strconv.FormatUint(j.seed, 10),
			"--transport", transport, "--shrink-budget", "0", "--cluster", d.c.cluster, "--out", dir)
		a.Wall = time.Since(start)
		var res struct {
			Runs    []json.RawMessage `json:"runs"`
			Invalid *struct {
				Run    int      `json:"run"`
				Broken []string `json:"broken"`
			} `json:"invalid"`
		}
		b, rerr := os.ReadFile(filepath.Join(dir, "explore.json"))
		if rerr == nil {
			rerr = json.Unmarshal(b, &res)
		}
		a.Runs = len(res.Runs)
		a.Verdicts = fmt.Sprintf("exit:%d", code)
		if err != nil || rerr != nil {
			a.Verdicts += " error: " + fmt.Sprint(errors.Join(err, rerr))
		}
		if code == exitInvalid && res.Invalid != nil {
			a.Found = a.Wall <= d.c.budget
			a.Invalid = fmt.Sprintf("run %d: %s", res.Invalid.Run, strings.Join(res.Invalid.Broken, ","))
		}
		return a
	}
	var cycle []string
	switch j.method {
	case methodCatalogue:
		cycle = catalogue(d.list, j.kind, d.c.cluster)
	case methodChaos:
		cycle = []string{"chaos"}
		if j.kind == "pipeline" {
			cycle = []string{"pipeline-chaos-kafka"}
		}
	case methodOwn:
		cycle = []string{j.own}
	}
	if len(cycle) == 0 {
		a.Verdicts = "error: no scenario"
		return a
	}
	codes := map[int]int{}
	errorsInARow := 0
	for i := 0; time.Since(start) < d.c.budget && ctx.Err() == nil; i++ {
		sc := cycle[i%len(cycle)]
		out := filepath.Join(dir, strconv.Itoa(i))
		code, err := d.fc(ctx, "run", sc, "--seed", strconv.FormatUint(j.seed+uint64(i), 10), "--transport", transport,
			"--cluster", d.c.cluster, "--out", out)
		a.Runs++
		codes[code]++
		a.Wall = time.Since(start)
		if err != nil {
			errorsInARow++
			if errorsInARow >= 3 {
				break // a harness that cannot run is not a measurement
			}
			continue
		}
		errorsInARow = 0
		if code == exitInvalid {
			a.Found = a.Wall <= d.c.budget
			a.Invalid = fmt.Sprintf("run %d %s: %s", i+1, sc, strings.Join(broken(filepath.Join(out, "latest", "results.json")), ","))
			break
		}
	}
	var keys []int
	for k := range codes {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("exit%d:%d", k, codes[k]))
	}
	a.Verdicts = strings.Join(parts, " ")
	return a
}

// fc runs one fencecheck command, its output to a log beside it, and returns its exit code;
// err only when it could not run or ended with a code a verdict does not have.
func (d *driver) fc(ctx context.Context, args ...string) (int, error) {
	dir := args[len(args)-1] // every command here ends with --out DIR
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return -1, err
	}
	logf, err := os.Create(filepath.Join(dir, "ttd-command.log"))
	if err != nil {
		return -1, err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "%s %s\n", d.c.fencecheck, strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, d.c.fencecheck, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Ctrl-C of the driver reaches the command as its own Ctrl-C: it heals and stops its
	// cluster instead of leaving one behind.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 2 * time.Minute
	err = cmd.Run()
	code := cmd.ProcessState.ExitCode()
	if code == exitValid || code == exitInvalid || code == exitUnknown {
		return code, nil
	}
	return code, fmt.Errorf("%s %s: exit %d: %v", d.c.fencecheck, strings.Join(args, " "), code, err)
}

// broken lists the guarantees an invalid run's results.json says were violated.
func broken(results string) []string {
	b, err := os.ReadFile(results)
	if err != nil {
		return []string{"(no results.json)"}
	}
	var r struct {
		Checks []struct {
			Name     string `json:"name"`
			Verdict  string `json:"verdict"`
			Advisory bool   `json:"advisory"`
		} `json:"checks"`
	}
	if json.Unmarshal(b, &r) != nil {
		return []string{"(unreadable results.json)"}
	}
	var out []string
	for _, c := range r.Checks {
		if c.Verdict == "invalid" && !c.Advisory {
			out = append(out, c.Name)
		}
	}
	return out
}

// loadavg is the 1-minute load average, or "?".
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}
