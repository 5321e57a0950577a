package explore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/cluster/links"
	"github.com/fencecheck/fencecheck/nemesis"
	"github.com/fencecheck/fencecheck/reports"
)

// The feedback of a run is a set of tuples, each a short text whose first word is its
// category. A schedule whose run reached a tuple no earlier run reached is kept.
//
//   - answer API ERROR: a request type and the error code its answer carried, as the client
//     saw it ("answer endtxn CONCURRENT_TRANSACTIONS"; NONE for none), from the links;
//   - op KIND OUTCOME [CLASS]: an operation kind and how it completed (ok, fail, info: the
//     outcome unknown), with the error class of a failure ("op work info timeout");
//   - op-in-fault KIND OUTCOME FAULT: the same, for an operation invoked while a fault window
//     of kind FAULT was open (what the fault did to the clients); a Kafka-aware fault is
//     named with its request type ("drop-response endtxn");
//   - state ...: the transaction and group state changes the history shows: an acquire that
//     got a new producer id or bumped the epoch of the role's last one, a describe that saw a
//     holder or none, a describe behind the last acquire, a pipeline member's transaction
//     under a new generation (a rebalance); a pipeline member frozen past the session
//     timeout whose partition another member started meanwhile ("state zombie freeze
//     before-commit", see zombies);
//   - fault FAULT took-hold|missed: whether each fault window took hold (a Kafka-aware one
//     named with its request type);
//   - promise NAME kept|not-kept: every coverage promise the checker knows (not only the
//     scenario's), judged on the run's history, so a run that made the first handoff, fenced
//     the first write or paused a member that was then fenced shows it;
//   - check NAME VERDICT: each guarantee's verdict (not-covered when the run gave it nothing
//     to judge);
//   - exposure split-brain: two members believed they held a role at once (the window the
//     fencing guarantees are about).
type tuples map[string]bool

// add adds the tuple made of words.
func (t tuples) add(words ...string) { t[strings.Join(words, " ")] = true }

