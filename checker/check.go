package checker

import (
	"cmp"
	"context"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/fencecheck/fencecheck/checker/history"
)

// run is one Check in progress.
type run struct {
	cfg           config
	x             *index
	res           *Results
	visualizeErrs []error
}

// Check judges a history against docs/checker.md: the porcupine model role by role through a
// bounded pool, and meanwhile the linear checks (they need no search) and split-brain
// exposure, then coverage. It reads h and nothing else, and never changes it.
//
// The error is non-nil only for invalid options or history metadata (wrapping ErrOptions); a
// check that panics becomes unknown and the others still run. The results' verdict is the worst
// of the non-advisory checks and of coverage; a recording that breaks the history's own rules
// (well-formed) is a harness error, and no model check runs on a role it names.
func Check(ctx context.Context, h *history.History, opts Options) (*Results, error) {
	cfg, err := opts.config(&h.Meta)
	if err != nil {
		return nil, err
	}
	switch h.Meta.Workload {
	case "":
	case history.WorkloadPipeline:
		return checkPipeline(ctx, h, cfg), nil
	default:
		// Judged by another workload's guarantees it would pass on checks that saw nothing.
		return nil, fmt.Errorf("history header workload %q: this checker knows leases and %s: %w", h.Meta.Workload, history.WorkloadPipeline, ErrOptions)
	}
	start := time.Now()
	c := &run{cfg: cfg, res: &Results{Format: ResultsFormat, Run: h.Meta}}
	for _, name := range append(append(slices.Clone(Guarantees), SpuriousFence), WellFormed) {
		c.res.Checks = append(c.res.Checks, Result{
			Name: name, Verdict: VerdictValid, Advisory: cfg.advisory[name], Details: map[string]any{},
		})
	}
	c.res.History = Stats{
		Format: h.Format, Ops: h.Len(), Faults: len(h.Faults), End: h.End,
		Truncated: h.Truncated, TruncatedLine: h.TruncatedLine, Pending: h.Pending(),
	}

	t0 := time.Now()
	var indexPanic any
	func() {
		defer func() { indexPanic = recover() }()
		c.x = newIndex(h, &c.cfg)
	}()
	c.res.Timings.Index = int64(time.Since(t0))
	if indexPanic != nil {
		// Without the index no check can run: all of them are unknown.
		cfg.log.Error("indexing the history panicked", "panic", indexPanic, "stack", string(debug.Stack()))
		for i := range c.res.Checks {
			c.res.Checks[i].Verdict = VerdictUnknown
			c.res.Checks[i].Details["panic"] = fmt.Sprint(indexPanic)
		}
		c.finish(start)
		return c.res, nil
	}
	c.res.History.Roles, c.res.History.Logs, c.res.History.Records = len(c.x.roles), len(c.x.logIDs), c.x.records

	// The model search runs on its pool while this goroutine does the linear checks, the
	// exposure and the liveness: on a large history the search is a third of the work and
	// leaves a core idle at its tail, and these are a fifth and run on one core. Both only
	// read the index, and each writes results of its own.
	models := []*Result{c.result(TokenMonotonic), c.result(FencedStaleWrite), c.result(DescribeConsistent), c.result(SpuriousFence)}
	var search sync.WaitGroup
	search.Go(func() {
		c.safely(models[0], func() {
			c.aggregateModels(c.x.checkModels(ctx, &c.res.Timings))
		})
	})

	t0 = time.Now()
	linear := []struct {
		name  string
		check func()
	}{
		{WellFormed, c.checkWellFormed},
		{LogTokenOrder, c.checkLogTokenOrder},
		{NoLostWrite, c.checkNoLostWrite},
		{NoZombieCommit, c.checkNoZombieCommit},
		{RegistrationOrder, c.checkRegistrationOrder},
		{ReadPrefix, c.checkReadPrefix},
		{ReadPrefix, func() { c.checkSettledReads(c.result(ReadPrefix)) }},
		{ReadMonotonic, c.checkReadMonotonic},
		{NoTornTxn, c.checkNoTornTxn},
	}
	for _, l := range linear {
		c.safely(c.result(l.name), l.check)
	}
	c.res.Timings.Linear = int64(time.Since(t0))

	func() {
		defer func() {
			if p := recover(); p != nil {
				c.res.Exposure = Exposure{Error: fmt.Sprintf("measuring exposure panicked: %v", p)}
				cfg.log.Error("exposure panicked", "panic", p, "stack", string(debug.Stack()))
			}
		}()
		c.measureExposure()
	}()
	c.measureLiveness() // plain arithmetic over the lease writes, after the checks that guard it
	search.Wait()
	for _, r := range models[1:] { // a panic outside the per-role guard hits all four
		if p, ok := models[0].Details["panic"]; ok {
			r.Verdict, r.Details["panic"] = VerdictUnknown, p
		}
	}
	c.checkCoverage()
	c.finish(start)
	t := c.res.Timings
	cfg.log.Info("history checked", "verdict", c.res.Verdict, "ops", h.Len(), "roles", len(c.x.roles),
		"index", time.Duration(t.Index), "linear", time.Duration(t.Linear), "porcupine", time.Duration(t.Porcupine),
		"explain", time.Duration(t.Explain), "total", time.Duration(t.Total))
	return c.res, nil
}

