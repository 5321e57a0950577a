package checker

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fencecheck/fencecheck/checker/history"
)

// The guarantees of an exactly-once pipeline run (docs/checker.md, "Pipelines"). Their names
// start with eos- so that none is mistaken for a lease guarantee of a similar name. Their
// anomalies name the transactions (Ops) and say the input and output offsets in words: an
// anomaly's Offsets are records of a lease log, which a pipeline does not have.
const (
	// EOSNoLoss: every input record below its partition's final committed offset has its
	// output in the committed output.
	EOSNoLoss = "eos-no-loss"
	// EOSNoDuplicate: no input record has more than one output in the committed output.
	EOSNoDuplicate = "eos-no-duplicate"
	// EOSOffsetsMatchOutput: no output of an input record at or past its partition's final
	// committed offset; each committed transaction's offsets end where its outputs end; no
	// committed offset beyond the input.
	EOSOffsetsMatchOutput = "eos-offsets-match-output"
	// EOSOrder: per input partition, outputs are committed in input order.
	EOSOrder = "eos-order"
	// EOSTxnOutcome: a transaction reported not committed has no output in the committed
	// output, and one reported committed has all of its outputs there.
	EOSTxnOutcome = "eos-txn-outcome"
	// EOSReadCommitted: every committed output is made of an input record the harness wrote
	// and did not abort: the members read their input committed.
	EOSReadCommitted = "eos-read-committed"
	// EOSTermination: after the heal no transaction of the run stays open, and every input
	// and output partition's last stable offset reaches its end.
	EOSTermination = "eos-termination"
	// EOSFold (the stateful variant): each output's aggregate is the fold of exactly the
	// committed input of its partition up to its record.
	EOSFold = "eos-fold"
)

// PipelineGuarantees lists the pipeline guarantees in the order of docs/checker.md.
var PipelineGuarantees = []string{EOSNoLoss, EOSNoDuplicate, EOSOffsetsMatchOutput, EOSOrder, EOSTxnOutcome, EOSReadCommitted,
	EOSGenerationFencing, EOSStableFetch, EOSTermination, EOSFold}

// Pipeline coverage requirements a scenario can promise (besides final-read, ops-succeeded
// and fault-took-hold, which a pipeline run is held to as a lease run is).
const (
	CoverRebalance = "rebalance" // some input partition's committed transactions came from two group members
	// CoverTxnAborted: some transaction certainly did not commit (a zombie's, once its member
	// learned it lost its partitions, or one the group or the broker refused as fenced).
	CoverTxnAborted = "txn-aborted"
)

func init() {
	meanings[EOSNoLoss] = "every input record below its partition's committed offset has its output in the committed output"
	meanings[EOSNoDuplicate] = "no input record has more than one output in the committed output"
	meanings[EOSOffsetsMatchOutput] = "committed offsets end exactly where the committed outputs end, per partition and per transaction"
	meanings[EOSOrder] = "per input partition, outputs are committed in input order"
	meanings[EOSTxnOutcome] = "a transaction reported aborted has no committed output; one reported committed has all of it"
	meanings[EOSReadCommitted] = "every committed output is made of an input record that was written and not aborted"
	meanings[EOSFold] = "each output's aggregate is the fold of exactly the committed input up to its record"
	meanings[EOSTermination] = "after the heal no transaction of the run stays open and every partition's last stable offset reaches its end"
	for _, g := range PipelineGuarantees {
		sentinels[g] = fmt.Errorf("%s", g)
	}
}

// pipePromises are the coverage names a pipeline history may promise.
var pipePromises = []string{CoverFinalRead, CoverOpsSucceeded, CoverFaultTookHold, CoverRebalance, CoverTxnAborted}

// PipelinePromises returns the names of every coverage requirement of a pipeline run, sorted.
func PipelinePromises() []string { return slices.Sorted(slices.Values(pipePromises)) }

// pipeRun is one Check of a pipeline history: what the index holds for the checks.
type pipeRun struct {
	*run
	h *history.History
	// landed indexes each input record that landed (an ok send) in landedIDs, its id;
	// sentIDsBuilt are the ids of every send, landed or not, once sentIDSet has built them:
	// read them with sentIDSet.
	landed       inputIndex
	landedIDs    []string
	sentIDsBuilt map[string]bool
	// aborted are the ids of the input records written in transactions the harness aborted.
	aborted map[string]bool
	ends    map[int32]int64 // per input partition: one past the highest offset sent
	// txns are the transactions by op id; txnList the same in the order of their ids;
	// fetches the members' completed offset fetches.
	txns    map[int64]*history.Op
	txnList []*history.Op
	fetches []*history.Op
	// finalTxns is the last look at what the run left open (nil when the history has none).
	finalTxns *history.Op
	// outputs are the committed outputs (the final output read); committed the group's final
	// committed offsets. haveOutput/haveOffsets say whether those final reads succeeded.
	outputs   []history.PipeOutput
	committed map[int32]int64
	// inputEnds are the input partitions' end offsets read after the run (nil in histories
	// without them).
	inputEnds   map[int32]int64
	haveOutput  bool
	haveOffsets bool
	// byInput and byTxn are the indexes of the committed outputs, sorted by input record,
	// and by transaction and input record (see sortedOutputs).
	byInput, byTxn []int32
}

