package checker

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"unsafe"

	"github.com/fencecheck/fencecheck/checker/history"
)

// index is the history organized for the checks: operations by role and by log, writes by
// write id, the final committed log of every log, and for every write where committed reads
// saw it. Building it is one sequential pass over the operations plus one over the records of
// the final reads; every check reads it and none changes it.
type index struct {
	h   *history.History
	cfg *config

	// roles are the roles operations name, sorted; a role's number is its index here, in
	// roleData and in roleOf.
	roles    []string
	roleData []*roleData
	roleOf   []int32 // per operation: its role's number, -1 when it names none
	byRole   map[string]*roleData
	writes   *writeIDs // write id → its write op
	logs     map[history.LogID]*logInfo
	logList  []*logInfo         // by logInfo.num: in the order operations first named them
	workLogs map[int32]*logInfo // work partition → its log
	roleLogs []*logInfo         // by role number: its lease log, once an operation names it
	logIDs   []history.LogID    // sorted: lease logs by role, then work partitions
	opLog    []int32            // per operation: the num of the log it writes or reads, -1 if none
	// outcome is every operation's type (a pending one is TypeInfo): the checks that walk a
	// log's writes read it here, not in the history, where each would be a cache miss.
	outcome []history.EventType
	// tally counts, for coverage, the failed final reads, the ok operations other than final
	// reads, and the writes fenced.
	tally struct{ failedFinalReads, ok, fenced int }

	// Per operation, meaningful for writes: the earliest completion of a committed read
	// (final reads included) holding the write's record, that read, and the record's offset;
	// and how many times the record is in the final read of the write's own log.
	seenAt  []int64
	seenBy  []int32
	seenOff []int64
	inFinal []int32

	// Writes of several records (Args.Records above 1): their record count, and per write
	// which of its records the final log of its log holds (see notePart); nil in a history
	// of single-record writes, which then pays nothing for them.
	multi map[int32]uint16
	parts map[int32]*txnParts
	// misfits are the records of final logs whose index or count does not fit their write.
	misfits []misfit

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
	// memberNums are the members' process and member numbers (see memberNum), beside
	// members; noMemberNum for one named only by an operation kept whole.
	memberNums []uint64
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

// memberNum is memberIndex for the process and member that h numbers so (see
// history.Brief): the numbers are compared, not the names, and the names only on a miss.
func (rd *roleData) memberNum(h *history.History, process, member uint32) uint16 {
	key := uint64(process)<<32 | uint64(member)
	for i, k := range rd.memberNums {
		if k == key {
			return uint16(i)
		}
	}
	i := rd.memberIndex(h.Name(process), h.Name(member))
	for len(rd.memberNums) < len(rd.members) {
		rd.memberNums = append(rd.memberNums, noMemberNum)
	}
	rd.memberNums[i] = key
	return i
}

// noMemberNum marks a member in roleData.memberNums that was named by an operation kept
// whole, not by numbers: no key equals it (a history has fewer than 2^32 - 1 names).
const noMemberNum = ^uint64(0)

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
	num    int32   // its index in index.logList
	final  int32   // the final read: the last ok final-read of the log; -1 if none
	reads  []int32 // every other ok read of the log, in history order
	writes []int32 // write ops into the log
	// hashes, ids and toks are the hashes of the writes' ids (writeIDs.hash), the ids and
	// the tokens, as writes: resolveLog reads them in order, where reading the writes from
	// the history would be a cache miss or two a write.
	hashes []uint64
	ids    []string
	toks   []history.Token
	// mismatch[i] is, for reads[i], -1 when it is a prefix of the final log, else the first
	// position where it differs (len(final) when it is longer). Unset without a final read.
	mismatch []int
	// finalWriter[p] is the write op of the final log's record p, or -1.
	finalWriter []int32
	// restamped lists, in order, the positions p of the final log whose record carries
	// another token than its writer ran under (log-token-order): usually none.
	restamped []int
}

type foreignRecord struct {
	write  int32
	log    history.LogID
	offset int64
}

// op returns operation i, a copy out of the history's compact form (history.History.Op):
// the passes over every operation Load into one Op instead, and the checks that walk a log's
// writes read x.outcome, reading an operation only to describe it.
func (x *index) op(i int32) history.Op { return x.h.Op(int(i)) }

