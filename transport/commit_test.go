package transport

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestFencedCommitIsFencedAndUnknown: every stale-epoch answer to a commit, INVALID_TXN_STATE
// included (what Kafka's TV2 coordinator answers a commit that arrives after it aborted the
// transaction on its timeout, KAFKA-20785), is reported as ErrFenced with an unknown outcome:
// the answer may follow an earlier attempt of the same EndTxn that committed, so calling it a
// certain failure could hide a committed write from the checker (docs/checker.md).
func TestFencedCommitIsFencedAndUnknown(t *testing.T) {
	for _, answer := range []error{kerr.ProducerFenced, kerr.InvalidProducerEpoch, kerr.InvalidTxnState} {
		e := &Error{Op: OpWrite, Role: "r", Kind: kindOf(answer), Stage: StageCommit, Err: answer}
		if !errors.Is(e, ErrFenced) {
			t.Errorf("a commit answered %v is %v, want ErrFenced", answer, e.Kind)
		}
		if got := Classify(e); got != Unknown {
			t.Errorf("Classify(commit answered %v) = %v, want unknown", answer, got)
		}
	}
}
