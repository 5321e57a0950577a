package history_test

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/fencecheck/fencecheck/checker/history"
)

// TestSetOpKeepsAnyOperation: whatever Op is stored, Op gives it back, including the shapes
// the compact form has no room for (which History keeps whole) and after an operation is
// replaced by one of another shape; WriteToken and WriteID read what Op would.
func TestSetOpKeepsAnyOperation(t *testing.T) {
	tok := &history.Token{ProducerID: 4, Epoch: 2}
	off := int64(7)
	recs := []history.Record{{Offset: 0, Kind: history.RecordLease, Member: "m1", Token: *tok, WriteID: "w1"}}
	pipeArgs := history.Args{Token: history.NoToken, Pipe: &history.PipeArgs{ID: "i1", Inputs: []history.PipeRange{{Partition: 1, From: 2, To: 3}}}}
	pipeResult := history.Result{Pipe: &history.PipeResult{Sent: &history.PipeOffset{Partition: 1, Offset: 2}}}
	shapes := map[string]func(op *history.Op){
		"as generated":            func(*history.Op) {},
		"failure texts":           func(op *history.Op) { op.Error, op.Message = history.ErrorFenced, "fenced: é" },
		"result token on write":   func(op *history.Op) { op.Kind, op.Args.Token, op.Result.Token = history.KindWork, *tok, tok },
		"log of another role":     func(op *history.Op) { op.Args.Log = history.RoleLog(op.Role + "x") },
		"work log with a role":    func(op *history.Op) { op.Args.Log = history.LogID{Work: true, Role: "r", Partition: 3} },
		"unknown kind":            func(op *history.Op) { op.Kind = "compact" },
		"no kind":                 func(op *history.Op) { op.Kind = "" },
		"client out of range":     func(op *history.Op) { op.Client = math.MaxInt32 + 1 },
		"offset and records":      func(op *history.Op) { op.Result.Offset, op.Result.Records = &off, recs },
		"empty records":           func(op *history.Op) { op.Result.Records = []history.Record{} },
		"offset":                  func(op *history.Op) { op.Result.Offset, op.Result.Records = &off, nil },
		"held without a token":    func(op *history.Op) { op.Result.Held, op.Result.Token = true, nil },
		"zero args, result token": func(op *history.Op) { op.Args, op.Result.Token = history.Args{}, tok },
		"pending":                 func(op *history.Op) { op.Pending, op.Type, op.Return = true, history.TypeInfo, history.Never },
		"pipeline":                func(op *history.Op) { op.Kind, op.Args, op.Result = history.KindTxn, pipeArgs, pipeResult },
		"pipeline, no result":     func(op *history.Op) { op.Kind, op.Args, op.Result = history.KindSend, pipeArgs, history.Result{} },
		"pipeline, lease token": func(op *history.Op) {
			op.Kind, op.Args, op.Result = history.KindSend, pipeArgs, pipeResult
			op.Args.Token = *tok
		},
		"pipeline, lease result": func(op *history.Op) {
			op.Kind, op.Args, op.Result = history.KindFinalOutput, pipeArgs, pipeResult
			op.Result.Offset = &off
		},
		"pipeline payload on a lease op": func(op *history.Op) { op.Result.Pipe = pipeResult.Pipe },
		"several records": func(op *history.Op) {
			op.Kind, op.Args.Token, op.Args.Records, op.Result = history.KindWork, *tok, 3, history.Result{}
		},
		"records on a read": func(op *history.Op) { op.Kind, op.Args.Records = history.KindRead, 2 },
		"records and an offset on a write": func(op *history.Op) {
			op.Kind, op.Args.Token, op.Args.Records, op.Result = history.KindWriteLease, *tok, 2, history.Result{Offset: &off}
		},
	}
	h := generated(t, 9)
	rng := rand.New(rand.NewPCG(9, 9))
	want := make([]history.Op, h.Len())
	for i := range h.Len() {
		want[i] = h.Op(i)
	}
	for name, shape := range shapes {
		for range 40 {
			i := rng.IntN(h.Len())
			op := h.Op(i)
			shape(&op)
			h.SetOp(i, op)
			want[i] = op
			if got := h.Op(i); !reflect.DeepEqual(got, op) {
				t.Fatalf("%s: stored %+v, got back %+v", name, op, got)
			}
		}
	}
	for i := range h.Len() {
		if got := h.Op(i); !reflect.DeepEqual(got, want[i]) {
			t.Fatalf("op %d: want %+v, got %+v", i, want[i], got)
		}
	}
	var loaded history.Op
	for i, op := range h.All() {
		h.Load(i, &loaded)
		if !reflect.DeepEqual(loaded, op) {
			t.Fatalf("op %d: Load gave %+v after %+v, Op %+v", i, loaded, h.Op(max(i-1, 0)), op)
		}
		if tok, id := h.WriteToken(i), h.WriteID(i); tok != op.Args.Token || id != op.Args.WriteID {
			t.Fatalf("op %d: WriteToken %v and WriteID %q, Op %+v", i, tok, id, op)
		}
	}
	h.Append(want[0], want[1])
	if h.Len() != len(want)+2 || !reflect.DeepEqual(h.Op(h.Len()-1), want[1]) {
		t.Fatalf("appended: %d operations, last %+v", h.Len(), h.Op(h.Len()-1))
	}
}

