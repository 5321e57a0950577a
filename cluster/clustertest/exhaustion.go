package clustertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/cluster/links"
)

// exhaustedEpoch is the epoch at which a coordinator stops bumping a producer id's epoch
// (Short.MaxValue - 1): the next bump hands out a new producer id at epoch 0.
const exhaustedEpoch = 32766

// epochDriver drives one transactional id's epoch with InitProducerId calls on the KIP-360
// path: each names the current producer id and epoch, so the coordinator bumps it.
type epochDriver struct {
	t         *testing.T
	ctx       context.Context
	raw       *kgo.Client
	txnID     string
	timeoutMs int32 // the transaction timeout every call sets
	calls     int
}

// init sends one InitProducerId naming (id, epoch) and fails t on any error.
func (d *epochDriver) init(id int64, epoch int16) (int64, int16) {
	d.t.Helper()
	resp, err := d.try(d.ctx, id, epoch)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		d.t.Fatalf("InitProducerId(%d, %d): %v", id, epoch, err)
	}
	return resp.ProducerID, resp.ProducerEpoch
}

// try sends one InitProducerId naming (id, epoch) and returns the answer as it came.
func (d *epochDriver) try(ctx context.Context, id int64, epoch int16) (*kmsg.InitProducerIDResponse, error) {
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = &d.txnID
	req.TransactionTimeoutMillis = d.timeoutMs
	req.ProducerID, req.ProducerEpoch = id, epoch
	d.calls++
	return req.RequestWith(ctx, d.raw)
}

// newEpochDriver makes a topic and a transactional id named prefix plus a timestamp on c,
// and a driver of that id through process 2's links, bounded by ctx.
func newEpochDriver(t *testing.T, ctx context.Context, c cluster.Cluster, prefix string) *epochDriver {
	t.Helper()
	txnID := fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano())
	CreateTopic(t, c, txnID)
	return &epochDriver{t: t, ctx: ctx, raw: Client(t, c, 2), txnID: txnID, timeoutMs: 60000}
}

// rotate drives a fresh producer id's epoch to exhaustion and rotates it with one more call,
// within limit: the token before the rotation, the one after, and how long it all took.
func (d *epochDriver) rotate(limit time.Duration) (before, after [2]int64, took time.Duration) {
	d.t.Helper()
	start := time.Now()
	id, epoch := d.to(exhaustedEpoch, limit)
	nid, nepoch := d.init(id, epoch)
	if nid == id {
		d.t.Fatalf("InitProducerId(%d, %d) at the exhausted epoch answered (%d, %d): no rotation", id, epoch, nid, nepoch)
	}
	return [2]int64{id, int64(epoch)}, [2]int64{nid, int64(nepoch)}, time.Since(start)
}

// to bumps the epoch from a fresh producer id until it is target, within limit.
func (d *epochDriver) to(target int16, limit time.Duration) (int64, int16) {
	d.t.Helper()
	start := time.Now()
	id, epoch := d.init(-1, -1)
	for epoch < target {
		if time.Since(start) > limit {
			d.t.Fatalf("epoch %d of %d after %v and %d calls: not reached within %v", epoch, target, time.Since(start), d.calls, limit)
		}
		nid, nepoch := d.init(id, epoch)
		if nid != id {
			d.t.Fatalf("InitProducerId(%d, %d) rotated to (%d, %d) before epoch %d", id, epoch, nid, nepoch, target)
		}
		epoch = nepoch
	}
	return id, epoch
}

// Exhaustion is what EpochExhaustion measured: the token before and after the producer id
// rotated, how many InitProducerId calls it took and how long.
type Exhaustion struct {
	Before, After   [2]int64 // producer id, epoch
	Ordered         bool     // After > Before as (producer id, epoch)
	Calls           int
	Took            time.Duration
	StaleFenced     bool   // a commit with the pre-rotation token was refused
	StaleFencedWith string // what the broker answered it
}