func (x *index) finalRecords(l *logInfo) []history.Record {
	if l.final < 0 {
		return nil
	}
	return x.op(l.final).Result.Records
}

// newIndex builds the index of h: one pass numbering the roles, one copying the role
// operations out and filing writes and reads by log, then one over the records of every log's
// final read (analyzeLog).
func newIndex(h *history.History, cfg *config) *index {
	n := h.Len()
	x := &index{
		h: h, cfg: cfg,
		logs:    map[history.LogID]*logInfo{},
		opLog:   make([]int32, n),
		seenAt:  make([]int64, n),
		seenBy:  make([]int32, n),
		seenOff: make([]int64, n),
		inFinal: make([]int32, n),
		orphans: map[history.LogID]int{},

		illFormedOps:   map[int64]bool{},
		illFormedRoles: map[string]bool{},
	}
	writes := x.numberRoles()
	// Copying the role operations and filing the writes and reads touch different parts of
	// the index (and only the second finds malformed operations, in history order as
	// before): each is about a third of building it, so they run on two cores.
	var copying sync.WaitGroup
	copying.Go(x.copyRoleOps)
	x.writes = newWriteIDs(h, writes)
	x.fileOps()
	x.keepWriteIDs(writes)
	copying.Wait()
	x.checkFaultTimes()
	for r, role := range x.roles {
		x.log(history.RoleLog(role))
		if cfg.hashedPIDs {
			rd := x.roleData[r]
			rd.rot, rd.unordered = x.orderPIDs(rd)
		}
	}
	for id := range x.logs {
		x.logIDs = append(x.logIDs, id)
	}
	slices.SortFunc(x.logIDs, compareLogs)
	x.resolveLogs()
	for _, id := range x.logIDs {
		x.analyzeLog(x.logs[id])
	}
	return x
}

// resolveLogs runs resolveLog on every log, through the model check's pool: it only reads
// the index, and its write-id lookups are most of the time analyzing logs takes. Indexing
// is not cancelled, so no log is left out.
func (x *index) resolveLogs() {
	x.pool(context.Background(), len(x.logList), func(_, i int) { x.resolveLog(x.logList[i]) }, nil)
}

// resolveLog picks the log's final read (the last ok final read), finds the write of every
// record of it (finalWriter) and the records stamped with another token (restamped), and
// where every other read departs from the final log (mismatch). It writes only l.
func (x *index) resolveLog(l *logInfo) {
	for _, r := range l.reads {
		op := x.op(r)
		if op.Kind == history.KindFinalRead && (l.final < 0 || op.Return >= x.op(l.final).Return) {
			l.final = r
		}
	}
	if l.final < 0 {
		return
	}
	l.reads = slices.DeleteFunc(l.reads, func(r int32) bool { return r == l.final })
	final := x.finalRecords(l)
	l.finalWriter = make([]int32, len(final))
	next := 0 // in l.writes, just after the write of the last record found there
	for p := range final {
		l.finalWriter[p] = -1
		if rec := &final[p]; rec.Kind != history.RecordRegistration {
			if w, k := x.writerIn(l, rec.WriteID, &next); w >= 0 {
				l.finalWriter[p] = w
				tok := l.toks[max(k, 0)]
				if k < 0 { // a write of another log
					tok = x.h.WriteToken(int(w))
				}
				if tok != rec.Token {
					l.restamped = append(l.restamped, p)
				}
			}
		}
	}
	l.mismatch = make([]int, len(l.reads))
	for i, r := range l.reads {
		l.mismatch[i] = prefixMismatch(x.op(r).Result.Records, final)
	}
}

// ahead and behind are how far from the write of the previous record writerIn looks for a
// record's write in its log's writes, before it searches all the writes. Records stray
// further from their writes' order the more roles share a work partition: a thousand roles
// on 16 partitions put records up to 26 places behind; comparing a hash costs a few
// nanoseconds, a search of all the writes a microsecond or two.
const ahead, behind = 128, 1024

