package nemesis

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/cluster/links"
	"github.com/fencecheck/fencecheck/internal/units"
)

// The Kafka-aware faults act on the Kafka requests of processes' broker connections, in the
// processes' own dial path (links.Network.AddKafkaFault), so they work on every cluster
// kind. Each action is a fault of its own name; they share the target (processes, and a role
// that narrows to its transactional id) and the parameters api, until, count, partition,
// delay and error. In a random schedule they are drawn like any other fault, each draw
// choosing its request type and parameters (kafkamix.go).

func init() {
	for _, k := range []struct {
		action  links.KafkaAction
		summary string
		params  []string
		def     Params
	}{
		{links.KafkaDropRequest, "drop matching Kafka requests (default endtxn): the broker never sees them", nil, Params{API: "endtxn"}},
		{links.KafkaDropResponse, "drop the responses to matching Kafka requests (default endtxn): the request takes effect, the client never learns it", nil, Params{API: "endtxn"}},
		{links.KafkaDelay, "delay matching Kafka requests (default produce) by delay (default 1s)", []string{"delay"}, Params{API: "produce", Delay: units.Duration(time.Second)}},
		{links.KafkaHold, "hold matching Kafka requests (default produce) and deliver them after the response to the next until request (default endtxn), even if the client gave up", []string{"until"}, Params{API: "produce", Until: "endtxn"}},
		{links.KafkaDuplicate, "send matching Kafka requests (default produce) twice; with until, the copy is held and delivered like hold's", []string{"until"}, Params{API: "produce"}},
		{links.KafkaErrorResponse, "let the broker handle matching Kafka requests (default endtxn) and answer the client with error (default NOT_COORDINATOR)", []string{"error"}, Params{API: "endtxn", Error: "NOT_COORDINATOR"}},
	} {
		action := k.action
		registry = append(registry, &definition{
			name:      string(action),
			summary:   k.summary,
			uses:      uses{processes: true, role: true, rolePhrase: "role"},
			params:    append([]string{"api", "count", "partition"}, k.params...),
			sustained: true,
			kafka:     true,
			defaults:  Spec{Target: Target{Processes: All()}, Params: k.def},
			check:     checkKafka,
			build: func(n *Nemesis, s Spec) Fault {
				return &kafkaFault{n: n, spec: s, action: action}
			},
		})
	}
}

// DefaultMenu returns the names of the faults a random schedule picks from when its menu is
// empty: every registered fault. A Kafka-aware one is drawn on a request type the run has
// sent, with a target and parameters drawn too (kafkamix.go).
func DefaultMenu() []string {
	out := make([]string, len(registry))
	for i, d := range registry {
		out[i] = d.name
	}
	return out
}

// KafkaFaultNames returns the names of the Kafka-aware faults.
func KafkaFaultNames() []string {
	var out []string
	for _, d := range registry {
		if d.kafka {
			out = append(out, d.name)
		}
	}
	return out
}

// txnAPIs are the requests that name a transactional id, which a role narrows them to.
var txnAPIs = []string{"produce", "findcoordinator", "initproducerid", "addpartitionstotxn", "addoffsetstotxn",
	"endtxn", "txnoffsetcommit", "describetransactions", links.KafkaAddOffsets}

// apiName is a fault's api as the nemesis names it: kmsg's name in lower case, or the request
// class links.KafkaAddOffsets.
func apiName(name string) string {
	if k, ok := links.KafkaAPIKey(name); ok {
		return links.KafkaAPIName(k)
	}
	if links.KafkaFaultAPI(name) {
		return links.KafkaAddOffsets
	}
	return name
}

// checkKafka validates a Kafka-aware fault's parameters (with their defaults).
func checkKafka(s Spec) error {
	p := s.Params
	const apis = "a Kafka request type as franz-go's kmsg names it, e.g. produce, endtxn, initproducerid, addpartitionstotxn, findcoordinator, metadata, fetch, describetransactions"
	if !links.KafkaFaultAPI(p.API) {
		return &SpecError{Field: "params.api", Value: p.API, Reason: "want " + apis + ", or " + links.KafkaAddOffsets +
			" (AddOffsetsToTxn, or the TxnOffsetCommit that adds the offsets itself under transaction version 2)"}
	}
	if p.Until != "" {
		if _, ok := links.KafkaAPIKey(p.Until); !ok {
			return &SpecError{Field: "params.until", Value: p.Until, Reason: "want " + apis}
		}
	}
	if p.Error != "" {
		if _, ok := links.KafkaErrorCode(p.Error); !ok {
			return &SpecError{Field: "params.error", Value: p.Error, Reason: "want a Kafka error name such as NOT_COORDINATOR, or its code"}
		}
	}
	if _, err := parsePartition(p.Partition); err != nil {
		return &SpecError{Field: "params.partition", Value: p.Partition, Reason: err.Error()}
	}
	if s.Target.Role != "" && !slices.Contains(txnAPIs, apiName(p.API)) {
		return &SpecError{Field: "target.role", Value: s.Target.Role,
			Reason: fmt.Sprintf("%s requests name no transactional id; a role narrows only %s", apiName(p.API), strings.Join(txnAPIs, ", "))}
	}
	return nil
}