// checkPipeline judges a pipeline history: the linear checks of PipelineGuarantees against
// the final reads, well-formed, and coverage. It needs no search: the output records name
// the input record and the transaction they came from.
func checkPipeline(_ context.Context, h *history.History, cfg config) *Results {
	start := time.Now()
	c := &pipeRun{run: &run{cfg: cfg, res: &Results{Format: ResultsFormat, Run: h.Meta}}, h: h}
	for _, name := range append(slices.Clone(PipelineGuarantees), WellFormed) {
		c.res.Checks = append(c.res.Checks, Result{Name: name, Verdict: VerdictValid, Details: map[string]any{}})
	}
	c.res.History = Stats{
		Format: h.Format, Ops: h.Len(), Faults: len(h.Faults), End: h.End,
		Truncated: h.Truncated, TruncatedLine: h.TruncatedLine, Pending: h.Pending(),
	}
	t0 := time.Now()
	c.safely(c.result(WellFormed), c.index)
	c.res.Timings.Index = int64(time.Since(t0))
	c.memberTxnVersion()
	t0 = time.Now()
	for _, l := range []struct {
		name  string
		check func(*Result)
	}{
		{EOSNoLoss, c.checkNoLoss},
		{EOSNoDuplicate, c.checkNoDuplicate},
		{EOSOffsetsMatchOutput, c.checkOffsetsMatchOutput},
		{EOSOrder, c.checkOrder},
		{EOSTxnOutcome, c.checkTxnOutcome},
		{EOSReadCommitted, c.checkReadCommitted},
		// Both judged in one pass (pipe_fence.go), stable fetch with generation fencing.
		{EOSGenerationFencing, func(r *Result) { c.checkFences(r, c.result(EOSStableFetch)) }},
		{EOSStableFetch, func(*Result) {}},
		{EOSTermination, nil},
		{EOSFold, c.checkFold},
	} {
		r := c.result(l.name)
		if l.name == EOSTermination {
			// Judged on its own evidence: an output read held back by an open transaction
			// is what it is about.
			c.safely(r, func() { c.checkTermination(r) })
			continue
		}
		if !c.haveOutput || !c.haveOffsets {
			// Without the reference there is nothing to judge against: never valid.
			r.Verdict, r.Details["unknown"] = VerdictUnknown, "no successful final read of the output and the committed offsets"
			continue
		}
		c.safely(r, func() { l.check(r) })
	}
	c.res.Timings.Linear = int64(time.Since(t0))
	c.pipeCoverage()
	c.finish(start)
	c.setFirstAt()
	return c.res
}

// memberTxnVersion sets the results' transaction version (Results.Run) to the one the members'
// committed transactions were spoken in, as their gateways saw them (PipeResult.TxnVersion),
// and the cluster's beside it when that differs: the header is written before any member sends
// a request, so it cannot know what a client behind the exec protocol speaks (a client without
// KIP-890 speaks 1 on a cluster that finalized 2). When the members differ, the version most
// of their transactions were spoken in. Nothing changes when no transaction says.
func (c *pipeRun) memberTxnVersion() {
	count := map[int]int{}
	for _, op := range c.txnList {
		if op.Type == history.TypeOK && op.Result.Pipe != nil && op.Result.Pipe.TxnVersion != 0 {
			count[op.Result.Pipe.TxnVersion]++
		}
	}
	tv := 0
	for v, n := range count {
		if n > count[tv] || (n == count[tv] && v < tv) {
			tv = v
		}
	}
	if tv == 0 {
		return
	}
	run := &c.res.Run
	cluster := run.ClusterTransactionVersion
	if cluster == 0 {
		cluster = run.TransactionVersion
	}
	run.TransactionVersion, run.ClusterTransactionVersion = tv, 0
	if cluster != 0 && cluster != tv {
		run.ClusterTransactionVersion = cluster
	}
}

