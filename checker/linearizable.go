package checker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/checker/model"
)

// roleOutcome is what the model check found for one role.
type roleOutcome struct {
	role    string
	ops     int                   // model operations
	result  porcupine.CheckResult // of the strict model; "" when the role was not searched
	unknown string                // why the role is unknown (timeout, panic, tokens not comparable)
	// illFormed is set when the role was not searched because a well-formed violation names
	// one of its operations: a broken recording yields the error verdict, never a model one.
	illFormed bool
	// spuriousOnly is set when the strict model failed and the lenient one passed: the only
	// fault is a fence nothing explains.
	spuriousOnly bool
	anomalies    []Anomaly
	visualized   bool
	visualizeErr error
}

// modelOps turns a role's operations into model operations (docs/checker.md, "From history
// operations to model operations"):
//
//   - acquire ok: Acquire; info, pending or fenced: a Credit at its invocation; other fail: none.
//   - write ok: WriteOK; fenced: WriteFenced (Long when open ≥ the lease, or the lease is
//     unknown); other fail: none, or a Credit when it stayed open ≥ the lease (its transaction
//     may have been aborted by timeout, bumping the epoch).
//   - write info or pending: WriteOK ending when the first committed read saw its record, or a
//     Credit when the committed log shows it did not commit (or cannot tell).
//   - describe ok: DescribeHeld or DescribeNone; otherwise none (describe changes nothing).
//   - on a transaction-version-1 cluster, an acquire ok also gets an AbortBump over the same
//     interval: its InitProducerId may have found the holder's transaction open, bumped the
//     epoch to abort it (fencing that holder) and given the client's retry the next epoch. For
//     the same reason an acquire info, pending or fenced gets a second Credit.
//
// On a cluster that hashes producer ids, a role whose producer id rotated gets keys
// (rotation index, epoch) for tokens (docs/checker.md, "Producer-id rotation"); x.show(role)
// maps them back for printing.
//
// The operations are built in buf, which the caller may reuse once porcupine is done with them.
func (x *index) modelOps(role string, buf *searchBuf, clients bool) []porcupine.Operation {
	rd := x.byRole[role]
	if buf == nil {
		buf = &searchBuf{}
	}
	n := len(rd.ops) // at most one model operation per role operation, and on TV1 one more per acquire
	bumps := x.cfg.abortBumps(rd)
	if bumps {
		for i := range rd.ops {
			if rd.ops[i].kind == opAcquire {
				n++
			}
		}
	}
	if cap(buf.inputs) < n {
		buf.inputs = make([]model.Op, 0, n) // never grows below: &inputs[i] stays valid
		buf.ops = make([]porcupine.Operation, 0, n)
	}
	inputs, ops := buf.inputs[:0], buf.ops[:0]
	// A history client's operations are one row of the visualization; its acquires' abort
	// bumps, which overlap them, get a row of their own.
	type row struct {
		client int
		bump   bool
	}
	var clientIDs map[row]int
	if clients {
		clientIDs = map[row]int{}
	}
	clientID := func(hist *history.Op, bump bool) int {
		if !clients {
			// Porcupine needs client ids only to draw. Not reading the operation saves a
			// cache miss an operation: the history is far larger than the caches.
			return 0
		}
		id, ok := clientIDs[row{hist.Client, bump}]
		if !ok {
			id = len(clientIDs)
			clientIDs[row{hist.Client, bump}] = id
		}
		return id
	}
	lease := x.cfg.lease
	for i := range rd.ops {
		ro := &rd.ops[i]
		kind, tok, long := model.Kind(0), history.NoToken, false
		call, ret := ro.invoke, ro.ret
		credit := func() { kind, ret = model.Credit, call }
		switch ro.kind {
		case opAcquire:
			switch {
			case ro.typ == history.TypeOK:
				kind, tok = model.Acquire, ro.token()
			case ro.typ == history.TypeInfo || ro.fenced():
				credit()
			}
		case opWriteLease, opWork:
			tok = ro.token()
			switch {
			case ro.typ == history.TypeOK:
				kind = model.WriteOK
			case ro.typ == history.TypeFail && ro.fenced():
				kind, long = model.WriteFenced, lease == 0 || ret-call >= lease
			case ro.typ == history.TypeFail:
				if lease > 0 && ret-call >= lease {
					credit()
				}
			case x.committed(ro.op) == commitYes:
				kind, ret = model.WriteOK, max(call, x.seenAt[ro.op])
			default:
				credit()
			}
		case opDescribe:
			if ro.typ == history.TypeOK {
				kind = model.DescribeNone
				if ro.held() {
					kind, tok = model.DescribeHeld, ro.token()
				}
			}
		}
		if kind == 0 {
			continue
		}
		var hist *history.Op // only a role being explained is described
		if clients {
			op := x.op(ro.op)
			hist = &op
		}
		tok, _ = rd.rot.key(tok) // every token of the role is in its rotation
		switch {
		case !bumps || ro.kind != opAcquire:
		case kind == model.Acquire:
			inputs = append(inputs, model.Op{Kind: model.AbortBump, Token: tok, Hist: hist})
			ops = append(ops, porcupine.Operation{ClientId: clientID(hist, true), Input: &inputs[len(inputs)-1], Call: call, Return: ret})
		case kind == model.Credit:
			// An unknown acquire may have bumped twice, each bump fencing a holder: its
			// abort and its mint.
			inputs = append(inputs, model.Op{Kind: model.Credit, Hist: hist})
			ops = append(ops, porcupine.Operation{ClientId: clientID(hist, true), Input: &inputs[len(inputs)-1], Call: call, Return: ret})
		}
		inputs = append(inputs, model.Op{Kind: kind, Token: tok, Long: long, Hist: hist})
		ops = append(ops, porcupine.Operation{ClientId: clientID(hist, false), Input: &inputs[len(inputs)-1], Call: call, Return: ret})
	}
	buf.inputs, buf.ops = inputs, ops
	return ops
}

