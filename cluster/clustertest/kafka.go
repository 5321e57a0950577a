package clustertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/cluster/links"
)

// KafkaFaults checks each action of the Kafka-aware faults (links.Network.AddKafkaFault) on
// c by what a client sees and what the log holds afterwards. Process 1 is the faulty one;
// process 2 writes sentinels and reads.
func KafkaFaults(t *testing.T, c cluster.Cluster) {
	e := &kafkaFaultEnv{c: c, net: c.Network(), suffix: fmt.Sprint(time.Now().UnixNano())}
	for _, k := range []struct {
		name string
		run  func(*testing.T, *kafkaFaultEnv)
	}{
		{"drop-response of EndTxn - the client fails, the commit is in the log", dropResponseOfEndTxn},
		{"drop of EndTxn - the client fails, nothing is committed", dropOfEndTxn},
		{"error-response of Produce - the client sees the error, the record is in the log", errorResponseOfProduce},
		{"delay of Produce - the produce succeeds late", delayOfProduce},
		{"delay of ListOffsets past the client's deadline - the call fails at its deadline", delayPastDeadline},
		{"duplicate of Produce - the record is in the log twice", duplicateOfProduce},
		{"hold of Produce until EndTxn - it lands after the commit, though its client is gone", holdUntilEndTxn},
		{"hold whose trigger never comes - heal-all removes the fault and delivers", holdHealedByHealAll},
	} {
		t.Run(k.name, func(t *testing.T) { k.run(t, e) })
	}
}

// kafkaFaultEnv is what the cases of KafkaFaults share: the cluster, its network, and a suffix
// that keeps their topics and transactional ids apart from other runs' on the same cluster.
type kafkaFaultEnv struct {
	c      cluster.Cluster
	net    *links.Network
	suffix string
}

// add adds the fault, removed when the test ends.
func (e *kafkaFaultEnv) add(t *testing.T, s links.KafkaFaultSpec) *links.KafkaFault {
	t.Helper()
	f, err := e.net.AddKafkaFault(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Remove(context.Background()) })
	return f
}

// plain is a client of process without idempotence, waiting for every in-sync replica.
func (e *kafkaFaultEnv) plain(t *testing.T, process int, opts ...kgo.Opt) *kgo.Client {
	return Client(t, e.c, process, append([]kgo.Opt{kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.AllISRAcks())}, opts...)...)
}

// dropResponseOfEndTxn: drop-response of EndTxn - the client fails, the commit is in the log.
func dropResponseOfEndTxn(t *testing.T, e *kafkaFaultEnv) {
	topic, txnID := "fc-kf-dropresp-"+e.suffix, "fc-kf-dropresp-"+e.suffix
	CreateTopic(t, e.c, topic)
	f := e.add(t, links.KafkaFaultSpec{Action: links.KafkaDropResponse, API: "EndTxn", Processes: []int{1}, TransactionalID: txnID})
	err := txnWithCommit(e.c, 1, txnID, topic, "v", 3*time.Second)
	if err == nil {
		t.Fatal("commit succeeded; want the client to time out without an answer")
	}
	if f.Acted() == 0 {
		t.Fatalf("the fault never acted; commit error: %v", err)
	}
	t.Logf("the client saw: %v", err)
	vals := readUntilSentinel(t, e.c, topic, kgo.ReadCommitted())
	if !slices.Contains(vals, "v") {
		t.Fatalf("committed records %q lack v: the commit did not take effect", vals)
	}
}

