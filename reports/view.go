package reports

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/checker/history"
)

// Limits that keep report.html small for million-operation runs; the page says when it
// sampled.
const (
	maxTimelineRoles = 40   // roles with a drawn timeline (anomalous roles first)
	maxMarksPerRole  = 1500 // write and acquire marks per role timeline
	maxAnomalyOps    = 12   // operations listed per anomaly
	chartBins        = 120  // time buckets of the throughput and latency charts, at most
	minBin           = 500 * time.Millisecond
	chartWidth       = 960.0
	labelWidth       = 150.0
)

// page is everything the template shows, computed once.
type page struct {
	Info          *RunInfo
	Res           *checker.Results
	Verdict       string
	Headline      string
	Duration      string
	Checks        []checkRow
	Coverage      []checkRow
	Anomalies     []anomalyView
	Timelines     []timeline
	Charts        []chart
	Notes         []string
	Failures      []failureRow
	Exposure      []exposureRow
	ExposureError string
	// Liveness is the held fraction and renewal gaps in words, "" when not measured.
	Liveness string
	// IsPipeline is set for a pipeline run, whose Pipeline table and PipelineFaults take
	// the place of the lease run's exposure, liveness and timelines.
	IsPipeline     bool
	Pipeline       []pipeRow
	PipelineFaults []faultRow
}

type checkRow struct {
	Name, Meaning  string
	Verdict, Class string
	Advisory       bool
	Anomalies      int
	Detail         string
}

type anomalyView struct {
	Guarantee, Role, Log, Explanation, Linear string
	Ops                                       []opRow
	MoreOps                                   int
	Offsets                                   []recordRow
}

type opRow struct {
	ID                                           int64
	Process, Member, Role, Kind, Token, Outcome  string
	Invoke, Return, Error, OutcomeClass, WriteID string
	Message                                      string
}

// failureRow is one kind of failed operation: the operations of one kind that failed with
// one class and one message, so a run whose calls all failed for one reason shows it.
type failureRow struct {
	Kind, Outcome, Error, Message string
	Count                         int
	First                         int64 // the first such operation's id
}

type recordRow struct {
	Offset                       int64
	Kind, Member, Token, WriteID string
	Found                        bool
}

type exposureRow struct {
	Role           string
	Intervals      int
	Total, Longest string
}

// timeline is one role's SVG: a row per member.
type timeline struct {
	Role      string
	ID        string // DOM id
	Anomalous bool
	Height    float64
	Rows      []tlRow
	Bands     []band
	Overlaps  []band
	Holds     []rect
	Marks     []mark
	Axis      []tick
	Sampled   bool
}

type tlRow struct {
	Label string
	Y     float64
}

type rect struct {
	X, Y, W, H float64
	Title      string
}

type band struct {
	X, W  float64
	Title string
	Class string
}

type mark struct {
	X, Y  float64
	Class string
	Title string
}

type tick struct {
	X      float64
	Label  string
	Anchor string // SVG text-anchor: the last tick ends at the edge instead of overflowing it
}

type chart struct {
	Title  string
	Unit   string
	Height float64
	Lines  []line
	Bands  []band
	Axis   []tick
	YTicks []tick // X holds the y position
}

type line struct {
	Name, Class, Points string
}

// newPage prepares the report of one run. h may be nil (the history could not be read): the
// page then shows the results only and says why.
func newPage(info *RunInfo, res *checker.Results, h *history.History, histErr error) *page {
	p := &page{Info: info, Res: res, Verdict: string(res.Verdict)}
	p.Headline = headline(res)
	if h != nil {
		p.Duration = time.Duration(h.End).Round(time.Millisecond).String()
	} else if info != nil {
		p.Duration = info.Duration.String()
	}
	if histErr != nil {
		p.Notes = append(p.Notes, "The history could not be read, so no timelines are drawn: "+histErr.Error())
	}
	for _, r := range res.Checks {
		p.Checks = append(p.Checks, row(r))
	}
	for _, r := range res.Coverage {
		p.Coverage = append(p.Coverage, row(r))
	}
	ops, finals := anomalyOps(res, h)
	visualized := map[string]bool{}
	for _, r := range res.Visualized {
		visualized[r] = true
	}
	anomalous := map[string]bool{}
	for _, r := range res.Checks {
		for _, a := range r.Anomalies {
			p.Anomalies = append(p.Anomalies, anomaly(a, ops, finals, visualized))
			if a.Role != "" {
				anomalous[a.Role] = true
			}
		}
	}
	p.Exposure = exposureRows(res)
	p.ExposureError = res.Exposure.Error
	p.Liveness = livenessLine(res.Liveness)
	if h != nil && h.Meta.Workload == history.WorkloadPipeline {
		p.IsPipeline = true
		p.Pipeline, p.PipelineFaults = pipelineView(h)
		p.Failures = failures(h)
		return p
	}
	if h != nil {
		p.Timelines, p.Notes = timelines(h, res, anomalous, p.Notes)
		p.Charts = charts(h)
		p.Failures = failures(h)
	}
	return p
}