// searchBuf is one worker's reusable memory for building and pruning a role's model
// operations: a million-operation history has a thousand roles, and allocating these afresh
// for each was a tenth of the check's allocations.
type searchBuf struct {
	inputs []model.Op
	ops    []porcupine.Operation
	// prune's: the acquires (in order, by invocation, by return), the describes that
	// reported a holder and those that reported none, and the running tokens over the
	// acquires.
	acquires, byCall, byReturn, held, none  []porcupine.Operation
	prefixMax, suffixMin, prefixMaxReturned []history.Token
	// per token, the acknowledged writes prune keeps (see keepWrites).
	writes map[history.Token]writeBounds
	// linearize's: the operations by invocation and by return, which are placed, and the
	// ones that may be placed next.
	order, byRet, cands []int32
	placed              []bool
}

// writeBounds are, of the acknowledged writes under one token, the one that returned first
// and the one invoked last (indexes in prune's input).
type writeBounds struct{ firstReturn, lastCall int }

// tokens returns (*buf)[:n], growing *buf when it is shorter.
func tokens(buf *[]history.Token, n int) []history.Token {
	if cap(*buf) < n {
		*buf = make([]history.Token, n)
	}
	return (*buf)[:n]
}

func in(o porcupine.Operation) *model.Op { return o.Input.(*model.Op) }

