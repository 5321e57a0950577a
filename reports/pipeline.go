package reports

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/fencecheck/fencecheck/checker/history"
)

// pipeRow is one input partition of a pipeline run, as the report's table shows it.
type pipeRow struct {
	Partition int32
	// Sent counts the input records that landed there; Committed is the group's final
	// committed offset ("none" without one); Outputs the outputs of its records in the
	// committed output.
	Sent      int
	Committed string
	Outputs   int
	// Txns counts its transactions by outcome.
	TxnsOK, TxnsFailed, TxnsUnknown int
	// Owners are the members whose transactions committed its records, in time order, each
	// with its generation and the span of its committed transactions.
	Owners []string
}

// faultRow is one fault window, for a run without timelines.
type faultRow struct {
	Kind, Desc, Start, End string
	TookHold               bool
}

// pipelineView returns the per-partition table and the fault windows of a pipeline history.
func pipelineView(h *history.History) ([]pipeRow, []faultRow) {
	rows := map[int32]*pipeRow{}
	row := func(p int32) *pipeRow {
		if rows[p] == nil {
			rows[p] = &pipeRow{Partition: p, Committed: "none"}
		}
		return rows[p]
	}
	if m := h.Meta.Pipeline; m != nil {
		for p := range m.Partitions {
			row(p)
		}
	}
	type span struct {
		who        string
		gen        int32
		start, end int64
	}
	spans := map[int32][]span{}
	var op history.Op
	for i := range h.Len() {
		h.Load(i, &op)
		switch {
		case op.Kind == history.KindSend && op.Type == history.TypeOK && op.Result.Pipe != nil && op.Result.Pipe.Sent != nil:
			row(op.Result.Pipe.Sent.Partition).Sent++
		case op.Kind == history.KindTxn && op.Args.Pipe != nil:
			for _, in := range op.Args.Pipe.Inputs {
				r := row(in.Partition)
				switch {
				case op.Type == history.TypeOK:
					r.TxnsOK++
					who, gen := op.Process+"/"+op.Member, op.Args.Pipe.Generation
					s := spans[in.Partition]
					if n := len(s); n > 0 && s[n-1].who == who && s[n-1].gen == gen {
						s[n-1].end = op.Return
					} else {
						s = append(s, span{who, gen, op.Invoke, op.Return})
					}
					spans[in.Partition] = s
				case op.Pending || op.Type == history.TypeInfo:
					r.TxnsUnknown++
				default:
					r.TxnsFailed++
				}
			}
		case op.Kind == history.KindFinalOutput && op.Type == history.TypeOK && op.Result.Pipe != nil:
			for p := range rows {
				rows[p].Outputs = 0
			}
			for _, o := range op.Result.Pipe.Outputs {
				if o.In.Partition >= 0 {
					row(o.In.Partition).Outputs++
				}
			}
		case op.Kind == history.KindFinalOffsets && op.Type == history.TypeOK && op.Result.Pipe != nil:
			for _, o := range op.Result.Pipe.Offsets {
				row(o.Partition).Committed = fmt.Sprint(o.Offset)
			}
		}
	}
	var out []pipeRow
	for _, p := range slices.Sorted(maps.Keys(rows)) {
		r := rows[p]
		for _, s := range spans[p] {
			r.Owners = append(r.Owners, fmt.Sprintf("%s gen %d (%s–%s)", s.who, s.gen, seconds(s.start), seconds(s.end)))
		}
		out = append(out, *r)
	}
	var faults []faultRow
	for _, f := range h.Faults {
		end := "never closed"
		if f.End != history.Never {
			end = seconds(f.End)
		}
		desc := f.Desc
		if desc == "" {
			desc = strings.Join(f.Targets, ", ")
		}
		faults = append(faults, faultRow{Kind: string(f.Kind), Desc: desc, Start: seconds(f.Start), End: end, TookHold: f.TookHold})
	}
	return out, faults
}

func seconds(ns int64) string { return time.Duration(ns).Round(10 * time.Millisecond).String() }
