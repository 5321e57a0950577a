package nemesis

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/fencecheck/fencecheck/cluster/links"
	"github.com/fencecheck/fencecheck/internal/units"
)

// A random schedule's Kafka-aware faults. A menu entry that names a Kafka-aware fault and no
// api is a family: each time it is drawn, the request type and whatever else the entry leaves
// unset (target, count, delay, error, until) are drawn with the run's seed, from what the run
// makes possible:
//
//   - only a request type some process has sent through its links so far (a lease run sends
//     no group requests; a transport that does not describe sends no DescribeTransactions),
//     since a fault on a request nobody sends could never take hold;
//   - error-response answers only with errors that leave the request's outcome for the client
//     to find out (retriable ones), because the broker did handle the request: a definitive
//     refusal of a request the broker took would be a lie, and the checker would rightly call
//     the client's belief of it a bug;
//   - hold only a request a later one of the same transaction delivers (until EndTxn; EndTxn
//     itself until the next InitProducerId), so the held request arrives late, never lost.

// mixAPI is one request type the random mix may aim at.
type mixAPI struct {
	api string
	// errors are what error-response may answer it with: retriable errors, after which the
	// client retries or looks again and learns the truth.
	errors []string
	// until is the request after whose answer hold delivers it; "" leaves it out of hold.
	until string
	// dup: duplicate may send it twice (the requests a client may really retry on a new
	// connection while the first is still in flight).
	dup bool
}

// mixAPIs are the requests the issue of fencing turns on: the transactional ones, describe,
// and the group and offset requests of a pipeline.
var mixAPIs = []mixAPI{
	{api: "initproducerid", errors: []string{"NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS", "CONCURRENT_TRANSACTIONS"}, dup: true},
	{api: "addpartitionstotxn", errors: []string{"NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS", "CONCURRENT_TRANSACTIONS"}, until: "endtxn", dup: true},
	{api: "produce", errors: []string{"NOT_LEADER_FOR_PARTITION", "REQUEST_TIMED_OUT"}, until: "endtxn", dup: true},
	{api: "endtxn", errors: []string{"NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS", "CONCURRENT_TRANSACTIONS"}, until: "initproducerid", dup: true},
	{api: "describetransactions", errors: []string{"NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS"}},
	{api: "addoffsetstotxn", errors: []string{"NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS", "CONCURRENT_TRANSACTIONS"}, until: "endtxn", dup: true},
	{api: "txnoffsetcommit", errors: []string{"NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS"}, until: "endtxn", dup: true},
	{api: "joingroup", errors: []string{"NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS"}},
	{api: "syncgroup", errors: []string{"NOT_COORDINATOR", "REBALANCE_IN_PROGRESS"}},
	{api: "heartbeat", errors: []string{"NOT_COORDINATOR", "REBALANCE_IN_PROGRESS"}},
	{api: "consumergroupheartbeat", errors: []string{"NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS"}},
	{api: "offsetfetch", errors: []string{"NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS", "UNSTABLE_OFFSET_COMMIT"}},
}

// mixDelays and mixCounts are what delay's delay and a fault's count are drawn from: from a
// blip to past a client's request timeout, and from the first request to every one of the
// window (0).
var (
	mixDelays = []time.Duration{250 * time.Millisecond, time.Second, 3 * time.Second, 8 * time.Second}
	mixCounts = []int{1, 1, 2, 3, 0}
)

// MixAPIs returns the request types a random schedule's Kafka-aware faults may be drawn on,
// those some process has sent or not.
func MixAPIs() []string {
	out := make([]string, len(mixAPIs))
	for i, m := range mixAPIs {
		out[i] = m.api
	}
	return out
}

// MixErrors returns the errors error-response may answer request type api with (the
// retriable ones of that request), and MixUntil the request after whose answer hold delivers
// it ("" when hold does not take it): what a random schedule draws, for other searches that
// must not lie to a client either (fencecheck explore).
func MixErrors(api string) []string {
	for _, m := range mixAPIs {
		if m.api == api {
			return slices.Clone(m.errors)
		}
	}
	return nil
}