// writerIn returns the write whose record has write id id, found in log l, and its place in
// l.writes (-1 when it is another log's write), or -1, -1 when no write has it; *next is
// where in l.writes the previous record's write was found, plus one (0 at the first record).
// A log's records come nearly in the order their writes were invoked, which is the order of
// l.writes: the writes after the previous record's (those that did not commit) and before it
// (those that committed later than writes invoked after them, as on a work partition many
// roles write) are compared first, by their ids' hashes in l.hashes, read in memory order,
// and a write whose hash matches by its id (in l.ids). A search of x.writes is a cache miss at every
// step. l.writes holds only writes filed in x.writes, whose ids are unique, so a write found
// there is the one x.writes names.
func (x *index) writerIn(l *logInfo, id string, next *int) (w int32, k int) {
	n, hash := *next, x.writes.hash(id)
	is := func(k int) bool { return l.hashes[k] == hash && l.ids[k] == id }
	if n > 0 && is(n-1) { // the previous record's write again: one of several records
		return l.writes[n-1], n - 1
	}
	for k := n; k < min(len(l.writes), n+ahead); k++ {
		if is(k) {
			*next = k + 1
			return l.writes[k], k
		}
	}
	for k := n - 2; k >= max(n-behind, 0); k-- {
		if is(k) {
			*next = k + 1
			return l.writes[k], k
		}
	}
	w, ok := x.writes.find(id)
	if !ok {
		return -1, -1
	}
	if x.opLog[w] != l.num {
		return w, -1
	}
	k, _ = slices.BinarySearch(l.writes, w) // l.writes is in history order
	*next = k + 1                           // the next record's write is near
	return w, k
}

// count adds an operation of kind that completed as typ with error class errc to x.tally.
func (x *index) count(kind history.Kind, typ history.EventType, errc string) {
	switch {
	case kind == history.KindFinalRead:
		if typ != history.TypeOK {
			x.tally.failedFinalReads++
		}
	case typ == history.TypeOK:
		x.tally.ok++
	case kind.IsWrite() && typ == history.TypeFail && errc == history.ErrorFenced:
		x.tally.fenced++
	}
}

// numberRoles numbers the roles in name order and sets x.roles, x.roleOf and x.roleData, with
// every role's ops slice carved out of one array at the size it will have: the role
// operations then sit together, in one allocation, and fileOps appends without growing. It
// returns the write operations, in history order.
func (x *index) numberRoles() (writes []int32) {
	h := x.h
	x.roleOf = make([]int32, h.Len())
	x.outcome = make([]history.EventType, h.Len())
	number := map[string]int32{} // in the order roles first appear
	type roleSlot struct {
		p    *byte // a role name's bytes: strings never change, and the slot keeps them
		n    int
		role int32
	}
	// 8,192 slots, 64 - 51 bits of a hash: of a thousand roles, about six in ten share one
	// of 1,024 slots with another role, one in nine one of 8,192.
	cache := make([]roleSlot, 1<<13)
	var counts []int // role operations, by first-appearance number
	// Room for every operation: growing by append's quarter allocated three times as much.
	writes = make([]int32, 0, h.Len())
	var op history.Op
	var b history.Brief
	for i := range h.Len() {
		var role string
		if h.LoadBrief(i, &b) {
			role = h.Name(b.Role)
		} else {
			h.Load(i, &op)
			role = op.Role
			b = history.Brief{Kind: op.Kind, Type: op.Type, Error: op.Error}
		}
		x.roleOf[i] = -1
		x.outcome[i] = b.Type
		x.count(b.Kind, b.Type, b.Error)
		if b.Kind.IsWrite() {
			writes = append(writes, int32(i))
		}
		if role == "" {
			if toOpKind(b.Kind) != 0 {
				h.Load(i, &op)
				x.malform(&op, "a %s names no role", op.Kind)
			}
			continue
		}
		// A history holds each name once (History.Name gives the same string for it every
		// time), so the role is first looked up by the address of its bytes: a million
		// operations name a thousand roles, and hashing each name was most of this pass.
		p := unsafe.StringData(role)
		slot := &cache[uint64(uintptr(unsafe.Pointer(p)))*0x9e3779b97f4a7c15>>51]
		r := slot.role
		if slot.p != p || slot.n != len(role) {
			var ok bool
			if r, ok = number[role]; !ok {
				r = int32(len(x.roles))
				number[role] = r
				x.roles = append(x.roles, role)
				counts = append(counts, 0)
			}
			*slot = roleSlot{p, len(role), r}
		}
		x.roleOf[i] = r
		if toOpKind(b.Kind) != 0 {
			counts[r]++
		}
	}
	// Renumber in name order, so that role r is x.roles[r] everywhere.
	byName := make([]int32, len(x.roles)) // name order → first-appearance number
	for r := range byName {
		byName[r] = int32(r)
	}
	slices.SortFunc(byName, func(a, b int32) int { return cmp.Compare(x.roles[a], x.roles[b]) })
	renumber := make([]int32, len(x.roles)) // first-appearance number → name order
	sorted := make([]string, len(x.roles))
	for r, first := range byName {
		renumber[first] = int32(r)
		sorted[r] = x.roles[first]
	}
	x.roles = sorted
	for i, r := range x.roleOf {
		if r >= 0 {
			x.roleOf[i] = renumber[r]
		}
	}
	total := 0
	for _, c := range counts {
		total += c
	}
	all := make([]roleOp, 0, total)
	x.roleData = make([]*roleData, len(x.roles))
	x.byRole = make(map[string]*roleData, len(x.roles))
	for r, first := range byName {
		c := counts[first]
		x.roleData[r] = &roleData{ops: all[len(all) : len(all) : len(all)+c]}
		all = all[:len(all)+c]
		x.byRole[x.roles[r]] = x.roleData[r]
	}
	return writes
}

