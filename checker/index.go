package checker

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/fencecheck/fencecheck/checker/history"
)

// index is the history organized for the checks: operations by role and by log, writes by
// write id, the final committed log of every log, and for every write where committed reads
// saw it. Building it is one sequential pass over the operations plus one over the records of
// the final reads; every check reads it and none changes it.
type index struct {
	h   *history.History
	cfg *config

	roles  []string // every role an operation names, sorted
	byRole map[string]*roleData
	writes map[string]int32 // write id → its write op
	logs   map[history.LogID]*logInfo
	logIDs []history.LogID // sorted: lease logs by role, then work partitions

	// Per operation, meaningful for writes: the earliest completion of a committed read
	// (final reads included) holding the write's record, that read, and the record's offset;
	// and how many times the record is in the final read of the write's own log.
	seenAt  []int64
	seenBy  []int32
	seenOff []int64
	inFinal []int32

	foreign   []foreignRecord // records found in a log other than their write's
	orphans   map[history.LogID]int
	malformed []Anomaly // well-formed violations
	// illFormedOps and illFormedRoles are the operations (by id) and the roles that a
	// well-formed violation names: no model check runs on such a role, and no anomaly that
	// cites such an operation counts (see run.finish).
	illFormedOps   map[int64]bool
	illFormedRoles map[string]bool
	records        int
	finalCount     int
}

// roleData holds what the model check, the exposure and coverage need of a role's
// register, acquire, write and describe operations, copied out of the history in two
// sequential passes, so the per-role work does not chase operations all over the history.
type roleData struct {
	ops     []roleOp // in history order
	members []memberKey
	log     *logInfo // the role's lease log, once an operation names it
	// On a cluster that hashes producer ids: the order of the role's producer ids (nil when
	// it has one), or why their order is not established (see orderPIDs).
	rot       *rotation
	unordered string
}

type memberKey struct{ process, member string }

// roleOp is one operation of a role, in 40 bytes.
type roleOp struct {
	invoke, ret int64
	pid         int64 // token: a write's, or an acquire's or a describe's result; -1 if none
	op          int32 // index in History.Ops
	epoch       int16
	member      uint16 // index in roleData.members
	kind        opKind
	typ         history.EventType
	flags       uint8
}

// opKind is a role operation's kind, in a byte.
type opKind uint8

const (
	opRegister opKind = iota + 1
	opAcquire
	opWriteLease
	opWork
	opDescribe
)

func (k opKind) isWrite() bool { return k == opWriteLease || k == opWork }

func toOpKind(k history.Kind) opKind {
	switch k {
	case history.KindRegister:
		return opRegister
	case history.KindAcquire:
		return opAcquire
	case history.KindWriteLease:
		return opWriteLease
	case history.KindWork:
		return opWork
	case history.KindDescribe:
		return opDescribe
	}
	return 0
}

const (
	flagFenced  uint8 = 1 << iota // failed with ErrorFenced
	flagNotHeld                   // failed with ErrorNotHeld
	flagHeld                      // a describe that reported a holder
)

func (r *roleOp) token() history.Token {
	return history.Token{ProducerID: r.pid, Epoch: r.epoch}
}
func (r *roleOp) fenced() bool  { return r.flags&flagFenced != 0 }
func (r *roleOp) notHeld() bool { return r.flags&flagNotHeld != 0 }
func (r *roleOp) held() bool    { return r.flags&flagHeld != 0 }

func (rd *roleData) memberIndex(process, member string) uint16 {
	for i, m := range rd.members {
		if m.member == member && m.process == process {
			return uint16(i)
		}
	}
	rd.members = append(rd.members, memberKey{process, member})
	return uint16(len(rd.members) - 1)
}

// logInfo is one committed log.
type logInfo struct {
	id     history.LogID
	final  int32   // the final read: the last ok final-read of the log; -1 if none
	reads  []int32 // every other ok read of the log, in history order
	writes []int32 // write ops into the log
	// mismatch[i] is, for reads[i], -1 when it is a prefix of the final log, else the first
	// position where it differs (len(final) when it is longer). Unset without a final read.
	mismatch []int
	// finalWriter[p] is the write op of the final log's record p, or -1.
	finalWriter []int32
}

type foreignRecord struct {
	write  int32
	log    history.LogID
	offset int64
}

func (x *index) op(i int32) *history.Op { return &x.h.Ops[i] }

func (x *index) finalRecords(l *logInfo) []history.Record {
	if l.final < 0 {
		return nil
	}
	return x.op(l.final).Result.Records
}

