package checker

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/fencecheck/fencecheck/checker/history"
)

// The linear checks over committed logs (docs/checker.md, "The guarantees"): they need no search, and they read
// the final committed log of every log and every committed read, for lease records and work
// records alike.

// describeRecord renders a record for an explanation.
func (x *index) describeRecord(rec *history.Record, writer int32) string {
	switch rec.Kind {
	case history.RecordRegistration:
		return fmt.Sprintf("offset %d (registration of %s)", rec.Offset, rec.Member)
	}
	s := fmt.Sprintf("offset %d (%s record %q of %s under %s", rec.Offset, rec.Kind, rec.WriteID, rec.Member, rec.Token)
	if writer >= 0 {
		s += fmt.Sprintf(", op %d", x.op(writer).ID)
	}
	return s + ")"
}

// opList renders ops as "op 3, op 7".
func (x *index) opList(ops []int32) string {
	parts := make([]string, len(ops))
	for i, o := range ops {
		parts[i] = fmt.Sprintf("op %d", x.op(o).ID)
	}
	return strings.Join(parts, ", ")
}

// opIDs returns the ids of the given ops, skipping -1.
func (x *index) opIDs(ops ...int32) []int64 {
	ids := make([]int64, 0, len(ops))
	for _, o := range ops {
		if o >= 0 {
			ids = append(ids, x.op(o).ID)
		}
	}
	return ids
}

// checkLogTokenOrder: in every final log, records carry non-decreasing minted tokens in offset
// order. A work partition may be shared by several roles, whose tokens do not compare: it is
// checked role by role (the record's role, or its writer's). On a cluster that hashes producer
// ids a role's tokens compare by its rotation (compareTokens).
//
// The order is that of the tokens the writers' operations ran under, and every committed
// record's stamped token must equal its writer's: otherwise the log order, which trusts the
// stamp, and the model, which trusts the operation, would judge different histories, and an
// old holder's record stamped with a newer token would hide a reorder.
func (c *run) checkLogTokenOrder() {
	r, x := c.result(LogTokenOrder), c.x
	checked, skipped, notComparable := 0, 0, 0
	type top struct {
		tok history.Token
		p   int
	}
	stamped := map[int32]bool{} // writes whose mismatched stamp is reported
	var op history.Op           // the writer checkStamp reads, reused: it reads one a record
	checkStamp := func(id history.LogID, rec *history.Record, w, read int32) history.Token {
		if w < 0 {
			return rec.Token
		}
		x.h.Load(int(w), &op)
		if op.Args.Token == rec.Token {
			return rec.Token
		}
		if !stamped[w] {
			stamped[w] = true
			r.Anomalies = append(r.Anomalies, Anomaly{
				Guarantee: LogTokenOrder, Role: op.Role, Log: id.String(),
				Ops: x.opIDs(w, read), Offsets: []int64{rec.Offset},
				Explanation: fmt.Sprintf("%s op %d of %s returned %s, but its write (%s op %d by %s) ran under %s: a committed record must carry the token its writer ran under.",
					x.op(read).Kind, x.op(read).ID, id, x.describeRecord(rec, w), op.Kind, op.ID, op.Member, op.Args.Token),
			})
		}
		return op.Args.Token
	}
	for _, id := range x.logIDs {
		l := x.logs[id]
		// Reads that are not prefixes of the final log hold records the final read does not.
		for i, rd := range l.reads {
			if l.final >= 0 && l.mismatch[i] < 0 {
				continue
			}
			recs := x.op(rd).Result.Records
			for j := range recs {
				checkStamp(id, &recs[j], x.writerOf(&recs[j]), rd)
			}
		}
		if l.final < 0 {
			skipped++
			continue
		}
		checked++
		final := x.finalRecords(l)
		maxBy := map[string]top{}
		describe := func(p int, tok history.Token) string {
			s := x.describeRecord(&final[p], l.finalWriter[p])
			if tok != final[p].Token {
				s += fmt.Sprintf(", whose write ran under %s,", tok)
			}
			return s
		}
		restamped := l.restamped
		for p := range final {
			rec := &final[p]
			if rec.Kind == history.RecordRegistration {
				continue
			}
			tok := rec.Token // the writer's, but for the records resolveLog found restamped
			if len(restamped) > 0 && restamped[0] == p {
				tok = checkStamp(id, rec, l.finalWriter[p], l.final)
				restamped = restamped[1:]
			}
			key := ""
			if id.Work {
				key = rec.Role
				if key == "" && l.finalWriter[p] >= 0 {
					key = x.op(l.finalWriter[p]).Role
				}
			}
			m, ok := maxBy[key]
			if !ok {
				maxBy[key] = top{tok, p}
				continue
			}
			c, known := x.compareTokens(cmp.Or(id.Role, key), tok, m.tok)
			switch {
			case !known:
				notComparable++
				maxBy[key] = top{tok, p}
			case c < 0:
				newer := &final[m.p]
				r.Anomalies = append(r.Anomalies, Anomaly{
					Guarantee: LogTokenOrder, Role: cmp.Or(id.Role, key), Log: id.String(),
					Ops:     x.opIDs(l.finalWriter[m.p], l.finalWriter[p]),
					Offsets: []int64{newer.Offset, rec.Offset},
					Explanation: fmt.Sprintf("In the final log of %s, %s committed after %s: an older holder's record follows its successor's.",
						id, describe(p, tok), describe(m.p, m.tok)),
				})
			case c > 0:
				maxBy[key] = top{tok, p}
			}
		}
	}
	r.Details["logs"] = checked
	if skipped > 0 {
		r.Details["logs_without_final_read"] = skipped
		r.Verdict = Worst(r.Verdict, VerdictInconclusive)
	}
	if notComparable > 0 {
		r.Details["not_comparable"] = fmt.Sprintf("%d producer-id changes that the checker could not order as rotations (the cluster hashes producer ids)", notComparable)
		r.Verdict = Worst(r.Verdict, VerdictUnknown)
	}
}

