package workload

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/cluster/embedded"
	"github.com/fencecheck/fencecheck/transport"
)

// TestClientRetiredAfterUnknown: an operation whose outcome is unknown retires the actor's
// porcupine client id; a certain failure does not.
func TestClientRetiredAfterUnknown(t *testing.T) {
	ctx := context.Background()
	wl, hw, buf := oneMember(t)
	cl := wl.members[0].cl

	// A write under a token this process does not hold fails locally: certainly no effect.
	if _, err := cl.WriteLease(ctx, "r1", transport.FencingToken{ProducerID: 1, Epoch: 1}); transport.Classify(err) != transport.Fail {
		t.Fatalf("write without a holding: %v, want a certain failure", err)
	}
	// An acquire cut off by its context may still have minted: unknown.
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := cl.Acquire(cancelled, "r1"); transport.Classify(err) != transport.Unknown {
		t.Fatalf("cancelled acquire: %v, want an unknown outcome", err)
	}
	if _, _, err := cl.Describe(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	if err := hw.Flush(); err != nil {
		t.Fatal(err)
	}
	h, err := history.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	if h.Len() != 3 {
		t.Fatalf("%d ops, want 3", h.Len())
	}
	write, acquire, describe := h.Op(0), h.Op(1), h.Op(2)
	if write.Type != history.TypeFail || write.Error != history.ErrorNotHeld {
		t.Errorf("write: %s %q, want fail %q", write.Type, write.Error, history.ErrorNotHeld)
	}
	if acquire.Type != history.TypeInfo || acquire.Client != write.Client {
		t.Errorf("acquire: %s by client %d, want info by client %d (a failure keeps the id)", acquire.Type, acquire.Client, write.Client)
	}
	if describe.Client == acquire.Client {
		t.Errorf("describe after an unknown acquire by client %d, want a fresh client id", describe.Client)
	}
	if write.Args.WriteID != writeID(uint64(write.ID)) {
		t.Errorf("write id %q, want it named after op %d", write.Args.WriteID, write.ID)
	}
}

// TestWorkOfSeveralRecords: a work write of several records is one transaction whose records
// name the write, their index and their count, and the history records the count; a read
// gives them back in order.
func TestWorkOfSeveralRecords(t *testing.T) {
	ctx := context.Background()
	wl, hw, buf := oneMember(t)
	cl := wl.members[0].cl
	tok, err := cl.Acquire(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Work(ctx, "r1", tok, wl.workTopic, 0, []byte("p"), 3); err != nil {
		t.Fatal(err)
	}
	if err := cl.Work(ctx, "r1", tok, wl.workTopic, 0, []byte("p"), 1); err != nil {
		t.Fatal(err)
	}
	recs, err := cl.ReadWork(ctx, history.KindRead, wl.workTopic, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := hw.Flush(); err != nil {
		t.Fatal(err)
	}
	h, err := history.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	several, one := h.Op(1), h.Op(2)
	if several.Kind != history.KindWork || several.Args.Records != 3 || one.Args.Records != 0 {
		t.Fatalf("work ops %+v and %+v, want 3 records and one (recorded as 0)", several.Args, one.Args)
	}
	if len(recs) != 4 {
		t.Fatalf("read %d records, want 4: %+v", len(recs), recs)
	}
	for i, r := range recs[:3] {
		if r.WriteID != several.Args.WriteID || int(r.Index) != i || r.Count != 3 {
			t.Errorf("record %d: %+v, want record %d of 3 of %s", i, r, i, several.Args.WriteID)
		}
	}
	if r := recs[3]; r.WriteID != one.Args.WriteID || r.Index != 0 || r.Count != 0 {
		t.Errorf("the one-record write's record: %+v", r)
	}
}

// Recording an operation runs inside the latency the lease-write benchmark compares with a
// bare client, so its invoke and completion allocate nothing but the write id.
func TestRecordingAllocatesOnlyTheWriteID(t *testing.T) {
	hw := history.NewWriter(io.Discard, history.WriterOptions{})
	r := &recorder{w: hw, start: time.Now(), lease: 2 * time.Second, log: slog.New(slog.DiscardHandler),
		stats: newCounters(2*time.Second, []string{"r1"}), broken: make(chan struct{})}
	c := r.newClient(nil, "p1", "m1")
	args := history.Args{Token: history.Token{ProducerID: 12345, Epoch: 7}}
	allocs := testing.AllocsPerRun(100, func() {
		k := c.begin(history.KindWriteLease, "r1", args)
		if out := k.end(nil, history.Result{}); out != transport.OK {
			t.Fatalf("outcome %v, want ok", out)
		}
	})
	if allocs > 1 {
		t.Errorf("recording a lease write: %v allocations, want at most 1 (its write id)", allocs)
	}
	if err := r.failed(); err != nil {
		t.Fatal(err)
	}
}

// oneMember is a workload of one process, one role, one member and no reader on an embedded
// cluster, recording into the returned buffer (its header written); the test's end closes it.
func oneMember(t *testing.T) (*Workload, *history.Writer, *bytes.Buffer) {
	t.Helper()
	ctx := context.Background()
	c, err := embedded.New(ctx, embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(ctx) })
	cfg, _ := Preset(PresetLow)
	cfg.Processes, cfg.Roles, cfg.MembersPerRole, cfg.Readers = 1, 1, 1, 0
	buf := &bytes.Buffer{}
	hw := history.NewWriter(buf, history.WriterOptions{})
	if err := hw.WriteHeader(cfg.Meta(c.Info())); err != nil {
		t.Fatal(err)
	}
	wl, err := New(ctx, cfg, c, hw, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wl.Close(ctx) })
	return wl, hw, buf
}
