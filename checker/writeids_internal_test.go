package checker

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/fencecheck/fencecheck/checker/checkertest"
	"github.com/fencecheck/fencecheck/checker/history"
)

// TestWriteIDsFindTheFirstWriteOfAnID: the table names, for every id, the first write that
// has it, and every later write with the same id as reusing that one, however the hashes
// sort; on tables short enough to sort by comparisons and long enough to radix sort.
func TestWriteIDsFindTheFirstWriteOfAnID(t *testing.T) {
	for _, n := range []int{0, 1, 7, 1000, 5000} {
		rng := rand.New(rand.NewPCG(uint64(n), 1))
		h := &history.History{}
		var ws []int32
		first := map[string]int32{}
		for i := range n {
			id := fmt.Sprintf("w%d", rng.IntN(max(1, n*3/4))) // a quarter of the ids reused
			if rng.IntN(5) == 0 {
				h.Append(history.Op{ID: int64(i), Kind: history.KindDescribe, Role: "r"})
				continue
			}
			h.Append(history.Op{ID: int64(i), Kind: history.KindWork, Role: "r", Args: history.Args{WriteID: id, Log: history.WorkLog(1)}})
			ws = append(ws, int32(i))
			if _, ok := first[id]; !ok {
				first[id] = int32(i)
			}
		}
		tab := newWriteIDs(h, ws)
		for _, w := range ws {
			id := h.WriteID(int(w))
			got, ok := tab.find(id)
			if !ok || got != first[id] {
				t.Fatalf("n=%d: find(%q) = %d, %t; want %d", n, id, got, ok, first[id])
			}
			prev, reuses := tab.reuses(w)
			if want := first[id] != w; reuses != want || reuses && prev != first[id] {
				t.Fatalf("n=%d: reuses(%d) = %d, %t; the first write of %q is %d", n, w, prev, reuses, id, first[id])
			}
		}
		if _, ok := tab.find("none"); ok {
			t.Fatalf("n=%d: found an id no write has", n)
		}
		if !slices.IsSorted(tab.sorted) {
			t.Fatalf("n=%d: not sorted by hash, then by operation", n)
		}
	}
}

// TestFinalRecordsFindTheWritesTheTableNames: the writes resolveLog finds for the records of
// every final log, comparing a few writes near the previous record's before it searches,
// are those the table of all write ids names, on histories of many roles sharing work
// partitions (records far out of their writes' order), with writes of several records, with
// planted violations and with write ids reused.
func TestFinalRecordsFindTheWritesTheTableNames(t *testing.T) {
	for seed := range uint64(12) {
		rng := rand.New(rand.NewPCG(seed, 5))
		cfg := checkertest.DefaultConfig()
		cfg.Roles, cfg.WorkPartitions, cfg.Indeterminate = 12, 2, 0.1
		if seed%2 == 1 {
			cfg.WorkRecords = 3
		}
		h := checkertest.Generate(cfg, rng)
		checkertest.Plant(h, checkertest.Violations[seed%uint64(len(checkertest.Violations))], rng)
		if seed%3 == 0 { // some writes take the id of an earlier write of the history
			var ids []string
			for i := range h.Len() {
				if op := h.Op(i); op.Kind.IsWrite() {
					if len(ids) > 0 && rng.IntN(20) == 0 {
						h.Edit(i, func(op *history.Op) { op.Args.WriteID = ids[rng.IntN(len(ids))] })
					}
					ids = append(ids, op.Args.WriteID)
				}
			}
		}
		c, err := Options{}.config(&history.Meta{LeaseDuration: h.Meta.LeaseDuration, TransactionVersion: h.Meta.TransactionVersion})
		if err != nil {
			t.Fatal(err)
		}
		x := newIndex(h, &c)
		checked := 0
		for _, l := range x.logList {
			for p, rec := range x.finalRecords(l) {
				want := int32(-1)
				if rec.Kind != history.RecordRegistration {
					if w, ok := x.writes.find(rec.WriteID); ok {
						want = w
					}
				}
				if l.finalWriter[p] != want {
					t.Fatalf("seed %d: log %s, record %d (%q): write %d, the table names %d", seed, l.id, p, rec.WriteID, l.finalWriter[p], want)
				}
				checked++
			}
		}
		if checked < 100 {
			t.Fatalf("seed %d: only %d final records", seed, checked)
		}
	}
}