func headline(res *checker.Results) string {
	switch res.Verdict {
	case checker.VerdictValid:
		return "Safe: every guarantee held, and the run covered what it promised."
	case checker.VerdictInvalid:
		n := 0
		for _, r := range res.Checks {
			if r.Verdict == checker.VerdictInvalid && !r.Advisory {
				n++
			}
		}
		return fmt.Sprintf("Unsafe: %d guarantee(s) violated. The anomalies below show the operations and records involved.", n)
	case checker.VerdictUnknown:
		return "Undecided: at least one check could not reach a verdict (see its details)."
	case checker.VerdictInconclusive:
		return "Inconclusive: nothing was violated, but the run did not cover what it promised, so the pass would be vacuous."
	case checker.VerdictError:
		return "Harness error: the run could not be judged. " + res.Error
	}
	return string(res.Verdict)
}

func row(r checker.Result) checkRow {
	c := checkRow{Name: r.Name, Meaning: checker.Meaning(r.Name), Verdict: string(r.Verdict), Class: verdictClass(r.Verdict), Advisory: r.Advisory,
		Anomalies: len(r.Anomalies)}
	if n, ok := r.Details["anomalies"].(float64); ok && int(n) > c.Anomalies {
		c.Anomalies = int(n)
	}
	keys := make([]string, 0, len(r.Details))
	for k := range r.Details {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s: %v", k, r.Details[k]))
	}
	c.Detail = strings.Join(parts, "; ")
	return c
}

func verdictClass(v checker.Verdict) string {
	switch v {
	case checker.VerdictValid:
		return "ok"
	case checker.VerdictInvalid:
		return "bad"
	case checker.VerdictNotCovered:
		return "nc"
	}
	return "warn"
}

// maxFailureRows bounds the failures table: the commonest reasons say what went wrong.
const maxFailureRows = 12

// failures groups the operations that did not succeed by kind, outcome, error class and
// message, commonest first.
func failures(h *history.History) []failureRow {
	type key struct{ kind, outcome, class, msg string }
	rows := map[key]*failureRow{}
	for _, op := range h.All() {
		if op.Type == history.TypeOK || op.Pending {
			continue
		}
		outcome := "fail"
		if op.Type == history.TypeInfo {
			outcome = "info"
		}
		k := key{string(op.Kind), outcome, op.Error, op.Message}
		r := rows[k]
		if r == nil {
			r = &failureRow{Kind: k.kind, Outcome: outcome, Error: op.Error, Message: op.Message, First: op.ID}
			rows[k] = r
		}
		r.Count++
	}
	out := make([]failureRow, 0, len(rows))
	for _, r := range rows {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b failureRow) int {
		if a.Count != b.Count {
			return b.Count - a.Count
		}
		return int(a.First - b.First)
	})
	if len(out) > maxFailureRows {
		out = out[:maxFailureRows]
	}
	return out
}

// anomalyOps finds, in one pass over the history, the operations the anomalies list (an
// id the history lacks maps to nil) and every log's ok final reads, by log name: all that
// the anomalies show of the history. A history of a million operations has no room for a map
// of every operation by id.
func anomalyOps(res *checker.Results, h *history.History) (ops map[int64]*history.Op, finals map[string][]*history.Op) {
	if h == nil || !slices.ContainsFunc(res.Checks, func(r checker.Result) bool { return len(r.Anomalies) > 0 }) {
		return nil, nil // nothing to show: a valid run's report does not walk the history for it
	}
	ops, finals = map[int64]*history.Op{}, map[string][]*history.Op{}
	for _, r := range res.Checks {
		for _, a := range r.Anomalies {
			for _, id := range a.Ops[:min(len(a.Ops), maxAnomalyOps)] {
				ops[id] = nil
			}
		}
	}
	for _, op := range h.All() {
		// Only the operations kept are copied to the heap; op itself stays on the stack.
		if _, ok := ops[op.ID]; ok {
			v := op
			ops[op.ID] = &v
		}
		if op.Kind == history.KindFinalRead && op.Type == history.TypeOK {
			v, log := op, op.Args.Log.String()
			finals[log] = append(finals[log], &v)
		}
	}
	return ops, finals
}