// TestBuilderKeepsResultsTheWriterWouldNotWrite: a result the compact form has no room for (a
// token in a write's result, an offset beside a read's records) is kept as the line gave it.
func TestBuilderKeepsResultsTheWriterWouldNotWrite(t *testing.T) {
	tok := history.Token{ProducerID: 3, Epoch: 1}
	off := int64(5)
	recs := []history.Record{{Offset: 0, Kind: history.RecordRegistration, Member: "m1", Token: history.NoToken}}
	b := history.NewBuilder(0)
	for _, e := range []history.Event{
		{Type: history.TypeHeader},
		{Type: history.TypeInvoke, ID: 1, Role: "r", Member: "m1", Kind: history.KindWriteLease, Args: history.Args{Token: tok, WriteID: "w1"}},
		{Type: history.TypeOK, ID: 1, Time: 1, Result: history.Result{Token: &tok}},
		{Type: history.TypeInvoke, ID: 2, Time: 2, Role: "r", Kind: history.KindRead},
		{Type: history.TypeOK, ID: 2, Time: 3, Result: history.Result{Offset: &off, Records: recs}},
	} {
		if err := b.Add(&e); err != nil {
			t.Fatal(err)
		}
	}
	h := b.History()
	if w := h.Op(0); w.Args.Token != tok || w.Result.Token == nil || *w.Result.Token != tok || w.Type != history.TypeOK {
		t.Errorf("write: %+v", w)
	}
	if r := h.Op(1); r.Result.Offset == nil || *r.Result.Offset != off || !reflect.DeepEqual(r.Result.Records, recs) || r.Return != 3 {
		t.Errorf("read: %+v", r)
	}
}

// TestBuilderNamesSubstringsApart: names that share their bytes (substrings of one string,
// at the same address with other lengths, or one name at two addresses) get the names they
// were given, however the Builder caches them.
func TestBuilderNamesSubstringsApart(t *testing.T) {
	all := "role-1role-10p1m1"
	b := history.NewBuilder(0)
	if err := b.Add(&history.Event{Type: history.TypeHeader}); err != nil {
		t.Fatal(err)
	}
	type names struct{ process, member, role string }
	want := []names{
		{all[12:14], all[14:16], all[0:6]},  // p1 m1 role-1
		{all[12:13], all[14:15], all[6:12]}, // p m role-1 at another address
		{all[12:14], all[14:16], all[0:7]},  // role-1r: role-1's address, another length
		{"p1", "m1", all[6:13]},             // role-10
	}
	for i, n := range want {
		if err := b.Add(&history.Event{Type: history.TypeInvoke, ID: int64(i), Process: n.process, Member: n.member, Role: n.role, Kind: history.KindDescribe}); err != nil {
			t.Fatal(err)
		}
	}
	h := b.History()
	for i, n := range want {
		if op := h.Op(i); op.Process != n.process || op.Member != n.member || op.Role != n.role {
			t.Fatalf("op %d: %q %q %q, want %+v", i, op.Process, op.Member, op.Role, n)
		}
	}
}
