package checker

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/fencecheck/fencecheck/checker/history"
)

// Transactions of several records (docs/checker.md, "no-torn-txn"): a work write may carry
// several records, all in one transaction, each naming its write, its index among them and
// their count. A committed read shows all of a transaction's records or none, with one
// allowance Kafka makes: a read_committed read stops at the last stable offset, which an open
// transaction of another producer can hold below the end of a committed transaction whose
// records interleave with its own, so a read may show a committed transaction's first records
// and stop before the rest. Such a read is a prefix of the log; a torn read is one that skips
// a record of a write inside the range it covers (below its last record), or a settled read
// (the final read, or a process's last read after it) that shows some but not all of a
// write's records.

// txnParts is what the final log of its log holds of one write of several records.
type txnParts struct {
	at      []int32 // per index: the record's position in the final log, -1 when absent
	present int     // indexes present
	dup     int     // records of an index already present
}

// misfit is a record of a final log whose index or count does not fit its write.
type misfit struct {
	write int32
	log   *logInfo
	pos   int
}

// notePart files record rec, at position p of l's final log, of write w (which wrote to l)
// under the write's parts, or as a misfit when its count differs from the write's or its
// index is out of range.
func (x *index) notePart(l *logInfo, p int, w int32, rec *history.Record) {
	want, got := max(int(x.multi[w]), 1), max(int(rec.Count), 1)
	if got != want || int(rec.Index) >= want {
		x.misfits = append(x.misfits, misfit{w, l, p})
		return
	}
	if want == 1 {
		return
	}
	t := x.parts[w]
	if t == nil {
		t = &txnParts{at: make([]int32, want)}
		for i := range t.at {
			t.at[i] = -1
		}
		if x.parts == nil {
			x.parts = map[int32]*txnParts{}
		}
		x.parts[w] = t
	}
	if t.at[rec.Index] >= 0 {
		t.dup++
		return
	}
	t.at[rec.Index] = int32(p)
	t.present++
}

// lastSettled returns, for each process that read l after its final read returned, the last
// such read (by invocation), in process order: the reads that must show the settled log
// whole (read-prefix) and every transaction in it whole (no-torn-txn). The workload reads
// again while a settled read comes back short, so the earlier ones do not count.
func (x *index) lastSettled(l *logInfo) []int32 {
	if l.final < 0 {
		return nil
	}
	finalOp := x.op(l.final)
	last := map[string]int32{}
	for _, rd := range l.reads {
		op := x.op(rd)
		if op.Kind != history.KindRead || op.Type != history.TypeOK || op.Invoke <= finalOp.Return {
			continue
		}
		if prev, ok := last[op.Process]; !ok || x.op(prev).Invoke < op.Invoke {
			last[op.Process] = rd
		}
	}
	processes := make([]string, 0, len(last))
	for p := range last {
		processes = append(processes, p)
	}
	slices.Sort(processes)
	out := make([]int32, len(processes))
	for i, p := range processes {
		out[i] = last[p]
	}
	return out
}

// indexes renders record indexes as "0, 2".
func indexes(is []int) string {
	parts := make([]string, len(is))
	for i, v := range is {
		parts[i] = strconv.Itoa(v)
	}
	return strings.Join(parts, ", ")
}

// records renders record indexes as "record 0" or "records 0, 2".
func records(is []int) string {
	if len(is) == 1 {
		return "record " + indexes(is)
	}
	return "records " + indexes(is)
}