// parsePartition reads "TOPIC/N" or "N" (any topic); "" is no narrowing.
func parsePartition(text string) (*cluster.TopicPartition, error) {
	if text == "" {
		return nil, nil
	}
	topic, num := "", text
	if i := strings.LastIndex(text, "/"); i >= 0 {
		topic, num = text[:i], text[i+1:]
	}
	n, err := strconv.ParseInt(num, 10, 32)
	if err != nil || n < 0 {
		return nil, fmt.Errorf("want TOPIC/N or N, N a partition number")
	}
	return &cluster.TopicPartition{Topic: topic, Partition: int32(n)}, nil
}

// kafkaFault is one Kafka-aware fault: a links.KafkaFault on the chosen processes.
type kafkaFault struct {
	n      *Nemesis
	spec   Spec
	action links.KafkaAction
	procs  []int
	holder string // the role whose holder the processes are, for a holder selector
	role   string
	txnID  string
	how    string // how the processes were picked
	f      *links.KafkaFault
}

func kafkaTarget(process int, api string) string {
	return links.ProcessName(process) + ":" + apiName(api)
}

func (k *kafkaFault) Setup(ctx context.Context) error {
	sel := k.spec.Target.Processes
	role := k.spec.Target.Role
	if sel.Kind == SelectHolder {
		// The holder's requests are narrowed to its role's transactional id, where they name one.
		r, err := k.n.pickRole(sel.Role)
		if err != nil {
			return err
		}
		sel.Role = r
		if role == "" && slices.Contains(txnAPIs, apiName(k.spec.Params.API)) {
			role = r
		}
	}
	procs, err := k.n.pickProcesses(sel, func(p int) bool { return !k.n.busy(kafkaTarget(p, k.spec.Params.API)) })
	if err != nil {
		return err
	}
	k.procs, k.how = procs, processNames(procs)
	if sel.Kind == SelectHolder {
		k.how += " (holder of " + sel.Role + ")"
		k.holder = sel.Role
	}
	if role != "" {
		keys, err := k.n.roleKeys(role)
		if err != nil {
			return err
		}
		k.role, k.txnID = role, keys.TransactionalID
	}
	return nil
}

func (k *kafkaFault) clusterSpec() (links.KafkaFaultSpec, error) {
	p := k.spec.Params
	part, err := parsePartition(p.Partition)
	if err != nil {
		return links.KafkaFaultSpec{}, err
	}
	s := links.KafkaFaultSpec{
		Action: k.action, API: p.API, Processes: k.procs, TransactionalID: k.txnID,
		Partition: part, Count: p.Count, Delay: p.Delay.D(), Until: p.Until,
	}
	if p.Error != "" {
		s.ErrorCode, _ = links.KafkaErrorCode(p.Error)
	}
	return s, nil
}

func (k *kafkaFault) Window() Window {
	targets := make([]string, len(k.procs))
	for i, p := range k.procs {
		targets[i] = kafkaTarget(p, k.spec.Params.API)
	}
	p := k.spec.Params
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s of %s", k.action, apiName(p.API), k.how)
	if k.role != "" {
		fmt.Fprintf(&b, " narrowed to %s (txn %s)", k.role, k.txnID)
	}
	if p.Partition != "" {
		b.WriteString(" on partition " + p.Partition)
	}
	if p.Until != "" {
		b.WriteString(" until " + apiName(p.Until))
	}
	if p.Count > 0 {
		fmt.Fprintf(&b, ", first %d", p.Count)
	}
	switch k.action {
	case links.KafkaDelay:
		fmt.Fprintf(&b, " by %v", p.Delay)
	case links.KafkaErrorResponse:
		b.WriteString(" with " + p.Error)
	}
	fmt.Fprintf(&b, " for %v", k.spec.For)
	w := Window{Kind: historyKind(k.spec.Fault), Targets: targets, Desc: b.String()}
	t := k.spec.Target
	switch t.Processes.Kind {
	case SelectDefault, SelectAll: // every process, in the replay too
	case SelectHolder: // whoever holds the role then, as a freeze does
		t.Processes = HolderOf(k.holder)
	default:
		t.Processes = IDs(slices.Sorted(slices.Values(k.procs))...)
	}
	w.Target = &t
	return w
}