// copyRoleOps copies every role operation into its role, and marks every operation not yet
// seen by a committed read.
func (x *index) copyRoleOps() {
	h := x.h
	var op history.Op
	var b history.Brief
	for i := range h.Len() {
		x.seenAt[i], x.seenBy[i] = history.Never, -1
		r := x.roleOf[i]
		if r < 0 {
			continue
		}
		rd := x.roleData[r]
		if h.LoadBrief(i, &b) {
			if k := toOpKind(b.Kind); k != 0 {
				rd.ops = append(rd.ops, briefRoleOp(&b, int32(i), k, rd.memberNum(h, b.Process, b.Member)))
			}
			continue
		}
		h.Load(i, &op)
		if k := toOpKind(op.Kind); k != 0 {
			rd.ops = append(rd.ops, newRoleOp(&op, int32(i), k, rd))
		}
	}
}

// fileOps checks every operation's times, and files writes (by write id and by log) and ok
// reads by log. It touches no roleData (it keeps the roles' lease logs in x.roleLogs), so it
// may run while copyRoleOps fills them.
func (x *index) fileOps() {
	h := x.h
	x.roleLogs = make([]*logInfo, len(x.roles))
	var op history.Op
	var b history.Brief
	for i := range h.Len() {
		x.opLog[i] = -1
		if h.LoadBrief(i, &b) && !b.Kind.IsWrite() && !b.Kind.IsRead() {
			// Only the times to check: the whole operation only to name a fault.
			if badTimes(b.Invoke, b.Return, b.Pending) {
				h.Load(i, &op)
				x.checkOpTimes(&op)
			}
			continue
		}
		h.Load(i, &op)
		x.checkOpTimes(&op)
		switch r := x.roleOf[i]; {
		case op.Kind.IsWrite():
			x.fileWrite(&op, int32(i), r)
		case op.Kind.IsRead():
			x.fileRead(&op, int32(i), r)
		}
	}
}

// keepWriteIDs sets every log's hashes, ids and toks, from writes (every write, in history
// order): each log's carved out of one array at its size, filled in one pass that reads the
// writes in memory order (appending them as fileWrite filed them allocated four times as
// much).
func (x *index) keepWriteIDs(writes []int32) {
	hashes := make([]uint64, 0, len(writes))
	ids := make([]string, 0, len(writes))
	toks := make([]history.Token, 0, len(writes))
	for _, l := range x.logList {
		n := len(l.writes)
		l.hashes, hashes = hashes[len(hashes):len(hashes):len(hashes)+n], hashes[:len(hashes)+n]
		l.ids, ids = ids[len(ids):len(ids):len(ids)+n], ids[:len(ids)+n]
		l.toks, toks = toks[len(toks):len(toks):len(toks)+n], toks[:len(toks)+n]
	}
	for _, w := range writes {
		if n := x.opLog[w]; n >= 0 { // filed: in l.writes, in this order
			l := x.logList[n]
			id := x.h.WriteID(int(w))
			l.hashes = append(l.hashes, x.writes.hash(id))
			l.ids = append(l.ids, id)
			l.toks = append(l.toks, x.h.WriteToken(int(w)))
		}
	}
}