// index reads the history into c, and reports as well-formed anomalies what breaks the
// recording's own rules.
func (c *pipeRun) index() {
	wf := c.result(WellFormed)
	bad := func(op *history.Op, format string, args ...any) {
		wf.Anomalies = append(wf.Anomalies, Anomaly{Guarantee: WellFormed, Ops: []int64{op.ID}, Explanation: fmt.Sprintf(format, args...)})
	}
	c.aborted, c.ends = map[string]bool{}, map[int32]int64{}
	// Room for an id an operation: growing the table as sends come would allocate several
	// times its size.
	c.landedIDs = make([]string, 0, c.h.Len())
	var op history.Op
	var txnOps []history.Op // where c.txns point: allocated a block at a time, not one by one
	for i := range c.h.Len() {
		c.h.Load(i, &op)
		switch op.Kind {
		case history.KindSend:
			if op.Args.Pipe == nil || op.Args.Pipe.ID == "" {
				bad(&op, "send op %d names no input record", op.ID)
				continue
			}
			if op.Type == history.TypeFail {
				c.aborted[op.Args.Pipe.ID] = true
			}
			if op.Type != history.TypeOK {
				continue
			}
			if op.Result.Pipe == nil || op.Result.Pipe.Sent == nil {
				bad(&op, "ok send op %d does not say where its record landed", op.ID)
				continue
			}
			at := *op.Result.Pipe.Sent
			if prev, dup := c.landed.get(at); dup {
				bad(&op, "send op %d landed at input %s, where %s already is", op.ID, at, c.landedIDs[prev])
				continue
			}
			c.landed.put(at, len(c.landedIDs))
			c.landedIDs = append(c.landedIDs, op.Args.Pipe.ID)
			c.ends[at.Partition] = max(c.ends[at.Partition], at.Offset+1)
		case history.KindTxn:
			if op.Args.Pipe == nil || len(op.Args.Pipe.Inputs) == 0 {
				bad(&op, "txn op %d names no input records", op.ID)
				continue
			}
			if len(txnOps) == cap(txnOps) {
				txnOps = make([]history.Op, 0, 1024)
			}
			txnOps = append(txnOps, op)
			c.txnList = append(c.txnList, &txnOps[len(txnOps)-1])
		case history.KindFetch:
			switch {
			case op.Type != history.TypeOK:
				// A fetch's answer is recorded with its invocation; one without is a member
				// that never said where it started, and judges nothing.
			case op.Args.Pipe == nil || op.Result.Pipe == nil:
				bad(&op, "fetch op %d names no group membership or no start", op.ID)
			default:
				f := op // op is loaded again next round
				c.fetches = append(c.fetches, &f)
			}
		case history.KindFinalTxns:
			f := op
			c.finalTxns = &f
		case history.KindFinalOutput:
			if op.Type == history.TypeOK && op.Result.Pipe != nil {
				c.outputs, c.haveOutput = op.Result.Pipe.Outputs, true // the last one read is the reference
			}
		case history.KindFinalOffsets:
			if op.Type == history.TypeOK && op.Result.Pipe != nil {
				c.committed, c.haveOffsets = map[int32]int64{}, true
				for _, o := range op.Result.Pipe.Offsets {
					c.committed[o.Partition] = o.Offset
				}
				c.inputEnds = nil
				if ends := op.Result.Pipe.InputEnds; len(ends) > 0 {
					c.inputEnds = map[int32]int64{}
					for _, o := range ends {
						c.inputEnds[o.Partition] = o.Offset
					}
				}
			}
		default:
			bad(&op, "%s op %d in a pipeline history", op.Kind, op.ID)
		}
	}
	c.txns = make(map[int64]*history.Op, len(c.txnList))
	for _, op := range c.txnList {
		c.txns[op.ID] = op
	}
	if len(c.txns) < len(c.txnList) || !slices.IsSortedFunc(c.txnList, func(a, b *history.Op) int { return cmp.Compare(a.ID, b.ID) }) {
		// Ids out of order or repeated (a history built by hand): the map's, in order.
		c.txnList = c.txnList[:0]
		for _, id := range slices.Sorted(maps.Keys(c.txns)) {
			c.txnList = append(c.txnList, c.txns[id])
		}
	}
	c.byInput, c.byTxn = sortedOutputs(c.outputs, byInputOrder), sortedOutputs(c.outputs, byTxnOrder)
	// The outputs that name a transaction the history does not have, found in the order of
	// transactions (see txnCursor) and reported in the order of the outputs.
	var unknown []int32
	txns := txnCursor(c.txnList)
	for _, i := range c.byTxn {
		if _, ok := txns.find(c.outputs[i].Txn); !ok {
			unknown = append(unknown, i)
		}
	}
	slices.Sort(unknown)
	for _, i := range unknown {
		o := &c.outputs[i]
		wf.Anomalies = append(wf.Anomalies, Anomaly{Guarantee: WellFormed,
			Explanation: fmt.Sprintf("output %d/%d names txn op %d, which the history does not have", o.Partition, o.Offset, o.Txn)})
	}
	wf.Details["sends"], wf.Details["txns"], wf.Details["outputs"] = c.landed.len(), len(c.txns), len(c.outputs)
}

