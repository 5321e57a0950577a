package links

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// KafkaAction is what a Kafka-aware fault does to the requests it matches.
type KafkaAction string

// The actions. Requests and responses keep their order on a connection, as on TCP: a
// connection on which a request was dropped or held, or a response dropped, carries no more
// requests (or responses) from then on, so the client times out on it and reconnects, as
// after a packet lost for good.
const (
	// KafkaDropRequest: the request never reaches the broker.
	KafkaDropRequest KafkaAction = "drop"
	// KafkaDropResponse: the broker handles the request, the client never learns the result.
	KafkaDropResponse KafkaAction = "drop-response"
	// KafkaDelay: the request reaches the broker Delay late; later requests on its connection
	// wait behind it.
	KafkaDelay KafkaAction = "delay"
	// KafkaHold: the request is taken off its connection and delivered on a connection of its
	// own once the response to the next Until request of the same transactional id (or, when
	// the held request names none, of the same process) has come back, or when the fault is
	// removed, whichever is first. Its response goes nowhere: the client gave up on it.
	KafkaHold KafkaAction = "hold"
	// KafkaDuplicate: the request is sent twice; the client sees the first response. With
	// Until, the copy is held and delivered as KafkaHold delivers.
	KafkaDuplicate KafkaAction = "duplicate"
	// KafkaErrorResponse: the broker handles the request and its response reaches the client
	// with every error code in it set to ErrorCode.
	KafkaErrorResponse KafkaAction = "error-response"
)

// KafkaActions lists the actions.
func KafkaActions() []KafkaAction {
	return []KafkaAction{KafkaDropRequest, KafkaDropResponse, KafkaDelay, KafkaHold, KafkaDuplicate, KafkaErrorResponse}
}

// KafkaFaultSpec says which requests of the processes' broker connections a Kafka-aware
// fault matches and what it does to them.
type KafkaFaultSpec struct {
	Action KafkaAction
	// API names the request type (see KafkaAPIKey), or the request class KafkaAddOffsets.
	// Required.
	API string
	// Processes whose connections the fault acts on. Empty: every process.
	Processes []int
	// TransactionalID narrows the match to requests that name it (Produce, EndTxn,
	// InitProducerId, AddPartitionsToTxn, FindCoordinator of a transaction coordinator,
	// DescribeTransactions, ...). Empty: any.
	TransactionalID string
	// Partition narrows the match to requests that name it; an empty Topic matches any topic
	// (requests that name topics by id, such as Fetch from version 13, match only then). Nil:
	// any.
	Partition *TopicPartition
	// Count acts on the first Count matching requests only. 0: every one.
	Count int
	// Delay is KafkaDelay's delay.
	Delay time.Duration
	// Until names the request after whose response a held request is delivered (KafkaHold,
	// required; KafkaDuplicate, optional).
	Until string
	// ErrorCode is KafkaErrorResponse's error code.
	ErrorCode int16
}

// String reads like the one-line form: "hold Produce of p1 txn t until EndTxn first 1".
func (s KafkaFaultSpec) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", s.Action, s.API)
	if len(s.Processes) > 0 {
		names := make([]string, len(s.Processes))
		for i, p := range s.Processes {
			names[i] = ProcessName(p)
		}
		b.WriteString(" of " + strings.Join(names, ","))
	}
	if s.TransactionalID != "" {
		b.WriteString(" txn " + s.TransactionalID)
	}
	if s.Partition != nil {
		fmt.Fprintf(&b, " partition %s/%d", s.Partition.Topic, s.Partition.Partition)
	}
	if s.Until != "" {
		b.WriteString(" until " + s.Until)
	}
	if s.Count > 0 {
		fmt.Fprintf(&b, " first %d", s.Count)
	}
	if s.Action == KafkaDelay {
		fmt.Fprintf(&b, " by %v", s.Delay)
	}
	if s.Action == KafkaErrorResponse {
		b.WriteString(" with " + KafkaErrorName(s.ErrorCode))
	}
	return b.String()
}

