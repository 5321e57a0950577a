// Package shrink turns a failing run directory into the smallest scenario that still fails
// the same way: it replays the run's faults as an explicit script, then removes and shortens
// faults, the run and the workload one candidate at a time, keeping a candidate only when a
// try of it breaks one of the guarantees the original run broke (see docs/bug-report.md).
package shrink

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/cluster/links"
	"github.com/fencecheck/fencecheck/internal/units"
	"github.com/fencecheck/fencecheck/nemesis"
	"github.com/fencecheck/fencecheck/reports"
	"github.com/fencecheck/fencecheck/scenarios"
)

// ErrNotShrinkable marks a run directory that cannot be shrunk: unreadable, or not invalid on
// any guarantee. It is a usage error.
var ErrNotShrinkable = errors.New("cannot shrink")

// Origin is the failing run a shrink starts from.
type Origin struct {
	// Dir is the run directory.
	Dir string
	// Info is its run.json.
	Info *reports.RunInfo
	// Scenario is the scenario as it ran, with a random schedule replaced by the explicit
	// script of the faults the run injected (same faults, times and targets).
	Scenario *scenarios.Scenario
	// Steps is Scenario's script, parsed.
	Steps []nemesis.Step
	// Failed are the guarantees the run was invalid on (non-advisory checks).
	Failed []string
	// Report is the run's report.html.
	Report string
}

// Load reads a run directory: run.json (the expanded scenario, the seed and the transport),
// results.json (which guarantees failed) and, for a random schedule, history.jsonl (the fault
// windows that make the explicit script).
func Load(dir string) (*Origin, error) {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	d := reports.Dir(dir)
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrNotShrinkable, dir, fmt.Sprintf(format, args...))
	}
	if _, err := d.ReadRunInfo(); err != nil {
		return nil, bad("%v", err)
	}
	sc, info, err := scenarios.FromRun(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotShrinkable, err)
	}
	s := *sc
	res, err := checker.ReadResultsFile(d.Results())
	if err != nil {
		return nil, bad("%v (check the run first: fencecheck check %s)", err, dir)
	}
	failed := Failed(res)
	if len(failed) == 0 {
		return nil, bad("the run is %s, not invalid on any guarantee: there is no failure to shrink", res.Verdict)
	}
	o := &Origin{Dir: dir, Info: info, Failed: failed, Report: d.Report()}
	if s.Nemesis.Random != nil {
		h, err := history.ReadFile(d.History())
		if err != nil {
			return nil, bad("%v", err)
		}
		steps, err := Explicit(&s, h)
		if err != nil {
			return nil, bad("%v", err)
		}
		s.Nemesis = scenarios.NemesisSpec{Script: stepLines(steps)}
	}
	sched, _, err := s.Nemesis.Schedule()
	if err != nil {
		return nil, bad("%v", err)
	}
	o.Steps = sched.Script
	if err := s.Validate(); err != nil {
		return nil, bad("%v", err)
	}
	o.Scenario = &s
	return o, nil
}

// Failed returns the names of the non-advisory checks res is invalid on, sorted.
func Failed(res *checker.Results) []string {
	var out []string
	for _, c := range res.Checks {
		if c.Verdict == checker.VerdictInvalid && !c.Advisory {
			out = append(out, c.Name)
		}
	}
	sort.Strings(out)
	return out
}

func stepLines(steps []nemesis.Step) []string {
	out := make([]string, len(steps))
	for i, st := range steps {
		out[i] = st.String()
	}
	return out
}