// txnCursor finds transactions in c.txnList by ids that come in ascending order: a walk
// beside the outputs sorted by transaction, where a lookup in c.txns an output was a hash and
// a cache miss each.
type txnCursor []*history.Op

func (t *txnCursor) find(id int64) (*history.Op, bool) {
	for len(*t) > 0 && (*t)[0].ID < id {
		*t = (*t)[1:]
	}
	if len(*t) > 0 && (*t)[0].ID == id {
		return (*t)[0], true
	}
	return nil, false
}

// sentIDSet returns the ids of every send, landed or not, as a set. Built on first use: a
// run whose outputs are all made of the records where they say is needs none.
func (c *pipeRun) sentIDSet() map[string]bool {
	if c.sentIDsBuilt == nil {
		c.sentIDsBuilt = map[string]bool{}
		var op history.Op
		for i := range c.h.Len() {
			if c.h.Load(i, &op); op.Kind == history.KindSend && op.Args.Pipe != nil && op.Args.Pipe.ID != "" {
				c.sentIDsBuilt[op.Args.Pipe.ID] = true
			}
		}
	}
	return c.sentIDsBuilt
}

// partitions returns every input partition the run knows of, sorted.
func (c *pipeRun) partitions() []int32 {
	ps := map[int32]bool{}
	for p := range c.ends {
		ps[p] = true
	}
	for p := range c.committed {
		ps[p] = true
	}
	for _, i := range c.byInput {
		ps[c.outputs[i].In.Partition] = true
	}
	return slices.Sorted(maps.Keys(ps))
}

// checkNoLoss: every input record below its partition's committed offset has an output. A
// lost record's anomaly names the first committed transaction that consumed past it: the
// one whose offsets skipped it.
func (c *pipeRun) checkNoLoss(r *Result) {
	var starts map[int32][]txnStart // built at the first loss: a valid run needs none
	checked := 0
	next := c.byInput // the outputs of the inputs from in on
	// The inputs the harness knows it sent, in order: the committed offset comes from the
	// member under test and may be anything, so it bounds the walk but does not drive it.
	for in, id := range c.landed.all() {
		p, o := in.Partition, in.Offset
		if o >= c.committed[p] {
			continue
		}
		checked++
		for len(next) > 0 && comparePipeOffsets(c.outputs[next[0]].In, in) < 0 {
			next = next[1:]
		}
		if len(next) == 0 || c.outputs[next[0]].In != in {
			a := Anomaly{Guarantee: EOSNoLoss, Log: "input:" + in.String(),
				Explanation: fmt.Sprintf("input %s (%s) is below partition %d's committed offset %d, but has no output in the committed output", in, c.landedIDs[id], p, c.committed[p])}
			if starts == nil {
				starts = c.committedStarts()
			}
			s := starts[p]
			if i, _ := slices.BinarySearchFunc(s, o+1, func(x txnStart, from int64) int { return cmp.Compare(x.from, from) }); i < len(s) {
				a.Ops = []int64{s[i].txn}
				a.Explanation += fmt.Sprintf("; the next committed transaction of the partition, txn op %d, starts past it at %d", s[i].txn, s[i].from)
			}
			r.Anomalies = append(r.Anomalies, a)
		}
	}
	r.Details["inputs_checked"] = checked
}

// txnStart is where a committed transaction's inputs of one partition start.
type txnStart struct {
	from int64
	txn  int64
}

// committedStarts returns, per input partition, where the inputs of the transactions whose
// outputs are committed start, in order.
func (c *pipeRun) committedStarts() map[int32][]txnStart {
	starts := map[int32][]txnStart{}
	seen := map[int64]bool{}
	for _, o := range c.outputs {
		op, ok := c.txns[o.Txn]
		if !ok || seen[o.Txn] {
			continue
		}
		seen[o.Txn] = true
		for _, in := range op.Args.Pipe.Inputs {
			starts[in.Partition] = append(starts[in.Partition], txnStart{in.From, o.Txn})
		}
	}
	for _, s := range starts {
		slices.SortFunc(s, func(a, b txnStart) int { return cmp.Or(cmp.Compare(a.from, b.from), cmp.Compare(a.txn, b.txn)) })
	}
	return starts
}

// checkNoDuplicate: no input record has two outputs.
func (c *pipeRun) checkNoDuplicate(r *Result) {
	inputs := 0
	for outs := range runs(c.outputs, c.byInput, byInputOrder) {
		inputs++
		if len(outs) < 2 {
			continue
		}
		var offsets, txns []int64
		for _, i := range outs {
			offsets, txns = append(offsets, c.outputs[i].Offset), append(txns, c.outputs[i].Txn)
		}
		first := &c.outputs[outs[0]]
		r.Anomalies = append(r.Anomalies, Anomaly{Guarantee: EOSNoDuplicate, Log: fmt.Sprintf("output:%d", first.Partition), Ops: compactIDs(txns),
			Explanation: fmt.Sprintf("input %s (%s) has %d outputs in the committed output (output offsets %v, from txn ops %v)", first.In, first.ID, len(outs), offsets, txns)})
	}
	r.Details["inputs_with_output"] = inputs
}