// KafkaFault is an active Kafka-aware fault of a Network (AddKafkaFault).
type KafkaFault struct {
	spec  KafkaFaultSpec
	api   apiMatch
	until int16
	n     *Network
	procs map[int]bool

	mu        sync.Mutex
	acted     int
	removed   bool
	held      []*heldRequest
	delivered []KafkaDelivery
	deliverWG sync.WaitGroup
	actedCh   chan struct{} // closed at the first act
}

// KafkaDelivery is the late delivery of a held request, or a delayed request's answer.
type KafkaDelivery struct {
	Process   int
	API       string
	At        time.Time // when it was written to the broker
	Trigger   string    // what released it: the Until request's API, "removal", or "a 4s delay"
	ErrorCode int16     // the first error code of the broker's response; 0 when none
	Err       error     // the delivery failed (dial, write or read)
}

// heldRequest is a request taken off its connection, waiting for its trigger.
type heldRequest struct {
	f       *KafkaFault
	req     *request
	process int
	txnID   string
	dial    func(ctx context.Context) (net.Conn, error)
	state   int // 0 held, 1 triggered (waiting for the trigger's response), 2 released
}

// AddKafkaFault starts a Kafka-aware fault on the processes' connections, the open ones and
// those dialed later.
func (n *Network) AddKafkaFault(spec KafkaFaultSpec) (*KafkaFault, error) {
	f := &KafkaFault{spec: spec, n: n, until: -1, actedCh: make(chan struct{})}
	api, ok := faultAPI(spec.API)
	if !ok {
		return nil, &OptionError{Field: "API", Value: spec.API, Reason: "not a Kafka request type kmsg knows, nor " + KafkaAddOffsets}
	}
	f.api = api
	if spec.Until != "" {
		if f.until, ok = KafkaAPIKey(spec.Until); !ok {
			return nil, &OptionError{Field: "Until", Value: spec.Until, Reason: "not a Kafka request type kmsg knows"}
		}
	}
	switch spec.Action {
	case KafkaHold:
		if spec.Until == "" {
			return nil, &OptionError{Field: "Until", Reason: "hold needs the request to deliver after"}
		}
	case KafkaDuplicate, KafkaDropRequest, KafkaDropResponse:
	case KafkaDelay:
		if spec.Delay <= 0 {
			return nil, &OptionError{Field: "Delay", Value: spec.Delay.String(), Reason: "must be positive"}
		}
	case KafkaErrorResponse:
		if spec.ErrorCode == 0 {
			return nil, &OptionError{Field: "ErrorCode", Reason: "must name an error"}
		}
	default:
		return nil, &OptionError{Field: "Action", Value: string(spec.Action), Reason: fmt.Sprintf("want one of %v", KafkaActions())}
	}
	if spec.Count < 0 {
		return nil, &OptionError{Field: "Count", Value: fmt.Sprint(spec.Count), Reason: "must not be negative"}
	}
	if len(spec.Processes) > 0 {
		f.procs = make(map[int]bool)
		for _, p := range spec.Processes {
			f.procs[p] = true
		}
	}
	k := &n.kafka
	k.mu.Lock()
	defer k.mu.Unlock()
	if n.isClosed() {
		return nil, ErrClosed
	}
	k.faults = append(k.faults, f)
	k.publish()
	n.log.Debug("kafka fault added", "fault", spec.String())
	return f, nil
}

func (n *Network) isClosed() bool {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.closed
}

// KafkaFaults returns the active Kafka-aware faults.
func (n *Network) KafkaFaults() []*KafkaFault {
	k := &n.kafka
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.faults)
}

// Spec returns what f was added with.
func (f *KafkaFault) Spec() KafkaFaultSpec { return f.spec }

// String is the spec's one-line form.
func (f *KafkaFault) String() string { return f.spec.String() }

// Acted returns how many requests f has matched and acted upon.
func (f *KafkaFault) Acted() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.acted
}

// WaitActed returns nil once f has acted upon a request, or ctx's error.
func (f *KafkaFault) WaitActed(ctx context.Context) error {
	select {
	case <-f.actedCh:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Held returns how many requests f holds that are not delivered yet.
func (f *KafkaFault) Held() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.held)
}

