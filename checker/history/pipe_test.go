package history_test

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/fencecheck/fencecheck/checker/history"
)

// pipelineEvents is a small pipeline history: a send, a committed and a failed transaction,
// an unknown one, and the final reads.
func pipelineEvents() []history.Event {
	tok := history.Token{ProducerID: 7, Epoch: 2}
	meta := &history.Meta{Workload: history.WorkloadPipeline, Pipeline: &history.PipelineMeta{
		Group: "g", Input: "in", Output: "out", Partitions: 2, Member: "plain", Protocol: "classic",
	}}
	txn := &history.PipeArgs{Group: "g", MemberID: "m-1", Generation: 3, TransactionalID: "t-1",
		Inputs: []history.PipeRange{{Partition: 1, From: 0, To: 1}}, Offsets: []history.PipeOffset{{Partition: 1, Offset: 1}}}
	return []history.Event{
		{Type: history.TypeHeader, Meta: meta},
		{Type: history.TypeInvoke, ID: 1, Time: 10, Process: "seeder", Kind: history.KindSend, Args: history.Args{Pipe: &history.PipeArgs{ID: "i1"}}},
		{Type: history.TypeOK, ID: 1, Time: 20, Result: history.Result{Pipe: &history.PipeResult{Sent: &history.PipeOffset{Partition: 1, Offset: 0}}}},
		{Type: history.TypeInvoke, ID: 2, Time: 30, Client: 4, Process: "p1", Member: "m1", Kind: history.KindTxn, Args: history.Args{Pipe: txn}},
		{Type: history.TypeOK, ID: 2, Time: 40, Result: history.Result{Pipe: &history.PipeResult{Token: &tok}}},
		{Type: history.TypeInvoke, ID: 3, Time: 50, Client: 4, Process: "p1", Member: "m1", Kind: history.KindTxn, Args: history.Args{Pipe: txn}},
		{Type: history.TypeFail, ID: 3, Time: 60, Error: "fenced", Message: "the group refused"},
		{Type: history.TypeInvoke, ID: 4, Time: 70, Client: 4, Process: "p1", Member: "m1", Kind: history.KindTxn, Args: history.Args{Pipe: txn}},
		{Type: history.TypeInvoke, ID: 5, Time: 80, Process: "final", Kind: history.KindFinalOutput},
		{Type: history.TypeOK, ID: 5, Time: 90, Result: history.Result{Pipe: &history.PipeResult{Outputs: []history.PipeOutput{
			{Partition: 1, Offset: 0, In: history.PipeOffset{Partition: 1, Offset: 0}, ID: "i1", Txn: 2, Member: "m1", Generation: 3},
		}}}},
		{Type: history.TypeInvoke, ID: 6, Time: 95, Process: "final", Kind: history.KindFinalOffsets},
		{Type: history.TypeOK, ID: 6, Time: 99, Result: history.Result{Pipe: &history.PipeResult{Offsets: []history.PipeOffset{{Partition: 1, Offset: 1}}}}},
	}
}

