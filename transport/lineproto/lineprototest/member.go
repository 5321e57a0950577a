package lineprototest

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencecheck/fencecheck/transport/pipeline"
)

// PollBatch polls m, a second at a time, until it returns records, and returns them; the
// test fails if ctx ends first.
func PollBatch(ctx context.Context, t testing.TB, m pipeline.Member) pipeline.Batch {
	t.Helper()
	var b pipeline.Batch
	for len(b.Records) == 0 && ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		b, _ = m.Poll(pctx)
		cancel()
	}
	if len(b.Records) == 0 {
		t.Fatalf("no record polled: %v", ctx.Err())
	}
	return b
}

// CopyOne writes one record of value to partition 0 of topic in (cl must partition by the
// record's Partition), polls m until it returns a batch and transacts that batch with one
// output to partition 0, the call bounded by bound: one transaction of a pipeline member, as
// the wire tests make them.
func CopyOne(ctx context.Context, t testing.TB, cl *kgo.Client, m pipeline.Member, in string, value []byte, bound time.Duration) pipeline.Result {
	t.Helper()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: in, Value: value}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	b := PollBatch(ctx, t, m)
	tctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	return m.Transact(tctx, b, []pipeline.Output{{Partition: 0, Value: []byte("x")}})
}