// prune drops the operations that can neither be illegal nor change what is legal for any
// other operation, whatever the linearization, so the verdict is the same without them and
// the search is smaller (describes are often half of a role's operations):
//
//   - a fence of token t invoked after an acquire of a newer token returned: at its point
//     the mint is newer than t, so it is legal and changes nothing;
//   - a describe that reported d, where d is at least every token whose acquire was invoked
//     before the describe returned (so d ≥ mint wherever it is placed), every acquire that
//     may follow it returned a token above d and no describe "none" may follow it (so
//     raising the floor to d never matters);
//   - a describe "none" that no acquire and no reporting describe may precede;
//   - of the acknowledged writes under one token, all but the one that returned first and
//     the one invoked last (keepWrites says why that is exact).
//
// Abort bumps are kept, and these rules hold with them: an abort bump raises the mint only
// to a token below its acquire's, and is invoked with it, so it never raises the mint above
// what the rules assume; and it does not touch the floor.
func prune(ops []porcupine.Operation, buf *searchBuf) []porcupine.Operation {
	acquires, held, none := buf.acquires[:0], buf.held[:0], buf.none[:0]
	for _, o := range ops {
		switch in(o).Kind {
		case model.Acquire:
			acquires = append(acquires, o)
		case model.DescribeHeld:
			held = append(held, o)
		case model.DescribeNone:
			none = append(none, o)
		}
	}
	buf.acquires, buf.held, buf.none = acquires, held, none
	// maxCalled(T): the greatest token among acquires invoked at or before T.
	byCall := append(buf.byCall[:0], acquires...)
	buf.byCall = byCall
	slices.SortFunc(byCall, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
	prefixMax := tokens(&buf.prefixMax, len(byCall))
	for i, a := range byCall {
		prefixMax[i] = in(a).Token
		if i > 0 && prefixMax[i].Less(prefixMax[i-1]) {
			prefixMax[i] = prefixMax[i-1]
		}
	}
	maxCalled := func(t int64) history.Token {
		n, _ := slices.BinarySearchFunc(byCall, t+1, func(o porcupine.Operation, t int64) int { return cmp.Compare(o.Call, t) })
		if n == 0 {
			return history.NoToken
		}
		return prefixMax[n-1]
	}
	// By return time: suffixMin[i] is the least token among byReturn[i:] (the acquires that
	// returned at or after byReturn[i]), prefixMaxReturned[i] the greatest among byReturn[:i+1].
	byReturn := append(buf.byReturn[:0], acquires...)
	buf.byReturn = byReturn
	slices.SortFunc(byReturn, func(a, b porcupine.Operation) int { return cmp.Compare(a.Return, b.Return) })
	suffixMin := tokens(&buf.suffixMin, len(byReturn))
	for i := len(byReturn) - 1; i >= 0; i-- {
		suffixMin[i] = in(byReturn[i]).Token
		if i+1 < len(byReturn) && suffixMin[i+1].Less(suffixMin[i]) {
			suffixMin[i] = suffixMin[i+1]
		}
	}
	prefixMaxReturned := tokens(&buf.prefixMaxReturned, len(byReturn))
	for i, a := range byReturn {
		prefixMaxReturned[i] = in(a).Token
		if i > 0 && prefixMaxReturned[i].Less(prefixMaxReturned[i-1]) {
			prefixMaxReturned[i] = prefixMaxReturned[i-1]
		}
	}
	firstReturnedFrom := func(t int64) int {
		n, _ := slices.BinarySearchFunc(byReturn, t, func(o porcupine.Operation, t int64) int { return cmp.Compare(o.Return, t) })
		return n
	}
	keep := keepWrites(ops, buf)
	lastNoneReturn := int64(-1 << 63)
	for _, o := range none {
		lastNoneReturn = max(lastNoneReturn, o.Return)
	}
	firstHeldCall := int64(1<<63 - 1)
	for _, o := range held {
		firstHeldCall = min(firstHeldCall, o.Call)
	}
	out := ops[:0] // in place: o is read before its slot can be written
	for i, o := range ops {
		op := in(o)
		switch op.Kind {
		case model.WriteOK:
			if b := keep[op.Token]; i != b.firstReturn && i != b.lastCall {
				continue
			}
		case model.WriteFenced:
			// Some acquire of a newer token returned before the fence was invoked?
			if i := firstReturnedFrom(o.Call); i > 0 && op.Token.Less(prefixMaxReturned[i-1]) {
				continue // byReturn[:i] returned before the fence was invoked
			}
		case model.DescribeHeld:
			d := op.Token
			if maxCalled(o.Return).Compare(d) <= 0 && lastNoneReturn < o.Call {
				if i := firstReturnedFrom(o.Call); i == len(byReturn) || d.Less(suffixMin[i]) {
					continue
				}
			}
		case model.DescribeNone:
			if !maxCalled(o.Return).Valid() && firstHeldCall > o.Return {
				continue
			}
		}
		out = append(out, o)
	}
	return out
}

// keepWrites picks, for every token, the two acknowledged writes under it that prune keeps:
// the one that returned first and the one invoked last. The others change nothing.
//
// An acknowledged write changes no state, and is legal exactly where the mint is its token
// and the holder is not deposed. In any order the model accepts, that condition holds over
// one unbroken stretch: the mint only rises, and within a mint "deposed" only goes from false
// to true (only an acquire, which raises the mint, clears it). Say the stretch runs between
// the points in time p and q at which the operations that open and close it take effect.
// Writes whose intervals are [c_i, r_i] can all be placed in it iff p ≤ r_i and c_i ≤ q for
// every i, that is iff p ≤ min r_i and max c_i ≤ q, and the two kept writes impose exactly
// those bounds (and each is one of the writes, so a history the model accepts still passes
// without the others). TestPruneKeepsTheVerdict checks the verdict is unchanged.
func keepWrites(ops []porcupine.Operation, buf *searchBuf) map[history.Token]writeBounds {
	if buf.writes == nil {
		buf.writes = map[history.Token]writeBounds{}
	}
	keep := buf.writes
	clear(keep)
	for i, o := range ops {
		op := in(o)
		if op.Kind != model.WriteOK {
			continue
		}
		b, seen := keep[op.Token]
		if !seen {
			keep[op.Token] = writeBounds{i, i}
			continue
		}
		if o.Return < ops[b.firstReturn].Return {
			b.firstReturn = i
		}
		if o.Call > ops[b.lastCall].Call {
			b.lastCall = i
		}
		keep[op.Token] = b
	}
	return keep
}

// show returns how to print the role's model tokens: the real token each key stands for.
func (x *index) show(role string) model.Show {
	if rot := x.byRole[role].rot; rot != nil {
		return rot.token
	}
	return nil
}

// checkModels searches every role with the strict model through a pool of cfg.workers, then
// explains every role that came out Illegal (a second pool pass, so the common all-valid case
// never pays for the verbose search).
func (x *index) checkModels(ctx context.Context, t *Timings) []roleOutcome {
	out := make([]roleOutcome, len(x.roles))
	start := time.Now()
	bufs := make([]*searchBuf, x.cfg.workers)
	x.pool(ctx, len(x.roles), func(w, i int) {
		if bufs[w] == nil {
			bufs[w] = &searchBuf{}
		}
		out[i] = x.checkRole(x.roles[i], bufs[w])
		if out[i].result == porcupine.Unknown {
			bufs[w] = nil // a search that timed out may still be reading its operations
		}
	}, func(i int) {
		out[i] = roleOutcome{role: x.roles[i], unknown: "check cancelled: " + context.Cause(ctx).Error()}
	})
	t.Porcupine = int64(time.Since(start))
	start = time.Now()
	var illegal []int
	for i := range out {
		if out[i].result == porcupine.Illegal && out[i].unknown == "" {
			illegal = append(illegal, i)
		}
	}
	x.pool(ctx, len(illegal), func(_, j int) {
		x.explainRole(&out[illegal[j]])
	}, func(j int) {
		o := &out[illegal[j]]
		o.unknown = "explanation cancelled: " + context.Cause(ctx).Error()
	})
	t.Explain = int64(time.Since(start))
	return out
}

// pool runs do(w, i) for i in [0, n) on cfg.workers goroutines (w is the worker); once ctx
// is done, the remaining indexes get cancelled(i) instead.
func (x *index) pool(ctx context.Context, n int, do func(w, i int), cancelled func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range min(x.cfg.workers, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if ctx.Err() != nil {
					cancelled(i)
					continue
				}
				do(w, i)
			}
		})
	}
	wg.Wait()
}

