package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/IBM/sarama"
)

// kafkaVersion is Sarama's Config.Version: for each request, Sarama picks the newest version
// it knows for this Kafka release, then clamps it to the broker's ApiVersions range
// (api_versions.go restrictApiVersion). It clamps down to a broker's maximum, never up to its
// minimum, so a Version that is too old fails on Kafka 4.x, which removed the oldest request
// versions (KIP-896); and Sarama refuses locally any request whose requiredVersion is above
// Version (DescribeTransactions needs 3.0: at Sarama's DefaultVersion 2.8 describe would fail
// with ErrUnsupportedVersion). At 3.9 Sarama sends ApiVersions v4, Metadata v11, FindCoordinator
// v3, InitProducerId v4, AddPartitionsToTxn v3, Produce v10, EndTxn v3,
// ListOffsets v6, Fetch v12, DescribeTransactions v0: all within what Kafka 3.9 accepts (its
// message JSONs: Produce 0-11, Fetch 0-17, ListOffsets 0-10, Metadata 0-12, ApiVersions 0-4)
// and above what Kafka 4.0 removed (at most Produce 0-6, Fetch 0-9, ListOffsets 0-1,
// Metadata 0-3 in the KIP's widest draft). 3.9 is the oldest release the harness targets, so
// Sarama never assumes a feature newer than every target cluster has; a 4.x Version changes
// none of the versions above. Checked on kfake (the conformance suite, the scenarios); on
// Apache Kafka by reasoning from those ranges, not yet by a run.
var kafkaVersion = sarama.V3_9_0_0

// adapter is one process's transport on Sarama.
type adapter struct {
	out   io.Writer
	outMu sync.Mutex

	started atomic.Bool
	closed  atomic.Bool

	cfg   *config
	addrs []string
	rt    time.Duration // request_timeout_ms: bounds every call
	lease time.Duration // lease_ms: the transaction timeout

	mu    sync.Mutex
	roles map[string]*roleState

	regMu sync.Mutex
	reg   *registrar // registrations: one idempotent, non-transactional producer

	readMu sync.Mutex
	reader sarama.Client // reads: shared read_committed client, replaced after a failure

	adminMu sync.Mutex
	admin   sarama.ClusterAdmin

	offsets offsetsAPI // --offsets: how a pipeline member adds its offsets to a transaction
	member  *member    // the pipeline member, after member_start (member.go)
}

// roleState is this process's view of one role: at most one holding.
type roleState struct {
	mu   sync.Mutex
	gen  uint64 // counts acquires, so a late producer of an abandoned one is not installed
	held *holding
}

// holding is a producer this process built for a role, with its own client: Sarama's
// transactional id is a Config field, so each transactional producer has its own client.
type holding struct {
	role     string
	client   sarama.Client
	producer sarama.AsyncProducer
	busy     sync.Mutex // one write at a time on the producer
	once     sync.Once
}

type registrar struct {
	client   sarama.Client
	producer sarama.SyncProducer
}

func newAdapter(out io.Writer) *adapter {
	return &adapter{out: out, roles: map[string]*roleState{}}
}

// ---- start ----