// checkOffsetsMatchOutput: no output at or past the committed offset; no committed offset
// past the input's end; each committed transaction's offsets end where its outputs end.
func (c *pipeRun) checkOffsetsMatchOutput(r *Result) {
	for _, p := range c.partitions() {
		committed := c.committed[p]
		if end, read := c.inputEnds[p]; read {
			// The partition's end as the broker had it after the run: aborted records and
			// transaction markers included, so a member that commits its position past them
			// is not flagged.
			if committed > end {
				r.Anomalies = append(r.Anomalies, Anomaly{Guarantee: EOSOffsetsMatchOutput, Log: fmt.Sprintf("input:%d", p),
					Explanation: fmt.Sprintf("partition %d's committed offset %d is past the input's end offset %d", p, committed, end)})
			}
			continue
		}
		// Without the end offsets (an older history), the end of what the harness wrote, and
		// only when every send's fate is known: a record that may have landed may be the end.
		if end := c.ends[p]; committed > end && len(c.sentIDSet()) == c.landed.len()+len(c.aborted) {
			r.Anomalies = append(r.Anomalies, Anomaly{Guarantee: EOSOffsetsMatchOutput, Log: fmt.Sprintf("input:%d", p),
				Explanation: fmt.Sprintf("partition %d's committed offset %d is past its input's end %d", p, committed, end)})
		}
	}
	for _, o := range c.outputs {
		if committed := c.committed[o.In.Partition]; o.In.Offset >= committed {
			r.Anomalies = append(r.Anomalies, Anomaly{Guarantee: EOSOffsetsMatchOutput, Log: fmt.Sprintf("output:%d", o.Partition), Ops: []int64{o.Txn},
				Explanation: fmt.Sprintf("output %d/%d of input %s (txn op %d) is committed, but partition %d's committed offset is %d: the offsets were not committed with the output", o.Partition, o.Offset, o.In, o.Txn, o.In.Partition, committed)})
		}
	}
	// Per transaction whose outputs were committed: its outputs cover its inputs, and the
	// offsets it sent end where its inputs do.
	var ins []history.PipeOffset  // the inputs of the transaction's outputs, sorted, each once
	var ends []history.PipeOffset // per partition: one past the last input the transaction consumed
	txns := txnCursor(c.txnList)
	for outs := range runs(c.outputs, c.byTxn, func(a, b *history.PipeOutput) int { return cmp.Compare(a.Txn, b.Txn) }) {
		id := c.outputs[outs[0]].Txn
		op, ok := txns.find(id)
		if !ok {
			continue // well-formed says so
		}
		ins = ins[:0]
		for _, i := range outs {
			if in := c.outputs[i].In; len(ins) == 0 || ins[len(ins)-1] != in {
				ins = append(ins, in)
			}
		}
		a := op.Args.Pipe
		missing := 0
		ends = ends[:0]
		for _, in := range a.Inputs {
			if in.To > in.From {
				// The range's inputs less those with an output: ins are sorted, so those are
				// a run of them.
				from, _ := slices.BinarySearchFunc(ins, history.PipeOffset{Partition: in.Partition, Offset: in.From}, comparePipeOffsets)
				to, _ := slices.BinarySearchFunc(ins, history.PipeOffset{Partition: in.Partition, Offset: in.To}, comparePipeOffsets)
				missing += int(in.To-in.From) - (to - from)
			}
			if j := slices.IndexFunc(ends, func(e history.PipeOffset) bool { return e.Partition == in.Partition }); j >= 0 {
				ends[j].Offset = max(ends[j].Offset, in.To)
			} else {
				ends = append(ends, history.PipeOffset{Partition: in.Partition, Offset: max(0, in.To)})
			}
		}
		slices.SortFunc(ends, comparePipeOffsets) // one a partition: by partition
		for _, e := range ends {
			p, end := e.Partition, e.Offset
			sent := slices.IndexFunc(a.Offsets, func(x history.PipeOffset) bool { return x.Partition == p })
			if sent >= 0 && a.Offsets[sent].Offset > end && c.noInputIn(p, end, a.Offsets[sent].Offset) {
				// Past offsets that hold no record that landed (transaction markers, aborted
				// input): a member that commits its consumer's position (Kafka Streams, when
				// a task has nothing buffered) skips them, and loses nothing.
				continue
			}
			if sent < 0 || a.Offsets[sent].Offset != end {
				got := "none"
				if sent >= 0 {
					got = fmt.Sprint(a.Offsets[sent].Offset)
				}
				r.Anomalies = append(r.Anomalies, Anomaly{Guarantee: EOSOffsetsMatchOutput, Log: fmt.Sprintf("input:%d", p), Ops: []int64{id},
					Explanation: fmt.Sprintf("txn op %d committed the outputs of partition %d's inputs up to %d with offset %s, want %d", id, p, end, got, end)})
			}
		}
		if missing > 0 {
			r.Anomalies = append(r.Anomalies, Anomaly{Guarantee: EOSOffsetsMatchOutput, Ops: []int64{id},
				Explanation: fmt.Sprintf("txn op %d is torn: %d of its inputs' outputs are in the committed output, %d are not", id, len(ins), missing)})
		}
	}
}