// Deliveries returns the late deliveries of held requests that have completed, and the
// answers to the delayed requests the broker answered, in the order they came.
func (f *KafkaFault) Deliveries() []KafkaDelivery {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.delivered)
}

// take counts one act if f may still act, and reports whether it may.
func (f *KafkaFault) take() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.removed || f.spec.Count > 0 && f.acted >= f.spec.Count {
		return false
	}
	f.acted++
	if f.acted == 1 {
		close(f.actedCh)
	}
	return true
}

func (f *KafkaFault) matches(process int, r *request) bool {
	if !f.api.matches(r.key, r.version) || f.procs != nil && !f.procs[process] {
		return false
	}
	if f.spec.TransactionalID != "" || f.spec.Partition != nil {
		r.decode()
	}
	if f.spec.TransactionalID != "" && !slices.Contains(r.txnIDs, f.spec.TransactionalID) {
		return false
	}
	if p := f.spec.Partition; p != nil && !slices.ContainsFunc(r.parts, func(tp TopicPartition) bool {
		return tp.Partition == p.Partition && (p.Topic == "" || p.Topic == tp.Topic)
	}) {
		return false
	}
	return true
}

// Remove ends f: it acts on nothing more, and the requests it still holds are delivered now
// (a held request is late, never lost). It returns once those deliveries are done, or ctx's
// error when ctx ends first. A delivery that fails (the link is down, the broker gone) is not
// an error of Remove: Deliveries reports it.
func (f *KafkaFault) Remove(ctx context.Context) error {
	k := &f.n.kafka
	k.mu.Lock()
	k.faults = slices.DeleteFunc(k.faults, func(x *KafkaFault) bool { return x == f })
	k.publish()
	k.mu.Unlock()
	f.mu.Lock()
	f.removed = true
	var release []*heldRequest
	for _, h := range f.held {
		// Waiting for its trigger, or for the trigger's response: either may never come.
		if h.state != 2 {
			h.state = 2
			release = append(release, h)
		}
	}
	f.mu.Unlock()
	for _, h := range release {
		h.deliver("removal")
	}
	done := make(chan struct{})
	go func() { f.deliverWG.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("kafka fault %s: held requests not delivered: %w", f, ctx.Err())
	}
	f.n.log.Debug("kafka fault removed", "fault", f.spec.String(), "acted", f.Acted())
	return nil
}

// hold takes r off its connection until its trigger.
func (f *KafkaFault) hold(process int, r *request, dial func(context.Context) (net.Conn, error)) {
	r.decode()
	r.frame = slices.Clone(r.frame) // the client reuses its buffer
	h := &heldRequest{f: f, req: r, process: process, dial: dial}
	if len(r.txnIDs) > 0 {
		h.txnID = r.txnIDs[0]
	}
	f.mu.Lock()
	f.held = append(f.held, h)
	f.deliverWG.Add(1)
	f.mu.Unlock()
}

// triggered returns the held requests that r, a request of process, triggers, and marks
// them so no later request triggers them again.
func (k *kafkaFaults) triggered(process int, r *request) []*heldRequest {
	var out []*heldRequest
	for _, f := range k.load() {
		if f.until != r.key {
			continue
		}
		f.mu.Lock()
		for _, h := range f.held {
			if h.state != 0 {
				continue
			}
			if h.txnID != "" {
				r.decode()
				if !slices.Contains(r.txnIDs, h.txnID) {
					continue
				}
			} else if h.process != process {
				continue
			}
			h.state = 1
			out = append(out, h)
		}
		f.mu.Unlock()
	}
	return out
}