func (a *adapter) start(c *config) (int, *callError) {
	if a.started.Load() {
		return 0, fail(kindInvalidConfig, "start: already started")
	}
	var addrs []string
	for _, s := range strings.Split(c.Bootstrap, ",") {
		if s = strings.TrimSpace(s); s != "" {
			addrs = append(addrs, s)
		}
	}
	if len(addrs) == 0 {
		return 0, fail(kindInvalidConfig, "Bootstrap: no address")
	}
	if c.RequestTimeoutMS <= 0 || c.LeaseMS <= 0 {
		return 0, fail(kindInvalidConfig, "LeaseDuration and RequestTimeout must be positive")
	}
	if c.Topic == "" {
		return 0, fail(kindInvalidConfig, "Topic: empty")
	}
	switch c.TransactionVersion {
	case 0, 1:
	case 2:
		// Sarama has no KIP-890 support: its transaction manager always sends
		// AddPartitionsToTxn (v3 at most) before producing to a partition, Produce v10 at most
		// and EndTxn v3 at most; the broker runs such a producer's transactions under TV1.
		return 0, fail(kindInvalidConfig, "TransactionVersion: 2 required, but Sarama "+saramaVersion()+
			" speaks transaction version 1 only (it sends AddPartitionsToTxn; Produce v10, EndTxn v3 at most)")
	default:
		return 0, fail(kindInvalidConfig, fmt.Sprintf("TransactionVersion: %d is not 0, 1 or 2", c.TransactionVersion))
	}
	a.cfg, a.addrs = c, addrs
	a.rt = time.Duration(c.RequestTimeoutMS) * time.Millisecond
	a.lease = time.Duration(c.LeaseMS) * time.Millisecond
	for _, cfg := range []*sarama.Config{a.txnConfig("validate"), a.registerConfig(), a.readerConfig(), a.adminConfig()} {
		if err := cfg.Validate(); err != nil {
			return 0, fail(kindInvalidConfig, "Sarama refuses the config: "+errText(err))
		}
	}
	a.started.Store(true)
	a.warmUp()
	return 1, nil
}

// warmUp connects the reader and builds the registrar inside start's budget, so the first
// calls of the run do not pay for it. A failure is not start's: the next call tries again.
// (The topics do not exist yet at start: the harness creates them after starting the
// transports.)
func (a *adapter) warmUp() {
	deadline := time.Now().Add(a.rt)
	if _, err := a.registrar(deadline); err != nil {
		logf("warm-up: registrar: %v", err)
	}
	if c, err := a.readerClient(); err == nil {
		done := make(chan error, 1)
		go func() { done <- c.RefreshMetadata() }()
		select {
		case err := <-done:
			if err != nil {
				logf("warm-up: reader metadata: %s", errText(err))
			}
		case <-time.After(time.Until(deadline)):
		}
	}
}

// ---- Sarama's configs ----

// baseConfig sets every timeout from the request timeout (rt), so that no single request of
// Sarama's outlives a call:
//   - Net.DialTimeout, ReadTimeout, WriteTimeout = rt: the phases of one request on a socket
//     (a read deadline is set per response read);
//   - Metadata.Timeout = rt bounds a metadata refresh with its retries (Retry.Max 3, backoff
//     100 ms); Metadata.Full false: only the topics in use, and no I/O in NewClient;
//   - Producer.Timeout = rt: the broker's wait for acks (acks=all) in a Produce;
//   - Producer.Transaction.Retry: backoff 100 ms, Max rt/100ms for the transaction manager's
//     retries (FindCoordinator, InitProducerId, AddPartitionsToTxn, EndTxn). Each attempt
//     may take rt, so they can outlast the call by minutes: a call that gives up closes
//     its client, which stops them (acquire, and the writes around CommitTxn);
//   - Admin.Timeout = rt (DescribeTransactions), Admin.Retry.Max 3;
//   - Consumer.Retry.Backoff 100 ms (default 2 s) so a read recovers within its budget.
//
// The transaction timeout is lease_ms (txnConfig); Sarama does not check it against the
// others and Kafka only bounds it above (transaction.max.timeout.ms), so nothing is clamped.
// Every blocking Sarama call (constructors running InitProducerId, CommitTxn, SendMessage,
// ConsumePartition, the reads) runs in a goroutine the call waits for until rt has passed.
func (a *adapter) baseConfig() *sarama.Config {
	c := sarama.NewConfig()
	c.ClientID = a.cfg.ClientID
	if c.ClientID == "" {
		c.ClientID = "fencecheck-sarama"
	}
	c.Version = kafkaVersion
	c.Net.DialTimeout = a.rt
	c.Net.ReadTimeout = a.rt
	c.Net.WriteTimeout = a.rt
	c.Metadata.Full = false
	c.Metadata.AllowAutoTopicCreation = false
	c.Metadata.Timeout = a.rt
	c.Metadata.Retry.Max = 3
	c.Metadata.Retry.Backoff = 100 * time.Millisecond
	c.Admin.Timeout = a.rt
	c.Admin.Retry.Max = 3
	c.Admin.Retry.Backoff = 100 * time.Millisecond
	c.Producer.Timeout = a.rt
	c.Producer.Retry.Max = 3
	c.Producer.Retry.Backoff = 100 * time.Millisecond
	c.Producer.Transaction.Retry.Backoff = 100 * time.Millisecond
	c.Producer.Transaction.Retry.Max = max(1, int(a.rt/(100*time.Millisecond)))
	c.Consumer.Retry.Backoff = 100 * time.Millisecond
	c.Metadata.RefreshFrequency = 10 * time.Minute
	return c
}

