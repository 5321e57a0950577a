package scenarios

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fencecheck/fencecheck/nemesis"
	"github.com/fencecheck/fencecheck/workload"
)

// Warnings returns, one line each, what s asks for that will not happen as written, naming
// the step: a before-lease-commit freeze longer than a commit can be held back (the freezer
// caps it under the request timeout, so the member freezes for less), and a step that starts
// at or after the end of the run (it never runs, which makes the run inconclusive). Call it on
// a valid scenario, after every override (cluster kind, duration): the command line prints
// the warnings before the run starts. It also warns of an error-response on EndTxn with an
// error a coordinator gives only before it acts (refusalOnly): that answer after a commit
// happens only to a retried EndTxn, so a client that never retries it rightly calls the
// commit failed, and the run then reports a zombie commit that no broker could cause. And a
// duplicate of EndTxn: the copy stands for a client's retry after a stuck first attempt, which
// a client that sends EndTxn once never makes, so through such a client the copy can commit a
// transaction the client was told failed, a history no network produces.
func (s *Scenario) Warnings() []string {
	var out []string
	duplicateEndTxn := func(field string, spec nemesis.Spec) {
		if spec.Fault == "duplicate" && apiName(spec.Params.API) == "endtxn" {
			out = append(out, field+": a copy of an EndTxn stands for a client's retry after a stuck first attempt; "+
				"a client that sends EndTxn once (KafkaJS) never has two in the network, so through it the run can show a zombie commit no network could cause "+
				"(hold endtxn delays a client's only EndTxn instead)")
		}
	}
	refusal := func(field string, spec nemesis.Spec) {
		api := spec.Params.API
		if api == "" {
			api = "endtxn"
		}
		if spec.Fault != "error-response" || apiName(api) != "endtxn" || !slices.Contains(refusalOnly, strings.ToUpper(spec.Params.Error)) {
			return
		}
		out = append(out, fmt.Sprintf("%s: a coordinator answers an EndTxn %s only before it acts, or to a retried EndTxn after the first committed; "+
			"a client that sends EndTxn once may rightly call this commit failed, and the run then shows a zombie commit no broker could cause "+
			"(to get the answer from the broker itself, drop the EndTxn's response instead: drop-response endtxn)", field, spec.Params.Error))
	}
	commitCap := CommitHoldCap(s.Workload.RequestTimeout.D())
	freezeCap := func(field string, spec nemesis.Spec) {
		// A pipeline member freezes after a poll, holding no commit back: no cap.
		if s.Workload.IsPipeline() || spec.Fault != "freeze" || (spec.Params.Point != "" && spec.Params.Point != string(workload.BeforeLeaseCommit)) {
			return
		}
		asked := spec.For.D()
		if asked == 0 {
			asked = 2 * s.Workload.Lease.D() // the nemesis's default: twice the lease
		}
		if asked > commitCap {
			out = append(out, fmt.Sprintf("%s: a commit is held back at most %v (a tenth under the workload's %v request timeout), so this freeze will last %v, not %v",
				field, commitCap, s.Workload.RequestTimeout, commitCap, asked))
		}
	}
	for i, line := range s.Nemesis.Script {
		st, err := nemesis.ParseStep(line)
		if err != nil {
			continue // Validate reports it
		}
		field := fmt.Sprintf("nemesis.script[%d] %q", i, line)
		if st.At.D() >= s.Duration.D() {
			out = append(out, fmt.Sprintf("%s: starts at %v, not before the end of the %v run: it will not run, and the run will be inconclusive (fault-took-hold)",
				field, st.At, time.Duration(s.Duration)))
		}
		freezeCap(field, st.Spec)
		refusal(field, st.Spec)
		duplicateEndTxn(field, st.Spec)
	}
	if r := s.Nemesis.Random; r != nil {
		if len(r.Faults) == 0 {
			freezeCap("nemesis.random (every fault: freeze with its defaults)", nemesis.Spec{Fault: "freeze"})
		}
		for i, f := range r.Faults {
			freezeCap(fmt.Sprintf("nemesis.random.faults[%d] %q", i, f.String()), f)
			refusal(fmt.Sprintf("nemesis.random.faults[%d] %q", i, f.String()), f)
			duplicateEndTxn(fmt.Sprintf("nemesis.random.faults[%d] %q", i, f.String()), f)
		}
	}
	return out
}

// refusalOnly are the errors a transaction coordinator answers an EndTxn with before it acts
// on it: the epoch check, the state check, and a transaction still completing.
var refusalOnly = []string{"CONCURRENT_TRANSACTIONS", "INVALID_PRODUCER_EPOCH", "PRODUCER_FENCED", "INVALID_TXN_STATE",
	"INVALID_PRODUCER_ID_MAPPING", "51", "47", "90", "48", "49"}

// apiName is a Kafka-aware fault's request type as the nemesis matches it: without case, '-'
// or '_' ("EndTxn", "end_txn" and "endtxn" are one).
func apiName(api string) string {
	return strings.NewReplacer("-", "", "_", "").Replace(strings.ToLower(api))
}

// CommitHoldCap is the longest a before-lease-commit freeze holds a commit back: a tenth
// under the request timeout, after which the transport abandons the commit. The harness
// caps a freeze so, and Warnings says when a script asks for more.
func CommitHoldCap(requestTimeout time.Duration) time.Duration {
	return requestTimeout - requestTimeout/10
}
