package main

// The pipeline member (docs/exec-protocol.md, "Pipelines"): one Sarama consumer-group member
// per adapter process, in the loop Sarama's users write, driven one call at a time by the
// harness (member_start, poll, transact, close).
//
//   - The consumer is Sarama's ConsumerGroup (the classic protocol: Sarama has no KIP-848
//     consumer) at read_committed, without auto-commit. Its handler forwards each claim's
//     messages to the member; a poll takes them from the current session.
//   - A batch a poll returned holds its session's handlers until its transact ends, so a
//     rebalance waits for it, as a kafka-clients member's does (a rebalance runs inside
//     poll()): Sarama ends a session only once every ConsumeClaim has returned.
//   - The producer is a transactional AsyncProducer (one per member, or one per input
//     partition with txn_id_per_partition). transact runs BeginTxn, the outputs, the offsets
//     (AddOffsetsToTxnWithGroupMetadata with the batch's session's member id and generation,
//     KIP-447; or, with --offsets group-id, AddOffsetsToTxn with the group id alone) and
//     CommitTxn. Sarama sends AddOffsetsToTxn and TxnOffsetCommit inside CommitTxn, right
//     before the EndTxn.
//   - After a transaction that did not commit the member aborts and rewinds: Sarama's
//     partition consumers cannot seek, so it ends the session and joins again, and the new
//     session starts each partition at the group's committed offset, which Sarama fetches
//     with require_stable at read_committed (offset_manager.go). transact waits for that
//     session (bounded), so the harness sees the fetch as the transaction's rewind.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
)

// offsetsAPI is how transact adds its offsets to the transaction (the adapter's --offsets flag).
type offsetsAPI string

const (
	// offsetsGroupMetadata: AddOffsetsToTxnWithGroupMetadata with the member id and generation
	// of the session the batch was polled under (TxnOffsetCommit v3 carries them): the group
	// coordinator fences a superseded member (KIP-447).
	offsetsGroupMetadata offsetsAPI = "metadata"
	// offsetsGroupID: AddOffsetsToTxn(offsets, groupID), Sarama's older call: TxnOffsetCommit v3
	// with generation -1 and no member id, which the coordinator does not fence.
	offsetsGroupID offsetsAPI = "group-id"
)

// memberConfig is member_start's pipeline config.
type memberConfig struct {
	Bootstrap            string `json:"bootstrap"`
	ClientID             string `json:"client_id"`
	Group                string `json:"group"`
	Input                string `json:"input"`
	Output               string `json:"output"`
	TransactionalID      string `json:"transactional_id"`
	TxnIDPerPartition    bool   `json:"txn_id_per_partition"`
	SessionTimeoutMS     int64  `json:"session_timeout_ms"`
	RebalanceTimeoutMS   int64  `json:"rebalance_timeout_ms"`
	TransactionTimeoutMS int64  `json:"transaction_timeout_ms"`
	RequestTimeoutMS     int64  `json:"request_timeout_ms"`
	MaxPoll              int    `json:"max_poll"`
	Protocol             string `json:"protocol"`
	TransactionVersion   int    `json:"transaction_version"`
}

// offset is a transact request's input offset.
type offset struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
}

// output is a record a transaction produces, to the output partition of its input's number.
type output struct {
	Partition int32  `json:"partition"`
	Key       []byte `json:"key,omitempty"`
	Value     []byte `json:"value,omitempty"`
}

