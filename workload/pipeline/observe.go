package pipeline

import (
	"context"
	"fmt"

	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/transport/pipeline"
)

// A self-driven member (pipeline.Observer, Kafka Streams behind the exec protocol) runs its own
// loop: the workload cannot hand it batches and outputs, so it asks it what it did and records
// that as the same operations a driven member's calls make. A transaction becomes a txn
// operation invoked when its observed begin is bounded (Began) and completed when the answer
// that reported it came (Ended), both on the harness's clock; its outputs name it by the
// member's ref and number, which the final read maps to the operation's id (txnOp). A poll
// that returned records marks the member as their partitions' holder and is its after-poll
// pause point. Its offset fetches are recorded from its gateway, as for any exec member.

// stop closes mb, recording what a self-driven member did while it closed (its client
// commits what it processed).
func (m *member) stop(mb pipeline.Member) {
	if obs, ok := selfDriven(mb); ok {
		m.record(context.Background(), obs.Stop())
		return
	}
	mb.Close()
}

// selfDriven returns mb as an Observer when it runs its own loop.
func selfDriven(mb pipeline.Member) (pipeline.Observer, bool) {
	obs, ok := mb.(pipeline.Observer)
	return obs, ok && obs.SelfDriven()
}

// record writes what a self-driven member did into the history, and reports whether the
// member must be replaced.
func (m *member) record(ctx context.Context, o pipeline.Observation) (restart bool) {
	wl := m.wl
	if o.Err != nil && !o.Restart {
		wl.log.Debug("observe", "member", m.name, "err", o.Err)
	}
	for _, e := range o.Events {
		switch {
		case e.Poll != nil:
			if len(e.Poll.Records) == 0 {
				continue
			}
			m.mu.Lock()
			for _, r := range e.Poll.Records {
				m.held[r.Partition] = wl.now()
			}
			m.mu.Unlock()
			m.pausePoint(ctx, PointAfterPoll)
		case e.Txn != nil:
			m.recordTxn(e.Txn)
		}
	}
	if o.Restart {
		wl.log.Warn("self-driven member stopped", "member", m.name, "err", o.Err)
	}
	return o.Restart
}

// recordTxn records one observed transaction as a txn operation.
func (m *member) recordTxn(t *pipeline.ObservedTxn) {
	wl := m.wl
	if len(t.Inputs) == 0 {
		// Nothing of it can be in the output: its offsets alone moved the group (a
		// transaction of offsets only, which a pipeline's history has no operation for).
		wl.log.Info("self-driven member: a transaction without inputs", "member", m.name, "txn", t.Number,
			"outcome", t.Result.Outcome, "offsets", fmt.Sprint(t.Offsets))
		return
	}
	op := wl.lastOp.Add(1)
	wl.obsMu.Lock()
	if wl.obsTxns == nil {
		wl.obsTxns = map[obsKey]int64{}
	}
	wl.obsTxns[obsKey{t.Ref, t.Number}] = op
	wl.obsMu.Unlock()
	args := &history.PipeArgs{Group: wl.group, MemberID: t.MemberID, Generation: t.Generation, TransactionalID: t.TransactionalID,
		Inputs: ranges(t.Inputs)}
	for p, o := range t.Offsets {
		args.Offsets = append(args.Offsets, history.PipeOffset{Partition: p, Offset: o})
	}
	sortOffsets(args.Offsets)
	began := max(0, int64(t.Began.Sub(wl.start)))
	ended := max(began, int64(t.Ended.Sub(wl.start)))
	wl.append(history.Event{Type: history.TypeInvoke, ID: op, Time: began, Process: m.process, Member: m.name, Kind: history.KindTxn,
		Args: history.Args{Pipe: args}})
	// The transaction's EndTxn went out before the member reported it, through the member's
	// gateway, which tells the version of each (Config.TxnVersion): the last one seen is
	// this transaction's or a later one's, and a client's version does not change mid-run.
	wl.completeTxn(history.Event{ID: op, Time: ended}, t.Result, len(t.Inputs), func(r *history.PipeResult) {
		r.TxnVersion = int(m.txnVersion.Load())
	})
}

// obsKey names a self-driven member's transaction: its ref and number.
type obsKey struct {
	ref    string
	number int64
}

// txnOp returns the txn operation recorded for a self-driven member's transaction, -1 when
// none was (the member was killed before it said): the checker then reports the output as
// naming a transaction the history does not have.
func (wl *Workload) txnOp(ref string, number int64) int64 {
	wl.obsMu.Lock()
	defer wl.obsMu.Unlock()
	if op, ok := wl.obsTxns[obsKey{ref, number}]; ok {
		return op
	}
	return -1
}

// observedOutput is an output as a self-driven member writes it: the workload's format, and
// the member's ref, which with Txn names its transaction.
type observedOutput struct {
	history.PipeOutput
	Ref string `json:"ref"`
}
