package checker_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/checker/history"
)

// randomPipelineSeeds is how many random pipeline histories TestPipelineRandomHistories
// checks against testdata/pipeline-random.golden.
const randomPipelineSeeds = 300

// randomPipeline returns the events of a small random pipeline run: mostly what a faithful
// pipeline records, with, at random, the faults the guarantees exist for (lost, duplicated,
// reordered and torn outputs, outcomes that disagree with the output, offsets that do not
// match, aborted or unknown inputs read) and recordings the checker must call ill-formed.
func randomPipeline(rng *rand.Rand) []history.Event {
	// faults scales the chance of every fault: a third of the histories have none.
	faults := []float64{0, 1, 3}[rng.IntN(3)]
	p := func(x float64) bool { return rng.Float64() < x*faults }
	coin := func(x float64) bool { return rng.Float64() < x }
	meta := &history.Meta{Workload: history.WorkloadPipeline,
		Pipeline: &history.PipelineMeta{Group: "g", Input: "in", Output: "out", Partitions: 3}}
	if coin(0.3) {
		meta.Promises = []string{checker.CoverRebalance, checker.CoverTxnAborted}
	}
	events := []history.Event{{Type: history.TypeHeader, Meta: meta}}
	var id, t int64
	// op appends an invoke and, unless typ is 0 (pending), its completion.
	op := func(kind history.Kind, member string, args *history.PipeArgs, typ history.EventType, res *history.PipeResult, errClass string) int64 {
		id++
		t += 1 + rng.Int64N(20)
		events = append(events, history.Event{Type: history.TypeInvoke, ID: id, Time: t, Process: "p-" + member, Member: member, Kind: kind, Args: history.Args{Pipe: args}})
		if typ != 0 {
			t += 1 + rng.Int64N(20)
			e := history.Event{Type: typ, ID: id, Time: t, Error: errClass}
			if typ == history.TypeOK {
				e.Result.Pipe = res
			}
			events = append(events, e)
		}
		return id
	}
	parts := 1 + rng.Int32N(3)
	// The sends: per partition, the ids of the records at each offset (those that landed).
	landed := make([][]string, parts)
	for p32 := range parts {
		next := int64(0)
		for k := range rng.IntN(12) {
			name := fmt.Sprintf("i%d-%d", p32, k)
			switch {
			case p(0.06):
				op(history.KindSend, "", &history.PipeArgs{ID: name}, history.TypeFail, nil, history.ErrorAborted)
				next++ // the aborted record takes an offset
			case p(0.03):
				op(history.KindSend, "", &history.PipeArgs{ID: name}, history.TypeInfo, nil, "timeout")
			case p(0.02):
				op(history.KindSend, "", &history.PipeArgs{ID: name}, 0, nil, "")
			case p(0.02):
				op(history.KindSend, "", &history.PipeArgs{ID: name}, history.TypeOK, &history.PipeResult{}, "") // no sent: ill-formed
			case p(0.02):
				op(history.KindSend, "", &history.PipeArgs{}, history.TypeOK, nil, "") // no id: ill-formed
			default:
				if p(0.03) && next > 0 {
					next-- // lands where another already is: ill-formed
				}
				op(history.KindSend, "", &history.PipeArgs{ID: name}, history.TypeOK,
					&history.PipeResult{Sent: &history.PipeOffset{Partition: p32, Offset: next}}, "")
				for int64(len(landed[p32])) <= next {
					landed[p32] = append(landed[p32], "")
				}
				landed[p32][next] = name
				next++
				if p(0.05) {
					next++ // a gap: a transaction marker
				}
			}
		}
	}
	// The transactions: per partition, batches of 1 to 4 records by m1 or m2, their outputs
	// and the committed offset.
	var outs []history.PipeOutput
	outNext := make([]int64, parts)
	committed := make([]int64, parts)
	emit := func(txn int64, p32 int32, from, to int64, member string) {
		for o := from; o < to; o++ {
			name := ""
			if o < int64(len(landed[p32])) {
				name = landed[p32][o]
			}
			switch {
			case p(0.03):
				continue // lost from the output
			case p(0.02):
				name = "never-" + name
			}
			out := history.PipeOutput{Partition: p32, Offset: outNext[p32], In: history.PipeOffset{Partition: p32, Offset: o}, ID: name, Txn: txn, Member: member, Generation: 1}
			outNext[p32]++
			outs = append(outs, out)
			if p(0.02) {
				out.Offset = outNext[p32]
				outNext[p32]++
				outs = append(outs, out) // duplicated
			}
		}
	}
	for p32 := range parts {
		end := int64(len(landed[p32]))
		for from := int64(0); from < end; {
			to := min(end, from+1+rng.Int64N(4))
			member := []string{"m1", "m2"}[rng.IntN(2)]
			offset := to
			if p(0.03) {
				offset += rng.Int64N(3) - 1
			}
			args := &history.PipeArgs{Group: "g", MemberID: member + "-id", Generation: 1, TransactionalID: "t-" + member,
				Inputs: []history.PipeRange{{Partition: p32, From: from, To: to}}, Offsets: []history.PipeOffset{{Partition: p32, Offset: offset}}}
			if p(0.02) {
				args.Inputs = nil // names no inputs: ill-formed
			}
			if p(0.03) {
				args.Offsets = nil
			}
			tok := &history.PipeResult{Token: &history.Token{ProducerID: 1, Epoch: int16(rng.IntN(3))}}
			switch r := rng.Float64() / faults; {
			case r < 0.08: // fenced, and it did not commit (or, a fault, it did)
				txn := op(history.KindTxn, member, args, history.TypeFail, nil, history.ErrorFenced)
				if p(0.2) {
					emit(txn, p32, from, to, member)
				}
				continue // copied again
			case r < 0.12: // unknown outcome
				txn := op(history.KindTxn, member, args, history.TypeInfo, nil, "timeout")
				if coin(0.5) {
					emit(txn, p32, from, to, member)
					committed[p32] = offset
					from = to
				}
				continue
			case r < 0.14: // pending
				op(history.KindTxn, member, args, 0, nil, "")
				continue
			}
			txn := op(history.KindTxn, member, args, history.TypeOK, tok, "")
			switch {
			case p(0.03): // reported committed, but nothing in the output
			case p(0.03) && to-from > 1: // torn
				emit(txn, p32, from, from+1, member)
			default:
				emit(txn, p32, from, to, member)
			}
			if !p(0.03) {
				committed[p32] = offset
			}
			if p(0.03) {
				to = from + (to-from)/2 // copies part of it again
			}
			if p(0.03) {
				to++ // skips one
			}
			from = to
		}
	}
	if p(0.05) && len(outs) > 1 { // reordered
		i := rng.IntN(len(outs) - 1)
		outs[i], outs[i+1] = outs[i+1], outs[i]
	}
	if p(0.03) && len(outs) > 0 {
		outs[rng.IntN(len(outs))].Txn = 999999 // names a txn the history does not have
	}
	if p(0.03) {
		op(history.KindDescribe, "x", nil, history.TypeOK, nil, "") // a lease op: ill-formed
	}
	if !p(0.05) {
		op(history.KindFinalOutput, "", nil, history.TypeOK, &history.PipeResult{Outputs: outs}, "")
	}
	if !p(0.05) {
		var offsets, ends []history.PipeOffset
		for p32 := range parts {
			c := committed[p32]
			if p(0.03) {
				c += 2
			}
			if c > 0 || coin(0.5) {
				offsets = append(offsets, history.PipeOffset{Partition: p32, Offset: c})
			}
			ends = append(ends, history.PipeOffset{Partition: p32, Offset: int64(len(landed[p32])) + rng.Int64N(2)})
		}
		res := &history.PipeResult{Offsets: offsets}
		if coin(0.5) {
			res.InputEnds = ends
		}
		op(history.KindFinalOffsets, "", nil, history.TypeOK, res, "")
	}
	return events
}