// member is the adapter's pipeline member.
type member struct {
	cfg   *memberConfig
	api   offsetsAPI
	addrs []string
	rt    time.Duration

	client sarama.Client // the consumer group's
	group  sarama.ConsumerGroup
	stop   context.CancelFunc // ends the Consume loop
	loop   chan struct{}      // closed when the Consume loop has returned

	mu       sync.Mutex
	cur      *session      // the session whose claims run now; nil between sessions
	changed  chan struct{} // closed (and replaced) whenever cur changes
	sessions int           // sessions begun, for the rewind's wait

	held *session // the session whose batch the last poll returned, held until transact

	// The producer of a transactional id per member (nil with TxnIDPerPartition), built in the
	// background from member_start: the first transact waits for ready.
	prod  *txnProducer
	ready chan struct{}
	// parts are the producers of a transactional id per input partition, made when the
	// partition is assigned (Setup) and closed when it is revoked (Cleanup).
	parts map[int32]*txnProducer
	// failed: the member's producer failed for good; every transact asks for a restart.
	failed bool
}

// session is one Sarama consumer group session of the member: its claims' messages, and
// whether a batch polled from it is being processed (which keeps its handlers, and so the
// next rebalance, waiting).
type session struct {
	sess   sarama.ConsumerGroupSession
	cancel context.CancelFunc // ends the session (the Consume call returns)
	recs   chan *sarama.ConsumerMessage

	mu   sync.Mutex
	free chan struct{} // closed while no batch of the session is held
}

func newSession(sess sarama.ConsumerGroupSession, cancel context.CancelFunc) *session {
	free := make(chan struct{})
	close(free)
	return &session{sess: sess, cancel: cancel, recs: make(chan *sarama.ConsumerMessage), free: free}
}

// hold marks a batch of the session as being processed; false when the session has already
// ended (its partitions may be another member's by now).
func (s *session) hold() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess.Context().Err() != nil {
		return false
	}
	s.free = make(chan struct{})
	return true
}

func (s *session) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.free:
	default:
		close(s.free)
	}
}

// waitFree waits until no batch of the session is held.
func (s *session) waitFree() {
	s.mu.Lock()
	free := s.free
	s.mu.Unlock()
	<-free
}

// txnProducer is a transactional AsyncProducer with the client it was built on (Sarama's
// transactional id is a Config field: one client per producer), and the EndTxn requests its
// connections carried.
type txnProducer struct {
	id       string
	client   sarama.Client
	producer sarama.AsyncProducer
	wire     *wireCount
	once     sync.Once
}

func (p *txnProducer) close() {
	p.once.Do(func() {
		_ = p.client.Close() // cuts a request in flight
		p.producer.AsyncClose()
		go func() {
			for range p.producer.Successes() {
			}
		}()
		go func() {
			for range p.producer.Errors() {
			}
		}()
	})
}

// ---- member_start ----

func badField(field, why string) *callError { return fail(kindInvalidConfig, field+": "+why) }