func newIndex(h *history.History, cfg *config) *index {
	n := len(h.Ops)
	x := &index{
		h: h, cfg: cfg,
		byRole:  map[string]*roleData{},
		writes:  make(map[string]int32, n/2),
		logs:    map[history.LogID]*logInfo{},
		seenAt:  make([]int64, n),
		seenBy:  make([]int32, n),
		seenOff: make([]int64, n),
		inFinal: make([]int32, n),
		orphans: map[history.LogID]int{},

		illFormedOps:   map[int64]bool{},
		illFormedRoles: map[string]bool{},
	}
	log := func(id history.LogID) *logInfo {
		l := x.logs[id]
		if l == nil {
			l = &logInfo{id: id, final: -1}
			x.logs[id] = l
		}
		return l
	}
	// logOf finds op's log without hashing a LogID per operation: a lease log hangs off its
	// role, a work partition off a small table.
	workLogs := map[int32]*logInfo{}
	logOf := func(op *history.Op, rd *roleData) *logInfo {
		id := op.Args.Log
		switch {
		case id.Work:
			l := workLogs[id.Partition]
			if l == nil {
				l = log(id)
				workLogs[id.Partition] = l
			}
			return l
		case rd != nil && id.Role == op.Role:
			if rd.log == nil {
				rd.log = log(id)
			}
			return rd.log
		}
		return log(id)
	}
	// Pass 1: each operation's role (an index into roleList) and how many each role has.
	roleOf := make([]int32, n)
	roleIndex := map[string]int32{}
	var roleList []string
	var counts []int
	for i := range h.Ops {
		op := &h.Ops[i]
		roleOf[i] = -1
		if op.Role == "" {
			if toOpKind(op.Kind) != 0 {
				x.malform(op, "a %s names no role", op.Kind)
			}
			continue
		}
		r, ok := roleIndex[op.Role]
		if !ok {
			r = int32(len(roleList))
			roleIndex[op.Role] = r
			roleList = append(roleList, op.Role)
			counts = append(counts, 0)
		}
		roleOf[i] = r
		if toOpKind(op.Kind) != 0 {
			counts[r]++
		}
	}
	all := make([]roleOp, 0, n)
	rds := make([]*roleData, len(roleList))
	for r, role := range roleList {
		rds[r] = &roleData{ops: all[len(all) : len(all) : len(all)+counts[r]]}
		all = all[:len(all)+counts[r]]
		x.byRole[role] = rds[r]
	}
	// Pass 2: copy the role operations out; index writes and reads by log.
	for i := range h.Ops {
		op := &h.Ops[i]
		id := int32(i)
		x.seenAt[i], x.seenBy[i] = history.Never, -1
		switch {
		case history.CheckTime(op.Invoke) != nil:
			x.malform(op, "was invoked at %d, outside the times a history may carry (0 to %d)", op.Invoke, history.MaxTime)
		case op.Pending:
		case history.CheckTime(op.Return) != nil:
			x.malform(op, "completed at %d, outside the times a history may carry (0 to %d)", op.Return, history.MaxTime)
		case op.Return < op.Invoke:
			x.malform(op, "completed at %d, before it was invoked at %d", op.Return, op.Invoke)
		}
		var rd *roleData
		if roleOf[i] >= 0 {
			rd = rds[roleOf[i]]
		}
		if k := toOpKind(op.Kind); k != 0 && rd != nil {
			ro := roleOp{
				invoke: op.Invoke, ret: op.Return, pid: -1, epoch: -1, op: id,
				member: rd.memberIndex(op.Process, op.Member), kind: k, typ: op.Type,
			}
			switch {
			case k.isWrite():
				ro.pid, ro.epoch = op.Args.Token.ProducerID, op.Args.Token.Epoch
			case op.Result.Token != nil:
				ro.pid, ro.epoch = op.Result.Token.ProducerID, op.Result.Token.Epoch
			}
			switch op.Error {
			case history.ErrorFenced:
				ro.flags |= flagFenced
			case history.ErrorNotHeld:
				ro.flags |= flagNotHeld
			}
			if op.Result.Held {
				ro.flags |= flagHeld
			}
			rd.ops = append(rd.ops, ro)
		}
		switch {
		case op.Kind.IsWrite():
			if prev, dup := x.writes[op.Args.WriteID]; dup {
				x.malform(op, "reuses write id %q of op %d", op.Args.WriteID, h.Ops[prev].ID)
				continue
			}
			if !op.Args.Token.Valid() {
				x.malform(op, "writes under no token")
			}
			x.writes[op.Args.WriteID] = id
			l := logOf(op, rd)
			l.writes = append(l.writes, id)
		case op.Kind.IsRead():
			if !op.Args.Log.Work && op.Args.Log.Role == "" {
				x.malform(op, "reads neither a role's lease log nor a work partition")
				continue
			}
			l := logOf(op, rd)
			if op.Type == history.TypeOK {
				l.reads = append(l.reads, id)
				x.records += len(op.Result.Records)
			}
		}
	}
	for i := range h.Faults {
		f := &h.Faults[i]
		if history.CheckTime(f.Start) != nil || (f.End != history.Never && history.CheckTime(f.End) != nil) {
			x.malformed = append(x.malformed, Anomaly{Guarantee: WellFormed,
				Explanation: fmt.Sprintf("Fault %d runs from %d to %d, outside the times a history may carry (0 to %d).", f.ID, f.Start, f.End, history.MaxTime)})
		}
	}
	for role, rd := range x.byRole {
		x.roles = append(x.roles, role)
		log(history.RoleLog(role))
		if cfg.hashedPIDs {
			rd.rot, rd.unordered = x.orderPIDs(rd)
		}
	}
	for id := range x.logs {
		x.logIDs = append(x.logIDs, id)
	}
	slices.Sort(x.roles)
	slices.SortFunc(x.logIDs, compareLogs)
	for _, id := range x.logIDs {
		x.analyzeLog(x.logs[id])
	}
	return x
}

