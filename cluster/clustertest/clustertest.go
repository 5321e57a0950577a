// Package clustertest holds the acceptance checks every cluster backend runs
// in its own tests: a per-process link cut, a kill of the transaction
// coordinator, a pause, and helpers to read a cluster's state with plain
// kgo/kadm clients.
package clustertest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/cluster/links"
)

// Timeouts of the checks. A cut link must make calls fail within CutTimeout;
// recovery after healing or a broker kill may take up to RecoverTimeout
// (Kafka fences a dead broker after broker.session.timeout.ms, 9 s).
const (
	CutTimeout     = 5 * time.Second
	RecoverTimeout = 90 * time.Second
)

// Client returns a plain kgo client of process, dialing through its links,
// closed when the test ends.
func Client(t testing.TB, c cluster.Cluster, process int, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dial, err := c.Links(ctx, process)
	if err != nil {
		t.Fatalf("links of %s: %v", links.ProcessName(process), err)
	}
	cl, err := kgo.NewClient(append(clientOpts(c, dial), opts...)...)
	if err != nil {
		t.Fatalf("client of %s: %v", links.ProcessName(process), err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func clientOpts(c cluster.Cluster, dial cluster.DialFunc) []kgo.Opt {
	return []kgo.Opt{
		kgo.SeedBrokers(c.Bootstrap()...),
		kgo.Dialer(dial),
		kgo.DialTimeout(2 * time.Second),
		kgo.RequestTimeoutOverhead(3 * time.Second),
		kgo.RetryTimeout(CutTimeout),
		kgo.MetadataMinAge(100 * time.Millisecond),
		kgo.MetadataMaxAge(2 * time.Second),
	}
}

// Admin returns a kadm client on the cluster's bootstrap addresses (no
// links), closed when the test ends.
func Admin(t testing.TB, c cluster.Cluster) *kadm.Client {
	t.Helper()
	cl, err := cluster.NewAdminClient(c.Bootstrap(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// CreateTopic creates a one-partition topic replicated on up to 3 brokers.
func CreateTopic(t testing.TB, c cluster.Cluster, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rf := int16(min(3, c.Info().Brokers))
	adm := Admin(t, c)
	for {
		resp, err := adm.CreateTopic(ctx, 1, rf, nil, topic)
		if err == nil {
			err = resp.Err
		}
		if err == nil || errors.Is(err, kerr.TopicAlreadyExists) {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("create topic %s: %v", topic, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// Produce writes one record to topic and waits for the ack, giving up at
// ctx's deadline.
func Produce(ctx context.Context, cl *kgo.Client, topic string) error {
	return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("fencecheck")}).FirstErr()
}

// ProducePerProcess is Produce with a per-record timeout, on a fresh context.
func producePerProcess(cl *kgo.Client, topic string, d time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	err := Produce(ctx, cl, topic)
	return time.Since(start), err
}

// Eventually retries fn until it returns nil or d passes; it returns the
// time taken and the last error.
func Eventually(d time.Duration, fn func() error) (time.Duration, error) {
	start := time.Now()
	for {
		err := fn()
		if err == nil || time.Since(start) > d {
			return time.Since(start), err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// LinkCut checks per-process links: with every link p1→b* down, process 1's
// produce and metadata requests fail within CutTimeout while process 2's
// succeed; after the links are healed, process 1 recovers.
func LinkCut(t *testing.T, c cluster.Cluster) {
	ctx := context.Background()
	const topic = "fencecheck-linkcut"
	CreateTopic(t, c, topic)
	opts := []kgo.Opt{kgo.DisableIdempotentWrite(), kgo.RecordDeliveryTimeout(CutTimeout)}
	p1 := Client(t, c, 1, opts...)
	p2 := Client(t, c, 2, opts...)
	for i, cl := range []*kgo.Client{p1, p2} {
		if took, err := Eventually(RecoverTimeout, func() error { _, err := producePerProcess(cl, topic, 10*time.Second); return err }); err != nil {
			t.Fatalf("p%d produce before the cut: %v (after %v)", i+1, err, took)
		}
	}

	cut, err := c.Network().ProcessLinks(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(cut) != c.Info().Brokers {
		t.Fatalf("p1 has %d links, want one per broker (%d)", len(cut), c.Info().Brokers)
	}
	for _, l := range cut {
		if err := l.Disable(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("cut %v", cut)

	took, err := producePerProcess(p1, topic, CutTimeout)
	if err == nil {
		t.Fatalf("p1 produce with p1→b* down: succeeded, want an error")
	}
	t.Logf("p1 produce failed after %v: %v", took.Round(time.Millisecond), err)
	if took > 2*CutTimeout {
		t.Errorf("p1 produce took %v to fail, want within %v", took, CutTimeout)
	}
	mctx, cancel := context.WithTimeout(ctx, CutTimeout)
	start := time.Now()
	// ListOffsets, not Metadata: kgo may answer a Metadata request from
	// what it learned a moment ago.
	offs, err := kadm.NewClient(p1).ListEndOffsets(mctx, topic)
	cancel()
	if err == nil {
		err = offs.Error()
	}
	if err == nil {
		t.Fatalf("p1 list offsets with p1→b* down: succeeded, want an error")
	}
	t.Logf("p1 list offsets failed after %v: %v", time.Since(start).Round(time.Millisecond), err)

	// p2 only has to succeed while p1 is still cut; on a loaded 2-core box
	// one attempt can miss its deadline, so allow a few.
	if took, err := Eventually(30*time.Second, func() error { _, err := producePerProcess(p2, topic, 10*time.Second); return err }); err != nil {
		t.Fatalf("p2 produce while p1 is cut: %v (after %v)", err, took)
	} else {
		t.Logf("p2 produced while p1 is cut (%v)", took.Round(time.Millisecond))
	}

	for _, l := range cut {
		if err := l.Heal(ctx); err != nil {
			t.Fatal(err)
		}
	}
	took, err = Eventually(RecoverTimeout, func() error { _, err := producePerProcess(p1, topic, CutTimeout); return err })
	if err != nil {
		t.Fatalf("p1 produce after healing: %v (after %v)", err, took)
	}
	t.Logf("p1 recovered %v after healing", took.Round(time.Millisecond))
}

// Coordinator returns the broker that coordinates txnID.
func Coordinator(ctx context.Context, c cluster.Cluster, txnID string) (int32, error) {
	bs, err := c.Brokers(ctx, cluster.RoleQuery{TransactionalIDs: []string{txnID}})
	if err != nil {
		return -1, err
	}
	for _, b := range bs {
		if b.Has(cluster.BrokerRole{Kind: cluster.RoleTxnCoordinator, Key: txnID}) {
			return b.ID, nil
		}
	}
	return -1, fmt.Errorf("no coordinator for %q in %+v", txnID, bs)
}

// CommitTxn runs one transaction as process with a new producer: it inits
// the producer id, produces one record to topic and commits. The whole thing
// is bounded by ctx even where kgo ignores it (an in-flight produce): then
// the client is closed.
func CommitTxn(ctx context.Context, c cluster.Cluster, process int, txnID, topic string) error {
	dial, err := c.Links(ctx, process)
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(append(clientOpts(c, dial),
		kgo.TransactionalID(txnID),
		kgo.TransactionTimeout(30*time.Second),
	)...)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() {
		done <- func() error {
			if _, _, err := cl.ProducerID(ctx); err != nil {
				return fmt.Errorf("init producer id: %w", err)
			}
			if err := cl.BeginTransaction(); err != nil {
				return fmt.Errorf("begin: %w", err)
			}
			if err := Produce(ctx, cl, topic); err != nil {
				return fmt.Errorf("produce: %w", err)
			}
			if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
				return fmt.Errorf("commit: %w", err)
			}
			return nil
		}()
	}()
	select {
	case err = <-done:
	case <-ctx.Done():
		cl.Close()
		<-done
		err = fmt.Errorf("transaction: %w", ctx.Err())
	}
	cl.Close()
	return err
}

// KillCoordinator kills the broker coordinating a transactional id and
// checks that a new producer can still InitProducerId and commit once the
// cluster has moved the coordinator; then it restarts the broker and waits
// for the cluster to be healthy.
func KillCoordinator(t *testing.T, c cluster.Cluster) {
	ctx := context.Background()
	const txnID, topic = "fencecheck-killcoord", "fencecheck-killcoord"
	CreateTopic(t, c, topic)
	if took, err := Eventually(RecoverTimeout, func() error {
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		return CommitTxn(cctx, c, 3, txnID, topic)
	}); err != nil {
		t.Fatalf("transaction before the kill: %v (after %v)", err, took)
	}
	coord, err := Coordinator(ctx, c, txnID)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("coordinator of %s is %s; killing it", txnID, links.BrokerName(coord))
	if err := c.Kill(ctx, coord); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if b, _ := c.Brokers(ctx, cluster.RoleQuery{}); len(b) == 0 {
		t.Fatal("no brokers listed")
	} else if bb, _ := cluster.Find(b, coord); bb.State != cluster.StateKilled {
		t.Errorf("%s state %v after Kill, want killed", links.BrokerName(coord), bb.State)
	}

	attempts := 0
	took, err := Eventually(RecoverTimeout, func() error {
		attempts++
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		err := CommitTxn(cctx, c, 4, txnID, topic)
		if err != nil {
			t.Logf("attempt %d after %v: %v", attempts, time.Since(killed).Round(time.Millisecond), err)
		}
		return err
	})
	if err != nil {
		t.Fatalf("new producer with %s killed: %v (after %v)", links.BrokerName(coord), err, took)
	}
	t.Logf("new producer committed %v after the kill (%d attempts)", time.Since(killed).Round(time.Millisecond), attempts)
	if now, err := Coordinator(ctx, c, txnID); err != nil {
		t.Errorf("coordinator after the kill: %v", err)
	} else if now == coord {
		t.Errorf("coordinator after the kill is still the killed %s", links.BrokerName(coord))
	}

	rctx, cancel := context.WithTimeout(ctx, 2*RecoverTimeout)
	defer cancel()
	start := time.Now()
	if err := c.Restart(rctx, coord); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitHealthy(rctx, c, nil); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s restarted, cluster healthy after %v", links.BrokerName(coord), time.Since(start).Round(time.Millisecond))
}

// PauseLeader pauses the leader of a partition: process 5's produce to it
// fails within CutTimeout; after Resume it succeeds. If the produce succeeds it reached another
// broker (a paused one answers nothing): the lookup and the client disagreed on the leader,
// as when leadership moves between them. The test then looks the leader up again and tries
// once more on it, up to three times, and fails only when the paused broker was still the
// leader.
func PauseLeader(t *testing.T, c cluster.Cluster) {
	ctx := context.Background()
	const topic = "fencecheck-pause"
	CreateTopic(t, c, topic)
	p := Client(t, c, 5, kgo.DisableIdempotentWrite(), kgo.RecordDeliveryTimeout(CutTimeout))
	if took, err := Eventually(RecoverTimeout, func() error { _, err := producePerProcess(p, topic, 10*time.Second); return err }); err != nil {
		t.Fatalf("produce before the pause: %v (after %v)", err, took)
	}
	leaderOf := func() int32 {
		t.Helper()
		bs, err := c.Brokers(ctx, cluster.RoleQuery{Partitions: []cluster.TopicPartition{{Topic: topic}}})
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bs {
			if b.Has(cluster.BrokerRole{Kind: cluster.RoleLeader, Topic: topic}) {
				return b.ID
			}
		}
		t.Fatalf("no leader of %s/0 in %+v", topic, bs)
		return -1
	}
	for attempt := 1; ; attempt++ {
		leader := leaderOf()
		if err := c.Pause(ctx, leader); err != nil {
			t.Fatal(err)
		}
		took, err := producePerProcess(p, topic, CutTimeout)
		if rerr := c.Resume(ctx, leader); rerr != nil {
			t.Fatal(rerr)
		}
		if err != nil {
			t.Logf("produce with leader %s paused failed after %v: %v", links.BrokerName(leader), took.Round(time.Millisecond), err)
			break
		}
		if now := leaderOf(); now == leader || attempt == 3 {
			t.Fatalf("produce with leader %s paused: succeeded (leader now %s, attempt %d), want an error",
				links.BrokerName(leader), links.BrokerName(now), attempt)
		} else {
			t.Logf("leadership moved from %s to %s during attempt %d: trying the new leader", links.BrokerName(leader), links.BrokerName(now), attempt)
		}
	}
	if took, err := Eventually(RecoverTimeout, func() error { _, err := producePerProcess(p, topic, CutTimeout); return err }); err != nil {
		t.Fatalf("produce after resume: %v (after %v)", err, took)
	}
}

// FinalizedFeature returns the finalized level of a feature (e.g.
// "transaction.version") as the brokers report it in ApiVersions; 0 when it
// is not finalized. Brokers that disagree are an error.
func FinalizedFeature(ctx context.Context, adm *kadm.Client, name string) (int16, error) {
	vs, err := adm.ApiVersions(ctx)
	if err != nil {
		return 0, err
	}
	level := int16(-1)
	for _, v := range vs.Sorted() {
		if v.Err != nil {
			return 0, fmt.Errorf("broker %d: %w", v.NodeID, v.Err)
		}
		var l int16
		for _, f := range v.Raw().FinalizedFeatures {
			if f.Name == name {
				l = f.MaxVersionLevel
			}
		}
		if level >= 0 && l != level {
			return 0, fmt.Errorf("brokers disagree on %s: %d and %d", name, level, l)
		}
		level = l
	}
	return level, nil
}