// dropOfEndTxn: drop of EndTxn - the client fails, nothing is committed.
func dropOfEndTxn(t *testing.T, e *kafkaFaultEnv) {
	topic, txnID := "fc-kf-drop-"+e.suffix, "fc-kf-drop-"+e.suffix
	CreateTopic(t, e.c, topic)
	f := e.add(t, links.KafkaFaultSpec{Action: links.KafkaDropRequest, API: "endtxn", Processes: []int{1}, TransactionalID: txnID})
	if err := txnWithCommit(e.c, 1, txnID, topic, "v", 3*time.Second); err == nil {
		t.Fatal("commit succeeded; want a timeout")
	}
	if f.Acted() == 0 {
		t.Fatal("the fault never acted")
	}
	if err := f.Remove(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A new producer of the transactional id aborts the open transaction.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := CommitTxn(ctx, e.c, 2, txnID, topic); err != nil {
		t.Fatalf("a new producer of %s: %v", txnID, err)
	}
	vals := readUntilSentinel(t, e.c, topic, kgo.ReadCommitted())
	if slices.Contains(vals, "v") {
		t.Fatalf("committed records %q hold v, whose commit never reached the broker", vals)
	}
}

// errorResponseOfProduce: error-response of Produce - the client sees the error, the record is in the log.
func errorResponseOfProduce(t *testing.T, e *kafkaFaultEnv) {
	topic := "fc-kf-error-" + e.suffix
	CreateTopic(t, e.c, topic)
	f := e.add(t, links.KafkaFaultSpec{Action: links.KafkaErrorResponse, API: "produce", Processes: []int{1},
		Partition: &cluster.TopicPartition{Topic: topic, Partition: 0}, ErrorCode: kerr.TopicAuthorizationFailed.Code})
	cl := e.plain(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("produce error = %v, want %v", err, kerr.TopicAuthorizationFailed)
	}
	if f.Acted() == 0 {
		t.Fatal("the fault never acted")
	}
	vals := readUntilSentinel(t, e.c, topic, kgo.ReadUncommitted())
	if !slices.Contains(vals, "v") {
		t.Fatalf("records %q lack v: the broker did not take the produce", vals)
	}
}

// delayOfProduce: delay of Produce - the produce succeeds late.
func delayOfProduce(t *testing.T, e *kafkaFaultEnv) {
	topic := "fc-kf-delay-" + e.suffix
	CreateTopic(t, e.c, topic)
	const delay = 1500 * time.Millisecond
	cl := e.plain(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("warm")}).FirstErr(); err != nil {
		t.Fatal(err) // metadata and connections are up: the next produce measures the delay
	}
	f := e.add(t, links.KafkaFaultSpec{Action: links.KafkaDelay, API: "Produce", Processes: []int{1}, Count: 1, Delay: delay})
	start := time.Now()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < delay {
		t.Fatalf("produce took %v, want at least %v", took, delay)
	}
	if f.Acted() != 1 {
		t.Fatalf("acted on %d requests, want 1", f.Acted())
	}
	// The delayed request's answer is recorded as a delivery, as a held one's is.
	ds := f.Deliveries()
	if len(ds) != 1 || ds[0].API != "produce" || ds[0].Process != 1 || ds[0].ErrorCode != 0 || ds[0].Err != nil ||
		ds[0].Trigger != "a 1.5s delay" || ds[0].At.Before(start.Add(delay)) {
		t.Fatalf("deliveries %+v, want the produce of p1, accepted after a 1.5s delay", ds)
	}
}

// delayPastDeadline: delay of ListOffsets past the client's deadline - the call fails at its deadline.
func delayPastDeadline(t *testing.T, e *kafkaFaultEnv) {
	topic := "fc-kf-delay2-" + e.suffix
	CreateTopic(t, e.c, topic)
	adm := kadm.NewClient(Client(t, e.c, 1))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := adm.ListEndOffsets(ctx, topic); err != nil {
		t.Fatal(err) // metadata and connections are up
	}
	f := e.add(t, links.KafkaFaultSpec{Action: links.KafkaDelay, API: "ListOffsets", Processes: []int{1}, Delay: 10 * time.Second})
	cctx, ccancel := context.WithTimeout(context.Background(), time.Second)
	defer ccancel()
	start := time.Now()
	res, err := adm.ListEndOffsets(cctx, topic)
	if err == nil {
		err = res.Error()
	}
	if took := time.Since(start); err == nil || took > 3*time.Second {
		t.Fatalf("list offsets: %v after %v; want an error at the 1s deadline, not after the 10s delay", err, took)
	}
	// The delayed write gave up at the client's deadline too: nothing is stuck behind it.
	if err := f.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	actx, acancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer acancel()
	res, err = adm.ListEndOffsets(actx, topic)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("list offsets after the fault: %v after %v; want an answer, not a wait behind the delayed write", err, time.Since(start))
	}
}