// sorted returns the tuples in order.
func (t tuples) sorted() []string {
	out := make([]string, 0, len(t))
	for k := range t {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// observe returns the feedback of the run in dir: its answers, its history's operations,
// fault windows and state changes, and its checked results, with every coverage promise
// judged anew (promises).
func observe(ctx context.Context, dir reports.Dir, answers []links.Answer, res *checker.Results, promises []string) (tuples, error) {
	t := tuples{}
	for _, a := range answers {
		t.add("answer", a.API, a.Error)
	}
	if res != nil {
		for _, c := range res.Checks {
			t.add("check", c.Name, string(c.Verdict))
		}
		if res.Exposure.TotalNS > 0 {
			t.add("exposure", "split-brain")
		}
	}
	h, err := history.ReadFile(dir.History())
	if err != nil {
		return t, fmt.Errorf("feedback of %s: %w", dir, err)
	}
	fromHistory(t, h)
	// Judge every promise on the history: the checks are bounded tightly, their verdicts
	// are the run's own (above), only the coverage is wanted here.
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	again, err := checker.Check(cctx, h, checker.Options{Promises: promises, Timeout: time.Second, MaxAnomalies: 1})
	if err == nil {
		for _, c := range again.Coverage {
			state := "kept"
			if c.Verdict != checker.VerdictValid {
				state = "not-kept"
			}
			t.add("promise", c.Name, state)
		}
	}
	return t, nil
}

// faultWhat names a fault window: its kind, and for a Kafka-aware fault the request type it
// acts on (the second word of its one-line form), so that a drop-response of EndTxn and one
// of Produce are told apart.
//
// A freeze is named freeze, and at a pause point with it ("freeze before-commit"): a pipeline
// member frozen with its offsets pending is another state than one frozen holding a polled
// batch, and the search tries each (menu.untried). The history records a freeze's window as
// a member pause (history.KindMemberPause), the kind the checker reads zombies from.
func faultWhat(f history.Fault) string {
	if f.Kind == history.KindMemberPause || f.Kind == "freeze" {
		for _, w := range strings.Fields(f.Spec) {
			if p, ok := strings.CutPrefix(w, "point="); ok {
				return "freeze " + p
			}
		}
		return "freeze"
	}
	if slices.Contains(nemesis.KafkaFaultNames(), string(f.Kind)) {
		if w := strings.Fields(f.Spec); len(w) > 1 {
			return string(f.Kind) + " " + w[1]
		}
	}
	return string(f.Kind)
}

// fromHistory adds the tuples of h's operations, fault windows and state changes.
func fromHistory(t tuples, h *history.History) {
	what := make([]string, len(h.Faults)) // each window's fault, with its request type
	for i, f := range h.Faults {
		what[i] = faultWhat(f)
		state := "missed"
		if f.TookHold {
			state = "took-hold"
		}
		t.add("fault", what[i], state)
	}
	last := map[string]history.Token{} // each role's last acquired token
	gens := map[string]int32{}         // each pipeline member's last generation
	for _, op := range h.All() {
		if op.Kind == history.KindFinalRead || op.Kind.IsPipeline() && strings.HasPrefix(string(op.Kind), "final-") {
			continue
		}
		outcome := op.Type.String()
		if op.Pending {
			outcome = "pending"
		}
		words := []string{"op", string(op.Kind), outcome}
		if op.Type != history.TypeOK && op.Error != "" {
			words = append(words, op.Error)
		}
		t.add(words...)
		for i, f := range h.Faults {
			if f.Start <= op.Invoke && (f.End == history.Never || op.Invoke < f.End) {
				t.add("op-in-fault", string(op.Kind), outcome, what[i])
			}
		}
		if op.Type != history.TypeOK || op.Pending {
			continue
		}
		switch op.Kind {
		case history.KindAcquire:
			if op.Result.Token == nil {
				continue
			}
			tok := *op.Result.Token
			if prev, ok := last[op.Role]; ok {
				switch {
				case tok.ProducerID != prev.ProducerID:
					t.add("state", "acquire", "new-producer-id")
				case tok.Epoch > prev.Epoch+1:
					t.add("state", "acquire", "epoch-jump")
				case tok.Epoch == prev.Epoch+1:
					t.add("state", "acquire", "epoch-bump")
				default:
					t.add("state", "acquire", "epoch-not-above")
				}
			}
			last[op.Role] = tok
		case history.KindDescribe:
			if !op.Result.Held {
				t.add("state", "describe", "none")
				continue
			}
			t.add("state", "describe", "held")
			if prev, ok := last[op.Role]; ok && op.Result.Token != nil && op.Result.Token.ProducerID == prev.ProducerID &&
				op.Result.Token.Epoch < prev.Epoch {
				t.add("state", "describe", "behind-acquire")
			}
		case history.KindTxn:
			// A member's transaction under a later generation than its last: a rebalance.
			if p := op.Args.Pipe; p != nil {
				if prev, ok := gens[op.Member]; ok && p.Generation != prev {
					t.add("state", "group", "new-generation")
				}
				gens[op.Member] = p.Generation
			}
		}
	}
	zombies(t, h, what)
}

// zombies adds "state zombie FREEZE" (FREEZE the freeze as faultWhat names it: "freeze
// before-commit") for each freeze of a pipeline member that made a zombie: the member stayed
// frozen longer than the group's session timeout, and another member fetched the committed
// offsets of a partition the frozen one was copying, while it was frozen or within a session
// timeout after it resumed (the group gave the partition away, and the frozen member's
// transaction was still open). That is the state a pipeline's fencing is about: a zombie's
// late commit, and a new owner starting where the committed offsets are, stable or not
// (unstable-fetch shows only there). A freeze shorter than the session timeout, or one whose
// partition nobody took, does not reach it; what = faultWhat of each of h.Faults.
func zombies(t tuples, h *history.History, what []string) {
	meta := h.Meta.Pipeline
	if meta == nil || meta.SessionTimeout <= 0 {
		return
	}
	ops := h.All()
	for i, f := range h.Faults {
		if f.Kind != history.KindMemberPause || !f.TookHold || f.Member == "" || f.End == history.Never ||
			f.End-f.Start <= meta.SessionTimeout {
			continue
		}
		// The partitions of the member's last transaction begun before it resumed: the
		// one it was frozen in.
		var last history.Op
		for _, op := range ops {
			if op.Kind == history.KindTxn && op.Member == f.Member && op.Invoke < f.End && op.Args.Pipe != nil &&
				(last.Args.Pipe == nil || op.Invoke > last.Invoke) {
				last = op
			}
		}
		if last.Args.Pipe == nil {
			continue
		}
		held := map[int32]bool{}
		for _, r := range last.Args.Pipe.Inputs {
			held[r.Partition] = true
		}
		for _, op := range ops {
			if op.Kind != history.KindFetch || op.Type != history.TypeOK || op.Pending || op.Member == f.Member ||
				op.Result.Pipe == nil || op.Return < f.Start || op.Return > f.End+meta.SessionTimeout {
				continue
			}
			if slices.ContainsFunc(op.Result.Pipe.Offsets, func(o history.PipeOffset) bool { return held[o.Partition] }) {
				t.add("state", "zombie", what[i])
				break
			}
		}
	}
}