func anomaly(a checker.Anomaly, ops map[int64]*history.Op, finals map[string][]*history.Op, visualized map[string]bool) anomalyView {
	v := anomalyView{Guarantee: a.Guarantee, Role: a.Role, Log: a.Log, Explanation: a.Explanation}
	if a.Role != "" && visualized[a.Role] {
		v.Linear = LinearName(a.Role)
	}
	for i, id := range a.Ops {
		if i == maxAnomalyOps {
			v.MoreOps = len(a.Ops) - i
			break
		}
		op := ops[id]
		if op == nil {
			v.Ops = append(v.Ops, opRow{ID: id, Outcome: "not in the history"})
			continue
		}
		v.Ops = append(v.Ops, opView(op))
	}
	if len(a.Offsets) > 0 && finals != nil {
		recs := finalRecords(finals[a.Log])
		for _, off := range a.Offsets {
			r, ok := recs[off]
			v.Offsets = append(v.Offsets, recordRow{Offset: off, Kind: r.Kind.String(), Member: r.Member,
				Token: tokenString(r.Token, r.Kind), WriteID: recordWriteID(&r), Found: ok})
		}
	}
	return v
}

// recordWriteID is a record's write id, with which of its write's records it is when the
// write carried several ("w17, record 1 of 3").
func recordWriteID(r *history.Record) string {
	if r.Count > 1 {
		return fmt.Sprintf("%s, record %d of %d", r.WriteID, r.Index, r.Count)
	}
	return r.WriteID
}

func tokenString(t history.Token, k history.RecordKind) string {
	if k == history.RecordRegistration {
		return ""
	}
	return t.String()
}

// finalRecords returns the records of a log's final reads by offset (a later read's record
// wins).
func finalRecords(finals []*history.Op) map[int64]history.Record {
	out := map[int64]history.Record{}
	for _, op := range finals {
		for _, r := range op.Result.Records {
			out[r.Offset] = r
		}
	}
	return out
}

func opView(op *history.Op) opRow {
	r := opRow{ID: op.ID, Process: op.Process, Member: op.Member, Role: op.Role, Kind: string(op.Kind),
		Invoke: fmtTime(op.Invoke), Return: fmtTime(op.Return), Error: op.Error, WriteID: op.Args.WriteID, Message: op.Message}
	if op.Args.Records > 1 {
		r.WriteID = fmt.Sprintf("%s (%d records)", op.Args.WriteID, op.Args.Records)
	}
	switch {
	case op.Pending:
		r.Outcome, r.OutcomeClass = "pending", "warn"
	case op.Type == history.TypeOK:
		r.Outcome, r.OutcomeClass = "ok", "ok"
	case op.Type == history.TypeFail:
		r.Outcome, r.OutcomeClass = "fail", "bad"
	default:
		r.Outcome, r.OutcomeClass = "info", "warn"
	}
	switch {
	case op.Kind.IsWrite():
		r.Token = op.Args.Token.String()
	case op.Result.Token != nil:
		r.Token = op.Result.Token.String()
	}
	return r
}

func fmtTime(ns int64) string {
	if ns == history.Never {
		return "never"
	}
	return fmt.Sprintf("%.3fs", float64(ns)/1e9)
}

func exposureRows(res *checker.Results) []exposureRow {
	var rows []exposureRow
	for _, r := range res.Exposure.Roles {
		rows = append(rows, exposureRow{Role: r.Role, Intervals: r.Count,
			Total: time.Duration(r.TotalNS).Round(time.Millisecond).String(), Longest: time.Duration(r.LongestNS).Round(time.Millisecond).String()})
	}
	slices.SortFunc(rows, func(a, b exposureRow) int { return strings.Compare(a.Role, b.Role) })
	return rows
}

// livenessLine says how well the roles were held: "Roles held 98.7% of the run on average
// (the lowest, r3, 91.2%); 412 renewals, gap p50 1s, p99 1.02s, longest 1.5s."
func livenessLine(l checker.Liveness) string {
	if !l.Measured {
		return ""
	}
	s := fmt.Sprintf("Roles held %.1f%% of the run on average (the lowest, %s, %.1f%%)", 100*l.HeldFraction, l.MinHeldRole, 100*l.MinHeldFraction)
	if l.Renewals == 0 {
		return s + "; no holder renewed twice."
	}
	ms := func(ns int64) string { return time.Duration(ns).Round(time.Millisecond).String() }
	return s + fmt.Sprintf("; %d renewals, gap p50 %s, p99 %s, longest %s.", l.Renewals, ms(l.RenewalGapP50), ms(l.RenewalGapP99), ms(l.RenewalGapMax))
}