func (k *kafkaFault) Inject(ctx context.Context) error {
	s, err := k.clusterSpec()
	if err != nil {
		return err
	}
	k.f, err = k.n.env.Cluster.Network().AddKafkaFault(s)
	return err
}

// WaitForInjected: a matching request was seen and acted upon.
func (k *kafkaFault) WaitForInjected(ctx context.Context) error {
	if err := k.f.WaitActed(ctx); err != nil {
		return fmt.Errorf("%w: no %s request matched: %w", ErrNotHeld, apiName(k.spec.Params.API), err)
	}
	return nil
}

// Recover removes the fault; requests it still holds are delivered then.
func (k *kafkaFault) Recover(ctx context.Context) error {
	if k.f == nil {
		return nil
	}
	err := k.f.Remove(ctx)
	attrs := []any{"fault", k.spec.Fault, "acted", k.f.Acted()}
	for i, d := range k.f.Deliveries() {
		// What a late request met is the point of hold: say it in the harness log.
		attrs = append(attrs, fmt.Sprintf("delivery%d", i+1),
			fmt.Sprintf("%s of %s after %s: %s", d.API, links.ProcessName(d.Process), d.Trigger, deliveryOutcome(d)))
	}
	k.n.log.Info("kafka fault removed", attrs...)
	k.f = nil
	return err
}

func (k *kafkaFault) WaitForRecovered(context.Context) error { return nil }

func (k *kafkaFault) Cleanup(context.Context) error { return nil }

// kafkaString is a Kafka-aware fault's one-line form (see parseKafka).
func (s Spec) kafkaString() string {
	var b strings.Builder
	b.WriteString(s.Fault)
	p := s.Params
	if p.API != "" {
		b.WriteString(" " + p.API)
	}
	if !s.Target.Processes.IsZero() {
		b.WriteString(" of " + s.Target.Processes.format("p"))
	}
	if s.Target.Role != "" {
		b.WriteString(" role " + s.Target.Role)
	}
	if p.Until != "" {
		b.WriteString(" until " + p.Until)
	}
	if p.Count != 0 {
		fmt.Fprintf(&b, " first %d", p.Count)
	}
	rest := p
	rest.API, rest.Until, rest.Count = "", "", 0
	if set := rest.set(); len(set) > 0 {
		b.WriteString(" with")
		for _, name := range set {
			b.WriteString(" " + name + "=" + rest.get(name))
		}
	}
	if s.For != 0 {
		b.WriteString(" for " + s.For.String())
	}
	return b.String()
}

// parseKafka reads the rest of a Kafka-aware fault's one-line form:
//
//	ACTION [API] [of PROCESSES] [role ROLE] [until API] [first N] [with NAME=VALUE ...] [for DURATION]
func (p *specParser) parseKafka(s Spec) (Spec, error) {
	keywords := []string{"of", "role", "until", "first", "with", "for"}
	if w := p.peek(); w != "" && !slices.Contains(keywords, w) {
		s.Params.API, _ = p.next()
	}
	for p.i < len(p.words) {
		w, _ := p.next()
		var err error
		switch w {
		case "of":
			s.Target.Processes, err = p.selector('p')
		case "role":
			var ok bool
			if s.Target.Role, ok = p.next(); !ok {
				return s, p.unexpected("want a role after role")
			}
		case "until":
			var ok bool
			if s.Params.Until, ok = p.next(); !ok {
				return s, p.unexpected("want a request type after until")
			}
		case "first":
			v, _ := p.next()
			n, convErr := strconv.Atoi(v)
			if convErr != nil || n < 1 {
				return s, &SpecError{Field: "params.count", Value: v, Reason: "first N needs a positive N"}
			}
			s.Params.Count = n
		case "with":
			err = p.params(&s.Params)
		case "for":
			v, _ := p.next()
			if err := s.For.UnmarshalText([]byte(v)); err != nil {
				return s, &SpecError{Field: "for", Value: v, Reason: err.Error()}
			}
		default:
			return s, p.unexpected(fmt.Sprintf("unexpected %q; after %s come [API] [of PROCESSES] [role ROLE] [until API] [first N] [with NAME=VALUE ...] [for DURATION]", w, s.Fault))
		}
		if err != nil {
			return s, err
		}
	}
	return s, nil
}

func deliveryOutcome(d links.KafkaDelivery) string {
	switch {
	case d.Err != nil:
		return d.Err.Error()
	case d.ErrorCode != 0:
		return "answered " + links.KafkaErrorName(d.ErrorCode)
	}
	return "accepted"
}