func compareLogs(a, b history.LogID) int {
	if a.Work != b.Work {
		if a.Work {
			return 1
		}
		return -1
	}
	if c := cmp.Compare(a.Role, b.Role); c != 0 {
		return c
	}
	return cmp.Compare(a.Partition, b.Partition)
}

func (x *index) malform(op *history.Op, format string, args ...any) {
	x.illFormedOps[op.ID] = true
	if op.Role != "" {
		x.illFormedRoles[op.Role] = true
	}
	x.malformed = append(x.malformed, Anomaly{
		Guarantee: WellFormed, Role: op.Role, Ops: []int64{op.ID},
		Explanation: fmt.Sprintf("op %d ", op.ID) + fmt.Sprintf(format, args...) + ".",
	})
}

// analyzeLog picks the log's final read, compares every other read with it, and records for
// every write where committed reads saw it. A read that is a prefix of the final log (the
// normal case) is handled by its length alone: record p of the final log was first seen by the
// earliest-completing read longer than p. Only reads that are not prefixes are walked record
// by record.
func (x *index) analyzeLog(l *logInfo) {
	for _, r := range l.reads {
		op := x.op(r)
		if op.Kind == history.KindFinalRead && (l.final < 0 || op.Return >= x.op(l.final).Return) {
			l.final = r
		}
	}
	if l.final >= 0 {
		x.finalCount++
		l.reads = slices.DeleteFunc(l.reads, func(r int32) bool { return r == l.final })
	}
	final := x.finalRecords(l)
	l.finalWriter = make([]int32, len(final))
	for p := range final {
		rec := &final[p]
		l.finalWriter[p] = -1
		if rec.Kind == history.RecordRegistration {
			continue
		}
		w, ok := x.writes[rec.WriteID]
		if !ok {
			x.orphans[l.id]++
			continue
		}
		l.finalWriter[p] = w
		if x.op(w).Args.Log != l.id {
			x.foreign = append(x.foreign, foreignRecord{write: w, log: l.id, offset: rec.Offset})
			continue
		}
		x.inFinal[w]++
	}

	// Reads that are prefixes, by completion time; the others record by record.
	var prefixes []int32
	if l.final >= 0 {
		l.mismatch = make([]int, len(l.reads))
	}
	for i, r := range l.reads {
		recs := x.op(r).Result.Records
		if l.final >= 0 {
			l.mismatch[i] = prefixMismatch(recs, final)
			if l.mismatch[i] < 0 {
				prefixes = append(prefixes, r)
				continue
			}
		}
		for _, rec := range recs {
			if rec.Kind == history.RecordRegistration {
				continue
			}
			if w, ok := x.writes[rec.WriteID]; ok {
				x.see(w, r, rec.Offset)
			}
		}
	}
	slices.SortFunc(prefixes, func(a, b int32) int { return cmp.Compare(x.op(a).Return, x.op(b).Return) })
	if l.final >= 0 {
		prefixes = append(prefixes, l.final) // the final read sees the rest
	}
	seen := 0
	for _, r := range prefixes {
		n := len(x.op(r).Result.Records)
		for p := seen; p < n; p++ {
			if w := l.finalWriter[p]; w >= 0 {
				x.see(w, r, final[p].Offset)
			}
		}
		seen = max(seen, n)
	}
}

// see notes that committed read r returned write w's record at offset off.
func (x *index) see(w, r int32, off int64) {
	if t := x.op(r).Return; t < x.seenAt[w] {
		x.seenAt[w], x.seenBy[w], x.seenOff[w] = t, r, off
	}
}

// prefixMismatch returns -1 when read is a prefix of final, else the first position where
// they differ.
func prefixMismatch(read, final []history.Record) int {
	if len(read) == 0 || (len(read) <= len(final) && &read[0] == &final[0]) {
		return -1 // the reader shared the records of the same array (history.Builder)
	}
	for i := range read {
		if i >= len(final) || read[i] != final[i] {
			return i
		}
	}
	return -1
}

// commit says what is known of whether a write committed.
type commit uint8

const (
	commitUnknown commit = iota // no committed read saw it and its log has no final read
	commitYes                   // a committed read holds its record
	commitNo                    // the final read of its log does not hold it
)

// committed resolves a write from the committed reads (docs/checker.md, "Resolving
// unknown writes from the log").
func (x *index) committed(w int32) commit {
	if x.seenAt[w] != history.Never {
		return commitYes
	}
	if x.logs[x.op(w).Args.Log].final >= 0 {
		return commitNo
	}
	return commitUnknown
}