// noInputIn reports whether input partition p holds no record that landed at offsets
// [from, to), all below the partition's end as read after the run (so they are offsets of
// the log: markers and aborted records). A record whose send's fate is unknown is not known
// to be there, as for eos-no-loss. Without the end offsets (an older history) it is false.
func (c *pipeRun) noInputIn(p int32, from, to int64) bool {
	if end, read := c.inputEnds[p]; !read || to > end {
		return false
	}
	for o := from; o < to; o++ {
		if _, ok := c.landed.get(history.PipeOffset{Partition: p, Offset: o}); ok {
			return false
		}
	}
	return true
}

// checkOrder: per output partition (one per input partition), outputs of one input
// partition come in input order.
func (c *pipeRun) checkOrder(r *Result) {
	// Per output partition and input partition, the output read last: each input
	// partition's outputs go to one output partition, and order is judged within it.
	type stream struct{ out, in int32 }
	last := map[stream]history.PipeOutput{}
	byOffset := func(a, b history.PipeOutput) int {
		return cmp.Or(cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
	}
	outs := c.outputs // the final read gives them in this order: no copy to sort then
	if !slices.IsSortedFunc(outs, byOffset) {
		outs = slices.Clone(c.outputs)
		slices.SortStableFunc(outs, byOffset)
	}
	for _, o := range outs {
		if prev, ok := last[stream{o.Partition, o.In.Partition}]; ok && o.In.Offset <= prev.In.Offset && o.In != prev.In {
			r.Anomalies = append(r.Anomalies, Anomaly{Guarantee: EOSOrder, Log: fmt.Sprintf("output:%d", o.Partition), Ops: compactIDs([]int64{prev.Txn, o.Txn}),
				Explanation: fmt.Sprintf("output %d/%d (input %s) comes after output %d/%d (input %s)", o.Partition, o.Offset, o.In, prev.Partition, prev.Offset, prev.In)})
		}
		last[stream{o.Partition, o.In.Partition}] = o
	}
}

// checkTxnOutcome: the outcome each member reported agrees with the committed output.
func (c *pipeRun) checkTxnOutcome(r *Result) {
	next := c.byTxn // the outputs of the transactions from id on
	for _, op := range c.txnList {
		id := op.ID
		for len(next) > 0 && c.outputs[next[0]].Txn < id {
			next = next[1:]
		}
		committed := 0 // how many of its outputs are in the committed output
		for len(next) > 0 && c.outputs[next[0]].Txn == id {
			committed++
			next = next[1:]
		}
		switch {
		case op.Type == history.TypeFail && committed > 0:
			r.Anomalies = append(r.Anomalies, Anomaly{Guarantee: EOSTxnOutcome, Ops: []int64{id},
				Explanation: fmt.Sprintf("txn op %d of %s was reported not committed (%s), but %d of its outputs are in the committed output", id, op.Member, op.Error, committed)})
		case op.Type == history.TypeOK && committed == 0:
			r.Anomalies = append(r.Anomalies, Anomaly{Guarantee: EOSTxnOutcome, Ops: []int64{id},
				Explanation: fmt.Sprintf("txn op %d of %s was reported committed, but none of its outputs is in the committed output", id, op.Member)})
		}
	}
}

// checkReadCommitted: no committed output of an input record the harness aborted, or never
// wrote.
func (c *pipeRun) checkReadCommitted(r *Result) {
	for _, o := range c.outputs {
		var why string
		switch {
		case c.aborted[o.ID]:
			why = "was written in a transaction the harness aborted"
		case !c.wasSent(&o):
			why = "was never written"
		default:
			continue
		}
		r.Anomalies = append(r.Anomalies, Anomaly{Guarantee: EOSReadCommitted, Log: fmt.Sprintf("output:%d", o.Partition), Ops: []int64{o.Txn},
			Explanation: fmt.Sprintf("output %d/%d (txn op %d of %s) is made of input %s (%s), which %s", o.Partition, o.Offset, o.Txn, o.Member, o.In, o.ID, why)})
	}
	r.Details["inputs_aborted"] = len(c.aborted)
}

// checkFold (the stateful variant): each committed output's aggregate (count, sum) equals the
// fold of the input records of its partition that were written and not aborted, up to and
// including its own: what a member that applied each committed input record exactly once
// holds. A record applied twice, or state restored from the wrong output, shows here even
// when the outputs themselves are not duplicated.
func (c *pipeRun) checkFold(r *Result) {
	switch {
	case c.h.Meta.Pipeline == nil || !c.h.Meta.Pipeline.Stateful:
		r.Verdict, r.Details["not_covered"] = VerdictNotCovered, "the run is not stateful"
		return
	case len(c.sentIDSet()) != c.landed.len()+len(c.aborted):
		// A record that may have landed may be in the fold: the prefix is not known.
		r.Verdict, r.Details["unknown"] = VerdictUnknown, fmt.Sprintf("%d input records were sent with an unknown outcome", len(c.sentIDSet())-c.landed.len()-len(c.aborted))
		return
	}
	folds := make(map[history.PipeOffset][2]int64, c.landed.len()) // per input record: the fold up to it
	var p int32 = -1
	var count, sum int64
	for in, id := range c.landed.all() {
		if in.Partition != p {
			p, count, sum = in.Partition, 0, 0
		}
		count++
		sum += pipeRecordNumber(c.landedIDs[id])
		folds[in] = [2]int64{count, sum}
	}
	// In output order (each input partition's outputs go to one output partition), an
	// anomaly where an output's error differs from the one before it: once a state went
	// wrong every later aggregate of the partition carries the same error, and only the
	// steps where it changed are news.
	outs := slices.Clone(c.outputs)
	slices.SortStableFunc(outs, func(a, b history.PipeOutput) int {
		return cmp.Or(cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
	})
	type stream struct{ out, in int32 }
	prev := map[stream][2]int64{} // per stream, the last output's error (count, sum)
	wrong := 0
	for _, o := range outs {
		want, ok := folds[o.In]
		if !ok {
			continue // eos-read-committed says what it is made of
		}
		st, off := stream{o.Partition, o.In.Partition}, [2]int64{o.Count - want[0], o.Sum - want[1]}
		if off != [2]int64{} {
			wrong++
		}
		if off == prev[st] {
			continue
		}
		prev[st] = off
		if off == [2]int64{} {
			continue // back to right: the output before it was the news
		}
		r.Anomalies = append(r.Anomalies, Anomaly{Guarantee: EOSFold, Log: fmt.Sprintf("output:%d", o.Partition), Ops: []int64{o.Txn},
			Explanation: fmt.Sprintf("output %d/%d of input %s (txn op %d of %s) carries count %d and sum %d, but the committed input up to it folds to count %d and sum %d",
				o.Partition, o.Offset, o.In, o.Txn, o.Member, o.Count, o.Sum, want[0], want[1])})
	}
	r.Details["outputs_wrong"] = wrong
	r.Details["outputs_checked"] = len(c.outputs)
}

// pipeRecordNumber is the number of an input record's id as the workload writes it ("i42" is
// 42); 0 for another id.
func pipeRecordNumber(id string) int64 {
	n, _ := strconv.ParseInt(strings.TrimPrefix(id, "i"), 10, 64)
	return n
}

// wasSent reports whether a send wrote the input record output o is made of: the record that
// landed where o says, or any other of that id.
func (c *pipeRun) wasSent(o *history.PipeOutput) bool {
	if i, ok := c.landed.get(o.In); ok && c.landedIDs[i] == o.ID {
		return true
	}
	return c.sentIDSet()[o.ID]
}

// pipeCoverage judges the coverage of a pipeline run: final-read and ops-succeeded always,
// fault-took-hold when the run scheduled faults, and the promises.
func (c *pipeRun) pipeCoverage() {
	for _, name := range c.coverageNames(&c.h.Meta) {
		r := Result{Name: name, Verdict: VerdictValid, Details: map[string]any{}}
		c.safely(&r, func() {
			var ok bool
			switch name {
			case CoverFinalRead:
				ok = c.haveOutput && c.haveOffsets
				r.Details["final_output"], r.Details["final_offsets"] = c.haveOutput, c.haveOffsets
			case CoverOpsSucceeded:
				n := 0
				for _, op := range c.txns {
					if op.Type == history.TypeOK {
						n++
					}
				}
				ok, r.Details["committed_txns"] = n > 0, n
			case CoverFaultTookHold:
				var details map[string]any
				ok, details = coverFaultTookHold(&index{h: c.h})
				maps.Copy(r.Details, details)
			case CoverRebalance:
				members := map[int32]map[string]bool{}
				for _, op := range c.txns {
					if op.Type != history.TypeOK {
						continue
					}
					for _, in := range op.Args.Pipe.Inputs {
						if members[in.Partition] == nil {
							members[in.Partition] = map[string]bool{}
						}
						// The group's member id: a member that left and rejoined is a new one.
						members[in.Partition][op.Process+"/"+op.Member+"/"+op.Args.Pipe.MemberID] = true
					}
				}
				moved := 0
				for _, m := range members {
					if len(m) >= 2 {
						moved++
					}
				}
				ok, r.Details["partitions_moved"] = moved > 0, moved
			case CoverTxnAborted:
				aborted, fenced, counted := 0, 0, 0
				for _, op := range c.txns {
					if op.Type == history.TypeFail {
						aborted++
						if c.nearFault(op.Return) {
							counted++
						}
					}
					if op.Error == history.ErrorFenced {
						fenced++
					}
				}
				ok, r.Details["aborted_txns"], r.Details["fenced_txns"], r.Details["aborted_near_faults"] = counted > 0, aborted, fenced, counted
			default:
				panic("no pipeline coverage named " + name)
			}
			if !ok {
				r.Verdict = VerdictInconclusive
			}
		})
		c.res.Coverage = append(c.res.Coverage, r)
	}
}

// nearFault reports whether a transaction that ended at t counts for txn-aborted: in a run
// with faults, it ended while one held or within the members' session timeout after one ended
// (a zombie's transaction ends when it thaws), not in the scramble of the first assignment or
// of the members leaving at the end; in a run without faults, any.
func (c *pipeRun) nearFault(t int64) bool {
	if len(c.h.Faults) == 0 {
		return true
	}
	var grace int64
	if m := c.h.Meta.Pipeline; m != nil {
		grace = m.SessionTimeout
	}
	for _, f := range c.h.Faults {
		if t >= f.Start && (f.End == history.Never || t <= f.End+grace) {
			return true
		}
	}
	return false
}

// setFirstAt sets each check's FirstAt: the latest completion among the operations its
// earliest anomaly names, as checkers of lease histories do.
func (c *pipeRun) setFirstAt() {
	for i := range c.res.Checks {
		r := &c.res.Checks[i]
		for _, a := range r.Anomalies {
			at := int64(0)
			for _, id := range a.Ops {
				if op, ok := c.txns[id]; ok && op.Return != history.Never {
					at = max(at, op.Return)
				}
			}
			if at > 0 && (r.FirstAt == 0 || at < r.FirstAt) {
				r.FirstAt = at
			}
		}
	}
}

func comparePipeOffsets(a, b history.PipeOffset) int {
	return cmp.Or(cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
}

// compactIDs returns ids sorted, without repeats.
func compactIDs(ids []int64) []int64 {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	return slices.Compact(ids)
}

// checkTermination: the final look (final-txns) found no transaction of the run open and every
// input and output partition's last stable offset at its end. An open transaction's anomaly
// names the last transaction its transactional id ran.
func (c *pipeRun) checkTermination(r *Result) {
	switch op := c.finalTxns; {
	case op == nil && !c.haveOutput && !c.haveOffsets:
		r.Verdict, r.Details["unknown"] = VerdictUnknown, "no final reads"
		return
	case op == nil:
		r.Verdict, r.Details["not_covered"] = VerdictNotCovered, "the history has no final look at open transactions (it predates it)"
		return
	case op.Type != history.TypeOK || op.Result.Pipe == nil:
		r.Verdict, r.Details["unknown"] = VerdictUnknown, "the final look at open transactions failed: "+op.Message
		return
	}
	look := c.finalTxns.Result.Pipe
	last := map[string]int64{} // per transactional id, its last transaction
	for id, op := range c.txns {
		if t := op.Args.Pipe.TransactionalID; t != "" && id > last[t] {
			last[t] = id
		}
	}
	for _, t := range look.OpenTxns {
		a := Anomaly{Guarantee: EOSTermination, Explanation: fmt.Sprintf("transactional id %s (producer %d) still has a transaction %s after the heal", t.TransactionalID, t.ProducerID, t.State)}
		if id, ok := last[t.TransactionalID]; ok {
			a.Ops = []int64{id}
			a.Explanation += fmt.Sprintf("; its last transaction was txn op %d", id)
		}
		r.Anomalies = append(r.Anomalies, a)
	}
	for _, e := range look.Ends {
		if e.Stable < e.End {
			r.Anomalies = append(r.Anomalies, Anomaly{Guarantee: EOSTermination, Log: fmt.Sprintf("%s:%d", e.Topic, e.Partition),
				Explanation: fmt.Sprintf("the last stable offset of %s[%d] is %d, below its end %d, after the heal: a transaction holds it", e.Topic, e.Partition, e.Stable, e.End)})
		}
	}
	r.Details["partitions_checked"], r.Details["open_txns"] = len(look.Ends), len(look.OpenTxns)
}
