package links

import (
	"encoding/binary"
	"slices"
	"sync/atomic"
)

// The observation of answers: which (request type, error code) pairs the processes' requests
// were answered with. `fencecheck explore` reads them as part of what a run reached (a run
// that saw EndTxn answered CONCURRENT_TRANSACTIONS went somewhere a run that did not, did
// not). It is off unless ObserveAnswers turns it on, so an ordinary run's connections pay one
// atomic load per request and per response for it. When on, a connection remembers each
// request's type by its correlation id in a small array (no allocation), and decodes the
// error code of each answer, except of the answers that are large and many (Fetch and
// Metadata with records or topics in them, see answerWorthReading).

// askedSlots is how many requests a connection remembers while they wait for their answers:
// kgo has at most a handful in flight per connection (five Produce requests, by default), and
// a request whose slot was taken by a later one is only left unobserved.
const askedSlots = 32

// asked is one request waiting for its answer.
type asked struct {
	corr         int32
	key, version int16
	set          bool
}

// answerCodes is how many error codes an API key's marks hold: codes -1 to answerCodes-2;
// larger codes share the last mark.
const answerCodes = 160

// answerMarks are the (API key, error code) pairs answered, each set once.
type answerMarks [128][answerCodes]atomic.Bool

func (m *answerMarks) mark(key, code int16) {
	if key < 0 || int(key) >= len(m) {
		return
	}
	i := int(code) + 1
	if i < 0 || i >= answerCodes {
		i = answerCodes - 1
	}
	if !m[key][i].Load() {
		m[key][i].Store(true)
	}
}

// Answer is one (request type, error code) pair the processes were answered with.
type Answer struct {
	// API is the request type as KafkaAPIName names it ("endtxn").
	API string `json:"api"`
	// Error is the error's protocol name (KafkaErrorName: "NOT_COORDINATOR"), "NONE" for
	// none, or the code when kerr does not know it. An answer whose parts carry several errors
	// counts as the first of them.
	Error string `json:"error"`
}

// ObserveAnswers turns on the observation of answers (Answers) on every connection of the
// network, open or not; it stays on until Close.
func (n *Network) ObserveAnswers() { n.kafka.observe.Store(true) }

// Answers returns the (request type, error code) pairs the processes' requests were answered
// with since ObserveAnswers, in API key and code order: what the client saw, so an answer an
// error-response fault rewrote counts as its error, and one a fault dropped does not count.
// Connections the links cannot read as Kafka (TLS they do not terminate) add nothing.
func (n *Network) Answers() []Answer {
	var out []Answer
	for key := range n.kafka.answers {
		for i := range n.kafka.answers[key] {
			if !n.kafka.answers[key][i].Load() {
				continue
			}
			name := "NONE"
			if code := int16(i - 1); code != 0 {
				name = KafkaErrorName(code)
			}
			out = append(out, Answer{API: KafkaAPIName(int16(key)), Error: name})
		}
	}
	return slices.Clip(out)
}

// ask remembers the request frame's type under its correlation id.
func (c *kafkaConn) ask(frame []byte) {
	if len(frame) < 12 {
		return
	}
	corr := int32(binary.BigEndian.Uint32(frame[8:12]))
	c.mu.Lock()
	c.asked[uint32(corr)%askedSlots] = asked{corr: corr, key: int16(binary.BigEndian.Uint16(frame[4:6])),
		version: int16(binary.BigEndian.Uint16(frame[6:8])), set: true}
	c.mu.Unlock()
}

// answered marks the answer frame to request corr: with code when a fault rewrote its error
// codes to it, else with the frame's own first error code.
func (c *kafkaConn) answered(frame []byte, corr int32, code int16) {
	c.mu.Lock()
	a := &c.asked[uint32(corr)%askedSlots]
	q := *a
	if q.set && q.corr == corr {
		a.set = false
	}
	c.mu.Unlock()
	if !q.set || q.corr != corr {
		return
	}
	if code == 0 {
		if !answerWorthReading(q.key, len(frame)) {
			return
		}
		code = responseErrorCode(frame, q.key, q.version)
	}
	c.k.answers.mark(q.key, code)
}

// answerWorthReading reports whether an answer of key of size bytes is decoded: not a Fetch
// that carries records, nor a Metadata, ApiVersions or DescribeConfigs answer of any size
// (their errors are not what a run's faults change, and they are the large ones). Small
// Fetch answers are mostly errors and empty polls.
func answerWorthReading(key int16, size int) bool {
	switch key {
	case 1: // Fetch
		return size <= 512
	case 3, 18, 32: // Metadata, ApiVersions, DescribeConfigs
		return false
	}
	return true
}