// producerConfig: acks=all, idempotent, one request in flight (Sarama requires it of an
// idempotent producer), every record to the partition it names.
func (a *adapter) producerConfig() *sarama.Config {
	c := a.baseConfig()
	c.Producer.Idempotent = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Net.MaxOpenRequests = 1
	c.Producer.Partitioner = sarama.NewManualPartitioner
	c.Producer.Return.Successes = true
	c.Producer.Return.Errors = true
	return c
}

func (a *adapter) txnConfig(role string) *sarama.Config {
	c := a.producerConfig()
	c.Producer.Transaction.ID = a.cfg.Topic + "/" + role
	c.Producer.Transaction.Timeout = a.lease
	return c
}

func (a *adapter) registerConfig() *sarama.Config { return a.producerConfig() }

func (a *adapter) readerConfig() *sarama.Config {
	c := a.baseConfig()
	c.Consumer.IsolationLevel = sarama.ReadCommitted
	c.Consumer.Return.Errors = true
	c.Consumer.Offsets.AutoCommit.Enable = false
	if a.cfg.FetchMaxWaitMS > 0 {
		c.Consumer.MaxWaitTime = time.Duration(a.cfg.FetchMaxWaitMS) * time.Millisecond
	}
	if a.cfg.FetchPartitionMax > 0 {
		c.Consumer.Fetch.Default = a.cfg.FetchPartitionMax
	}
	return c
}

// adminConfig: full metadata. NewClusterAdmin fetches the controller (Client.Controller),
// which refreshes metadata for the topics the client knows; with Metadata.Full false a new
// client knows none and Sarama refuses with ErrNoTopicsToUpdateMetadata ("kafka: no specific
// topics to update metadata") instead of asking for the brokers alone.
func (a *adapter) adminConfig() *sarama.Config {
	c := a.baseConfig()
	c.Metadata.Full = true
	return c
}

// ---- acquire ----

func (a *adapter) role(role string) *roleState {
	a.mu.Lock()
	defer a.mu.Unlock()
	rs := a.roles[role]
	if rs == nil {
		rs = &roleState{}
		a.roles[role] = rs
	}
	return rs
}

func (a *adapter) holding(role string) *holding {
	rs := a.role(role)
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.held
}

// drop forgets h as role's holding (if it still is) and closes its producer.
func (a *adapter) drop(h *holding, why string) {
	rs := a.role(h.role)
	rs.mu.Lock()
	if rs.held == h {
		rs.held = nil
	}
	rs.mu.Unlock()
	h.close(why)
}

// close closes the holding's client first, which closes its broker connections and so cuts
// any request still in flight (a commit whose answer did not come in time), then the
// producer, draining its channels in the background.
func (h *holding) close(why string) {
	h.once.Do(func() {
		logf("role %s: closing its producer (%s)", h.role, why)
		_ = h.client.Close()
		h.producer.AsyncClose()
		go func() {
			for range h.producer.Successes() {
			}
		}()
		go func() {
			for range h.producer.Errors() {
			}
		}()
	})
}