// deliver writes the held request to the broker on a connection of its own and reads the
// response, in the background.
func (h *heldRequest) deliver(trigger string) {
	go func() {
		defer h.f.deliverWG.Done()
		d := KafkaDelivery{Process: h.process, API: KafkaAPIName(h.req.key), Trigger: trigger}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		d.Err = func() error {
			c, err := h.dial(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			deadline, _ := ctx.Deadline()
			_ = c.SetDeadline(deadline)
			d.At = time.Now()
			if _, err := c.Write(h.req.frame); err != nil {
				return err
			}
			if h.req.noResp {
				return nil
			}
			var size [4]byte
			if _, err := io.ReadFull(c, size[:]); err != nil {
				return err
			}
			frame := make([]byte, 4+binary.BigEndian.Uint32(size[:]))
			copy(frame, size[:])
			if _, err := io.ReadFull(c, frame[4:]); err != nil {
				return err
			}
			d.ErrorCode = responseErrorCode(frame, h.req.key, h.req.version)
			return nil
		}()
		if d.Err != nil {
			d.Err = fmt.Errorf("deliver held %s of %s: %w", d.API, ProcessName(h.process), d.Err)
		}
		h.f.mu.Lock()
		h.f.held = slices.DeleteFunc(h.f.held, func(x *heldRequest) bool { return x == h })
		h.f.delivered = append(h.f.delivered, d)
		h.f.mu.Unlock()
		h.f.n.log.Debug("kafka fault delivered a held request", "fault", h.f.spec.String(), "trigger", trigger, "error_code", d.ErrorCode, "err", d.Err)
	}()
}

// release delivers the held requests hs whose trigger's response came back (or whose
// trigger's connection ended).
func release(hs []*heldRequest, trigger string) {
	for _, h := range hs {
		h.f.mu.Lock()
		ok := h.state == 1
		h.state = 2
		h.f.mu.Unlock()
		if ok {
			h.deliver(trigger)
		}
	}
}

// kafkaFaults is a Network's set of active Kafka-aware faults.
type kafkaFaults struct {
	topics sync.Map // [16]byte topic id → name, from the Metadata responses the processes got
	mu     sync.Mutex
	faults []*KafkaFault
	snap   atomic.Pointer[[]*KafkaFault] // faults, for the connections' fast path
	// sent marks, per process (int → *[128]atomic.Bool indexed by API key), the request types
	// it has sent, so that a random fault is drawn only on requests the run makes (SentAPIs).
	sent sync.Map
	// observe turns on the observation of answers (ObserveAnswers); answers marks the
	// (request type, error code) pairs the processes were answered with (Answers).
	observe atomic.Bool
	answers answerMarks
}

// sentBy returns process's marks of the request types it sent, made on first use.
func (k *kafkaFaults) sentBy(process int) *[128]atomic.Bool {
	v, ok := k.sent.Load(process)
	if !ok {
		v, _ = k.sent.LoadOrStore(process, new([128]atomic.Bool))
	}
	return v.(*[128]atomic.Bool)
}

// noteSent marks the request type of frame, a whole request, in sent.
func noteSent(sent *[128]atomic.Bool, frame []byte) {
	if len(frame) < 6 {
		return
	}
	if key := int(binary.BigEndian.Uint16(frame[4:6])); key < len(sent) && !sent[key].Load() {
		sent[key].Store(true)
	}
}

// SentAPIs returns the request types (as KafkaAPIName names them) that process (0: any
// process) has sent through its links since the network started, in API key order: the
// requests a Kafka-aware fault on it can act on. Connections the links cannot read as Kafka
// (TLS they do not terminate) add nothing.
func (n *Network) SentAPIs(process int) []string {
	var seen [128]bool
	n.kafka.sent.Range(func(k, v any) bool {
		if process == 0 || k.(int) == process {
			for key := range v.(*[128]atomic.Bool) {
				seen[key] = seen[key] || v.(*[128]atomic.Bool)[key].Load()
			}
		}
		return true
	})
	var out []string
	for key, ok := range seen {
		if ok {
			out = append(out, KafkaAPIName(int16(key)))
		}
	}
	return out
}

func (k *kafkaFaults) publish() {
	s := slices.Clone(k.faults)
	k.snap.Store(&s)
}

func (k *kafkaFaults) topicName(id [16]byte) string {
	if v, ok := k.topics.Load(id); ok {
		return v.(string)
	}
	return ""
}

func (k *kafkaFaults) load() []*KafkaFault {
	if p := k.snap.Load(); p != nil {
		return *p
	}
	return nil
}

// removeAll removes every fault, delivering what they hold.
func (k *kafkaFaults) removeAll(ctx context.Context) error {
	k.mu.Lock()
	fs := slices.Clone(k.faults)
	k.mu.Unlock()
	var errs []error
	for _, f := range fs {
		errs = append(errs, f.Remove(ctx))
	}
	return errors.Join(errs...)
}

// kafkaConn is a process's connection to a broker, seen as Kafka frames so the active
// Kafka-aware faults can act on its requests and responses. Without faults it passes every
// frame unchanged. kgo writes one whole request per Write and reads responses one at a time.
type kafkaConn struct {
	net.Conn
	k       *kafkaFaults
	process int
	sent    *[128]atomic.Bool // the request types process sent (kafkaFaults.sentBy), looked up once
	// dial opens another connection to the same broker along the same path, for the late
	// delivery of held requests.
	dial func(ctx context.Context) (net.Conn, error)

	// asked are the requests written and not yet answered, by correlation id modulo its
	// length, while answers are observed (kafkaFaults.observe): a response carries only its
	// correlation id, so its request type must be remembered from the request.
	asked [askedSlots]asked

	wbuf  []byte // request bytes not yet a whole frame (Write is not called concurrently)
	kafka bool   // the first bytes were a Kafka request header
	raw   atomic.Bool

	mu        sync.Mutex
	cut       bool // requests from now on are dropped
	silent    bool // responses from now on are dropped
	expect    map[int32]*expectation
	closed    bool
	closedCh  chan struct{}
	wdeadline time.Time     // the client's write deadline, which a delay honours
	wdChanged chan struct{} // signalled when wdeadline changes
	rbuf      []byte        // response bytes not yet a whole frame (Read side only)
	out       []byte        // response bytes ready for the client
	readChunk []byte
}

// expectation is what to do with the response to one request.
type expectation struct {
	key, version int16
	silence      bool  // drop it and every later response
	errCode      int16 // replace its error codes
	dups         int   // responses to swallow after the first (duplicates)
	delivered    bool
	release      []*heldRequest // deliver these once it came back
	learn        bool           // a Metadata response: learn its topic ids
	trigger      string
	delayed      *KafkaFault // a delayed request: record its answer as one of this fault's deliveries
	at           time.Time   // when the delayed request was written to the broker
}

func newKafkaConn(c net.Conn, k *kafkaFaults, process int, dial func(context.Context) (net.Conn, error)) *kafkaConn {
	return &kafkaConn{Conn: c, k: k, process: process, sent: k.sentBy(process), dial: dial, expect: make(map[int32]*expectation),
		closedCh: make(chan struct{}), wdChanged: make(chan struct{}, 1)}
}

// Write acts on each whole request in b; it reports all of b written unless the broker
// connection failed.
func (c *kafkaConn) Write(b []byte) (int, error) {
	if len(c.k.load()) == 0 && len(c.wbuf) == 0 && !c.isCut() && frameSize(b) == len(b) && !isMetadata(b) {
		// Fast path: no fault, one whole frame. Triggers need no fault either: a held
		// request belongs to a fault. Metadata requests take the slow path so that topic
		// ids are learned before a fault needs them.
		noteSent(c.sent, b)
		if c.k.observe.Load() {
			c.ask(b)
		}
		return c.Conn.Write(b)
	}
	if c.raw.Load() {
		return c.Conn.Write(b)
	}
	c.wbuf = append(c.wbuf, b...)
	if !c.kafka {
		// The first bytes decide: a connection that does not start with a Kafka request is
		// passed through untouched (a test's echo server, a health probe).
		maybe := looksLikeRequest(c.wbuf)
		if maybe && len(c.wbuf) < 6 {
			return len(b), nil
		}
		if !maybe {
			c.raw.Store(true)
			buf := c.wbuf
			c.wbuf = nil
			if _, err := c.Conn.Write(buf); err != nil {
				return 0, err
			}
			return len(b), nil
		}
		c.kafka = true
	}
	for {
		n := frameSize(c.wbuf)
		if n == 0 {
			break
		}
		frame := c.wbuf[:n]
		if err := c.request(frame); err != nil {
			return 0, err
		}
		c.wbuf = c.wbuf[n:]
	}
	if len(c.wbuf) == 0 {
		c.wbuf = nil
	}
	return len(b), nil
}

// looksLikeRequest reports whether b starts with a plausible Kafka request: a size below
// 100 MiB and an API key kmsg knows.
// With fewer than 6 bytes it judges what there is.
func looksLikeRequest(b []byte) bool {
	if len(b) < 4 {
		return true
	}
	if size := binary.BigEndian.Uint32(b); size < 8 || size >= 100<<20 {
		return false
	}
	if len(b) < 6 {
		return true
	}
	key := int16(binary.BigEndian.Uint16(b[4:6]))
	return key >= 0 && KafkaAPIName(key) != "unknown"
}

func isMetadata(frame []byte) bool { return len(frame) >= 6 && frame[4] == 0 && frame[5] == 3 }

func (c *kafkaConn) isCut() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cut
}

