package pipeline

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/cluster"
)

// sentinel is the value of the records FinalReads writes to find the output's end.
const sentinel = "fencecheck:end"

// FinalReads reads, after Run and the heal, what the pipeline committed: the output topic
// at read_committed (a final-output operation) and the group's committed offsets with
// require-stable (final-offsets). Both go straight to the cluster, not through the links.
// Then it looks at what the run left open (final-txns): the termination guarantee's evidence.
// To know where the output ends it writes a sentinel to each output partition outside any
// transaction and reads until it has them all: what comes before a sentinel is everything
// committed before it, and a transaction still open holds the read back until it ends, so
// a transaction that never ends shows as a failed final read, not as a short one.
func (wl *Workload) FinalReads(parent context.Context) error {
	// A transaction left open by a member that died can take its timeout to be aborted.
	ctx, cancel := context.WithTimeout(parent, 2*wl.cfg.TransactionTimeout.D()+30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(append(cluster.ClientSecurity(wl.cl).KgoOpts(),
		kgo.SeedBrokers(wl.cl.Bootstrap()...),
		kgo.ClientID("fencecheck-final"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{wl.output: wl.allPartitions(kgo.NewOffset().AtStart())}),
		kgo.DisableClientMetrics())...)
	if err != nil {
		return fmt.Errorf("final reads: %w", err)
	}
	defer cl.Close()
	errOut := wl.finalOutput(ctx, cl)
	errOffsets := wl.finalOffsets(ctx, cl)
	// Its own bound: the output read may have spent the shared one waiting for an open
	// transaction, which is what this look is for.
	look := wl.lookFor
	if look == 0 {
		look = wl.cfg.TransactionTimeout.D() + 15*time.Second
	}
	tctx, cancel := context.WithTimeout(parent, look)
	defer cancel()
	errTxns := wl.finalTxns(tctx, cl)
	return errors.Join(errOut, errOffsets, errTxns, wl.failed())
}

// openStates are the transaction states of ListTransactions that are not ended.
var openStates = []string{"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"}

// finalTxns looks at what the run left open: its transactions that a coordinator still has
// open, and every input and output partition's last stable offset against its end. It looks
// again every 200 ms until nothing is open or ctx ends (a commit's markers take a moment to
// be written after the commit is answered), and records the last look (final-txns).
func (wl *Workload) finalTxns(ctx context.Context, cl *kgo.Client) error {
	op := wl.lastOp.Add(1)
	wl.append(history.Event{Type: history.TypeInvoke, ID: op, Time: wl.now(), Process: FinalProcess, Kind: history.KindFinalTxns})
	adm := kadm.NewClient(cl)
	var res *history.PipeResult
	var err error
	for {
		res, err = wl.lookOpen(ctx, adm)
		if err == nil && len(res.OpenTxns) == 0 && !slices.ContainsFunc(res.Ends, func(e history.PipeEnd) bool { return e.Stable < e.End }) {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
			continue
		}
		break
	}
	if res == nil {
		wl.append(history.Event{Type: history.TypeInfo, ID: op, Time: wl.now(), Error: "error", Message: err.Error()})
		return fmt.Errorf("final look at the open transactions: %w", err)
	}
	wl.append(history.Event{Type: history.TypeOK, ID: op, Time: wl.now(), Result: history.Result{Pipe: res}})
	return nil
}

// lookOpen lists the run's open transactions (their ids start with the group's name) and
// the input and output partitions' last stable offsets and ends.
func (wl *Workload) lookOpen(ctx context.Context, adm *kadm.Client) (*history.PipeResult, error) {
	listed, err := adm.ListTransactions(ctx, nil, openStates)
	if err != nil {
		return nil, fmt.Errorf("list transactions: %w", err)
	}
	res := &history.PipeResult{}
	for _, id := range slices.Sorted(maps.Keys(listed)) {
		// Brokers before Kafka 3.0 ignore the state filter: it is applied here too.
		if t := listed[id]; strings.HasPrefix(id, wl.group) && slices.Contains(openStates, t.State) {
			res.OpenTxns = append(res.OpenTxns, history.PipeOpenTxn{TransactionalID: id, State: t.State, ProducerID: t.ProducerID})
		}
	}
	stable, err := adm.ListCommittedOffsets(ctx, wl.input, wl.output)
	if err == nil {
		err = stable.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("last stable offsets: %w", err)
	}
	ends, err := adm.ListEndOffsets(ctx, wl.input, wl.output)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("end offsets: %w", err)
	}
	stable.Each(func(o kadm.ListedOffset) {
		e, _ := ends.Lookup(o.Topic, o.Partition)
		res.Ends = append(res.Ends, history.PipeEnd{Topic: o.Topic, Partition: o.Partition, Stable: o.Offset, End: e.Offset})
	})
	slices.SortFunc(res.Ends, func(a, b history.PipeEnd) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return res, nil
}

func (wl *Workload) allPartitions(o kgo.Offset) map[int32]kgo.Offset {
	m := map[int32]kgo.Offset{}
	for p := range wl.cfg.Partitions {
		m[p] = o
	}
	return m
}

// finalOutput reads the output up to the sentinels and records it.
func (wl *Workload) finalOutput(ctx context.Context, cl *kgo.Client) error {
	op := wl.lastOp.Add(1)
	wl.append(history.Event{Type: history.TypeInvoke, ID: op, Time: wl.now(), Process: FinalProcess, Kind: history.KindFinalOutput})
	fail := func(err error) error {
		wl.append(history.Event{Type: history.TypeInfo, ID: op, Time: wl.now(), Error: history.ErrorTimeout, Message: err.Error()})
		return fmt.Errorf("final read of the output: %w", err)
	}
	var ends []*kgo.Record
	for p := range wl.cfg.Partitions {
		ends = append(ends, &kgo.Record{Topic: wl.output, Partition: p, Value: []byte(sentinel)})
	}
	res := cl.ProduceSync(ctx, ends...)
	if err := res.FirstErr(); err != nil {
		return fail(fmt.Errorf("write the sentinels: %w", err))
	}
	// Each partition is read up to its own sentinel, by offset: a sentinel an earlier final
	// read left does not end this one.
	until := map[int32]int64{}
	for _, r := range res {
		until[r.Record.Partition] = r.Record.Offset
	}
	var outs []history.PipeOutput
	for len(until) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return fail(fmt.Errorf("%d sentinels not read: %w (a transaction still open holds the output back)", len(until), ctx.Err()))
		}
		fs.EachRecord(func(r *kgo.Record) {
			end, reading := until[r.Partition]
			if !reading {
				return // past this read's sentinel
			}
			if r.Offset >= end {
				delete(until, r.Partition)
				return
			}
			if string(r.Value) == sentinel {
				return // an earlier final read's
			}
			var oo observedOutput
			if err := json.Unmarshal(r.Value, &oo); err != nil {
				// Not an output a member made: the checker finds no transaction of this id.
				oo.PipeOutput = history.PipeOutput{In: history.PipeOffset{Partition: -1, Offset: -1}, ID: "unreadable: " + string(r.Value), Txn: -1}
			}
			o := oo.PipeOutput
			if oo.Ref != "" {
				// A self-driven member's: its transaction's number, in the member's count.
				o.Txn = wl.txnOp(oo.Ref, o.Txn)
			}
			o.Partition, o.Offset = r.Partition, r.Offset
			outs = append(outs, o)
		})
	}
	slices.SortStableFunc(outs, func(a, b history.PipeOutput) int {
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Offset - b.Offset)
	})
	if outs == nil {
		outs = []history.PipeOutput{}
	}
	wl.append(history.Event{Type: history.TypeOK, ID: op, Time: wl.now(), Result: history.Result{Pipe: &history.PipeResult{Outputs: outs}}})
	return nil
}