// duplicateOfProduce: duplicate of Produce - the record is in the log twice.
func duplicateOfProduce(t *testing.T, e *kafkaFaultEnv) {
	topic := "fc-kf-dup-" + e.suffix
	CreateTopic(t, e.c, topic)
	f := e.add(t, links.KafkaFaultSpec{Action: links.KafkaDuplicate, API: "Produce", Processes: []int{1}, Count: 1})
	cl := e.plain(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if f.Acted() != 1 {
		t.Fatalf("acted on %d requests, want 1", f.Acted())
	}
	// The copy follows the request on its connection, and the broker reads it only once it
	// has answered the first: the client can have its answer, and a sentinel from another
	// connection can be appended, before the copy is. (Seen on Kafka at load average 20: the
	// read stopped at the sentinel with one v.) So the test waits for the second v first (the
	// read fails after a minute without it), then reads to a sentinel for the count.
	readRecordsUntil(t, e.c, topic, kgo.ReadUncommitted(), func(vals []string) bool { return count(vals, "v") >= 2 })
	vals := readUntilSentinel(t, e.c, topic, kgo.ReadUncommitted())
	if n := count(vals, "v"); n != 2 {
		t.Fatalf("records %q hold v %d times, want 2", vals, n)
	}
}

// heldProduce holds process 1's next Produce until a request of type until, produces the
// record "held" to topic, waits (within ctx) until the fault holds it and closes the client, so
// that only the fault can still deliver it.
func (e *kafkaFaultEnv) heldProduce(ctx context.Context, t *testing.T, topic, until string) *links.KafkaFault {
	t.Helper()
	f := e.add(t, links.KafkaFaultSpec{Action: links.KafkaHold, API: "Produce", Processes: []int{1}, Count: 1, Until: until})
	cl := e.plain(t, 1, kgo.ProduceRequestTimeout(time.Second))
	cl.Produce(context.Background(), &kgo.Record{Topic: topic, Value: []byte("held")}, nil)
	if err := f.WaitActed(ctx); err != nil {
		t.Fatalf("the produce was never held: %v", err)
	}
	cl.Close() // the client gives up on its connection
	return f
}

// holdUntilEndTxn: hold of Produce until EndTxn - it lands after the commit, though its client is gone.
func holdUntilEndTxn(t *testing.T, e *kafkaFaultEnv) {
	topic, txnID := "fc-kf-hold-"+e.suffix, "fc-kf-hold-"+e.suffix
	CreateTopic(t, e.c, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	f := e.heldProduce(ctx, t, topic, "EndTxn")
	if f.Held() != 1 {
		t.Fatalf("holds %d requests, want 1", f.Held())
	}
	if err := CommitTxn(ctx, e.c, 1, txnID, topic); err != nil {
		t.Fatalf("commit on p1: %v", err)
	}
	if _, err := Eventually(30*time.Second, func() error {
		if len(f.Deliveries()) == 0 {
			return errors.New("not delivered")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	d := f.Deliveries()[0]
	if d.Err != nil || d.ErrorCode != 0 || d.Trigger != "endtxn" {
		t.Fatalf("delivery %+v: want one released by endtxn and accepted", d)
	}
	recs := readRecordsUntil(t, e.c, topic, kgo.ReadUncommitted(), func(vals []string) bool { return slices.Contains(vals, "held") })
	var held, committed int64 = -1, -1
	for _, r := range recs {
		switch string(r.Value) {
		case "held":
			held = r.Offset
		case "fencecheck":
			committed = r.Offset
		}
	}
	if committed < 0 || held <= committed {
		t.Fatalf("held record at offset %d, committed one at %d: want the held one after the commit", held, committed)
	}
}

// holdHealedByHealAll: hold whose trigger never comes - heal-all removes the fault and delivers.
func holdHealedByHealAll(t *testing.T, e *kafkaFaultEnv) {
	topic := "fc-kf-heal-" + e.suffix
	CreateTopic(t, e.c, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	f := e.heldProduce(ctx, t, topic, "DescribeTransactions")
	if err := e.net.HealAll(ctx); err != nil {
		t.Fatal(err)
	}
	if left := e.net.KafkaFaults(); len(left) > 0 {
		t.Fatalf("Kafka faults left after heal-all: %v", left)
	}
	if ds := f.Deliveries(); len(ds) != 1 || ds[0].Trigger != "removal" || ds[0].Err != nil {
		t.Fatalf("deliveries %+v: want one at removal", ds)
	}
	readRecordsUntil(t, e.c, topic, kgo.ReadUncommitted(), func(vals []string) bool { return slices.Contains(vals, "held") })
}

func count(vals []string, v string) int {
	n := 0
	for _, x := range vals {
		if x == v {
			n++
		}
	}
	return n
}

// txnWithCommit produces value to topic in a transaction of txnID on process and commits,
// giving up after d.
func txnWithCommit(c cluster.Cluster, process int, txnID, topic, value string, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dial, err := c.Links(ctx, process)
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(append(clientOpts(c, dial), kgo.TransactionalID(txnID), kgo.TransactionTimeout(20*time.Second))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := cl.BeginTransaction(); err != nil {
		return err
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(value)}).FirstErr(); err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	ectx, ecancel := context.WithTimeout(context.Background(), d)
	defer ecancel()
	return cl.EndTransaction(ectx, kgo.TryCommit)
}

// readUntilSentinel writes a sentinel record to topic from process 2 and returns the values
// read (at isolation) up to it.
func readUntilSentinel(t *testing.T, c cluster.Cluster, topic string, isolation kgo.IsolationLevel) []string {
	t.Helper()
	cl := Client(t, c, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("sentinel")}).FirstErr(); err != nil {
		t.Fatalf("sentinel: %v", err)
	}
	recs := readRecordsUntil(t, c, topic, isolation, func(vals []string) bool { return slices.Contains(vals, "sentinel") })
	var out []string
	for _, r := range recs {
		if v := string(r.Value); v != "sentinel" {
			out = append(out, v)
		}
	}
	return out
}

// readRecordsUntil reads topic from the start on process 2 until done accepts the values
// read, for at most 60 s.
func readRecordsUntil(t *testing.T, c cluster.Cluster, topic string, isolation kgo.IsolationLevel, done func([]string) bool) []*kgo.Record {
	t.Helper()
	cl := Client(t, c, 2, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(isolation))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var recs []*kgo.Record
	var vals []string
	for !done(vals) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s: got %q before %v", topic, vals, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			recs = append(recs, r)
			vals = append(vals, string(r.Value))
		})
	}
	return recs
}