// request acts on one request frame.
func (c *kafkaConn) request(frame []byte) error {
	if c.isCut() {
		return nil
	}
	noteSent(c.sent, frame)
	if c.k.observe.Load() {
		c.ask(frame)
	}
	r, err := parseRequest(frame, c.k.topicName)
	if err != nil {
		_, err := c.Conn.Write(frame) // not ours to judge
		return err
	}
	var e expectation
	e.key, e.version = r.key, r.version
	if hs := c.k.triggered(c.process, r); len(hs) > 0 {
		e.release, e.trigger = hs, KafkaAPIName(r.key)
	}
	var act *KafkaFault
	for _, f := range c.k.load() {
		if f.matches(c.process, r) && f.take() {
			act = f
			break
		}
	}
	var action KafkaAction
	if act != nil {
		action = act.spec.Action
	}
	switch action {
	case KafkaDropRequest, KafkaHold:
		if action == KafkaHold {
			act.hold(c.process, r, c.dial)
		}
		c.mu.Lock()
		c.cut = true
		c.mu.Unlock()
		release(e.release, e.trigger) // it will never be answered here
		return nil
	case KafkaDelay:
		if err := c.sleep(act.spec.Delay); err != nil {
			return err
		}
		if !r.noResp {
			e.delayed, e.at = act, time.Now()
		}
	case KafkaDropResponse:
		e.silence = true
	case KafkaErrorResponse:
		e.errCode = act.spec.ErrorCode
	case KafkaDuplicate:
		if act.until >= 0 {
			r2 := *r
			act.hold(c.process, &r2, c.dial)
		} else if !r.noResp {
			e.dups = 1
		}
	}
	e.learn = r.key == 3
	if e.silence || e.errCode != 0 || e.dups > 0 || len(e.release) > 0 || e.learn || e.delayed != nil {
		if r.noResp {
			defer release(e.release, e.trigger)
		} else {
			c.mu.Lock()
			c.expect[r.corr] = &e
			c.mu.Unlock()
		}
	}
	if _, err := c.Conn.Write(frame); err != nil {
		return err
	}
	if action == KafkaDuplicate && act.until < 0 {
		if _, err := c.Conn.Write(frame); err != nil {
			return err
		}
	}
	return nil
}