// checkNoLostWrite: every acknowledged write is exactly once in the final log of its log. So
// is every write of unknown outcome that a committed read saw; none may be there twice.
func (c *run) checkNoLostWrite() {
	r, x := c.result(NoLostWrite), c.x
	checked, skipped := 0, 0
	for _, id := range x.logIDs {
		l := x.logs[id]
		if len(l.writes) == 0 {
			continue
		}
		if l.final < 0 {
			skipped++
			continue
		}
		final := x.op(l.final)
		for _, w := range l.writes {
			typ, n := x.outcome[w], x.inFinal[w]
			checked++
			if x.multi != nil && x.multi[w] > 1 {
				// A write of several records: n counts its records, so judge them record by
				// record. One missing from a write that has others there is a torn
				// transaction (no-torn-txn's); one there twice is a duplicate, as above.
				if t := x.parts[w]; t != nil {
					if t.dup > 0 && typ != history.TypeFail {
						op := x.op(w)
						r.Anomalies = append(r.Anomalies, Anomaly{
							Guarantee: NoLostWrite, Role: op.Role, Log: id.String(), Ops: x.opIDs(w, l.final),
							Explanation: fmt.Sprintf("Write %q (%s op %d, %d records) has %d records in the final log of %s (final read op %d) that repeat one of its records.",
								op.Args.WriteID, op.Kind, op.ID, x.multi[w], t.dup, id, final.ID),
						})
					}
					continue
				}
				n = 0 // none of its records, or only misfits (no-torn-txn's)
			}
			// The operation is read only for an anomaly: reading every write's would cost a
			// cache miss each.
			anomaly := func(op *history.Op, format string, args ...any) {
				r.Anomalies = append(r.Anomalies, Anomaly{
					Guarantee: NoLostWrite, Role: op.Role, Log: id.String(), Ops: x.opIDs(w, l.final),
					Explanation: fmt.Sprintf(format, args...),
				})
			}
			switch {
			case typ == history.TypeFail:
				// a failed write in the log is no-zombie-commit's
			case n > 1:
				op := x.op(w)
				anomaly(&op, "Write %q (%s op %d) is %d times in the final log of %s (final read op %d).",
					op.Args.WriteID, op.Kind, op.ID, n, id, final.ID)
			case n == 1:
			case typ == history.TypeOK:
				op := x.op(w)
				anomaly(&op, "Acknowledged write %q (%s op %d by %s under %s) is missing from the final log of %s (final read op %d).",
					op.Args.WriteID, op.Kind, op.ID, op.Member, op.Args.Token, id, final.ID)
			case x.seenBy[w] >= 0:
				op := x.op(w)
				a := Anomaly{
					Guarantee: NoLostWrite, Role: op.Role, Log: id.String(),
					Ops: x.opIDs(w, x.seenBy[w], l.final), Offsets: []int64{x.seenOff[w]},
					Explanation: fmt.Sprintf("Write %q (%s op %d, outcome unknown) was committed, since read op %d returned it at offset %d, but it is missing from the final log of %s (final read op %d).",
						op.Args.WriteID, op.Kind, op.ID, x.op(x.seenBy[w]).ID, x.seenOff[w], id, final.ID),
				}
				r.Anomalies = append(r.Anomalies, a)
			}
		}
	}
	for _, f := range x.foreign {
		op := x.op(f.write)
		r.Anomalies = append(r.Anomalies, Anomaly{
			Guarantee: NoLostWrite, Role: op.Role, Log: f.log.String(), Ops: []int64{op.ID}, Offsets: []int64{f.offset},
			Explanation: fmt.Sprintf("Write %q (%s op %d) was written to %s but its record is at offset %d of %s.",
				op.Args.WriteID, op.Kind, op.ID, op.Args.Log, f.offset, f.log),
		})
	}
	r.Details["writes"] = checked
	if orphans := len(x.orphans); orphans > 0 {
		n := 0
		for _, v := range x.orphans {
			n += v
		}
		r.Details["records_without_writer"] = n // from before the run, or a recording gap
	}
	if skipped > 0 {
		r.Details["logs_without_final_read"] = skipped
		r.Verdict = Worst(r.Verdict, VerdictInconclusive)
	}
}

