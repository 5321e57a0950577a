package transport_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/transport"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencecheck/fencecheck/transport/transporttest"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kversion"
)

// newKfake starts a 3-broker kfake cluster for the test and returns its bootstrap list.
func newKfake(t testing.TB, opts ...kfake.Opt) string {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(3)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return strings.Join(c.ListenAddrs(), ",")
}

func TestConformanceKfake(t *testing.T) {
	t.Run("TV2 negotiated", func(t *testing.T) {
		t.Parallel()
		transporttest.Run(t, transporttest.Env{Bootstrap: newKfake(t), TransactionVersion: 2, New: transporttest.Start})
	})
	t.Run("TV2 required", func(t *testing.T) {
		t.Parallel()
		transporttest.Run(t, transporttest.Env{Bootstrap: newKfake(t), TransactionVersion: 2,
			PinTransactionVersion: true, New: transporttest.Start})
	})
	t.Run("TV1 pinned by the client", func(t *testing.T) {
		t.Parallel()
		transporttest.Run(t, transporttest.Env{Bootstrap: newKfake(t), TransactionVersion: 1,
			PinTransactionVersion: true, New: transporttest.Start})
	})
	t.Run("TV1 cluster (3.9 protocol)", func(t *testing.T) {
		t.Parallel()
		transporttest.Run(t, transporttest.Env{Bootstrap: newKfake(t, kfake.MaxVersions(kversion.V3_9_0())),
			TransactionVersion: 1, New: transporttest.Start})
	})
}

func TestWaitStableWaitsForOpenTransactions(t *testing.T) {
	bootstrap := newKfake(t)
	cfg := transport.NewConfig(bootstrap, 10*time.Second)
	cfg.TopicPartitions = 1
	tr, err := transport.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close(context.Background())
	ctx := context.Background()
	cfg = tr.Config()                                     // defaults filled in: the topic's name
	if _, err := tr.Register(ctx, "r", "m"); err != nil { // creates the topic
		t.Fatal(err)
	}
	if err := tr.WaitStable(ctx, cfg.Topic, 0); err != nil {
		t.Fatalf("no transaction is open, yet WaitStable failed: %v", err)
	}

	open, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...), kgo.TransactionalID("open"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	if err := open.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := open.ProduceSync(ctx, &kgo.Record{Topic: cfg.Topic, Partition: 0, Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err = tr.WaitStable(short, cfg.Topic, 0)
	cancel()
	if !errors.Is(err, transport.ErrClient) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitStable with a transaction open = %v, want a deadline error", err)
	}
	if err := open.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if err := tr.WaitStable(ctx, cfg.Topic, 0); err != nil {
		t.Fatalf("WaitStable after the commit: %v", err)
	}
}