// Explicit turns the fault windows of h, a run of s with a random schedule, into script steps
// that replay the same faults at the same times on the same targets: links become
// "pN from bM,...", brokers their ids, a frozen member "holder of ROLE", a moved coordinator
// "of ROLE", a Kafka-aware fault's requests the processes picked (see kafkaTarget). Times count from the workload's start (the first operation's invocation) and are
// rounded to 100 ms. Each step takes its parameters and duration from the schedule's menu
// entry of that fault (the first, when several name it; for a Kafka-aware fault, the first
// of the window's request type), else the fault's defaults and the schedule's duration.
func Explicit(s *scenarios.Scenario, h *history.History) ([]nemesis.Step, error) {
	rs := s.Nemesis.Random
	if rs == nil {
		return nil, errors.New("not a random schedule")
	}
	start := int64(-1)
	for i := range h.Ops {
		if start < 0 || h.Ops[i].Invoke < start {
			start = h.Ops[i].Invoke
		}
	}
	if start < 0 {
		start = 0
	}
	interval := rs.Interval.D()
	if interval == 0 {
		interval = 10 * time.Second
	}
	defaultFor := rs.For.D()
	if defaultFor == 0 {
		defaultFor = interval / 2
	}
	var steps []nemesis.Step
	for _, f := range h.Faults {
		name := string(f.Kind)
		if f.Kind == history.KindMemberPause {
			name = "freeze"
		}
		spec := nemesis.Spec{Fault: name}
		menu, found := menuEntry(rs.Faults, name, f)
		if found {
			spec.Params, spec.For = menu.Params, menu.For
		}
		var err error
		if isKafka(name) {
			err = kafkaTarget(&spec, menu.Target, f)
		} else {
			err = target(&spec, f)
		}
		if err != nil {
			return nil, fmt.Errorf("fault window %d (%s %s): %w", f.ID, f.Kind, strings.Join(f.Targets, " "), err)
		}
		if spec.For == 0 && !nemesis.IsEvent(name) {
			spec.For = units.Duration(defaultFor)
			if name == "freeze" {
				spec.For = units.Duration(2 * s.Workload.Lease.D()) // freeze's own default
			}
		}
		at := max(time.Duration(f.Start-start), 0).Round(100 * time.Millisecond)
		st := nemesis.Step{At: units.Duration(at), Spec: spec}
		if _, err := nemesis.ParseStep(st.String()); err != nil {
			return nil, fmt.Errorf("fault window %d: %w", f.ID, err)
		}
		steps = append(steps, st)
	}
	return steps, nil
}

// isKafka reports whether the fault named name is a Kafka-aware one (drop, hold, delay, ...):
// the only faults a random schedule's default menu leaves out.
func isKafka(name string) bool {
	return nemesis.UsesProcesses(name) && !slices.Contains(nemesis.DefaultMenu(), name)
}

// windowAPI is the request type a Kafka-aware fault's window acted on: its targets are
// "pN:API", one per process.
func windowAPI(f history.Fault) string {
	if len(f.Targets) == 0 {
		return ""
	}
	_, api, _ := strings.Cut(f.Targets[0], ":")
	return api
}

// sameAPI reports whether two request type names name the same type ("EndTxn", "endtxn",
// "end_txn").
func sameAPI(a, b string) bool {
	ka, oka := links.KafkaAPIKey(a)
	kb, okb := links.KafkaAPIKey(b)
	return oka && okb && ka == kb
}

// menuEntry returns the menu entry a fault window carried out: the first entry of its fault;
// for a Kafka-aware fault, the first of its fault that names the window's request type, else
// the first that names none (the fault's default type). found is false when no entry names
// the fault (the default menu).
func menuEntry(menu []nemesis.Spec, name string, f history.Fault) (nemesis.Spec, bool) {
	var first, noAPI *nemesis.Spec
	for i := range menu {
		m := &menu[i]
		if m.Fault != name {
			continue
		}
		if !isKafka(name) {
			return *m, true
		}
		if api := windowAPI(f); m.Params.API != "" && sameAPI(m.Params.API, api) {
			return *m, true
		}
		if first == nil {
			first = m
		}
		if noAPI == nil && m.Params.API == "" {
			noAPI = m
		}
	}
	switch {
	case noAPI != nil:
		return *noAPI, true
	case first != nil:
		return *first, true
	}
	return nemesis.Spec{}, false
}

// holderRole finds the role in a Kafka-aware window's description, "... of p3 (holder of r1) ...".
var holderRole = regexp.MustCompile(`\(holder of ([^)\s]+)\)`)