// pipelineSummary is what testdata/pipeline-random.golden holds of one history's results:
// the verdicts and anomaly counts to read, and a hash of every check and coverage result
// whole (anomalies, details, first times; not the timings) that pins the rest.
type pipelineSummary struct {
	Seed    uint64          `json:"seed"`
	Verdict checker.Verdict `json:"verdict"`
	// NotValid maps each check or coverage result that is not valid to its verdict and its
	// number of anomalies.
	NotValid map[string]string `json:"not_valid,omitempty"`
	SHA256   string            `json:"sha256"`
}

func summarizePipeline(seed uint64, res *checker.Results) (pipelineSummary, []byte, error) {
	whole, err := json.Marshal(struct {
		Checks, Coverage []checker.Result
	}{res.Checks, res.Coverage})
	if err != nil {
		return pipelineSummary{}, nil, err
	}
	s := pipelineSummary{Seed: seed, Verdict: res.Verdict, SHA256: fmt.Sprintf("%x", sha256.Sum256(whole))}
	for _, r := range append(slices.Clone(res.Checks), res.Coverage...) {
		if r.Verdict != checker.VerdictValid {
			if s.NotValid == nil {
				s.NotValid = map[string]string{}
			}
			s.NotValid[r.Name] = fmt.Sprintf("%s %d", r.Verdict, len(r.Anomalies))
		}
	}
	return s, whole, nil
}