// startMember validates c and builds the member: the consumer group (joined on the first
// poll's wait, by the Consume loop started here) and, with one transactional id per member,
// its producer, whose InitProducerId runs in the background.
func startMember(c *memberConfig, api offsetsAPI) (*member, *callError) {
	var addrs []string
	for _, s := range strings.Split(c.Bootstrap, ",") {
		if s = strings.TrimSpace(s); s != "" {
			addrs = append(addrs, s)
		}
	}
	switch {
	case len(addrs) == 0:
		return nil, badField("Bootstrap", "no address")
	case c.Group == "":
		return nil, badField("Group", "empty")
	case c.Input == "":
		return nil, badField("Input", "empty")
	case c.Output == "" || c.Output == c.Input:
		return nil, badField("Output", "empty, or the input topic")
	case c.TransactionalID == "":
		return nil, badField("TransactionalID", "empty")
	case c.Protocol != "" && c.Protocol != "classic" && c.Protocol != "consumer":
		return nil, badField("Protocol", fmt.Sprintf("%q, want classic or consumer", c.Protocol))
	case c.Protocol == "consumer":
		return nil, badField("Protocol", "consumer: Sarama "+saramaVersion()+" has no KIP-848 consumer (classic only)")
	case c.RequestTimeoutMS <= 0 || c.TransactionTimeoutMS <= 0 || c.SessionTimeoutMS < 0 || c.RebalanceTimeoutMS < 0 || c.MaxPoll < 0:
		return nil, badField("RequestTimeout, LeaseDuration, SessionTimeout, RebalanceTimeout, MaxPoll",
			fmt.Sprintf("the timeouts must be positive (request %d ms, transaction %d ms, session %d ms, rebalance %d ms), max_poll not negative",
				c.RequestTimeoutMS, c.TransactionTimeoutMS, c.SessionTimeoutMS, c.RebalanceTimeoutMS))
	case c.TransactionVersion == 2:
		return nil, badField("TransactionVersion", "2 required, but Sarama "+saramaVersion()+" speaks transaction version 1 only")
	}
	m := &member{cfg: c, api: api, addrs: addrs, rt: time.Duration(c.RequestTimeoutMS) * time.Millisecond,
		changed: make(chan struct{}), parts: map[int32]*txnProducer{}}
	gc := m.groupConfig()
	if err := gc.Validate(); err != nil {
		return nil, fail(kindInvalidConfig, "Sarama refuses the consumer's config: "+errText(err))
	}
	if err := m.producerConfig("validate").Validate(); err != nil {
		return nil, fail(kindInvalidConfig, "Sarama refuses the producer's config: "+errText(err))
	}
	client, err := sarama.NewClient(addrs, gc)
	if err != nil {
		return nil, fail(kindOf(err), "build the consumer's client: "+errText(err))
	}
	group, err := sarama.NewConsumerGroupFromClient(c.Group, client)
	if err != nil {
		_ = client.Close()
		return nil, fail(kindOf(err), "build the consumer group: "+errText(err))
	}
	m.client, m.group = client, group
	go func() {
		for err := range group.Errors() {
			logf("consumer group: %s", errText(err))
		}
	}()
	if !c.TxnIDPerPartition {
		m.ready = make(chan struct{})
		go func() {
			defer close(m.ready)
			p, err := m.newProducer(c.TransactionalID, time.Now().Add(m.rt+startupGrace))
			m.mu.Lock()
			defer m.mu.Unlock()
			if err != nil {
				logf("member: the producer's InitProducerId: %s", err.Message)
				m.failed = true
				return
			}
			m.prod = p
		}()
	}
	ctx, stop := context.WithCancel(context.Background())
	m.stop, m.loop = stop, make(chan struct{})
	go m.consume(ctx)
	return m, nil
}

// startupGrace is how much longer than the request timeout the first InitProducerId may take.
const startupGrace = 25 * time.Second

// groupConfig is the consumer group's Sarama config: the group's timeouts, read_committed, no
// auto-commit, from the oldest offset when the group committed none.
func (m *member) groupConfig() *sarama.Config {
	c := memberBase(m.cfg, m.rt)
	c.Consumer.IsolationLevel = sarama.ReadCommitted
	c.Consumer.Return.Errors = true
	c.Consumer.Offsets.AutoCommit.Enable = false
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.MaxWaitTime = 100 * time.Millisecond
	c.Consumer.Retry.Backoff = 100 * time.Millisecond
	if m.cfg.SessionTimeoutMS > 0 {
		s := time.Duration(m.cfg.SessionTimeoutMS) * time.Millisecond
		c.Consumer.Group.Session.Timeout = s
		c.Consumer.Group.Heartbeat.Interval = max(time.Millisecond, min(3*time.Second, s/3))
	}
	if m.cfg.RebalanceTimeoutMS > 0 {
		c.Consumer.Group.Rebalance.Timeout = time.Duration(m.cfg.RebalanceTimeoutMS) * time.Millisecond
	}
	c.Consumer.Group.Rebalance.Retry.Backoff = 100 * time.Millisecond
	// The offset manager retries an UNSTABLE_OFFSET_COMMIT answer to its stable fetch
	// Metadata.Retry.Max times, Metadata.Retry.Backoff apart: a pending transaction's offsets
	// are waited for up to the request timeout before the session fails (and is joined again).
	c.Metadata.Retry.Max = max(3, int(m.rt/(100*time.Millisecond)))
	return c
}