func (x *index) checkRole(role string, buf *searchBuf) (out roleOutcome) {
	out.role = role
	defer func() {
		if r := recover(); r != nil {
			out.unknown = fmt.Sprintf("model check panicked: %v", r)
			x.cfg.log.Error("model check panicked", "role", role, "panic", r, "stack", string(debug.Stack()))
		}
	}()
	if x.illFormedRoles[role] {
		out.illFormed = true // porcupine must not see it: it may panic, or find a false violation
		return out
	}
	ops := x.modelOps(role, buf, false)
	out.ops = len(ops)
	if len(ops) == 0 {
		out.result = porcupine.Ok
		return out
	}
	if why := x.byRole[role].unordered; why != "" {
		out.unknown = why // the tokens cannot be ordered: no verdict is sound
		return out
	}
	ops = prune(ops, buf)
	if linearize(ops, buf) {
		out.result = porcupine.Ok // an order the model accepts is in hand: nothing to search
		return out
	}
	out.result = porcupine.CheckOperationsTimeout(model.New(false, nil), ops, x.cfg.timeout)
	if out.result == porcupine.Unknown {
		out.unknown = fmt.Sprintf("porcupine timed out after %s", x.cfg.timeout)
	}
	return out
}

// explainRole names what went wrong in a role the strict model rejected. The lenient model
// separates a spurious fence (liveness) from a safety violation. A safety violation is
// explained by sound witnesses (orderings no linearization can fix); when none applies, the
// smallest failing projection (acquires; acquires and describes; acquires and writes) names
// the guarantee and porcupine's longest partial linearization names the operation.
func (x *index) explainRole(out *roleOutcome) {
	defer func() {
		if r := recover(); r != nil {
			out.unknown = fmt.Sprintf("explaining the model failure panicked: %v", r)
			out.anomalies = nil
			x.cfg.log.Error("explain panicked", "role", out.role, "panic", r, "stack", string(debug.Stack()))
		}
	}()
	ops := x.modelOps(out.role, nil, true)
	show := x.show(out.role)
	lenient := porcupine.CheckOperationsTimeout(model.New(true, show), ops, x.cfg.timeout)
	var verbose porcupine.Model
	switch lenient {
	case porcupine.Unknown:
		out.unknown = fmt.Sprintf("the strict model rejected the role but the lenient one timed out after %s", x.cfg.timeout)
		return
	case porcupine.Ok:
		out.spuriousOnly = true
		verbose = model.New(false, show)
		out.anomalies = spuriousFences(out.role, ops, show)
	default:
		verbose = model.New(true, show)
		out.anomalies = witnesses(out.role, ops, show)
	}
	for i := range ops {
		ops[i].Metadata = x.opMetadata(in(ops[i]))
	}
	res, info := porcupine.CheckOperationsVerbose(verbose, ops, x.cfg.timeout)
	if len(out.anomalies) == 0 {
		guarantee := SpuriousFence
		if !out.spuriousOnly {
			guarantee = x.failingProjection(ops)
		}
		if res == porcupine.Illegal {
			out.anomalies = append(out.anomalies, blockedAnomaly(guarantee, out.role, verbose, show, ops, info))
		} else {
			out.anomalies = append(out.anomalies, Anomaly{Guarantee: guarantee, Role: out.role,
				Explanation: fmt.Sprintf("No order of role %s's operations is consistent with the coordinator model (the verbose search came out %s).", out.role, res)})
		}
	}
	if x.cfg.visualize != nil && res != porcupine.Unknown {
		info.AddAnnotations(x.annotations(ops))
		out.visualizeErr = x.writeVisualization(out.role, verbose, info)
		out.visualized = out.visualizeErr == nil
	}
}