// badTimes reports whether checkOpTimes finds fault with an operation invoked at invoke
// and completed at ret (unless pending).
func badTimes(invoke, ret int64, pending bool) bool {
	return history.CheckTime(invoke) != nil || !pending && (history.CheckTime(ret) != nil || ret < invoke)
}

// checkOpTimes reports an operation whose times a history may not carry.
func (x *index) checkOpTimes(op *history.Op) {
	switch {
	case history.CheckTime(op.Invoke) != nil:
		x.malform(op, "was invoked at %d, outside the times a history may carry (0 to %d)", op.Invoke, history.MaxTime)
	case op.Pending:
	case history.CheckTime(op.Return) != nil:
		x.malform(op, "completed at %d, outside the times a history may carry (0 to %d)", op.Return, history.MaxTime)
	case op.Return < op.Invoke:
		x.malform(op, "completed at %d, before it was invoked at %d", op.Return, op.Invoke)
	}
}

// briefRoleOp is newRoleOp from an operation's brief, its member's index in its role given.
func briefRoleOp(b *history.Brief, i int32, k opKind, member uint16) roleOp {
	ro := roleOp{
		invoke: b.Invoke, ret: b.Return, pid: -1, epoch: -1, op: i,
		member: member, kind: k, typ: b.Type,
	}
	if b.Token != history.NoToken {
		ro.pid, ro.epoch = b.Token.ProducerID, b.Token.Epoch
	}
	switch b.Error {
	case history.ErrorFenced:
		ro.flags |= flagFenced
	case history.ErrorNotHeld:
		ro.flags |= flagNotHeld
	}
	if b.Held {
		ro.flags |= flagHeld
	}
	return ro
}