// kafkaTarget sets a Kafka-aware fault's target from the menu entry's (menu) and the window:
// every process, and a holder, are replayed as they were picked (all processes; whoever holds
// the role at that moment of the new run, as freeze is); a random pick becomes the processes
// it picked. A role that narrows the requests to its transactional id is the menu's.
func kafkaTarget(spec *nemesis.Spec, menu nemesis.Target, f history.Fault) error {
	var procs []int
	for _, t := range f.Targets {
		p, _, ok := strings.Cut(t, ":")
		n, err := strconv.Atoi(strings.TrimPrefix(p, "p"))
		if !ok || err != nil || !strings.HasPrefix(p, "p") {
			return fmt.Errorf("target %q: want a process's requests pN:API", t)
		}
		if !slices.Contains(procs, n) {
			procs = append(procs, n)
		}
	}
	if len(procs) == 0 {
		return errors.New("no processes")
	}
	slices.Sort(procs)
	if spec.Params.API == "" {
		spec.Params.API = windowAPI(f) // the fault's default, said in the script
	}
	spec.Target.Role = menu.Role
	switch sel := menu.Processes; sel.Kind {
	case nemesis.SelectDefault, nemesis.SelectAll:
		spec.Target.Processes = nemesis.All() // the default, said in the script
	case nemesis.SelectHolder:
		m := holderRole.FindStringSubmatch(f.Desc)
		if m == nil {
			return fmt.Errorf("the window does not say whose holder it picked: %q", f.Desc)
		}
		sel.Role = m[1]
		spec.Target.Processes = sel
	default:
		spec.Target.Processes = nemesis.IDs(procs...)
	}
	return nil
}

// target sets spec's target from a window's targets.
func target(spec *nemesis.Spec, f history.Fault) error {
	var procs, brokers []int
	add := func(list *[]int, text, prefix string) error {
		n, err := strconv.Atoi(strings.TrimPrefix(text, prefix))
		if err != nil || !strings.HasPrefix(text, prefix) {
			return fmt.Errorf("target %q: want %s<number>", text, prefix)
		}
		if !slices.Contains(*list, n) {
			*list = append(*list, n)
		}
		return nil
	}
	switch {
	case nemesis.UsesProcesses(spec.Fault):
		for _, t := range f.Targets {
			p, b, ok := strings.Cut(t, "->")
			if !ok {
				return fmt.Errorf("target %q: want a link pN->bM", t)
			}
			if err := add(&procs, p, "p"); err != nil {
				return err
			}
			if err := add(&brokers, b, "b"); err != nil {
				return err
			}
		}
		if len(procs) == 0 {
			return errors.New("no links")
		}
		slices.Sort(procs)
		slices.Sort(brokers)
		spec.Target.Processes, spec.Target.Brokers = nemesis.IDs(procs...), nemesis.IDs(brokers...)
	case spec.Fault == "freeze":
		role := f.Role
		if role == "" && len(f.Targets) == 1 { // p1/r3/m1
			if parts := strings.Split(f.Targets[0], "/"); len(parts) == 3 {
				role = parts[1]
			}
		}
		if role == "" {
			return errors.New("no role")
		}
		spec.Target.Role = role
	case spec.Fault == "move-coordinator":
		for _, t := range f.Targets {
			if id, ok := strings.CutPrefix(t, "txn:"); ok {
				spec.Target.Role = id[strings.LastIndex(id, "/")+1:]
			}
		}
		if spec.Target.Role == "" {
			return errors.New("no transactional id")
		}
	default: // broker faults; isolate also lists its peer links, which are not targets
		for _, t := range f.Targets {
			if strings.Contains(t, "->") {
				continue
			}
			if err := add(&brokers, t, "b"); err != nil {
				return err
			}
		}
		if len(brokers) == 0 {
			return errors.New("no brokers")
		}
		slices.Sort(brokers)
		spec.Target.Brokers = nemesis.IDs(brokers...)
	}
	return nil
}
