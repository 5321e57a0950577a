package reports

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/checker/history"
)

const (
	rowHeight = 18.0
	axisSpace = 20.0
)

// xOf maps a history time to an x coordinate in a drawing of width chartWidth.
type xOf func(ns int64) float64

func scale(end int64) xOf {
	if end <= 0 {
		end = 1
	}
	return func(ns int64) float64 {
		if ns == history.Never || ns > end {
			ns = end
		}
		if ns < 0 {
			ns = 0
		}
		return labelWidth + float64(ns)/float64(end)*(chartWidth-labelWidth)
	}
}

func axis(end int64, x xOf) []tick {
	var ticks []tick
	for i := int64(0); i <= 5; i++ {
		ns := end/5*i + end%5*i/5 // end*i/5 without overflowing on very large times
		anchor := "middle"
		if i == 5 {
			anchor = "end"
		}
		ticks = append(ticks, tick{X: x(ns), Label: time.Duration(ns).Round(tickUnit(end)).String(), Anchor: anchor})
	}
	return ticks
}

// tickUnit is the power of ten at or below a fiftieth of end, so tick labels are round and a
// short history's ticks do not all read 0s.
func tickUnit(end int64) time.Duration {
	u := time.Duration(1)
	for u*10 <= time.Duration(end/50) {
		u *= 10
	}
	return u
}

func faultBands(h *history.History, x xOf) []band {
	var bands []band
	for _, f := range h.Faults {
		end := f.End
		if end == history.Never {
			end = h.End
		}
		title := fmt.Sprintf("%s %s (%s–%s)", f.Kind, strings.Join(f.Targets, ","), fmtTime(f.Start), fmtTime(end))
		if f.Desc != "" {
			title += ": " + f.Desc
		}
		if !f.TookHold {
			title += " (did not take hold)"
		}
		class := "fault"
		if f.Kind == history.KindMemberPause {
			class = "pause"
		}
		w := x(end) - x(f.Start)
		if w < 1 {
			w = 1
		}
		bands = append(bands, band{X: x(f.Start), W: w, Title: title, Class: class})
	}
	return bands
}

// timelines draws one timeline per role: roles with anomalies first, then the others by name,
// up to maxTimelineRoles.
func timelines(h *history.History, res *checker.Results, anomalous map[string]bool, notes []string) ([]timeline, []string) {
	overlaps := map[string][]checker.Overlap{}
	for _, r := range res.Exposure.Roles {
		overlaps[r.Role] = r.Overlaps
	}
	byRole := map[string][]int32{} // the operations' indexes: only the drawn roles' are read again
	for i, op := range h.All() {
		if op.Role == "" || op.Member == "" {
			continue
		}
		byRole[op.Role] = append(byRole[op.Role], int32(i))
	}
	roles := make([]string, 0, len(byRole))
	for r := range byRole {
		roles = append(roles, r)
	}
	sort.Slice(roles, func(i, j int) bool {
		if anomalous[roles[i]] != anomalous[roles[j]] {
			return anomalous[roles[i]]
		}
		return roles[i] < roles[j]
	})
	if len(roles) > maxTimelineRoles {
		notes = append(notes, fmt.Sprintf("Timelines are drawn for %d of %d roles (those with anomalies first).", maxTimelineRoles, len(roles)))
		roles = roles[:maxTimelineRoles]
	}
	x := scale(h.End)
	bands := faultBands(h, x)
	var out []timeline
	sampled := false
	for i, role := range roles {
		ops := make([]*history.Op, len(byRole[role]))
		for j, k := range byRole[role] {
			op := h.Op(int(k))
			ops[j] = &op
		}
		tl := roleTimeline(role, ops, h.End, x)
		tl.ID = "role-" + strconv.Itoa(i)
		tl.Anomalous = anomalous[role]
		tl.Bands = bands
		for _, o := range overlaps[role] {
			tl.Overlaps = append(tl.Overlaps, band{X: x(o.StartNS), W: max(x(o.EndNS)-x(o.StartNS), 1), Class: "overlap",
				Title: fmt.Sprintf("split-brain exposure %s–%s: %d members believed they held the role", fmtTime(o.StartNS), fmtTime(o.EndNS), len(o.Holders))})
		}
		sampled = sampled || tl.Sampled
		out = append(out, tl)
	}
	if sampled {
		notes = append(notes, fmt.Sprintf("Roles with more than %d writes show an even sample of them; fences, failures and acquires are always drawn.", maxMarksPerRole))
	}
	return out, notes
}

