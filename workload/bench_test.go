package workload

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/cluster/embedded"
	"github.com/fencecheck/fencecheck/transport"
)

// BenchmarkLeaseWrite compares the workload's lease write (recording client, transport
// WriteLease, history appended to a file) with a bare franz-go transactional loop (begin,
// produce one lease-sized record, commit) on the same kgo client, through the same links, in
// the same run. Each iteration makes one write per process in each mode, the modes taking
// turns, so drift in the cluster hits all alike; each process writes from one long-lived
// goroutine, as a member does. It reports the recorded, bare and transport-only (WriteLease
// without the recorder) rates, and ratio = recorded/bare (the target is ≥ 0.95).
func BenchmarkLeaseWrite(b *testing.B) {
	for _, procs := range []int{1, 16} {
		b.Run(fmt.Sprintf("processes=%d", procs), func(b *testing.B) { benchLeaseWrite(b, procs) })
	}
}

func benchLeaseWrite(b *testing.B, procs int) {
	ctx := context.Background()
	c, err := embedded.New(ctx, embedded.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(ctx)
	cfg, _ := Preset(PresetMedium)
	cfg.Processes, cfg.Roles, cfg.MembersPerRole = procs, procs, 1
	hw, err := history.Create(filepath.Join(b.TempDir(), "history.jsonl"), cfg.Meta(c.Info()), history.WriterOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer hw.Close()
	wl, err := New(ctx, cfg, c, hw, nil, 1)
	if err != nil {
		b.Fatal(err)
	}
	defer wl.Close(ctx)

	type holder struct {
		cl   *client
		kc   *kgo.Client
		role string
		tok  transport.FencingToken
		rec  *kgo.Record
	}
	hs := make([]*holder, procs)
	for i, m := range wl.members {
		tok, err := m.cl.Acquire(ctx, m.role)
		if err != nil {
			b.Fatal(err)
		}
		partitions, err := m.proc.tr.EnsureTopic(ctx, cfg.topic(), cfg.TopicPartitions)
		if err != nil {
			b.Fatal(err)
		}
		hs[i] = &holder{cl: m.cl, kc: m.proc.tr.(*transport.BrokerTransport).BoundProducer(transport.Role(m.role)), role: m.role, tok: tok, rec: &kgo.Record{
			Topic: cfg.topic(), Partition: transport.PartitionFor(transport.Role(m.role), partitions),
			Key: transport.EncodeKey(transport.Role(m.role)),
			Value: transport.AppendValue(nil, transport.Value{Kind: transport.KindLease, Token: tok, Member: "m1",
				Lease: transport.Lease{Holder: "m1", Seq: 1 << 40, Duration: time.Second, WrittenAt: time.Now()}}),
		}}
	}
	bare := func(h *holder) error {
		if err := h.kc.BeginTransaction(); err != nil {
			return err
		}
		r := *h.rec
		if err := h.kc.ProduceSync(ctx, &r).FirstErr(); err != nil {
			return err
		}
		return h.kc.EndTransaction(ctx, kgo.TryCommit)
	}
	recorded := func(h *holder) error {
		_, err := h.cl.WriteLease(ctx, h.role, h.tok)
		return err
	}
	// One long-lived goroutine per process, as a member is; a round hands each its write.
	work := make([]chan func(*holder) error, procs)
	errs := make(chan error, procs)
	for i, h := range hs {
		work[i] = make(chan func(*holder) error)
		go func() {
			for write := range work[i] {
				errs <- write(h)
			}
		}()
	}
	defer func() {
		for _, w := range work {
			close(w)
		}
	}()
	round := func(write func(*holder) error) time.Duration {
		start := time.Now()
		for _, w := range work {
			w <- write
		}
		for range procs {
			if err := <-errs; err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	unrecorded := func(h *holder) error {
		return h.cl.tr.WriteLease(ctx, transport.Role(h.role), h.tok, transport.Lease{Holder: "m1", Seq: 1 << 41, Duration: time.Second, WrittenAt: time.Now()})
	}
	var tRecorded, tBare, tTransport time.Duration
	n := 0
	for b.Loop() {
		tRecorded += round(recorded)
		tBare += round(bare)
		tTransport += round(unrecorded)
		n++
	}
	b.ReportMetric(float64(n*procs)/tTransport.Seconds(), "transport-writes/s")
	rr := float64(n*procs) / tRecorded.Seconds()
	rb := float64(n*procs) / tBare.Seconds()
	b.ReportMetric(rr, "recorded-writes/s")
	b.ReportMetric(rb, "bare-writes/s")
	b.ReportMetric(rr/rb, "ratio")
}