// acquire builds the role's new transactional producer. Sarama's AsyncProducer constructor
// runs FindCoordinator and InitProducerId (newTransactionManager): when it returns without an
// error, InitProducerId was answered, the pair minted (the harness's gateway read it) and
// every earlier producer of the id fenced.
func (a *adapter) acquire(role string) *callError {
	rs := a.role(role)
	rs.mu.Lock()
	rs.gen++
	gen, old := rs.gen, rs.held
	rs.held = nil
	rs.mu.Unlock()
	if old != nil {
		old.close("acquired again")
	}

	type result struct {
		h   *holding
		err *callError
	}
	ch := make(chan result, 1)
	timer := time.NewTimer(a.rt)
	defer timer.Stop()
	// Full metadata is off: NewClient sends nothing, so nothing was minted if it fails.
	client, err := sarama.NewClient(a.addrs, a.txnConfig(role))
	if err != nil {
		return fail(kindOf(err), "build the client: "+errText(err))
	}
	go func() {
		p, err := sarama.NewAsyncProducerFromClient(client)
		if err != nil {
			_ = client.Close()
			// An InitProducerId may have reached the coordinator (one of the transaction
			// manager's attempts): it may have minted and fenced.
			ch <- result{err: unknown(kindOf(err), "InitProducerId (NewAsyncProducerFromClient): "+errText(err))}
			return
		}
		ch <- result{h: &holding{role: role, client: client, producer: p}}
	}()
	var r result
	select {
	case r = <-ch:
	case <-timer.C:
		// The transaction manager retries InitProducerId for minutes (Transaction.Retry):
		// each retry is a new mint, which would fence the role's next holder, and whose
		// answer the gateway would take for the next acquire's token. Closing the client now
		// makes every retry fail before it is sent.
		_ = client.Close()
		go func() {
			if r := <-ch; r.h != nil {
				r.h.close("its acquire was answered unknown: timed out")
			}
		}()
		return unknown(kindClient, fmt.Sprintf("InitProducerId (NewAsyncProducerFromClient): no answer within the request timeout %v", a.rt))
	}
	if r.err != nil {
		return r.err
	}
	rs.mu.Lock()
	if rs.gen != gen || a.closed.Load() {
		rs.mu.Unlock()
		r.h.close("superseded")
		return unknown(kindClosed, "the transport was closed while InitProducerId ran")
	}
	rs.held = r.h
	rs.mu.Unlock()
	return nil
}

// ---- writes ----

// write commits ws in one transaction on the role's producer. Outcomes: fail for anything
// before CommitTxn (no commit was requested: the transaction can only be aborted, by its
// timeout or by the next InitProducerId), unknown for a CommitTxn that failed or did not
// answer in time (its EndTxn may have been sent, even when a retry was then refused).
func (a *adapter) write(role string, ws []write) *callError {
	h := a.holding(role)
	if h == nil {
		return fail(kindNotHeld, fmt.Sprintf("write %q: not held", role))
	}
	h.busy.Lock()
	defer h.busy.Unlock()
	if a.holding(role) != h {
		return fail(kindNotHeld, fmt.Sprintf("write %q: not held", role))
	}
	timer := time.NewTimer(a.rt)
	defer timer.Stop()
	p := h.producer
	if err := p.BeginTxn(); err != nil {
		a.drop(h, "BeginTxn failed")
		return fail(kindOf(err), fmt.Sprintf("BeginTxn: %s (txn status %s)", errText(err), p.TxnStatus()))
	}
	for _, w := range ws {
		msg := message(w.Topic, w.Partition, w.Key, w.Value)
		select {
		case p.Input() <- msg:
		case <-timer.C:
			a.drop(h, "produce timed out")
			return fail(kindClient, fmt.Sprintf("produce: the producer took no record within the request timeout %v (no commit requested)", a.rt))
		}
	}
	for acked := 0; acked < len(ws); {
		select {
		case <-p.Successes():
			acked++
		case pe := <-p.Errors():
			a.drop(h, "produce failed")
			return fail(kindOf(pe.Err), fmt.Sprintf("produce to %s/%d: %s (txn status %s; no commit requested)",
				pe.Msg.Topic, pe.Msg.Partition, errText(pe.Err), p.TxnStatus()))
		case <-timer.C:
			a.drop(h, "produce timed out")
			return fail(kindClient, fmt.Sprintf("produce: %d of %d records unacknowledged after the request timeout %v (no commit requested)",
				len(ws)-acked, len(ws), a.rt))
		}
	}
	if st := p.TxnStatus(); st&(sarama.ProducerTxnFlagInError|sarama.ProducerTxnFlagFatalError|sarama.ProducerTxnFlagAbortableError) != 0 {
		// CommitTxn would return the last error without sending EndTxn.
		a.drop(h, "transaction in error")
		return fail(kindProducer, fmt.Sprintf("the transaction is in error before its commit (txn status %s; no commit requested)", st))
	}
	done := make(chan error, 1)
	go func() { done <- p.CommitTxn() }()
	select {
	case err := <-done:
		if err != nil {
			st := p.TxnStatus()
			a.drop(h, "CommitTxn failed")
			return unknown(kindOf(err), fmt.Sprintf("CommitTxn: %s (txn status %s)", errText(err), st))
		}
		return nil
	case <-timer.C:
		a.drop(h, "CommitTxn timed out")
		return unknown(kindClient, fmt.Sprintf("CommitTxn: no answer within the request timeout %v (txn status %s)", a.rt, p.TxnStatus()))
	}
}