// EpochExhaustion drives a transactional id's epoch to exhaustion (Short.MaxValue - 1) with
// InitProducerId calls on the KIP-360 path, until the coordinator hands out a new producer id.
// Then the holder of the last token before the rotation commits (EndTxn): it must be refused.
// Ordered reports whether the new token compares greater than the old one as (producer id,
// epoch), the order a fencing token's user would compare them in.
func EpochExhaustion(t *testing.T, c cluster.Cluster, limit time.Duration) Exhaustion {
	ctx, cancel := context.WithTimeout(context.Background(), limit+time.Minute)
	defer cancel()
	d := newEpochDriver(t, ctx, c, "fc-exhaust")
	before, after, took := d.rotate(limit)
	x := Exhaustion{Before: before, After: after, Calls: d.calls, Took: took}
	// The deposed holder's commit: EndTxn with the last token before the rotation.
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID = d.txnID
	req.ProducerID, req.ProducerEpoch = before[0], int16(before[1])
	req.Commit = true
	resp, err := req.RequestWith(ctx, d.raw)
	if err != nil {
		t.Fatalf("EndTxn with the pre-rotation token: %v", err)
	}
	x.StaleFenced = resp.ErrorCode != 0
	x.StaleFencedWith = errName(resp.ErrorCode)
	x.Ordered = x.After[0] > x.Before[0] || (x.After[0] == x.Before[0] && x.After[1] > x.Before[1])
	return x
}

// RotationRetry is what RotationRetryAfterFailover measured.
type RotationRetry struct {
	Before, After [2]int64 // the exhausted token, and the one the rotating InitProducerId returned
	Calls         int
	Took          time.Duration
	// RetryBefore and RetryAfter are the answers to a retry of the rotating InitProducerId
	// (the same producer id and epoch, as a client sends when the first answer was lost),
	// before and after the coordinator failed over: "(id, epoch)" or the error.
	RetryBefore, RetryAfter string
	// RetryBeforeOK: the retry before the failover returned the rotated token.
	RetryBeforeOK bool
	// FalseFence: the retry after the failover was refused, although nothing but the
	// retried call itself had touched the transactional id (KAFKA-20357).
	FalseFence bool
	Failover   string // what the failover did
}

// RotationRetryAfterFailover drives a transactional id to the exhausted epoch, rotates its
// producer id with one more InitProducerId, and retries that call, as a client whose first
// answer was lost does: once on the coordinator that rotated it, and once after the
// coordinator's broker restarted (the transaction log is replayed by the new coordinator).
// Both retries should return the rotated token. Kafka before KAFKA-20357's fix kept the
// epoch a retry is recognised by in memory only, so after the failover the retry is fenced.
func RotationRetryAfterFailover(t *testing.T, c cluster.Cluster, limit time.Duration) RotationRetry {
	ctx, cancel := context.WithTimeout(context.Background(), limit+3*time.Minute)
	defer cancel()
	d := newEpochDriver(t, ctx, c, "fc-rotate-retry")
	before, after, took := d.rotate(limit)
	r := RotationRetry{Before: before, After: after, Calls: d.calls, Took: took}
	retry := func() (string, bool) {
		resp, err := d.retrying(ctx, before[0], int16(before[1]))
		if err != nil {
			return err.Error(), false
		}
		if resp.ErrorCode != 0 {
			return codeName(resp.ErrorCode), false
		}
		return fmt.Sprintf("(%d, %d)", resp.ProducerID, resp.ProducerEpoch), [2]int64{resp.ProducerID, int64(resp.ProducerEpoch)} == after
	}
	r.RetryBefore, r.RetryBeforeOK = retry()
	coord, err := Coordinator(ctx, c, d.txnID)
	if err != nil {
		t.Fatal(err)
	}
	fctx, fcancel := context.WithTimeout(ctx, 2*RecoverTimeout)
	defer fcancel()
	if err := c.Restart(fctx, coord); err != nil {
		t.Fatalf("restart the coordinator %s: %v", links.BrokerName(coord), err)
	}
	if err := cluster.WaitHealthy(fctx, c, nil); err != nil {
		t.Fatal(err)
	}
	now, _ := Coordinator(ctx, c, d.txnID)
	r.Failover = fmt.Sprintf("restarted the coordinator %s; the coordinator is now %s", links.BrokerName(coord), links.BrokerName(now))
	var ok bool
	r.RetryAfter, ok = retry()
	r.FalseFence = !ok
	return r
}