// checkNoZombieCommit: no failed write is in any committed read (Jepsen's aborted read, G1a).
func (c *run) checkNoZombieCommit() {
	r, x := c.result(NoZombieCommit), c.x
	failed := 0
	for _, id := range x.logIDs {
		for _, w := range x.logs[id].writes {
			if x.outcome[w] != history.TypeFail {
				continue
			}
			failed++
			if by := x.seenBy[w]; by >= 0 {
				op, reader := x.op(w), x.op(by)
				r.Anomalies = append(r.Anomalies, Anomaly{
					Guarantee: NoZombieCommit, Role: op.Role, Log: reader.Args.Log.String(),
					Ops: x.opIDs(w, by), Offsets: []int64{x.seenOff[w]},
					Explanation: fmt.Sprintf("Write %q (%s op %d by %s under %s) failed (%s), yet %s op %d returned its record at offset %d of %s.",
						op.Args.WriteID, op.Kind, op.ID, op.Member, op.Args.Token, cmp.Or(op.Error, "fail"), reader.Kind, reader.ID, x.seenOff[w], reader.Args.Log),
				})
			}
		}
	}
	r.Details["failed_writes"] = failed
	r.Details["records_read"] = x.records
}

// checkReadPrefix: every read returns a prefix of the final log of what it read, in order.
func (c *run) checkReadPrefix() {
	r, x := c.result(ReadPrefix), c.x
	checked, skipped := 0, 0
	for _, id := range x.logIDs {
		l := x.logs[id]
		if l.final < 0 {
			if len(l.reads) > 0 {
				skipped++
			}
			continue
		}
		final := x.finalRecords(l)
		finalOp := x.op(l.final)
		for i, rd := range l.reads {
			checked++
			m := l.mismatch[i]
			if m < 0 {
				continue
			}
			op := x.op(rd)
			recs := op.Result.Records
			a := Anomaly{Guarantee: ReadPrefix, Role: id.Role, Log: id.String(), Ops: x.opIDs(rd, l.final)}
			if m >= len(final) {
				a.Offsets = []int64{recs[m].Offset}
				a.Explanation = fmt.Sprintf("%s op %d of %s returned %d records, more than the %d of the final log (final read op %d); the first extra is %s.",
					op.Kind, op.ID, id, len(recs), len(final), finalOp.ID, x.describeRecord(&recs[m], x.writerOf(&recs[m])))
			} else {
				a.Offsets = []int64{recs[m].Offset, final[m].Offset}
				a.Explanation = fmt.Sprintf("%s op %d of %s is not a prefix of the final log (final read op %d): at position %d it returned %s where the final log has %s.",
					op.Kind, op.ID, id, finalOp.ID, m, x.describeRecord(&recs[m], x.writerOf(&recs[m])), x.describeRecord(&final[m], l.finalWriter[m]))
			}
			r.Anomalies = append(r.Anomalies, a)
		}
	}
	r.Details["reads"] = checked
	if skipped > 0 {
		r.Details["logs_without_final_read"] = skipped
		r.Verdict = Worst(r.Verdict, VerdictInconclusive)
	}
}