// ---- register ----

// registrar returns the registration producer, building it (InitProducerId of an idempotent
// producer, which appends nothing) if needed.
func (a *adapter) registrar(deadline time.Time) (*registrar, *callError) {
	a.regMu.Lock()
	defer a.regMu.Unlock()
	if a.reg != nil {
		return a.reg, nil
	}
	type result struct {
		r   *registrar
		err error
	}
	ch := make(chan result, 1)
	go func() {
		client, err := sarama.NewClient(a.addrs, a.registerConfig())
		if err != nil {
			ch <- result{err: err}
			return
		}
		p, err := sarama.NewSyncProducerFromClient(client)
		if err != nil {
			_ = client.Close()
			ch <- result{err: err}
			return
		}
		ch <- result{r: &registrar{client: client, producer: p}}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, fail(kindOf(r.err), "build the registration producer (idempotent InitProducerId): "+errText(r.err))
		}
		a.reg = r.r
		return r.r, nil
	case <-time.After(time.Until(deadline)):
		go func() {
			if r := <-ch; r.r != nil {
				a.regMu.Lock()
				if a.reg == nil && !a.closed.Load() {
					a.reg = r.r
					r.r = nil
				}
				a.regMu.Unlock()
				if r.r != nil {
					r.r.close()
				}
			}
		}()
		return nil, fail(kindClient, "build the registration producer: no answer within the request timeout")
	}
}

func (r *registrar) close() {
	_ = r.client.Close()
	go func() { _ = r.producer.Close() }()
}

// register appends one record outside any transaction (idempotent producer, acks=all); its
// offset is the join sequence.
func (a *adapter) register(topic string, partition int32, key, value []byte) (int64, *callError) {
	deadline := time.Now().Add(a.rt)
	r, cerr := a.registrar(deadline)
	if cerr != nil {
		return 0, cerr // nothing was sent
	}
	msg := message(topic, partition, key, value)
	type result struct {
		off int64
		err error
	}
	ch := make(chan result, 1)
	go func() {
		_, off, err := r.producer.SendMessage(msg)
		ch <- result{off, err}
	}()
	select {
	case res := <-ch:
		if res.err != nil {
			var ce sarama.ConfigurationError
			if errors.As(res.err, &ce) {
				return 0, fail(kindInvalidConfig, "register: "+errText(res.err)) // refused before sending
			}
			// The producer retries: an attempt may have been appended before a later one
			// failed. Unknown.
			return 0, unknown(kindOf(res.err), "register: "+errText(res.err))
		}
		return res.off, nil
	case <-time.After(time.Until(deadline)):
		return 0, unknown(kindClient, fmt.Sprintf("register: no acknowledgement within the request timeout %v", a.rt))
	}
}

// ---- describe ----