// retrying sends InitProducerId naming (id, epoch) until the answer is not a coordinator
// still loading or moving, or ctx ends: a client retries those.
func (d *epochDriver) retrying(ctx context.Context, id int64, epoch int16) (*kmsg.InitProducerIDResponse, error) {
	for {
		cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		resp, err := d.try(cctx, id, epoch)
		cancel()
		if err == nil && !retriableCoordinator(resp.ErrorCode) {
			return resp, nil
		}
		if ctx.Err() != nil {
			if err == nil {
				err = kerr.ErrorForCode(resp.ErrorCode)
			}
			return nil, fmt.Errorf("InitProducerId(%d, %d) until %w: %w", id, epoch, ctx.Err(), err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// retriableCoordinator reports whether code is an answer a client retries because the
// coordinator is loading, moving or finishing a transaction.
func retriableCoordinator(code int16) bool {
	return slices.Contains([]int16{kerr.CoordinatorLoadInProgress.Code, kerr.CoordinatorNotAvailable.Code,
		kerr.NotCoordinator.Code, kerr.ConcurrentTransactions.Code}, code)
}

// StuckAbort is what TimeoutAbortAtExhaustion measured.
type StuckAbort struct {
	Token    [2]int64 // the producer id and the exhausted epoch the transaction ran at
	Calls    int
	Took     time.Duration
	Produce  string   // the transactional produce's answer
	States   []string // the transaction states DescribeTransactions reported, in order, each once
	EndTxn   string   // the answers to the late EndTxn(abort) with the exhausted token, retried on CONCURRENT_TRANSACTIONS
	Final    string   // the state 10 s after the late EndTxn
	Acquire  string   // a new InitProducerId (a successor), retried on coordinator errors for 30 s
	Stuck    bool     // the transaction stayed Ongoing, or no successor could acquire (KAFKA-20090)
	Rotated  bool     // the successor got a new producer id
	Acquired [2]int64 // the successor's token
}

// TimeoutAbortAtExhaustion drives a transactional id to the exhausted epoch, begins a
// transaction there (transaction version 2: the produce adds its partition) with a 1 s
// timeout, waits for the coordinator to abort it on its timeout, and then delivers a late
// EndTxn(abort) with the exhausted token, as a client whose abort was slow does. Kafka before
// KAFKA-20090's fix could take the late abort for a retry and leave the transaction Ongoing,
// so that nobody can acquire the transactional id again. It needs transaction version 2.
func TimeoutAbortAtExhaustion(t *testing.T, c cluster.Cluster, limit time.Duration) StuckAbort {
	ctx, cancel := context.WithTimeout(context.Background(), limit+3*time.Minute)
	defer cancel()
	if v, err := FinalizedFeature(ctx, Admin(t, c), "transaction.version"); err != nil || v < 2 {
		t.Skipf("needs transaction.version 2 (finalized %d, %v)", v, err)
	}
	d := newEpochDriver(t, ctx, c, "fc-stuck-abort")
	txnID, topic, raw := d.txnID, d.txnID, d.raw
	start := time.Now()
	// One short of exhaustion: the transactional client's own InitProducerId bumps it there,
	// with the 1 s transaction timeout it sets.
	d.to(exhaustedEpoch-1, limit)
	x := StuckAbort{Calls: d.calls + 1, Took: time.Since(start)}
	cl := Client(t, c, 1, kgo.TransactionalID(txnID), kgo.TransactionTimeout(time.Second))
	id, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		t.Fatalf("the transactional client's InitProducerId: %v", err)
	}
	x.Token = [2]int64{id, int64(epoch)}
	if epoch != exhaustedEpoch {
		t.Fatalf("the transactional client holds (%d, %d), want epoch %d", id, epoch, exhaustedEpoch)
	}
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	pctx, pcancel := context.WithTimeout(ctx, 15*time.Second)
	x.Produce = errOrOK(cl.ProduceSync(pctx, &kgo.Record{Topic: topic, Value: []byte("at the exhausted epoch")}).FirstErr())
	pcancel()
	seen := func(state string) {
		if len(x.States) == 0 || x.States[len(x.States)-1] != state {
			x.States = append(x.States, state)
		}
	}
	// The coordinator aborts the transaction once its 1 s timeout passed (Kafka looks every
	// transaction.abort.timed.out.transaction.cleanup.interval.ms; fencecheck's local
	// clusters set 1 s).
	aborting := false
	for wait := time.Now().Add(20 * time.Second); time.Now().Before(wait) && !aborting; time.Sleep(50 * time.Millisecond) {
		st, err := describeTxn(ctx, raw, txnID)
		if err != nil {
			seen("describe: " + err.Error())
			continue
		}
		seen(st.State)
		aborting = st.State != "Ongoing" && st.State != "Empty"
	}
	if !aborting {
		t.Fatalf("the transaction at the exhausted epoch was not aborted on its timeout within 20 s: states %q", x.States)
	}
	// The late abort, as a client that gave up on its transaction sends it, retried while the
	// coordinator answers that the transaction is still completing, as a client retries it.
	var answers []string
	for wait := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID = txnID
		req.ProducerID, req.ProducerEpoch = id, epoch
		req.Commit = false
		eresp, err := req.RequestWith(ctx, raw)
		answer := errOrOK(err)
		if err == nil {
			answer = codeName(eresp.ErrorCode)
		}
		if len(answers) == 0 || answers[len(answers)-1] != answer {
			answers = append(answers, answer)
		}
		if err != nil || eresp.ErrorCode != kerr.ConcurrentTransactions.Code || time.Now().After(wait) {
			break
		}
	}
	x.EndTxn = strings.Join(answers, ", then ")
	for wait := time.Now().Add(10 * time.Second); time.Now().Before(wait); time.Sleep(100 * time.Millisecond) {
		if st, err := describeTxn(ctx, raw, txnID); err == nil {
			seen(st.State)
			x.Final = st.State
		}
	}
	// A successor: a new producer with no token.
	succ := &epochDriver{t: t, ctx: ctx, raw: raw, txnID: txnID, timeoutMs: 60000}
	actx, acancel := context.WithTimeout(ctx, 30*time.Second)
	resp, err := succ.retrying(actx, -1, -1)
	acancel()
	switch {
	case err != nil:
		x.Acquire = err.Error()
	case resp.ErrorCode != 0:
		x.Acquire = codeName(resp.ErrorCode)
	default:
		x.Acquire = fmt.Sprintf("(%d, %d)", resp.ProducerID, resp.ProducerEpoch)
		x.Acquired = [2]int64{resp.ProducerID, int64(resp.ProducerEpoch)}
		x.Rotated = resp.ProducerID != id
	}
	x.Stuck = x.Final == "Ongoing" || err != nil || (resp != nil && resp.ErrorCode != 0)
	return x
}

// String says what a StuckAbort measured, on one line.
func (x StuckAbort) String() string {
	return fmt.Sprintf("%d InitProducerId calls in %v; transaction at (%d, %d), produce %s; states %s; late EndTxn(abort) %s; state 10 s later %s; successor's InitProducerId %s",
		x.Calls, x.Took.Round(time.Millisecond), x.Token[0], x.Token[1], x.Produce, strings.Join(x.States, " → "), x.EndTxn, x.Final, x.Acquire)
}

// String says what a RotationRetry measured, on one line.
func (r RotationRetry) String() string {
	return fmt.Sprintf("%d InitProducerId calls in %v: (%d, %d) → (%d, %d); retry before the failover %s; %s; retry after it %s",
		r.Calls, r.Took.Round(time.Millisecond), r.Before[0], r.Before[1], r.After[0], r.After[1], r.RetryBefore, r.Failover, r.RetryAfter)
}

// codeName is the name of a Kafka error code ("PRODUCER_FENCED"), or "no error".
func codeName(code int16) string {
	var ke *kerr.Error
	if errors.As(kerr.ErrorForCode(code), &ke) {
		return ke.Message
	}
	return errName(code)
}