// result returns the check named name.
func (c *run) result(name string) *Result {
	for i := range c.res.Checks {
		if c.res.Checks[i].Name == name {
			return &c.res.Checks[i]
		}
	}
	panic("checker: no check named " + name)
}

// safely runs check; a panic makes r unknown (Jepsen: checkers never crash the analysis).
func (c *run) safely(r *Result, check func()) {
	defer func() {
		if p := recover(); p != nil {
			r.Verdict = VerdictUnknown
			r.Details["panic"] = fmt.Sprint(p)
			c.cfg.log.Error("check panicked", "check", r.Name, "panic", p, "stack", string(debug.Stack()))
		}
	}()
	check()
}

// checkWellFormed reports what the index found wrong with the recording itself.
func (c *run) checkWellFormed() {
	r := c.result(WellFormed)
	r.Anomalies = append(r.Anomalies, c.x.malformed...)
	if c.x.h.Truncated {
		r.Details["truncated_at_line"] = c.x.h.TruncatedLine
	}
}

// finish caps anomalies, sets every check's verdict from its anomalies, and the run's verdict.
func (c *run) finish(start time.Time) {
	verdict := VerdictValid
	for i := range c.res.Checks {
		r := &c.res.Checks[i]
		c.dropIllFormed(r)
		c.notCovered(r)
	}
	var byID map[int64]int32
	if c.x != nil {
		byID = c.x.opsByID(c.res.Checks)
	}
	for i := range c.res.Checks {
		r := &c.res.Checks[i]
		if len(r.Anomalies) > 0 && c.x != nil {
			c.x.setFirstAt(r, byID)
		}
		for j := range r.Anomalies {
			r.Anomalies[j].Explanation = capitalize(r.Anomalies[j].Explanation)
		}
		if n := len(r.Anomalies); n > 0 {
			bad := VerdictInvalid
			if r.Name == WellFormed {
				bad = VerdictError
			}
			r.Verdict = Worst(r.Verdict, bad)
			r.Details["anomalies"] = n
			slices.SortStableFunc(r.Anomalies, compareAnomalies)
			if n > c.cfg.maxAnomalies {
				r.Anomalies = slices.Clip(r.Anomalies[:c.cfg.maxAnomalies])
			}
		}
		if len(r.Details) == 0 {
			r.Details = nil
		}
		if !r.Advisory {
			verdict = Worst(verdict, r.Verdict)
		}
	}
	for _, r := range c.res.Coverage {
		verdict = Worst(verdict, r.Verdict)
	}
	c.res.Verdict = verdict
	c.res.ExitCode = ExitCode(verdict)
	slices.Sort(c.res.Visualized)
	c.res.Timings.Total = int64(time.Since(start))
}

// dropIllFormed removes r's anomalies that cite an operation the well-formed check rejected:
// what a broken recording seems to show is no violation. r becomes an error instead.
func (c *run) dropIllFormed(r *Result) {
	if r.Name == WellFormed || c.x == nil || len(c.x.illFormedOps) == 0 {
		return
	}
	n := len(r.Anomalies)
	r.Anomalies = slices.DeleteFunc(r.Anomalies, func(a Anomaly) bool {
		return slices.ContainsFunc(a.Ops, func(id int64) bool { return c.x.illFormedOps[id] })
	})
	if dropped := n - len(r.Anomalies); dropped > 0 {
		r.Details["ill_formed_anomalies"] = dropped
		r.Verdict = Worst(r.Verdict, VerdictError)
	}
}

func compareAnomalies(a, b Anomaly) int {
	if c := cmp.Compare(a.Role, b.Role); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Log, b.Log); c != 0 {
		return c
	}
	return slices.Compare(a.Ops, b.Ops)
}

// capitalize makes an explanation start like a sentence ("write-lease op 3 ..." → "Write-lease
// op 3 ...").
func capitalize(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError || unicode.IsUpper(r) {
		return s
	}
	return string(unicode.ToUpper(r)) + s[n:]
}

// notCovered turns describe-consistent into VerdictNotCovered when it passed without a single
// describe to judge: a pass that checked nothing must not read as one. Its details say why:
// the processes whose transports cannot describe (the header's no_describe), or that no
// describe completed.
func (c *run) notCovered(r *Result) {
	if r.Name != DescribeConsistent || r.Verdict != VerdictValid || c.x == nil {
		return
	}
	var op history.Op
	for i := range c.x.h.Len() {
		c.x.h.Load(i, &op)
		if op.Kind == history.KindDescribe && op.Type == history.TypeOK {
			return
		}
	}
	r.Verdict = VerdictNotCovered
	if p := c.x.h.Meta.NoDescribe; len(p) > 0 {
		r.Details["not_covered"] = "the transports of " + strings.Join(capStrings(p, 10), ", ") + " cannot describe (no-describe)"
	} else {
		r.Details["not_covered"] = "no describe completed"
	}
}