// memberBase is baseConfig (adapter.go) for a member: every timeout from the request timeout.
func memberBase(mc *memberConfig, rt time.Duration) *sarama.Config {
	a := &adapter{cfg: &config{ClientID: mc.ClientID}, rt: rt}
	return a.baseConfig()
}

// producerConfig is a transactional producer's: acks=all, idempotent, the manual
// partitioner, the transaction timeout.
func (m *member) producerConfig(id string) *sarama.Config {
	c := memberBase(m.cfg, m.rt)
	c.Producer.Idempotent = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Net.MaxOpenRequests = 1
	c.Producer.Partitioner = sarama.NewManualPartitioner
	c.Producer.Return.Successes = true
	c.Producer.Return.Errors = true
	c.Producer.Transaction.ID = id
	c.Producer.Transaction.Timeout = time.Duration(m.cfg.TransactionTimeoutMS) * time.Millisecond
	return c
}

// newProducer builds a transactional producer of id: its constructor runs FindCoordinator and
// InitProducerId, which fences the id's earlier producers, within deadline.
func (m *member) newProducer(id string, deadline time.Time) (*txnProducer, *callError) {
	c := m.producerConfig(id)
	wire := &wireCount{}
	c.Net.Proxy.Enable = true
	c.Net.Proxy.Dialer = wire.dialer(m.rt)
	client, err := sarama.NewClient(m.addrs, c)
	if err != nil {
		return nil, fail(kindOf(err), "build the producer's client: "+errText(err))
	}
	type result struct {
		p   sarama.AsyncProducer
		err error
	}
	ch := make(chan result, 1)
	go func() {
		p, err := sarama.NewAsyncProducerFromClient(client)
		ch <- result{p, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			_ = client.Close()
			return nil, fail(kindOf(r.err), "InitProducerId (NewAsyncProducerFromClient "+id+"): "+errText(r.err))
		}
		return &txnProducer{id: id, client: client, producer: r.p, wire: wire}, nil
	case <-time.After(time.Until(deadline)):
		_ = client.Close() // stops the transaction manager's retries
		go func() {
			if r := <-ch; r.p != nil {
				r.p.AsyncClose()
			}
		}()
		return nil, fail(kindClient, "InitProducerId (NewAsyncProducerFromClient "+id+"): no answer in time")
	}
}

// ---- the consumer group ----

