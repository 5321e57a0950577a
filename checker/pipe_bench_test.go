package checker_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/checker/history"
)

// writePipelineHistory writes a valid pipeline history of about ops operations to path:
// input records sent round 8 partitions, transactions of 5 records each (one in 50 aborted
// and copied again), and the final reads. It returns the number of operations written.
func writePipelineHistory(b *testing.B, path string, ops int) int {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	w := history.NewWriter(bw, history.WriterOptions{})
	const parts, batch = 8, 5
	sends := ops * batch / (batch + 1)
	id, t := int64(0), int64(0)
	app := func(e history.Event) {
		if err := w.Append(e); err != nil {
			b.Fatal(err)
		}
	}
	app(history.Event{Type: history.TypeHeader, Meta: &history.Meta{Workload: history.WorkloadPipeline,
		Pipeline: &history.PipelineMeta{Group: "g", Input: "in", Output: "out", Partitions: parts}}})
	next := make([]int64, parts) // per partition: the next offset sent
	for i := range sends {
		id++
		t += 1000
		p := int32(i % parts)
		app(history.Event{Type: history.TypeInvoke, ID: id, Time: t, Process: "seeder", Kind: history.KindSend, Args: history.Args{Pipe: &history.PipeArgs{ID: fmt.Sprintf("i%d", i)}}})
		app(history.Event{Type: history.TypeOK, ID: id, Time: t + 500, Result: history.Result{Pipe: &history.PipeResult{Sent: &history.PipeOffset{Partition: p, Offset: next[p]}}}})
		next[p]++
	}
	var outputs []history.PipeOutput
	outNext := make([]int64, parts)
	tok := history.Token{ProducerID: 1}
	for p := range int32(parts) {
		for from := int64(0); from < next[p]; from += batch {
			to := min(from+batch, next[p])
			for attempt := 0; attempt < 2; attempt++ {
				id++
				t += 1000
				args := &history.PipeArgs{Group: "g", MemberID: "m", Generation: 1, TransactionalID: "t",
					Inputs: []history.PipeRange{{Partition: p, From: from, To: to}}, Offsets: []history.PipeOffset{{Partition: p, Offset: to}}}
				app(history.Event{Type: history.TypeInvoke, ID: id, Time: t, Process: "p1", Member: "m1", Kind: history.KindTxn, Args: history.Args{Pipe: args}})
				if attempt == 0 && id%50 == 0 {
					app(history.Event{Type: history.TypeFail, ID: id, Time: t + 500, Error: history.ErrorFenced})
					continue
				}
				app(history.Event{Type: history.TypeOK, ID: id, Time: t + 500, Result: history.Result{Pipe: &history.PipeResult{Token: &tok}}})
				for o := from; o < to; o++ {
					outputs = append(outputs, history.PipeOutput{Partition: p, Offset: outNext[p], In: history.PipeOffset{Partition: p, Offset: o},
						ID: fmt.Sprintf("i%d", o*parts+int64(p)), Txn: id, Member: "m1", Generation: 1})
					outNext[p]++
				}
				break
			}
		}
	}
	var committed []history.PipeOffset
	for p := range int32(parts) {
		committed = append(committed, history.PipeOffset{Partition: p, Offset: next[p]})
	}
	id++
	app(history.Event{Type: history.TypeInvoke, ID: id, Time: t + 1000, Process: "final", Kind: history.KindFinalOutput})
	app(history.Event{Type: history.TypeOK, ID: id, Time: t + 2000, Result: history.Result{Pipe: &history.PipeResult{Outputs: outputs}}})
	id++
	app(history.Event{Type: history.TypeInvoke, ID: id, Time: t + 3000, Process: "final", Kind: history.KindFinalOffsets})
	app(history.Event{Type: history.TypeOK, ID: id, Time: t + 4000, Result: history.Result{Pipe: &history.PipeResult{Offsets: committed}}})
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	return int(id)
}

// BenchmarkPipelineReadCheck decodes and checks a pipeline history file (issue: 1M
// operations in at most 2 s and 1 GB): the file is written once, outside the timing.
func BenchmarkPipelineReadCheck(b *testing.B) {
	for _, ops := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("ops=%d", ops), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "history.jsonl")
			n := writePipelineHistory(b, path, ops)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				h, err := history.ReadFile(path)
				if err != nil {
					b.Fatal(err)
				}
				res, err := checker.Check(context.Background(), h, checker.Options{})
				if err != nil {
					b.Fatal(err)
				}
				if res.Verdict != checker.VerdictValid {
					b.Fatalf("verdict %s: %+v", res.Verdict, res.Checks)
				}
			}
			b.ReportMetric(float64(n), "ops")
		})
	}
}