// roleTimeline draws a role's members: holder intervals (from an acquire's return until the
// member's next acquire, its first write that did not succeed, or the end), acquires labelled
// with their token, and writes coloured by outcome.
func roleTimeline(role string, ops []*history.Op, end int64, x xOf) timeline {
	tl := timeline{Role: role}
	members := map[string]int{}
	var names []string
	for _, op := range ops {
		key := op.Process + "/" + op.Member
		if _, ok := members[key]; !ok {
			members[key] = 0
			names = append(names, key)
		}
	}
	sort.Strings(names)
	for i, n := range names {
		members[n] = i
		tl.Rows = append(tl.Rows, tlRow{Label: n, Y: float64(i)*rowHeight + rowHeight/2})
	}
	tl.Height = float64(len(names))*rowHeight + axisSpace
	tl.Axis = axis(end, x)

	writes := 0
	for _, op := range ops {
		if op.Kind.IsWrite() {
			writes++
		}
	}
	every := 1
	if writes > maxMarksPerRole {
		every = (writes + maxMarksPerRole - 1) / maxMarksPerRole
		tl.Sampled = true
	}

	holdStart := map[string]int64{} // member -> start of its current holding
	holdTok := map[string]string{}
	closeHold := func(key string, at int64) {
		start, ok := holdStart[key]
		if !ok {
			return
		}
		delete(holdStart, key)
		y := float64(members[key]) * rowHeight
		tl.Holds = append(tl.Holds, rect{X: x(start), Y: y + 3, W: max(x(at)-x(start), 1), H: rowHeight - 6,
			Title: fmt.Sprintf("%s held %s from %s to %s", key, holdTok[key], fmtTime(start), fmtTime(at))})
	}
	sorted := append([]*history.Op(nil), ops...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Invoke < sorted[j].Invoke })
	nw := 0
	for _, op := range sorted {
		key := op.Process + "/" + op.Member
		y := float64(members[key])*rowHeight + rowHeight/2
		switch {
		case op.Kind == history.KindAcquire:
			closeHold(key, op.Invoke)
			class, title := outcomeClass(op), fmt.Sprintf("acquire #%d %s", op.ID, outcomeWord(op))
			if op.Type == history.TypeOK && op.Result.Token != nil {
				holdStart[key] = op.Return
				holdTok[key] = op.Result.Token.String()
				title += " " + op.Result.Token.String()
			}
			if op.Message != "" {
				title += ": " + op.Message
			}
			tl.Marks = append(tl.Marks, mark{X: x(op.Return), Y: y, Class: "acq " + class, Title: title})
		case op.Kind.IsWrite():
			nw++
			failed := op.Type != history.TypeOK
			if failed {
				closeHold(key, op.Return)
			}
			if !failed && nw%every != 0 {
				continue
			}
			title := fmt.Sprintf("%s #%d under %s: %s", op.Kind, op.ID, op.Args.Token, outcomeWord(op))
			if op.Error != "" {
				title += " (" + op.Error + ")"
			}
			if op.Message != "" {
				title += ": " + op.Message
			}
			tl.Marks = append(tl.Marks, mark{X: x(op.Return), Y: y, Class: "w " + outcomeClass(op), Title: title})
		}
	}
	for key := range holdStart {
		closeHold(key, end)
	}
	return tl
}