// describe asks the role's transaction coordinator (Sarama's TransactionClusterAdmin
// DescribeTransactions, KIP-664).
func (a *adapter) describe(role string) (bool, *token, *callError) {
	id := a.cfg.Topic + "/" + role
	type result struct {
		states map[string]sarama.TransactionState
		err    error
	}
	ch := make(chan result, 1)
	go func() {
		admin, err := a.adminClient()
		if err != nil {
			ch <- result{err: err}
			return
		}
		ta, ok := admin.(sarama.TransactionClusterAdmin)
		if !ok {
			ch <- result{err: errors.New("Sarama's ClusterAdmin has no DescribeTransactions")}
			return
		}
		states, err := ta.DescribeTransactions([]string{id})
		if err != nil {
			a.resetAdmin(admin)
		}
		ch <- result{states, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			return false, nil, fail(kindAdmin, "DescribeTransactions: "+errText(r.err))
		}
		st, ok := r.states[id]
		if !ok {
			return false, nil, fail(kindAdmin, "DescribeTransactions: no state for "+id+" in the answer")
		}
		switch {
		case errors.Is(st.ErrorCode, errTransactionalIDNotFound):
			return false, nil, nil // no member ever acquired the role
		case !errors.Is(st.ErrorCode, sarama.ErrNoError):
			return false, nil, fail(kindAdmin, "DescribeTransactions: "+errText(st.ErrorCode))
		case st.ProducerID < 0:
			return false, nil, nil
		}
		return true, &token{ProducerID: st.ProducerID, Epoch: st.ProducerEpoch}, nil
	case <-time.After(a.rt):
		return false, nil, fail(kindAdmin, fmt.Sprintf("DescribeTransactions: no answer within the request timeout %v", a.rt))
	}
}

// adminClient returns the shared ClusterAdmin, building it (which fetches the controller) if
// needed.
func (a *adapter) adminClient() (sarama.ClusterAdmin, error) {
	a.adminMu.Lock()
	defer a.adminMu.Unlock()
	if a.admin != nil {
		return a.admin, nil
	}
	ad, err := sarama.NewClusterAdmin(a.addrs, a.adminConfig())
	if err != nil {
		return nil, err
	}
	if a.closed.Load() {
		_ = ad.Close()
		return nil, errors.New("transport closed")
	}
	a.admin = ad
	return ad, nil
}

// resetAdmin drops a ClusterAdmin whose call failed, so the next describe starts afresh.
func (a *adapter) resetAdmin(ad sarama.ClusterAdmin) {
	a.adminMu.Lock()
	if a.admin == ad {
		a.admin = nil
	}
	a.adminMu.Unlock()
	go func() { _ = ad.Close() }()
}

// ---- shutdown ----

func (a *adapter) shutdown() {
	if !a.closed.CompareAndSwap(false, true) {
		return
	}
	if a.member != nil {
		a.member.close()
	}
	a.mu.Lock()
	var hs []*holding
	for _, rs := range a.roles {
		rs.mu.Lock()
		if rs.held != nil {
			hs = append(hs, rs.held)
			rs.held = nil
		}
		rs.mu.Unlock()
	}
	a.mu.Unlock()
	for _, h := range hs {
		h.close("transport closed")
	}
	a.regMu.Lock()
	if a.reg != nil {
		a.reg.close()
		a.reg = nil
	}
	a.regMu.Unlock()
	a.readMu.Lock()
	if a.reader != nil {
		_ = a.reader.Close()
		a.reader = nil
	}
	a.readMu.Unlock()
	a.adminMu.Lock()
	if a.admin != nil {
		_ = a.admin.Close()
		a.admin = nil
	}
	a.adminMu.Unlock()
}

// ---- errors ----

// errTransactionalIDNotFound is Kafka's TRANSACTIONAL_ID_NOT_FOUND (105), which
// DescribeTransactions answers for an id the coordinator does not know. Sarama v1.61.1 has no
// constant for it (its KError list has no 105; its text is "Unknown error ... 105"); the
// code decodes into a KError all the same.
const errTransactionalIDNotFound = sarama.KError(105)