func (x *index) opMetadata(op *model.Op) string {
	h := op.Hist
	s := fmt.Sprintf("op %d, client %d", h.ID, h.Client)
	if h.Process != "" {
		s += ", process " + h.Process
	}
	if h.Error != "" {
		s += ", error " + h.Error
	}
	return s
}

func (x *index) writeVisualization(role string, m porcupine.Model, info porcupine.LinearizationInfo) (err error) {
	w, err := x.cfg.visualize(role)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := w.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("visualize %q: %w", role, cerr)
		}
	}()
	if err := porcupine.Visualize(m, info, w); err != nil {
		return fmt.Errorf("visualize %q: %w", role, err)
	}
	return nil
}

// annotations draws the fault windows that overlap the role's operations, member pauses on
// their own rows.
func (x *index) annotations(ops []porcupine.Operation) []porcupine.Annotation {
	if len(ops) == 0 {
		return nil
	}
	lo, hi := ops[0].Call, ops[0].Return
	for _, o := range ops {
		lo, hi = min(lo, o.Call), max(hi, o.Return)
	}
	var as []porcupine.Annotation
	for _, f := range x.h.Faults {
		end := f.End
		if end == history.Never {
			end = max(x.h.End, f.Start)
		}
		if end < lo || f.Start > hi {
			continue
		}
		a := porcupine.Annotation{
			Tag: "fault", Start: f.Start, End: end,
			Description: string(f.Kind), BackgroundColor: "#f6c8c8",
			Details: fmt.Sprintf("fault %d %s %s; %s; took hold: %t", f.ID, f.Kind, strings.Join(f.Targets, ","), f.Desc, f.TookHold),
		}
		if f.Kind == history.KindMemberPause {
			a.Tag = "pause " + f.Member
			a.Description = "paused " + f.Member
			a.BackgroundColor = "#c8d8f6"
		}
		as = append(as, a)
	}
	return as
}