// finalOffsets fetches the group's committed offsets, stable, and the input's end offsets, and
// records them.
func (wl *Workload) finalOffsets(ctx context.Context, cl *kgo.Client) error {
	op := wl.lastOp.Add(1)
	wl.append(history.Event{Type: history.TypeInvoke, ID: op, Time: wl.now(), Process: FinalProcess, Kind: history.KindFinalOffsets})
	resp, err := kadm.NewClient(cl).FetchOffsets(kadm.RequireStable(ctx), wl.group)
	if err == nil {
		err = resp.Error()
	}
	if errors.Is(err, kerr.GroupIDNotFound) {
		// No member ever committed (kfake answers a group without offsets so; Apache Kafka
		// answers none): nothing is committed, which the checks judge.
		resp, err = nil, nil
	}
	if err != nil {
		wl.append(history.Event{Type: history.TypeInfo, ID: op, Time: wl.now(), Error: "error", Message: err.Error()})
		return fmt.Errorf("final fetch of the committed offsets: %w", err)
	}
	offsets := []history.PipeOffset{}
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Topic == wl.input && o.At >= 0 {
			offsets = append(offsets, history.PipeOffset{Partition: o.Partition, Offset: o.At})
		}
	})
	sortOffsets(offsets)
	// The input's end offsets: every send is answered by now, so nothing more is written.
	listed, err := kadm.NewClient(cl).ListEndOffsets(ctx, wl.input)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		wl.append(history.Event{Type: history.TypeInfo, ID: op, Time: wl.now(), Error: "error", Message: "the input's end offsets: " + err.Error()})
		return fmt.Errorf("final read of the input's end offsets: %w", err)
	}
	var ends []history.PipeOffset
	listed.Each(func(o kadm.ListedOffset) {
		ends = append(ends, history.PipeOffset{Partition: o.Partition, Offset: o.Offset})
	})
	sortOffsets(ends)
	wl.append(history.Event{Type: history.TypeOK, ID: op, Time: wl.now(), Result: history.Result{Pipe: &history.PipeResult{Offsets: offsets, InputEnds: ends}}})
	return nil
}
