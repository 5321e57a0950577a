package workload

import (
	"bytes"
	"context"
	"testing"

	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/cluster/embedded"
	"github.com/fencecheck/fencecheck/transport"
)

// TestClientRetiredAfterUnknown: an operation whose outcome is unknown retires the actor's
// porcupine client id; a certain failure does not.
func TestClientRetiredAfterUnknown(t *testing.T) {
	ctx := context.Background()
	c, err := embedded.New(ctx, embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	cfg, _ := Preset(PresetLow)
	cfg.Processes, cfg.Roles, cfg.MembersPerRole, cfg.Readers = 1, 1, 1, 0
	var buf bytes.Buffer
	hw := history.NewWriter(&buf, history.WriterOptions{})
	if err := hw.WriteHeader(cfg.Meta(c.Info())); err != nil {
		t.Fatal(err)
	}
	wl, err := New(ctx, cfg, c, hw, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer wl.Close(ctx)
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
	h, err := history.Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Ops) != 3 {
		t.Fatalf("%d ops, want 3", len(h.Ops))
	}
	write, acquire, describe := h.Ops[0], h.Ops[1], h.Ops[2]
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