// failingProjection names the guarantee of the smallest sub-history the model rejects:
// acquires alone (token-monotonic), acquires and describes (describe-consistent), acquires and
// writes (fenced-stale-write). When only the whole role fails, the violation lies in how
// describes and writes constrain each other; it is reported as fenced-stale-write.
func (x *index) failingProjection(ops []porcupine.Operation) string {
	project := func(keep func(model.Kind) bool) []porcupine.Operation {
		var p []porcupine.Operation
		for _, o := range ops {
			if keep(in(o).Kind) {
				p = append(p, o)
			}
		}
		return p
	}
	projections := []struct {
		name string
		keep func(model.Kind) bool
	}{
		// An acquire's abort bump goes wherever the acquire does: it is part of what the
		// acquire did, and placed just before its acquire it changes nothing, so it can never
		// make a projection fail that passes without it.
		{TokenMonotonic, func(k model.Kind) bool { return k == model.Acquire || k == model.AbortBump }},
		{DescribeConsistent, func(k model.Kind) bool {
			return k == model.Acquire || k == model.AbortBump || k == model.DescribeHeld || k == model.DescribeNone
		}},
		{FencedStaleWrite, func(k model.Kind) bool {
			return k == model.Acquire || k == model.AbortBump || k == model.Credit || k == model.WriteOK || k == model.WriteFenced
		}},
	}
	for _, p := range projections {
		if porcupine.CheckOperationsTimeout(model.New(true, nil), project(p.keep), x.cfg.timeout) == porcupine.Illegal {
			return p.name
		}
	}
	return FencedStaleWrite
}

