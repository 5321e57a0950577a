package lineproto

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// requestFrame encodes req as the adapter's client sends it: size, header (key, version,
// correlation id, client id, and the flexible header's empty tags), body.
func requestFrame(req kmsg.Request, corr int32) []byte {
	b := make([]byte, 4, 64)
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 3)
	b = append(b, "cli"...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// responseFrame encodes resp as the broker answers: size, correlation id, the flexible
// header's empty tags, body.
func responseFrame(resp kmsg.Response, corr int32) []byte {
	b := make([]byte, 4, 64)
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	if resp.IsFlexible() {
		b = append(b, 0)
	}
	b = resp.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// TestGatewayTakesOnlyNewProducersMints: the gateway records the pair a new producer's
// InitProducerId got, in every request version, and ignores a KIP-360 bump (the request
// names its producer id), an idempotent producer's (no transactional id) and a refusal.
func TestGatewayTakesOnlyNewProducersMints(t *testing.T) {
	txn := "topic/r1"
	for _, version := range []int16{0, 1, 2, 3, 4, 5} {
		g := newGateway(nil, 0)
		exchange := func(pid int64, epoch int16, txnID *string, code int16, gotPID int64, gotEpoch int16) {
			req := kmsg.NewPtrInitProducerIDRequest()
			req.SetVersion(version)
			req.TransactionalID, req.TransactionTimeoutMillis = txnID, 2000
			req.ProducerID, req.ProducerEpoch = pid, epoch
			frame := requestFrame(req, 7)
			s := sent{key: keyInitProducerID, version: version, txnID: initProducerIDTxn(frame, version)}
			resp := kmsg.NewPtrInitProducerIDResponse()
			resp.SetVersion(version)
			resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = code, gotPID, gotEpoch
			g.observeMint(responseFrame(resp, 7), s)
		}
		mark := g.mintMark()
		exchange(-1, -1, &txn, 0, 1000, 3)
		if tok, ok := g.mintedSince(txn, mark); !ok || tok != (Token{ProducerID: 1000, Epoch: 3}) {
			t.Fatalf("v%d: a new producer's mint = %v, %v; want 1000/3", version, tok, ok)
		}
		mark = g.mintMark()
		if version >= 3 { // KIP-360's producer id and epoch in the request
			exchange(1000, 3, &txn, 0, 1000, 4)
		}
		exchange(-1, -1, nil, 0, 2000, 0)   // an idempotent producer
		exchange(-1, -1, &txn, 51, 1000, 9) // CONCURRENT_TRANSACTIONS
		if tok, ok := g.mintedSince(txn, mark); ok {
			t.Fatalf("v%d: took %v from a bump, an idempotent producer or a refusal", version, tok)
		}
	}
}

// TestMemberPausesOncePerTransaction: a member's gateway stops it at each pause point once per
// transaction, as a member in-process pauses. kafka-clients sends its EndTxn again (on a new
// connection) when the first outlasts its request timeout, as it does while the member is
// stopped before its commit: that retry must not call Config.Pause a second time. The next
// transaction pauses again; an EndTxn that aborts never does.
func TestMemberPausesOncePerTransaction(t *testing.T) {
	var points []string
	w := &memberWatch{pause: func(p string) { points = append(points, p) }, topics: map[[16]byte]string{}}
	endTxn := func(commit bool) []byte {
		req := kmsg.NewPtrEndTxnRequest()
		req.SetVersion(4)
		req.TransactionalID, req.Commit = "g/a", commit
		return requestFrame(req, 7)
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.SetVersion(4)
	add.TransactionalID, add.Group = "g/a", "g"
	addFrame := requestFrame(add, 6)
	for txn := range 2 {
		w.begin()
		w.request(keyAddOffsetsToTxn, 4, addFrame)
		w.request(keyAddOffsetsToTxn, 4, addFrame)
		w.request(keyEndTxn, 4, endTxn(true))
		w.request(keyEndTxn, 4, endTxn(true)) // the retry
		w.end()
		if want := 2 * (txn + 1); len(points) != want {
			t.Fatalf("after transaction %d: pauses %q, want each point once per transaction", txn, points)
		}
	}
	w.begin()
	w.request(keyEndTxn, 4, endTxn(false))
	w.end()
	w.request(keyEndTxn, 4, endTxn(true)) // outside a transact call
	if len(points) != 4 || points[2] != "after-produce" || points[3] != "before-commit" {
		t.Fatalf("pauses %q: an abort, or a commit outside a transact call, paused", points)
	}
}

// TestMemberPausesBeforeAnImplicitOffsetsAdd: under transaction version 2 kafka-clients sends
// no AddOffsetsToTxn (the offsets partition joins the transaction implicitly), so the
// after-produce point is the transaction's first TxnOffsetCommit; under version 1, where the
// AddOffsetsToTxn came first, the TxnOffsetCommit that follows it does not pause again.
func TestMemberPausesBeforeAnImplicitOffsetsAdd(t *testing.T) {
	var points []string
	w := &memberWatch{pause: func(p string) { points = append(points, p) }, topics: map[[16]byte]string{}}
	commit := kmsg.NewPtrTxnOffsetCommitRequest()
	commit.SetVersion(5)
	commit.TransactionalID, commit.Group = "g/a", "g"
	commitFrame := requestFrame(commit, 8)
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.SetVersion(4)
	add.TransactionalID, add.Group = "g/a", "g"
	addFrame := requestFrame(add, 9)

	w.begin() // version 2: TxnOffsetCommit only
	w.request(keyTxnOffsetCommit, 5, commitFrame)
	w.request(keyTxnOffsetCommit, 5, commitFrame) // a retry
	w.end()
	if len(points) != 1 || points[0] != "after-produce" {
		t.Fatalf("TxnOffsetCommit without AddOffsetsToTxn: pauses %q, want one after-produce", points)
	}
	w.begin() // version 1: AddOffsetsToTxn, then TxnOffsetCommit
	w.request(keyAddOffsetsToTxn, 4, addFrame)
	w.request(keyTxnOffsetCommit, 5, commitFrame)
	w.end()
	if len(points) != 2 {
		t.Fatalf("AddOffsetsToTxn then TxnOffsetCommit: pauses %q, want one more", points)
	}
}

// TestMemberReportsItsEndTxnVersion: the gateway tells the member's TxnVersion hook the
// transaction version of every EndTxn its client sends, commit or abort, in a transact call or
// not: v0-v4 are transaction version 1, v5 and later (KIP-890) version 2.
func TestMemberReportsItsEndTxnVersion(t *testing.T) {
	var seen []int
	w := &memberWatch{pause: func(string) {}, txnVersion: func(v int) { seen = append(seen, v) }, topics: map[[16]byte]string{}}
	for _, tc := range []struct {
		version int16
		commit  bool
	}{{1, true}, {3, false}, {4, true}, {5, true}, {5, false}} {
		req := kmsg.NewPtrEndTxnRequest()
		req.SetVersion(tc.version)
		req.TransactionalID, req.Commit = "g/a", tc.commit
		w.begin()
		w.request(keyEndTxn, tc.version, requestFrame(req, 7))
		w.end()
	}
	if want := []int{1, 1, 1, 2, 2}; !slices.Equal(seen, want) {
		t.Fatalf("transaction versions %v, want %v", seen, want)
	}
}