func (x *index) writerOf(rec *history.Record) int32 {
	if rec.Kind == history.RecordRegistration {
		return -1
	}
	if w, ok := x.writes.find(rec.WriteID); ok {
		return w
	}
	return -1
}

// checkReadMonotonic: reads of one log by one process never shrink: a read invoked after
// another returned reaches at least the same offset.
func (c *run) checkReadMonotonic() {
	r, x := c.result(ReadMonotonic), c.x
	checked := 0
	highest := func(rd int32) int64 {
		recs := x.op(rd).Result.Records
		if len(recs) == 0 {
			return -1
		}
		return recs[len(recs)-1].Offset
	}
	for _, id := range x.logIDs {
		byProcess := map[string][]int32{}
		var processes []string
		for _, rd := range x.logs[id].reads {
			op := x.op(rd)
			if op.Kind != history.KindRead {
				continue
			}
			if byProcess[op.Process] == nil {
				processes = append(processes, op.Process)
			}
			byProcess[op.Process] = append(byProcess[op.Process], rd)
		}
		slices.Sort(processes)
		for _, p := range processes {
			reads := byProcess[p]
			checked += len(reads)
			byInvoke, byReturn := x.byTimes(reads)
			j, best := 0, int32(-1)
			for _, next := range byInvoke {
				for j < len(byReturn) && byReturn[j].ret < next.invoke {
					if best < 0 || highest(byReturn[j].op) > highest(best) {
						best = byReturn[j].op
					}
					j++
				}
				b := next.op
				if best >= 0 && highest(b) < highest(best) {
					r.Anomalies = append(r.Anomalies, Anomaly{
						Guarantee: ReadMonotonic, Role: id.Role, Log: id.String(), Ops: x.opIDs(best, b),
						Offsets: []int64{highest(best), highest(b)},
						Explanation: fmt.Sprintf("Process %s read %s up to offset %d (read op %d), then up to offset %d only (read op %d, invoked after the first returned).",
							p, id, highest(best), x.op(best).ID, highest(b), x.op(b).ID),
					})
				}
			}
		}
	}
	r.Details["reads"] = checked
}