// errText is what Sarama said: its text, and the Kafka error code and name where there is one.
// message is a record to produce to partition of topic; a nil key or value stays null.
func message(topic string, partition int32, key, value []byte) *sarama.ProducerMessage {
	msg := &sarama.ProducerMessage{Topic: topic, Partition: partition}
	if key != nil {
		msg.Key = sarama.ByteEncoder(key)
	}
	if value != nil {
		msg.Value = sarama.ByteEncoder(value)
	}
	return msg
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	s := err.Error()
	var ke sarama.KError
	if errors.As(err, &ke) && ke != sarama.ErrNoError {
		label := fmt.Sprintf("Kafka error %d", int16(ke))
		if name := kafkaErrorName(ke); name != "" {
			label = name + " (" + label + ")"
		}
		if text := ke.Error(); strings.HasPrefix(text, "Unknown error") {
			// Sarama has no text for some codes it has constants for (90 PRODUCER_FENCED).
			s = strings.Replace(s, text, label, 1)
		} else {
			s = strings.Replace(s, text, label+": "+text, 1)
		}
	}
	return s
}

func kafkaErrorName(ke sarama.KError) string {
	switch ke {
	case sarama.ErrInvalidProducerEpoch:
		return "INVALID_PRODUCER_EPOCH"
	case sarama.ErrProducerFenced:
		return "PRODUCER_FENCED"
	case sarama.ErrInvalidTxnState:
		return "INVALID_TXN_STATE"
	case sarama.ErrInvalidProducerIDMapping:
		return "INVALID_PRODUCER_ID_MAPPING"
	case sarama.ErrConcurrentTransactions:
		return "CONCURRENT_TRANSACTIONS"
	case sarama.ErrNotCoordinatorForConsumer:
		return "NOT_COORDINATOR"
	case sarama.ErrConsumerCoordinatorNotAvailable:
		return "COORDINATOR_NOT_AVAILABLE"
	case sarama.ErrOffsetsLoadInProgress:
		return "COORDINATOR_LOAD_IN_PROGRESS"
	case sarama.ErrUnknownProducerID:
		return "UNKNOWN_PRODUCER_ID"
	case sarama.ErrOutOfOrderSequenceNumber:
		return "OUT_OF_ORDER_SEQUENCE_NUMBER"
	case sarama.ErrNotLeaderForPartition:
		return "NOT_LEADER_OR_FOLLOWER"
	case sarama.ErrUnknownTopicOrPartition:
		return "UNKNOWN_TOPIC_OR_PARTITION"
	case sarama.ErrRequestTimedOut:
		return "REQUEST_TIMED_OUT"
	case errTransactionalIDNotFound:
		return "TRANSACTIONAL_ID_NOT_FOUND"
	case sarama.ErrUnsupportedVersion:
		return "UNSUPPORTED_VERSION"
	case sarama.ErrIllegalGeneration:
		return "ILLEGAL_GENERATION"
	case sarama.ErrUnknownMemberId:
		return "UNKNOWN_MEMBER_ID"
	case sarama.ErrUnstableOffsetCommit:
		return "UNSTABLE_OFFSET_COMMIT"
	}
	return ""
}

// kindOf maps a Sarama error to the protocol's kind.
func kindOf(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, sarama.ErrProducerFenced), errors.Is(err, sarama.ErrInvalidProducerEpoch),
		errors.Is(err, sarama.ErrInvalidTxnState),
		// The group coordinator's refusal of a superseded member's offsets (KIP-447).
		errors.Is(err, sarama.ErrIllegalGeneration), errors.Is(err, sarama.ErrUnknownMemberId),
		errors.Is(err, sarama.ErrFencedInstancedId):
		return kindFenced
	case errors.Is(err, sarama.ErrOutOfBrokers), errors.Is(err, sarama.ErrNotConnected),
		errors.Is(err, sarama.ErrClosedClient), errors.Is(err, sarama.ErrShuttingDown),
		errors.Is(err, sarama.ErrRequestTimedOut), errors.Is(err, sarama.ErrNetworkException),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EPIPE),
		errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne):
		return kindClient
	}
	var ce sarama.ConfigurationError
	if errors.As(err, &ce) {
		return kindInvalidConfig
	}
	return kindProducer
}
