package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencecheck/fencecheck/checker/history"
)

// The stateful variant (Config.Stateful): each member keeps a running aggregate per input
// partition, the count of the records it applied and the sum of their numbers, and writes it
// in each output. A member that starts a partition (an assignment or a rewind), or whose
// transaction did not commit, restores the partition's aggregate from its last committed
// output before it applies another record, as a stream processor restores its state from a
// changelog. A record applied twice then shows in the aggregates (eos-fold) even where the
// outputs look deduplicated.

// aggregate is a partition's running state: how many input records were applied, and the
// sum of their numbers (an input record "i42" is 42).
type aggregate struct{ count, sum int64 }

// recordNumber is the number of an input record's id: "i42" is 42.
func recordNumber(id string) int64 {
	n, _ := strconv.ParseInt(strings.TrimPrefix(id, "i"), 10, 64)
	return n
}

// markStale says the member's aggregates of partitions must be restored before they are
// applied again. It is called from the member's client (Config.Fetched) and its loop.
func (m *member) markStale(partitions ...int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range partitions {
		delete(m.agg, p)
	}
}

// apply adds the records of b to the member's aggregates, restoring those it does not hold
// first, and returns the aggregate after each record, in b's order.
func (m *member) apply(ctx context.Context, records []string, partitions []int32) ([]aggregate, error) {
	out := make([]aggregate, len(records))
	for i, id := range records {
		p := partitions[i]
		m.mu.Lock()
		a, ok := m.agg[p]
		m.mu.Unlock()
		if !ok {
			var err error
			if a, err = m.wl.restore(ctx, p); err != nil {
				return nil, fmt.Errorf("restore the aggregate of input partition %d: %w", p, err)
			}
		}
		a.count++
		a.sum += recordNumber(id)
		m.mu.Lock()
		m.agg[p] = a
		m.mu.Unlock()
		out[i] = a
	}
	return out, nil
}

// restore reads partition p's aggregate from its last committed output. It writes a
// sentinel to the output partition, outside any transaction, and reads back at read_committed
// up to it, as the final reads do: a transaction still open there (its own, whose markers
// are still being written, or a former owner's) holds the read back until it ends, so the
// last output before the sentinel is the last one committed. An output partition with no
// output is the zero aggregate. It goes straight to the cluster, outside the faults: the
// restore is the application's, not under test.
func (wl *Workload) restore(ctx context.Context, p int32) (aggregate, error) {
	ctx, cancel := context.WithTimeout(ctx, wl.cfg.TransactionTimeout.D()+wl.cfg.RequestTimeout.D())
	defer cancel()
	cl, err := wl.seederClient(kgo.ClientID("fencecheck-restore"))
	if err != nil {
		return aggregate{}, err
	}
	res := cl.ProduceSync(ctx, &kgo.Record{Topic: wl.output, Partition: p, Value: []byte(sentinel)})
	cl.Close()
	if err := res.FirstErr(); err != nil {
		return aggregate{}, fmt.Errorf("write a sentinel: %w", err)
	}
	until := res[0].Record.Offset
	// Read back a window before the sentinel, wider each time it holds no output
	// (transaction markers, aborted outputs and sentinels take offsets too).
	for window := int64(64); ; window *= 4 {
		from := max(0, until-window)
		a, found, err := wl.lastAggregate(ctx, p, from, until)
		if err != nil || found || from == 0 {
			return a, err
		}
	}
}

// lastAggregate reads output partition p at read_committed from offset from up to the
// sentinel at until, and returns the aggregate of the last output before it, and whether
// there was one.
func (wl *Workload) lastAggregate(ctx context.Context, p int32, from, until int64) (aggregate, bool, error) {
	cl, err := wl.seederClient(kgo.ClientID("fencecheck-restore"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{wl.output: {p: kgo.NewOffset().At(from)}}))
	if err != nil {
		return aggregate{}, false, err
	}
	defer cl.Close()
	var last aggregate
	found := false
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return aggregate{}, false, fmt.Errorf("read output partition %d up to %d: %w (a transaction still open holds it back)", p, until, err)
		}
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			switch {
			case done || r.Offset >= until:
				done = true
			case string(r.Value) == sentinel:
			default:
				var o history.PipeOutput
				if json.Unmarshal(r.Value, &o) == nil && o.Count > 0 {
					last, found = aggregate{o.Count, o.Sum}, true
				}
			}
		})
		if done {
			return last, found, nil
		}
	}
}