// SetDeadline sets the broker connection's deadlines and notes the write deadline.
func (c *kafkaConn) SetDeadline(t time.Time) error {
	c.noteWriteDeadline(t)
	return c.Conn.SetDeadline(t)
}

// SetWriteDeadline sets the broker connection's write deadline and notes it.
func (c *kafkaConn) SetWriteDeadline(t time.Time) error {
	c.noteWriteDeadline(t)
	return c.Conn.SetWriteDeadline(t)
}

// noteWriteDeadline records t for a delayed request, which must fail at the client's write
// deadline as a blocked write would (kgo also moves it to now when the request's context
// ends).
func (c *kafkaConn) noteWriteDeadline(t time.Time) {
	c.mu.Lock()
	c.wdeadline = t
	c.mu.Unlock()
	select {
	case c.wdChanged <- struct{}{}:
	default:
	}
}

// sleep waits d, or fails when the connection closes or its write deadline passes.
func (c *kafkaConn) sleep(d time.Duration) error {
	end := time.Now().Add(d)
	for {
		c.mu.Lock()
		dl := c.wdeadline
		c.mu.Unlock()
		wake := end
		if !dl.IsZero() && dl.Before(wake) {
			wake = dl
		}
		wait := time.Until(wake)
		if wait <= 0 {
			if wake.Equal(end) {
				return nil
			}
			return os.ErrDeadlineExceeded
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-c.wdChanged:
		case <-c.closedCh:
			t.Stop()
			return net.ErrClosed
		}
		t.Stop()
	}
}