// checkRegistrationOrder: every acknowledged registration is in the final log of its role
// once, at the offset it was acknowledged with, as the registration of its member; offsets are
// unique, and a registration acknowledged before another was invoked has the lower offset.
// A registration that failed (certainly not applied) is not in the log: no member has more
// registration records than registrations that did not fail, even a member whose every
// registration failed.
func (c *run) checkRegistrationOrder() {
	r, x := c.result(RegistrationOrder), c.x
	checked, skipped, failedRegs := 0, 0, 0
	for _, role := range x.roles {
		var regs []int32
		attempts := map[string]int{}   // registrations that did not fail, by member
		tried := map[string][]int32{}  // the same, as ops, for the anomaly that counts them
		failed := map[string][]int32{} // registrations that failed, by member
		for _, ro := range x.byRole[role].ops {
			if ro.kind != opRegister {
				continue
			}
			id := ro.op
			op := x.op(id)
			if op.Type == history.TypeFail {
				failed[op.Member] = append(failed[op.Member], id)
				failedRegs++
			} else {
				attempts[op.Member]++
				tried[op.Member] = append(tried[op.Member], id)
			}
			if op.Type == history.TypeOK {
				regs = append(regs, id)
			}
		}
		if len(regs) == 0 && len(failed) == 0 {
			continue
		}
		l := x.logs[history.RoleLog(role)]
		if l.final < 0 {
			skipped++
			continue
		}
		checked += len(regs)
		final := x.finalRecords(l)
		log := l.id.String()
		add := func(ops []int64, offsets []int64, format string, args ...any) {
			r.Anomalies = append(r.Anomalies, Anomaly{Guarantee: RegistrationOrder, Role: role, Log: log,
				Ops: ops, Offsets: offsets, Explanation: fmt.Sprintf(format, args...)})
		}
		byOffset := map[int64]int32{}
		for _, id := range regs {
			op := x.op(id)
			off := *op.Result.Offset
			if prev, dup := byOffset[off]; dup {
				add(x.opIDs(prev, id), []int64{off}, "Registrations op %d (%s) and op %d (%s) were both acknowledged at offset %d.",
					x.op(prev).ID, x.op(prev).Member, op.ID, op.Member, off)
				continue
			}
			byOffset[off] = id
			p, found := slices.BinarySearchFunc(final, off, func(rec history.Record, o int64) int { return cmp.Compare(rec.Offset, o) })
			switch {
			case !found:
				add(x.opIDs(id, l.final), []int64{off}, "Registration of %s (op %d) was acknowledged at offset %d, which the final log of %s does not hold.",
					op.Member, op.ID, off, role)
			case final[p].Kind != history.RecordRegistration || final[p].Member != op.Member:
				add(x.opIDs(id, l.final), []int64{off}, "Registration of %s (op %d) was acknowledged at offset %d, where the final log of %s holds %s.",
					op.Member, op.ID, off, role, x.describeRecord(&final[p], l.finalWriter[p]))
			}
		}
		// Real-time order: acknowledged before invoked means a lower offset.
		byInvoke, byReturn := x.byTimes(regs)
		offset := func(id int32) int64 { return *x.op(id).Result.Offset }
		j, best := 0, int32(-1)
		for _, next := range byInvoke {
			for j < len(byReturn) && byReturn[j].ret < next.invoke {
				if best < 0 || offset(byReturn[j].op) > offset(best) {
					best = byReturn[j].op
				}
				j++
			}
			b := next.op
			if best >= 0 && offset(best) > offset(b) {
				add(x.opIDs(best, b), []int64{offset(best), offset(b)},
					"Registration of %s (op %d) got offset %d, below offset %d of the registration of %s (op %d) that was acknowledged before it was invoked.",
					x.op(b).Member, x.op(b).ID, offset(b), offset(best), x.op(best).Member, x.op(best).ID)
			}
		}
		// Once, and never a failed one: no member of this run has more registration records
		// than registrations that did not fail. (Records of members that never registered in
		// this run are not judged: they may predate it.)
		records := map[string][]int64{}
		for _, rec := range final {
			if rec.Kind == history.RecordRegistration {
				records[rec.Member] = append(records[rec.Member], rec.Offset)
			}
		}
		members := make([]string, 0, len(records))
		for m := range records {
			members = append(members, m)
		}
		slices.Sort(members)
		for _, m := range members {
			n, k, f := len(records[m]), attempts[m], failed[m]
			switch {
			case n <= k || (k == 0 && len(f) == 0):
			case len(f) == 0:
				add(x.opIDs(append(tried[m], l.final)...), records[m], "Member %s has %d registration records in the final log of %s but registered %d times.",
					m, n, role, k)
			case k == 0:
				add(append(x.opIDs(f...), x.op(l.final).ID), records[m],
					"Member %s has %d registration record(s) in the final log of %s, but its only registration(s) (%s) failed: a registration that certainly did not happen was applied.",
					m, n, role, x.opList(f))
			default:
				add(append(x.opIDs(f...), x.op(l.final).ID), records[m],
					"Member %s has %d registration records in the final log of %s, but only %d of its registrations did not fail (%s failed): a registration that certainly did not happen was applied.",
					m, n, role, k, x.opList(f))
			}
		}
	}
	r.Details["registrations"] = checked
	if failedRegs > 0 {
		r.Details["failed_registrations"] = failedRegs
	}
	if skipped > 0 {
		r.Details["roles_without_final_read"] = skipped
		r.Verdict = Worst(r.Verdict, VerdictInconclusive)
	}
}