func outcomeClass(op *history.Op) string {
	switch {
	case op.Pending || op.Type == history.TypeInfo:
		return "info"
	case op.Type == history.TypeFail && op.Error == history.ErrorFenced:
		return "fenced"
	case op.Type == history.TypeFail:
		return "fail"
	}
	return "ok"
}

func outcomeWord(op *history.Op) string {
	if op.Pending {
		return "pending"
	}
	return op.Type.String()
}

// charts draws throughput (ok completions per second by kind) and write latency over time.
func charts(h *history.History) []chart {
	if h.End <= 0 || h.Len() == 0 {
		return nil
	}
	x := scale(h.End)
	// Buckets of at least minBin, so a short run's chart shows rates rather than noise.
	bins := int(min(int64(chartBins), max(h.End/int64(minBin), 10)))
	binOf := func(ns int64) int {
		b := int(float64(ns) / float64(h.End) * float64(bins)) // in float: ns*bins overflows on very large times
		return min(max(b, 0), bins-1)
	}
	binSecs := float64(h.End) / 1e9 / float64(bins)
	kinds := []history.Kind{history.KindWriteLease, history.KindWork, history.KindAcquire, history.KindRead, history.KindDescribe}
	counts := map[history.Kind][]float64{}
	for _, k := range kinds {
		counts[k] = make([]float64, bins)
	}
	lat := make([][]int64, bins)
	for _, op := range h.All() {
		if op.Pending || op.Type != history.TypeOK {
			continue
		}
		b := binOf(op.Return)
		if c, ok := counts[op.Kind]; ok {
			c[b]++
		}
		if op.Kind.IsWrite() {
			lat[b] = append(lat[b], op.Return-op.Invoke)
		}
	}
	const height = 160.0
	thr := chart{Title: "Throughput: successful operations per second, by kind", Unit: "ops/s", Height: height + axisSpace,
		Bands: faultBands(h, x), Axis: axis(h.End, x)}
	peak := 1.0
	for _, k := range kinds {
		for _, c := range counts[k] {
			peak = max(peak, c/binSecs)
		}
	}
	for _, k := range kinds {
		var pts []string
		for b, c := range counts[k] {
			ns := int64((float64(b) + 0.5) * float64(h.End) / float64(bins))
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(ns), height-c/binSecs/peak*(height-10)))
		}
		thr.Lines = append(thr.Lines, line{Name: string(k), Class: "k-" + string(k), Points: strings.Join(pts, " ")})
	}
	thr.YTicks = []tick{{X: 10, Label: fmt.Sprintf("%.0f", peak)}, {X: height, Label: "0"}}

	latc := chart{Title: "Latency of successful writes (p50 and p99 per bucket)", Unit: "ms", Height: height + axisSpace,
		Bands: faultBands(h, x), Axis: axis(h.End, x)}
	p50, p99 := make([]float64, bins), make([]float64, bins)
	lpeak := 1.0
	for b, ls := range lat {
		if len(ls) == 0 {
			continue
		}
		sort.Slice(ls, func(i, j int) bool { return ls[i] < ls[j] })
		p50[b] = float64(ls[len(ls)/2]) / 1e6
		p99[b] = float64(ls[(len(ls)*99)/100]) / 1e6
		lpeak = max(lpeak, p99[b])
	}
	for _, s := range []struct {
		name string
		v    []float64
	}{{"p50", p50}, {"p99", p99}} {
		var pts []string
		for b, v := range s.v {
			ns := int64((float64(b) + 0.5) * float64(h.End) / float64(bins))
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(ns), height-v/lpeak*(height-10)))
		}
		latc.Lines = append(latc.Lines, line{Name: s.name, Class: "l-" + s.name, Points: strings.Join(pts, " ")})
	}
	latc.YTicks = []tick{{X: 10, Label: fmt.Sprintf("%.0f ms", lpeak)}, {X: height, Label: "0"}}
	return []chart{thr, latc}
}