// Read returns response bytes, after the faults acted on each whole response. Responses are
// always framed: kgo pipelines requests, so an expectation may be set while a response to an
// earlier request is on its way.
func (c *kafkaConn) Read(p []byte) (int, error) {
	for len(c.out) == 0 {
		if c.raw.Load() {
			return c.Conn.Read(p)
		}
		if n := frameSize(c.rbuf); n > 0 {
			c.response(c.rbuf[:n])
			c.rbuf = c.rbuf[n:]
			continue
		}
		if c.readChunk == nil {
			c.readChunk = make([]byte, 32<<10)
		}
		n, err := c.Conn.Read(c.readChunk)
		c.rbuf = append(c.rbuf, c.readChunk[:n]...)
		if err != nil && frameSize(c.rbuf) == 0 {
			return 0, err
		}
	}
	n := copy(p, c.out)
	c.out = c.out[n:]
	if len(c.out) == 0 {
		c.out = nil
	}
	return n, nil
}

// response acts on one response frame.
func (c *kafkaConn) response(frame []byte) {
	corr := int32(binary.BigEndian.Uint32(frame[4:8]))
	c.mu.Lock()
	if c.silent {
		c.mu.Unlock()
		return
	}
	e := c.expect[corr]
	if e == nil {
		c.mu.Unlock()
		if c.k.observe.Load() {
			c.answered(frame, corr, 0)
		}
		c.out = append(c.out, frame...)
		return
	}
	if e.delivered {
		// A duplicate's response.
		if e.dups--; e.dups <= 0 {
			delete(c.expect, corr)
		}
		c.mu.Unlock()
		return
	}
	e.delivered = true
	if e.dups == 0 {
		delete(c.expect, corr)
	}
	if e.silence {
		c.silent = true
	}
	c.mu.Unlock()
	defer release(e.release, e.trigger)
	if f := e.delayed; f != nil {
		// What a late request met is what a delay is for, as for a held one.
		d := KafkaDelivery{Process: c.process, API: KafkaAPIName(e.key), At: e.at,
			Trigger: "a " + f.spec.Delay.String() + " delay", ErrorCode: responseErrorCode(frame, e.key, e.version)}
		f.mu.Lock()
		f.delivered = append(f.delivered, d)
		f.mu.Unlock()
	}
	if e.learn {
		for id, name := range topicIDs(frame, e.version) {
			c.k.topics.Store(id, name)
		}
	}
	if c.k.observe.Load() && !e.silence {
		c.answered(frame, corr, e.errCode) // what the client is told
	}
	switch {
	case e.silence:
	case e.errCode != 0:
		out, err := replaceErrorCodes(frame, e.key, e.version, e.errCode)
		if err != nil {
			out = frame // an unreadable response passes unchanged
		}
		c.out = append(c.out, out...)
	default:
		c.out = append(c.out, frame...)
	}
}

// Close closes the broker connection. Held requests whose trigger was sent on it but never
// answered are delivered now.
func (c *kafkaConn) Close() error {
	c.mu.Lock()
	var pending []*expectation
	if !c.closed {
		c.closed = true
		close(c.closedCh)
		for _, e := range c.expect {
			if len(e.release) > 0 && !e.delivered {
				pending = append(pending, e)
			}
		}
	}
	c.mu.Unlock()
	for _, e := range pending {
		release(e.release, e.trigger)
	}
	return c.Conn.Close()
}