// TestPipelineRandomHistories checks random pipeline histories, valid and not, read from
// their file and built in memory, and compares every result with what the checker gave when
// testdata/pipeline-random.golden was written (rewrite it with -update, then review): a
// change for speed must not change a single anomaly.
func TestPipelineRandomHistories(t *testing.T) {
	golden := filepath.Join("testdata", "pipeline-random.golden")
	var want map[uint64]pipelineSummary
	if !*update {
		b, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (run with -update to create it)", err)
		}
		want = map[uint64]pipelineSummary{}
		for line := range bytes.Lines(b) {
			var s pipelineSummary
			if err := json.Unmarshal(line, &s); err != nil {
				t.Fatal(err)
			}
			want[s.Seed] = s
		}
		if len(want) != randomPipelineSeeds {
			t.Fatalf("%s has %d histories, want %d", golden, len(want), randomPipelineSeeds)
		}
	}
	var out bytes.Buffer
	verdicts := map[checker.Verdict]int{}
	for seed := range uint64(randomPipelineSeeds) {
		events := randomPipeline(rand.New(rand.NewPCG(seed, 40)))
		b := history.NewBuilder(0)
		var file bytes.Buffer
		w := history.NewWriter(&file, history.WriterOptions{})
		for i := range events {
			if err := b.Add(&events[i]); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			if err := w.Append(events[i]); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		read, err := history.Read(bytes.NewReader(file.Bytes()))
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		var sums [2]pipelineSummary
		var wholes [2][]byte
		for i, h := range []*history.History{b.History(), read} {
			res, err := checker.Check(context.Background(), h, checker.Options{})
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			if sums[i], wholes[i], err = summarizePipeline(seed, res); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(wholes[0], wholes[1]) {
			t.Fatalf("seed %d: the history read from its file gives\n%s\nthe one built in memory\n%s", seed, wholes[1], wholes[0])
		}
		verdicts[sums[0].Verdict]++
		if *update {
			line, err := json.Marshal(sums[0])
			if err != nil {
				t.Fatal(err)
			}
			out.Write(append(line, '\n'))
			continue
		}
		if !reflect.DeepEqual(sums[0], want[seed]) {
			t.Errorf("seed %d: got %+v, want %+v; the results:\n%s", seed, sums[0], want[seed], wholes[0])
		}
	}
	t.Logf("verdicts: %v", verdicts)
	if *update {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPipelineTransactionsOutOfOrder: a history built by hand may list its transactions out
// of the order of their ids; the checker judges it as it judges the same history in order.
func TestPipelineTransactionsOutOfOrder(t *testing.T) {
	for seed := range uint64(40) {
		events := randomPipeline(rand.New(rand.NewPCG(seed, 40)))
		b := history.NewBuilder(0)
		for i := range events {
			if err := b.Add(&events[i]); err != nil {
				t.Fatal(err)
			}
		}
		h := b.History()
		want, err := checker.Check(context.Background(), h, checker.Options{})
		if err != nil {
			t.Fatal(err)
		}
		// The same operations, the transactions' ids reversed among them (a txn keeps its
		// place in the history, and the outputs follow their transaction to its new id).
		var txnAt []int
		for i := range h.Len() {
			if h.Op(i).Kind == history.KindTxn {
				txnAt = append(txnAt, i)
			}
		}
		renamed := map[int64]int64{}
		for k, i := range txnAt {
			renamed[h.Op(i).ID] = h.Op(txnAt[len(txnAt)-1-k]).ID
		}
		for i := range h.Len() {
			h.Edit(i, func(op *history.Op) {
				if id, ok := renamed[op.ID]; ok && op.Kind == history.KindTxn {
					op.ID = id
				}
				if op.Kind == history.KindFinalOutput && op.Result.Pipe != nil {
					outs := slices.Clone(op.Result.Pipe.Outputs)
					for j := range outs {
						if id, ok := renamed[outs[j].Txn]; ok {
							outs[j].Txn = id
						}
					}
					op.Result.Pipe = &history.PipeResult{Outputs: outs}
				}
			})
		}
		got, err := checker.Check(context.Background(), h, checker.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Verdict != want.Verdict {
			t.Errorf("seed %d: %s with the transactions' ids reversed, %s in order", seed, got.Verdict, want.Verdict)
		}
		for i, r := range got.Checks {
			if r.Verdict != want.Checks[i].Verdict || len(r.Anomalies) != len(want.Checks[i].Anomalies) {
				t.Errorf("seed %d: %s is %s with %d anomalies with the ids reversed, %s with %d in order", seed, r.Name,
					r.Verdict, len(r.Anomalies), want.Checks[i].Verdict, len(want.Checks[i].Anomalies))
			}
		}
	}
}