// checkNoTornTxn: no committed read shows part of a transaction. It is not covered when no
// write carried several records.
func (c *run) checkNoTornTxn() {
	r, x := c.result(NoTornTxn), c.x
	if len(x.multi) == 0 && len(x.misfits) == 0 {
		r.Verdict = VerdictNotCovered
		r.Details["not_covered"] = "no write carried several records (the workload's load.work_records)"
		return
	}
	writes, reads, skipped := 0, 0, 0
	outcome := func(w int32) string {
		switch x.outcome[w] {
		case history.TypeOK:
			return "acknowledged"
		case history.TypeFail:
			return "failed"
		}
		return "outcome unknown"
	}
	describeWrite := func(op *history.Op, w int32) string {
		return fmt.Sprintf("write %q (%s op %d by %s under %s, %s, %d records)",
			op.Args.WriteID, op.Kind, op.ID, op.Member, op.Args.Token, outcome(w), x.multi[w])
	}
	for _, id := range x.logIDs {
		l := x.logs[id]
		var multi []int32 // the log's writes of several records
		for _, w := range l.writes {
			if x.multi[w] > 1 {
				multi = append(multi, w)
			}
		}
		if len(multi) == 0 {
			continue
		}
		if l.final < 0 {
			skipped++
			continue
		}
		final := x.finalRecords(l)
		finalOp := x.op(l.final)
		// The final log: each write whole or absent.
		for _, w := range multi {
			writes++
			t := x.parts[w]
			if t == nil || t.present == len(t.at) {
				continue
			}
			op := x.op(w)
			var have, missing []int
			var offsets []int64
			for i, p := range t.at {
				if p < 0 {
					missing = append(missing, i)
				} else {
					have = append(have, i)
					offsets = append(offsets, final[p].Offset)
				}
			}
			r.Anomalies = append(r.Anomalies, Anomaly{
				Guarantee: NoTornTxn, Role: op.Role, Log: id.String(), Ops: x.opIDs(w, l.final), Offsets: offsets,
				Explanation: fmt.Sprintf("The final log of %s (final read op %d) holds %s of %s, not %s: a transaction's records are committed all or none.",
					id, finalOp.ID, records(have), describeWrite(&op, w), indexes(missing)),
			})
		}
		settled := x.lastSettled(l)
		for i, rd := range l.reads {
			reads++
			last := slices.Contains(settled, rd)
			if l.mismatch[i] < 0 && !last {
				continue // a prefix of the final log skips nothing below where it stops
			}
			op := x.op(rd)
			recs := op.Result.Records
			if len(recs) == 0 {
				continue
			}
			// The write's records this read returned, by write, in the order they come.
			shown := map[int32][]int{}
			var order []int32
			for j := range recs {
				rec := &recs[j]
				if rec.Kind == history.RecordRegistration {
					continue
				}
				w := x.writerOf(rec)
				if w < 0 || x.multi[w] <= 1 || int(rec.Index) >= int(x.multi[w]) {
					continue
				}
				if shown[w] == nil {
					order = append(order, w)
				}
				shown[w] = append(shown[w], int(rec.Index))
			}
			end := recs[len(recs)-1].Offset
			for _, w := range order {
				count := int(x.multi[w])
				seen := make([]bool, count)
				top := 0
				for _, i := range shown[w] {
					seen[i] = true
					top = max(top, i)
				}
				t := x.parts[w]
				var have, skippedIdx []int
				var offsets []int64
				for i, s := range seen {
					switch {
					case s:
						have = append(have, i)
					case t != nil && t.at[i] >= 0:
						// Where the final log has it: a settled read must show it, and any
						// other read that returned a record past that offset covered it.
						if off := final[t.at[i]].Offset; last || off <= end {
							skippedIdx = append(skippedIdx, i)
							offsets = append(offsets, off)
						}
					case i < top:
						// Not in the final log (whose anomaly that is): the write produced it
						// before one the read returned, so it lies below that one.
						skippedIdx = append(skippedIdx, i)
					}
				}
				if len(skippedIdx) == 0 {
					continue
				}
				wop := x.op(w)
				var why string
				if last {
					why = fmt.Sprintf("%s op %d of %s by %s, invoked after the final read (op %d) returned, shows %s of %s, not %s: a settled read shows a transaction whole or not at all.",
						op.Kind, op.ID, id, op.Process, finalOp.ID, records(have), describeWrite(&wop, w), indexes(skippedIdx))
				} else {
					why = fmt.Sprintf("%s op %d of %s returned %s of %s and records up to offset %d, but not %s below that: a committed read shows all of a transaction's records below where it stops, or none.",
						op.Kind, op.ID, id, records(have), describeWrite(&wop, w), end, indexes(skippedIdx))
				}
				r.Anomalies = append(r.Anomalies, Anomaly{
					Guarantee: NoTornTxn, Role: wop.Role, Log: id.String(), Ops: x.opIDs(w, rd), Offsets: offsets, Explanation: why,
				})
			}
		}
	}
	for _, m := range x.misfits {
		final := x.finalRecords(m.log)
		rec := &final[m.pos]
		op := x.op(m.write)
		r.Anomalies = append(r.Anomalies, Anomaly{
			Guarantee: NoTornTxn, Role: op.Role, Log: m.log.id.String(), Ops: x.opIDs(m.write, m.log.final), Offsets: []int64{rec.Offset},
			Explanation: fmt.Sprintf("In the final log of %s, %s says it is record %d of %d, but its write (%s op %d) carried %d.",
				m.log.id, x.describeRecord(rec, m.write), rec.Index, max(rec.Count, 1), op.Kind, op.ID, max(op.Args.Records, 1)),
		})
	}
	r.Details["writes"] = writes
	r.Details["reads"] = reads
	if skipped > 0 {
		r.Details["logs_without_final_read"] = skipped
		r.Verdict = Worst(r.Verdict, VerdictInconclusive)
	}
}