// blockedAnomaly explains an Illegal search from porcupine's longest partial linearization:
// the operation that returned first among those it could not place is the one no order
// explains.
func blockedAnomaly(guarantee, role string, m porcupine.Model, show model.Show, ops []porcupine.Operation, info porcupine.LinearizationInfo) Anomaly {
	var longest []porcupine.Operation
	for _, part := range info.PartialLinearizationsOperations() {
		for _, lin := range part {
			if len(lin) > len(longest) {
				longest = lin
			}
		}
	}
	placed := map[*model.Op]bool{}
	state := m.Init()
	for _, o := range longest {
		placed[in(o)] = true
		_, state = m.Step(state, o.Input, o.Output)
	}
	var blocked *porcupine.Operation
	for i := range ops {
		if !placed[in(ops[i])] && (blocked == nil || ops[i].Return < blocked.Return) {
			blocked = &ops[i]
		}
	}
	a := Anomaly{Guarantee: guarantee, Role: role}
	if blocked == nil {
		a.Explanation = fmt.Sprintf("No order of role %s's %d operations is consistent with the coordinator model.", role, len(ops))
		return a
	}
	a.Ops = []int64{in(*blocked).Hist.ID}
	a.Explanation = fmt.Sprintf("No order of role %s's operations explains %s: the longest consistent order places %d of %d operations and ends in state [%s].",
		role, model.Describe(in(*blocked), show), len(longest), len(ops), m.DescribeState(state))
	return a
}

// aggregateModels folds the role outcomes into the results of the three model-checked
// guarantees and spurious-fence.
func (c *run) aggregateModels(outs []roleOutcome) {
	names := []string{TokenMonotonic, FencedStaleWrite, DescribeConsistent, SpuriousFence}
	byName := map[string]*Result{}
	for _, n := range names {
		byName[n] = c.result(n)
	}
	var unknownRoles, illFormedRoles []string
	var searched, modelOps int
	for i := range outs {
		o := &outs[i]
		modelOps += o.ops
		if o.illFormed {
			illFormedRoles = append(illFormedRoles, o.role)
			for _, n := range names {
				byName[n].Verdict = Worst(byName[n].Verdict, VerdictError)
			}
		}
		if o.result != "" {
			searched++
		}
		if o.unknown != "" {
			unknownRoles = append(unknownRoles, o.role+": "+o.unknown)
			for _, n := range names {
				byName[n].Verdict = Worst(byName[n].Verdict, VerdictUnknown)
			}
		}
		for _, a := range o.anomalies {
			byName[a.Guarantee].Anomalies = append(byName[a.Guarantee].Anomalies, a)
		}
		if o.visualized {
			c.res.Visualized = append(c.res.Visualized, o.role)
		}
		if o.visualizeErr != nil {
			c.cfg.log.Warn("visualization failed", "role", o.role, "err", o.visualizeErr)
			c.visualizeErrs = append(c.visualizeErrs, o.visualizeErr)
		}
	}
	for _, n := range names {
		r := byName[n]
		r.Details["roles"] = searched
		r.Details["model_ops"] = modelOps
		if len(illFormedRoles) > 0 {
			// Not searched: see well-formed for what is wrong with their recording.
			r.Details["ill_formed_roles"] = capStrings(illFormedRoles, 20)
		}
		if len(unknownRoles) > 0 {
			r.Details["unknown_roles"] = len(unknownRoles)
			r.Details["unknown"] = capStrings(unknownRoles, 20)
		}
	}
	if c.cfg.lease == 0 {
		sf := byName[SpuriousFence]
		sf.Verdict = Worst(sf.Verdict, VerdictUnknown)
		sf.Details["lease"] = "unknown: no fence can be shown spurious"
	}
	if err := errors.Join(c.visualizeErrs...); err != nil {
		for _, n := range names {
			byName[n].Details["visualize_error"] = err.Error()
		}
	}
}

func capStrings(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(slices.Clip(s[:n]), fmt.Sprintf("... and %d more", len(s)-n))
}