// consume runs the member's Consume loop: one session per call, joined again after each ends,
// until the member closes.
func (m *member) consume(ctx context.Context) {
	defer close(m.loop)
	h := &handler{m: m}
	for ctx.Err() == nil {
		sctx, cancel := context.WithCancel(ctx)
		h.cancel = cancel
		err := m.group.Consume(sctx, []string{m.cfg.Input}, h)
		cancel()
		if err != nil && ctx.Err() == nil {
			if errors.Is(err, sarama.ErrClosedConsumerGroup) {
				return
			}
			logf("member: Consume: %s", errText(err))
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// handler is the member's sarama.ConsumerGroupHandler.
type handler struct {
	m      *member
	cancel context.CancelFunc // the Consume call's (set before it starts)
	mu     sync.Mutex
	cur    *session
}

// Setup makes the session current; with a transactional id per input partition it first
// makes the producer of each assigned partition, whose InitProducerId fences the previous
// owner's producer and aborts its open transaction. (Sarama fetches the session's offsets
// before Setup: no hook of its runs between the assignment and that fetch.)
func (h *handler) Setup(sess sarama.ConsumerGroupSession) error {
	s := newSession(sess, h.cancel)
	if h.m.cfg.TxnIDPerPartition {
		h.m.assigned(sess.Claims()[h.m.cfg.Input])
	}
	h.mu.Lock()
	h.cur = s
	h.mu.Unlock()
	m := h.m
	m.mu.Lock()
	m.cur = s
	m.sessions++
	close(m.changed)
	m.changed = make(chan struct{})
	m.mu.Unlock()
	logf("member: session of generation %d, member %s: partitions %v", sess.GenerationID(), sess.MemberID(), sess.Claims()[m.cfg.Input])
	return nil
}

// Cleanup runs once every ConsumeClaim has returned: the session is no longer current, and
// the producers of its partitions (one per partition) are closed.
func (h *handler) Cleanup(sess sarama.ConsumerGroupSession) error {
	m := h.m
	h.mu.Lock()
	s := h.cur
	h.mu.Unlock()
	m.mu.Lock()
	if m.cur == s {
		m.cur = nil
		close(m.changed)
		m.changed = make(chan struct{})
	}
	var revoked []*txnProducer
	if m.cfg.TxnIDPerPartition {
		for _, p := range sess.Claims()[m.cfg.Input] {
			if tp := m.parts[p]; tp != nil {
				revoked = append(revoked, tp)
				delete(m.parts, p)
			}
		}
	}
	m.mu.Unlock()
	for _, tp := range revoked {
		tp.close()
	}
	return nil
}

// ConsumeClaim forwards the claim's messages to the member's polls until the session ends,
// then waits for a batch of the session still being processed: Sarama rebalances only once
// every ConsumeClaim has returned.
func (h *handler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	h.mu.Lock()
	s := h.cur
	h.mu.Unlock()
	defer s.waitFree()
	for {
		select {
		case msg, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			select {
			case s.recs <- msg:
			case <-sess.Context().Done():
				return nil
			}
		case <-sess.Context().Done():
			return nil
		}
	}
}

// assigned makes the producers of newly assigned partitions (one transactional id each), in
// parallel, each within the request timeout; one that fails is made again on first use.
func (m *member) assigned(partitions []int32) {
	var wg sync.WaitGroup
	for _, p := range partitions {
		wg.Go(func() {
			tp, err := m.newProducer(partitionTxnID(m.cfg.TransactionalID, p), time.Now().Add(m.rt))
			if err != nil {
				logf("member: the producer of assigned partition %d: %s", p, err.Message)
				return
			}
			m.mu.Lock()
			old := m.parts[p]
			m.parts[p] = tp
			m.mu.Unlock()
			if old != nil {
				old.close()
			}
		})
	}
	wg.Wait()
}

func partitionTxnID(prefix string, p int32) string { return prefix + "-" + strconv.Itoa(int(p)) }

// ---- poll ----

// poll returns up to max_poll records of the current session, waiting up to wait for the
// first; a batch it returns holds its session until the next transact (or poll).
func (m *member) poll(wait time.Duration) (recs []read, memberID string, generation int32) {
	m.releaseHeld()
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		m.mu.Lock()
		s, changed := m.cur, m.changed
		m.mu.Unlock()
		if s == nil {
			select {
			case <-changed:
				continue
			case <-deadline.C:
				return nil, "", -1
			}
		}
		var first *sarama.ConsumerMessage
		select {
		case first = <-s.recs:
		case <-s.sess.Context().Done():
			// The session ends: wait for the next one (its records start again at the
			// committed offsets).
			select {
			case <-changed:
			case <-deadline.C:
				return nil, s.sess.MemberID(), s.sess.GenerationID()
			}
			continue
		case <-changed:
			continue
		case <-deadline.C:
			return nil, s.sess.MemberID(), s.sess.GenerationID()
		}
		batch := []*sarama.ConsumerMessage{first}
	more:
		for m.cfg.MaxPoll <= 0 || len(batch) < m.cfg.MaxPoll {
			select {
			case r := <-s.recs:
				batch = append(batch, r)
			default:
				break more
			}
		}
		if !s.hold() {
			// The session ended while the batch was taken: its partitions may be another
			// member's now. Dropped, as a kafka-clients poll drops the records of partitions
			// revoked in it; the next session starts at the committed offsets.
			continue
		}
		m.mu.Lock()
		m.held = s
		m.mu.Unlock()
		for _, r := range batch {
			recs = append(recs, read{Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value})
		}
		return recs, s.sess.MemberID(), s.sess.GenerationID()
	}
}

func (m *member) releaseHeld() *session {
	m.mu.Lock()
	s := m.held
	m.held = nil
	m.mu.Unlock()
	if s != nil {
		s.release()
	}
	return s
}

// ---- transact ----

// transactResult is a transact call's answer.
type transactResult struct {
	err     *callError
	restart bool
}

// transact copies a batch in one transaction: the outputs, then the offsets with the group's
// metadata, then the commit. Outcomes: fail for anything before the EndTxn that commits went
// out (the transaction is aborted and the member rewound), unknown once it may have; restart
// when the producer cannot go on.
func (m *member) transact(offs []offset, outs []output, memberID string, generation int32, timeoutMS *int64) transactResult {
	start := time.Now()
	left := 3 * m.rt
	if timeoutMS != nil {
		left = max(0, time.Duration(*timeoutMS)*time.Millisecond)
	}
	// As the Java adapter: at most two request timeouts up to the commit, leaving the
	// harness's bound for an abort and a rewind; a commit may take the whole bound.
	txnDeadline := start.Add(min(left, 2*m.rt))
	commitDeadline := start.Add(min(left, 3*m.rt))
	endDeadline := start.Add(min(left, 2*m.rt) + m.rt)

	s := m.heldSession()
	defer m.releaseHeld()
	if s != nil && (s.sess.MemberID() != memberID || s.sess.GenerationID() != generation) {
		logf("member: transact of a batch polled as %s/%d, but the held session is %s/%d",
			memberID, generation, s.sess.MemberID(), s.sess.GenerationID())
	}
	rewind := func(err *callError) transactResult {
		m.releaseHeld()
		if !m.rewind(s, endDeadline) {
			err.Message += "; rewind: no new session of the group within the call's bound (the next poll starts at the committed offsets)"
		}
		return transactResult{err: err}
	}
	if timeoutMS != nil && left == 0 {
		return rewind(fail(kindClient, "the call's deadline had passed: no transaction began"))
	}
	if s == nil {
		return rewind(fail(kindClient, "no batch of a live session is held: the session ended before the transaction"))
	}

	var p *txnProducer
	if m.cfg.TxnIDPerPartition {
		if len(offs) != 1 {
			return rewind(fail(kindInvalidConfig, "a transactional id per input partition needs a batch of one partition"))
		}
		var cerr *callError
		if p, cerr = m.partitionProducer(offs[0].Partition, s, txnDeadline); cerr != nil {
			return rewind(cerr)
		}
	} else {
		if m.ready != nil {
			select {
			case <-m.ready:
			case <-time.After(time.Until(txnDeadline)):
				return transactResult{err: fail(kindClient, "InitProducerId: no answer within the call's bound"), restart: true}
			}
		}
		m.mu.Lock()
		p = m.prod
		failed := m.failed
		m.mu.Unlock()
		if failed || p == nil {
			return transactResult{err: fail(kindProducer, "the member's producer failed earlier: restart it"), restart: true}
		}
	}
	ap := p.producer

	if err := ap.BeginTxn(); err != nil {
		return m.giveUp(p, fail(kindOf(err), fmt.Sprintf("BeginTxn: %s (txn status %s)", errText(err), ap.TxnStatus())))
	}
	timer := time.NewTimer(time.Until(txnDeadline))
	defer timer.Stop()
	for _, o := range outs {
		msg := message(m.cfg.Output, o.Partition, o.Key, o.Value)
		select {
		case ap.Input() <- msg:
		case <-timer.C:
			return m.giveUp(p, fail(kindClient, "produce: the producer took no record within the call's bound (no commit requested)"))
		}
	}
	for acked := 0; acked < len(outs); {
		select {
		case <-ap.Successes():
			acked++
		case pe := <-ap.Errors():
			return m.abort(p, s, endDeadline, fail(kindOf(pe.Err), fmt.Sprintf("produce to %s/%d: %s (txn status %s; no commit requested)",
				pe.Msg.Topic, pe.Msg.Partition, errText(pe.Err), ap.TxnStatus())))
		case <-timer.C:
			return m.giveUp(p, fail(kindClient, fmt.Sprintf("produce: %d of %d outputs unacknowledged within the call's bound (no commit requested)",
				len(outs)-acked, len(outs))))
		}
	}
	offsets := map[string][]*sarama.PartitionOffsetMetadata{}
	for _, o := range offs {
		offsets[m.cfg.Input] = append(offsets[m.cfg.Input], &sarama.PartitionOffsetMetadata{Partition: o.Partition, Offset: o.Offset})
	}
	var err error
	if m.api == offsetsGroupID {
		err = ap.AddOffsetsToTxn(offsets, m.cfg.Group)
	} else {
		// The generation and member id of the session the batch was polled under: the
		// harness's memberID and generation are what poll answered from it.
		err = ap.AddOffsetsToTxnWithGroupMetadata(offsets, sarama.NewConsumerGroupMetadataFromSession(s.sess, m.cfg.Group, nil))
	}
	if err != nil {
		// Sarama only records them here (nothing is sent): a refusal is local.
		return m.abort(p, s, endDeadline, fail(kindOf(err), "AddOffsetsToTxn: "+errText(err)))
	}
	if st := ap.TxnStatus(); st&(sarama.ProducerTxnFlagInError|sarama.ProducerTxnFlagFatalError|sarama.ProducerTxnFlagAbortableError) != 0 {
		// CommitTxn would return the last error without sending anything.
		return m.abort(p, s, endDeadline, fail(kindProducer, fmt.Sprintf("the transaction is in error before its commit (txn status %s; no commit requested)", st)))
	}
	endTxns := p.wire.endTxns.Load()
	done := make(chan error, 1)
	go func() { done <- ap.CommitTxn() }()
	select {
	case err := <-done:
		if err == nil {
			return transactResult{}
		}
		msg := fmt.Sprintf("CommitTxn: %s (txn status %s)", errText(err), ap.TxnStatus())
		if p.wire.endTxns.Load() == endTxns {
			// Sarama sends AddOffsetsToTxn and TxnOffsetCommit inside CommitTxn, before the
			// EndTxn: no EndTxn left this producer's connections, so nothing can commit
			// (an ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID of the group coordinator, say).
			return m.abort(p, s, endDeadline, fail(kindOf(err), msg+"; no EndTxn was sent"))
		}
		return m.giveUp(p, unknown(kindOf(err), msg))
	case <-time.After(time.Until(commitDeadline)):
		return m.giveUp(p, unknown(kindClient, fmt.Sprintf("CommitTxn: no answer within the call's bound (txn status %s, EndTxn sent %v)",
			ap.TxnStatus(), p.wire.endTxns.Load() != endTxns)))
	}
}

func (m *member) heldSession() *session {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.held
}

// partitionProducer returns the producer of input partition p, made again if its making at
// the assignment failed, while the session that owns p is current.
func (m *member) partitionProducer(p int32, s *session, deadline time.Time) (*txnProducer, *callError) {
	m.mu.Lock()
	tp := m.parts[p]
	m.mu.Unlock()
	if tp != nil {
		return tp, nil
	}
	tp, err := m.newProducer(partitionTxnID(m.cfg.TransactionalID, p), deadline)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cur != s || m.parts[p] != nil {
		tp.close()
		return nil, fail(kindFenced, fmt.Sprintf("partition %d: the session ended while its producer was made", p))
	}
	m.parts[p] = tp
	return tp, nil
}

// abort aborts the open transaction and rewinds; a producer that cannot abort is given up.
func (m *member) abort(p *txnProducer, s *session, endDeadline time.Time, cerr *callError) transactResult {
	done := make(chan error, 1)
	go func() { done <- p.producer.AbortTxn() }()
	select {
	case err := <-done:
		if err != nil {
			cerr.Message += "; AbortTxn: " + errText(err)
			return m.giveUp(p, cerr)
		}
	case <-time.After(max(m.rt/2, time.Until(endDeadline)-m.rt/2)):
		cerr.Message += "; AbortTxn: no answer in time"
		return m.giveUp(p, cerr)
	}
	m.releaseHeld()
	if !m.rewind(s, endDeadline) {
		cerr.Message += "; rewind: no new session of the group within the call's bound (the next poll starts at the committed offsets)"
	}
	return transactResult{err: cerr}
}

// giveUp closes a producer that cannot go on. With one transactional id per member the
// member must restart; a partition's producer is made again on its next transaction, and
// the member rewinds.
func (m *member) giveUp(p *txnProducer, cerr *callError) transactResult {
	p.close()
	if !m.cfg.TxnIDPerPartition {
		m.mu.Lock()
		m.failed = true
		m.mu.Unlock()
		return transactResult{err: cerr, restart: true}
	}
	m.mu.Lock()
	for part, tp := range m.parts {
		if tp == p {
			delete(m.parts, part)
		}
	}
	s := m.held
	m.mu.Unlock()
	m.releaseHeld()
	m.rewind(s, time.Now().Add(m.rt))
	return transactResult{err: cerr}
}

// rewind ends the session s (the batch's) and waits until a later one has begun, whose
// partitions start at the group's committed offsets (fetched stable): Sarama's partition
// consumers cannot seek. It reports whether one began by deadline. With no session (none
// held), it ends the current one.
func (m *member) rewind(s *session, deadline time.Time) bool {
	m.mu.Lock()
	if s == nil {
		s = m.cur
	}
	n := m.sessions
	m.mu.Unlock()
	if s == nil {
		return true // between sessions: the next starts at the committed offsets
	}
	s.cancel()
	for {
		m.mu.Lock()
		begun, changed := m.sessions > n, m.changed
		m.mu.Unlock()
		if begun {
			return true
		}
		select {
		case <-changed:
		case <-time.After(time.Until(deadline)):
			return false
		}
	}
}

// ---- close ----

func (m *member) close() {
	m.releaseHeld()
	m.stop()
	_ = m.group.Close() // leaves the group
	<-m.loop
	_ = m.client.Close()
	m.mu.Lock()
	ps := []*txnProducer{m.prod}
	for _, p := range m.parts {
		ps = append(ps, p)
	}
	m.mu.Unlock()
	for _, p := range ps {
		if p != nil {
			p.close()
		}
	}
}

// ---- the producer's wire ----

// wireCount counts the EndTxn requests written on a producer's connections: whether a commit
// that failed sent one, so may have committed. Sarama writes each request with one Write,
// its size then its API key first.
type wireCount struct{ endTxns atomic.Int64 }

const apiKeyEndTxn = 26

func (w *wireCount) dialer(timeout time.Duration) *countingDialer {
	return &countingDialer{w: w, d: net.Dialer{Timeout: timeout, KeepAlive: 15 * time.Second}}
}

// countingDialer is the producer's Net.Proxy.Dialer: plain TCP, with its writes counted.
type countingDialer struct {
	w *wireCount
	d net.Dialer
}

func (c *countingDialer) Dial(network, addr string) (net.Conn, error) {
	conn, err := c.d.Dial(network, addr)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: conn, w: c.w}, nil
}

type countingConn struct {
	net.Conn
	w *wireCount
}

func (c *countingConn) Write(b []byte) (int, error) {
	if len(b) >= 6 && int16(b[4])<<8|int16(b[5]) == apiKeyEndTxn {
		c.w.endTxns.Add(1)
	}
	return c.Conn.Write(b)
}