// TestPipelineHistoryRoundTrips: a pipeline history is written as format 2, read back to the
// same operations (payloads, outcomes, a pending one), and written again byte for byte.
func TestPipelineHistoryRoundTrips(t *testing.T) {
	var buf bytes.Buffer
	w := history.NewWriter(&buf, history.WriterOptions{})
	for _, e := range pipelineEvents() {
		if err := w.Append(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if first, _, _ := strings.Cut(buf.String(), "\n"); !strings.Contains(first, `"format":2`) {
		t.Errorf("header %s: want format 2", first)
	}
	h, err := history.Read(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if h.Format != 2 || h.Meta.Workload != history.WorkloadPipeline || h.Meta.Pipeline.Partitions != 2 || h.Len() != 6 {
		t.Fatalf("format %d, meta %+v, %d ops", h.Format, h.Meta, h.Len())
	}
	txn := h.Op(1)
	if txn.Kind != history.KindTxn || txn.Type != history.TypeOK || txn.Result.Pipe == nil || *txn.Result.Pipe.Token != (history.Token{ProducerID: 7, Epoch: 2}) ||
		!reflect.DeepEqual(txn.Args.Pipe, pipelineEvents()[3].Args.Pipe) || txn.Client != 4 || txn.Member != "m1" {
		t.Errorf("committed txn read back as %+v", txn)
	}
	if f := h.Op(2); f.Type != history.TypeFail || f.Error != "fenced" || f.Result.Pipe != nil || f.Return != 60 {
		t.Errorf("failed txn read back as %+v", f)
	}
	if p := h.Op(3); !p.Pending || p.Type != history.TypeInfo || p.Return != history.Never || h.Pending() != 1 {
		t.Errorf("pending txn read back as %+v (pending %d)", p, h.Pending())
	}
	if out := h.Op(4).Result.Pipe.Outputs; len(out) != 1 || out[0].Txn != 2 || out[0].In.String() != "1/0" || out[0].ID != "i1" {
		t.Errorf("final output read back as %+v", out)
	}
	var again bytes.Buffer
	if err := history.Encode(&again, h); err != nil {
		t.Fatal(err)
	}
	h2, err := history.Read(bytes.NewReader(again.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	for i := range h.Len() {
		if a, b := h.Op(i), h2.Op(i); !reflect.DeepEqual(a, b) {
			t.Errorf("op %d differs after a second round:\n %+v\n %+v", i, a, b)
		}
	}
}

// TestPipelineEventsAreRefusedWhereTheyDoNotFit: a second completion of a pipeline operation,
// and a newer format than the reader knows, are refused.
func TestPipelineEventsAreRefusedWhereTheyDoNotFit(t *testing.T) {
	b := history.NewBuilder(0)
	evs := pipelineEvents()
	for i := range evs[:3] {
		if err := b.Add(&evs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Add(&evs[2]); !errors.Is(err, history.ErrMalformed) {
		t.Errorf("second completion of a send: %v, want ErrMalformed", err)
	}
	_, err := history.Read(strings.NewReader(`{"type":"header","time":0,"format":3}` + "\n"))
	if !errors.Is(err, history.ErrFormat) {
		t.Errorf("format 3: %v, want ErrFormat", err)
	}
	// A lease history's header is format 1, as it always was.
	var buf bytes.Buffer
	w := history.NewWriter(&buf, history.WriterOptions{})
	if err := w.WriteHeader(history.Meta{Scenario: "steady"}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if !strings.Contains(buf.String(), `"format":1`) {
		t.Errorf("lease header %s: want format 1", buf.String())
	}
}

// TestPipelinePayloadsDecodeAsJSON: the lexer decodes a pipeline payload written by hand
// (spaces, keys in another order, a key it does not know) as encoding/json would, and names a
// payload that is not what its field needs as malformed.
func TestPipelinePayloadsDecodeAsJSON(t *testing.T) {
	text := `{"type":"header","time":0,"format":2,"meta":{"workload":"pipeline"}}
{"type":"invoke","id":1,"time":1,"client":0,"process":"p1","kind":"txn","args":{"pipe": {"offsets": [{"offset": 5, "partition": 1}], "generation": 3, "future": {"x": [1, 2]}, "inputs": [{"to": 5, "from": 2, "partition": 1}], "member_id": "m\u002d1"}}}
{"type":"ok","id":1,"time":2,"result":{"pipe":{"token":{"epoch":2,"producer_id":9},"outputs":[{"in":{"offset":2,"partition":1},"txn":1,"id":"i8","offset":0,"partition":1}]}}}
{"type":"invoke","id":2,"time":3,"client":0,"process":"final","kind":"final-offsets"}
{"type":"ok","id":2,"time":4,"result":{"pipe":{"input_ends":[{"partition":1,"offset":9}],"offsets":[{"partition":1,"offset":5}]}}}
`
	h, err := history.Read(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	op := h.Op(0)
	want := &history.PipeArgs{MemberID: "m-1", Generation: 3, Inputs: []history.PipeRange{{Partition: 1, From: 2, To: 5}},
		Offsets: []history.PipeOffset{{Partition: 1, Offset: 5}}}
	if !reflect.DeepEqual(op.Args.Pipe, want) {
		t.Errorf("args %+v, want %+v", op.Args.Pipe, want)
	}
	res := op.Result.Pipe
	if res == nil || *res.Token != (history.Token{ProducerID: 9, Epoch: 2}) || len(res.Outputs) != 1 ||
		res.Outputs[0] != (history.PipeOutput{Partition: 1, In: history.PipeOffset{Partition: 1, Offset: 2}, ID: "i8", Txn: 1}) {
		t.Errorf("result %+v", res)
	}
	if got := h.Op(1).Result.Pipe; got == nil || !reflect.DeepEqual(got.InputEnds, []history.PipeOffset{{Partition: 1, Offset: 9}}) ||
		!reflect.DeepEqual(got.Offsets, []history.PipeOffset{{Partition: 1, Offset: 5}}) {
		t.Errorf("final-offsets result %+v, want offsets 1/5 and input end 1/9", got)
	}
	bad := strings.Replace(text, `"generation": 3`, `"generation": "three"`, 1)
	if _, err := history.Read(strings.NewReader(bad)); !errors.Is(err, history.ErrMalformed) {
		t.Errorf("a string generation: %v, want ErrMalformed", err)
	}
}

// TestOutputsDecodedInTwoHalvesAgreeWithTheLexer: a final read's outputs decoded in two
// halves at once are the outputs the lexer decodes, wherever the split falls: in the outputs,
// in the offsets after them (when the outputs are few), in an array whose second half the
// fast path cannot take (an escaped member), and in arrays of one output.
func TestOutputsDecodedInTwoHalvesAgreeWithTheLexer(t *testing.T) {
	defer history.SetSplitOutputs(1)()
	line := func(outputs, offsets int, escapeAt int) []byte {
		res := &history.PipeResult{}
		for i := range outputs {
			o := history.PipeOutput{Partition: int32(i % 3), Offset: int64(i), In: history.PipeOffset{Partition: int32(i % 3), Offset: int64(i / 3)},
				ID: "i" + strings.Repeat("x", i%5), Txn: int64(i/4 + 1), Member: []string{"m1", "m2", ""}[i%3], Generation: int32(i % 2)}
			if i == escapeAt {
				o.Member = `m"q`
			}
			res.Outputs = append(res.Outputs, o)
		}
		for i := range offsets {
			res.Offsets = append(res.Offsets, history.PipeOffset{Partition: int32(i), Offset: int64(i * 7)})
		}
		var buf bytes.Buffer
		w := history.NewWriter(&buf, history.WriterOptions{})
		for _, e := range []history.Event{
			{Type: history.TypeHeader, Meta: &history.Meta{Workload: history.WorkloadPipeline, Pipeline: &history.PipelineMeta{Partitions: 3}}},
			{Type: history.TypeInvoke, ID: 1, Time: 1, Process: "final", Kind: history.KindFinalOutput},
			{Type: history.TypeOK, ID: 1, Time: 2, Result: history.Result{Pipe: res}},
		} {
			if err := w.Append(e); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
		return lines[len(lines)-1]
	}
	fast := 0
	for _, c := range []struct{ outputs, offsets, escapeAt int }{
		{1, 0, -1}, {2, 0, -1}, {40, 0, -1}, {41, 3, -1}, {2, 60, -1}, {1, 30, -1}, {40, 2, 35}, {40, 2, 3},
	} {
		for _, split := range []int{1, 64, 512, 1 << 30} {
			restore := history.SetSplitOutputs(split)
			l := line(c.outputs, c.offsets, c.escapeAt)
			got, ok := history.DecodeFast(l)
			want, err := history.DecodeLex(l)
			restore()
			if err != nil {
				t.Fatalf("%+v: the lexer refused %s: %v", c, l, err)
			}
			if ok != (c.escapeAt < 0) {
				t.Fatalf("%+v, split at %d: the fast path took it: %t", c, split, ok)
			}
			if !ok {
				continue
			}
			fast++
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%+v, split at %d:\nfast  %+v\nlexer %+v", c, split, got.Result.Pipe, want.Result.Pipe)
			}
			if n := len(got.Result.Pipe.Outputs); n != c.outputs {
				t.Fatalf("%+v, split at %d: %d outputs", c, split, n)
			}
		}
	}
	if fast == 0 {
		t.Fatal("the fast path took no line")
	}
}