// newRoleOp copies what the role checks need of op (at index i, of kind k, in role rd).
func newRoleOp(op *history.Op, i int32, k opKind, rd *roleData) roleOp {
	ro := roleOp{
		invoke: op.Invoke, ret: op.Return, pid: -1, epoch: -1, op: i,
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
	return ro
}

// fileWrite files write op i (of role number r, -1 for none) by its write id and in its log;
// a reused write id is malformed, and the second write is not filed.
func (x *index) fileWrite(op *history.Op, i, r int32) {
	if prev, dup := x.writes.reuses(i); dup {
		x.malform(op, "reuses write id %q of op %d", op.Args.WriteID, x.op(prev).ID)
		return
	}
	if !op.Args.Token.Valid() {
		x.malform(op, "writes under no token")
	}
	if op.Args.Records > 1 {
		if x.multi == nil {
			x.multi = map[int32]uint16{}
		}
		x.multi[i] = uint16(min(op.Args.Records, history.MaxRecords))
	}
	l := x.logOf(op, r)
	l.writes = append(l.writes, i)
	x.opLog[i] = l.num
}

// fileRead files read op i (of role number r, -1 for none) in its log, when it succeeded.
func (x *index) fileRead(op *history.Op, i, r int32) {
	if !op.Args.Log.Work && op.Args.Log.Role == "" {
		x.malform(op, "reads neither a role's lease log nor a work partition")
		return
	}
	l := x.logOf(op, r)
	x.opLog[i] = l.num
	if op.Type == history.TypeOK {
		l.reads = append(l.reads, i)
		x.records += len(op.Result.Records)
	}
}

// checkFaultTimes reports a fault window whose times a history may not carry.
func (x *index) checkFaultTimes() {
	for i := range x.h.Faults {
		f := &x.h.Faults[i]
		if history.CheckTime(f.Start) != nil || (f.End != history.Never && history.CheckTime(f.End) != nil) {
			x.malformed = append(x.malformed, Anomaly{Guarantee: WellFormed,
				Explanation: fmt.Sprintf("Fault %d runs from %d to %d, outside the times a history may carry (0 to %d).", f.ID, f.Start, f.End, history.MaxTime)})
		}
	}
}

// log returns the log id, adding it when no operation named it before.
func (x *index) log(id history.LogID) *logInfo {
	l := x.logs[id]
	if l == nil {
		l = &logInfo{id: id, num: int32(len(x.logList)), final: -1}
		x.logs[id] = l
		x.logList = append(x.logList, l)
	}
	return l
}

// logOf finds the log op writes or reads without hashing a LogID per operation: a lease log
// hangs off its role (number r, -1 when op names none), a work partition off a small table.
func (x *index) logOf(op *history.Op, r int32) *logInfo {
	id := op.Args.Log
	switch {
	case id.Work && id.Role == "": // as the Builder writes every work partition
		if x.workLogs == nil {
			x.workLogs = map[int32]*logInfo{}
		}
		l := x.workLogs[id.Partition]
		if l == nil {
			l = x.log(id)
			x.workLogs[id.Partition] = l
		}
		return l
	case r >= 0 && id.Role == op.Role:
		if x.roleLogs[r] == nil {
			x.roleLogs[r] = x.log(id)
		}
		return x.roleLogs[r]
	}
	return x.log(id)
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

// analyzeLog files what resolveLog found of the log, and records for every write where
// committed reads saw it. A read that is a prefix of the final log (the normal case) is
// handled by its length alone: record p of the final log was first seen by the
// earliest-completing read longer than p. Only reads that are not prefixes are walked record
// by record.
func (x *index) analyzeLog(l *logInfo) {
	if l.final >= 0 {
		x.finalCount++
	}
	final := x.finalRecords(l)
	for p := range final {
		rec := &final[p]
		if rec.Kind == history.RecordRegistration {
			continue
		}
		w := l.finalWriter[p]
		if w < 0 {
			x.orphans[l.id]++
			continue
		}
		if x.opLog[w] != l.num { // not x.op(w).Args.Log: a cache miss a record
			x.foreign = append(x.foreign, foreignRecord{write: w, log: l.id, offset: rec.Offset})
			continue
		}
		x.inFinal[w]++
		if x.multi != nil || rec.Count != 0 {
			x.notePart(l, p, w, rec)
		}
	}

	// Reads that are prefixes, by completion time; the others record by record.
	var prefixes []int32
	for i, r := range l.reads {
		if l.final >= 0 && l.mismatch[i] < 0 {
			prefixes = append(prefixes, r)
			continue
		}
		read := x.op(r)
		for _, rec := range read.Result.Records {
			if rec.Kind == history.RecordRegistration {
				continue
			}
			if w, ok := x.writes.find(rec.WriteID); ok {
				x.see(w, r, read.Return, rec.Offset)
			}
		}
	}
	_, byReturn := x.byTimes(prefixes)
	for i := range byReturn {
		prefixes[i] = byReturn[i].op
	}
	if l.final >= 0 {
		prefixes = append(prefixes, l.final) // the final read sees the rest
	}
	seen := 0
	for _, r := range prefixes {
		read := x.op(r)
		n := len(read.Result.Records)
		for p := seen; p < n; p++ {
			if w := l.finalWriter[p]; w >= 0 {
				x.see(w, r, read.Return, final[p].Offset)
			}
		}
		seen = max(seen, n)
	}
}

// timedOp is an operation with its times, to order operations without reading each again at
// every comparison.
type timedOp struct {
	op          int32
	invoke, ret int64
}

// byTimes returns ops in the order of their invocations and in the order of their returns
// (both stable).
func (x *index) byTimes(ops []int32) (byInvoke, byReturn []timedOp) {
	byInvoke = make([]timedOp, len(ops))
	var op history.Op
	for i, o := range ops {
		x.h.Load(int(o), &op)
		byInvoke[i] = timedOp{o, op.Invoke, op.Return}
	}
	byReturn = slices.Clone(byInvoke)
	slices.SortStableFunc(byInvoke, func(a, b timedOp) int { return cmp.Compare(a.invoke, b.invoke) })
	slices.SortStableFunc(byReturn, func(a, b timedOp) int { return cmp.Compare(a.ret, b.ret) })
	return byInvoke, byReturn
}

// see notes that committed read r, which returned at t, returned write w's record at offset
// off.
func (x *index) see(w, r int32, t, off int64) {
	if t < x.seenAt[w] {
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