// MixUntil: see MixErrors.
func MixUntil(api string) string {
	for _, m := range mixAPIs {
		if m.api == api {
			return m.until
		}
	}
	return ""
}

// candidates returns the request types action may be drawn on among those sent, in mixAPIs'
// order.
func (k kafkaMixAction) candidates(sent []string) []mixAPI {
	var out []mixAPI
	for _, m := range mixAPIs {
		if !slices.Contains(sent, m.api) || (k.api != "" && k.api != m.api) {
			continue
		}
		switch links.KafkaAction(k.action) {
		case links.KafkaHold:
			// A request held until its own kind's next answer would wait for itself.
			if m.until == "" || k.until == m.api {
				continue
			}
		case links.KafkaDuplicate:
			if !m.dup {
				continue
			}
		case links.KafkaErrorResponse:
			if k.err != "" && !slices.Contains(m.errors, k.err) {
				continue
			}
		}
		out = append(out, m)
	}
	return out
}

type kafkaMixAction struct {
	action string
	api    string // set by the entry: draw nothing else of it
	err    string // error-response's error, set by the entry
	until  string // hold's and duplicate's, set by the entry
}

// drawKafka fills in what a random menu's Kafka-aware entry leaves unset (see above). It
// returns an error wrapping ErrNoTarget when no request the fault could act on has been sent
// yet (the pick then tries another fault).
func (n *Nemesis) drawKafka(spec Spec) (Spec, error) {
	net := n.env.Cluster.Network()
	sent := net.SentAPIs(0)
	cands := kafkaMixAction{action: spec.Fault, api: spec.Params.API, err: spec.Params.Error, until: spec.Params.Until}.candidates(sent)
	if len(cands) == 0 {
		return spec, fmt.Errorf("%s: no request it could act on has been sent yet (sent: %v): %w", spec.Fault, sent, ErrNoTarget)
	}
	bySender := make([][]string, n.env.Processes+1)
	for p := 1; p <= n.env.Processes; p++ {
		bySender[p] = net.SentAPIs(p)
	}
	holders := n.env.Freezer != nil && len(n.env.Roles) > 0
	n.rand(func(rng *rand.Rand) {
		m := cands[rng.IntN(len(cands))]
		p := &spec.Params
		p.API = m.api
		if spec.Target.Processes.IsZero() {
			var senders []int // the processes that sent m's request: one of them is a target
			for proc := 1; proc < len(bySender); proc++ {
				if slices.Contains(bySender[proc], m.api) {
					senders = append(senders, proc)
				}
			}
			switch r := rng.IntN(3); {
			case r == 0 && holders:
				// The holder's transactional requests are narrowed to its role (kafkaFault.Setup).
				spec.Target.Processes = HolderOf("")
			case r == 1 && len(senders) > 0:
				spec.Target.Processes = IDs(senders[rng.IntN(len(senders))])
			default:
				spec.Target.Processes = All()
			}
		}
		if p.Count == 0 {
			p.Count = mixCounts[rng.IntN(len(mixCounts))]
		}
		switch links.KafkaAction(spec.Fault) {
		case links.KafkaDelay:
			if p.Delay == 0 {
				p.Delay = units.Duration(mixDelays[rng.IntN(len(mixDelays))])
			}
		case links.KafkaErrorResponse:
			if p.Error == "" {
				p.Error = m.errors[rng.IntN(len(m.errors))]
			}
		case links.KafkaHold:
			if p.Until == "" {
				p.Until = m.until
			}
		case links.KafkaDuplicate:
			// Half the duplicates arrive late, after the transaction ended.
			if p.Until == "" && m.until != "" && rng.IntN(2) == 0 {
				p.Until = m.until
			}
		}
	})
	return spec, nil
}
