package links

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func frameOf(req kmsg.Request, corr int32) []byte {
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("p1")).AppendRequest(nil, req, corr)
}

func TestParseRequest(t *testing.T) {
	id := "txn-a"
	topicID := [16]byte{1, 2, 3}
	names := func(id [16]byte) string {
		if id == topicID {
			return "work"
		}
		return ""
	}
	for _, v := range []int16{3, 9, 12, 13} {
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(v)
		req.TransactionID, req.Acks = &id, -1
		tp := kmsg.NewProduceRequestTopic()
		tp.Topic, tp.TopicID = "work", topicID
		p := kmsg.NewProduceRequestTopicPartition()
		p.Partition = 2
		tp.Partitions = append(tp.Partitions, p)
		req.Topics = append(req.Topics, tp)
		r, err := parseRequest(frameOf(req, 7), names)
		if err != nil {
			t.Fatal(err)
		}
		r.decode()
		if r.key != 0 || r.version != v || r.corr != 7 || !slices.Equal(r.txnIDs, []string{id}) ||
			!slices.Equal(r.parts, []TopicPartition{{Topic: "work", Partition: 2}}) || r.noResp {
			t.Errorf("produce v%d: key %d version %d corr %d txn %v parts %v noResp %v", v, r.key, r.version, r.corr, r.txnIDs, r.parts, r.noResp)
		}
	}
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.SetVersion(4)
	fc.CoordinatorType, fc.CoordinatorKeys = 1, []string{id}
	r, err := parseRequest(frameOf(fc, 1), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.decode(); !slices.Equal(r.txnIDs, []string{id}) {
		t.Errorf("FindCoordinator of a transaction coordinator: txn ids %v", r.txnIDs)
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.SetVersion(5)
	end.TransactionalID = id
	r, _ = parseRequest(frameOf(end, 1), nil)
	if r.decode(); !slices.Equal(r.txnIDs, []string{id}) {
		t.Errorf("EndTxn: txn ids %v", r.txnIDs)
	}
}

func TestReplaceErrorCodes(t *testing.T) {
	for _, v := range []int16{1, 4, 5} { // v4+ is flexible: a response header with tags
		resp := kmsg.NewPtrEndTxnResponse()
		resp.SetVersion(v)
		body := resp.AppendTo(nil)
		frame := []byte{0, 0, 0, 0, 0, 0, 0, 9}
		if resp.IsFlexible() {
			frame = append(frame, 0)
		}
		frame = append(frame, body...)
		frame[3] = byte(len(frame) - 4)
		code, _ := KafkaErrorCode("NOT_COORDINATOR")
		out, err := replaceErrorCodes(frame, 26, v, code)
		if err != nil {
			t.Fatal(err)
		}
		if got := responseErrorCode(out, 26, v); got != code {
			t.Errorf("v%d: error code %d after the replacement, want %d", v, got, code)
		}
		if frameSize(out) != len(out) || out[7] != 9 {
			t.Errorf("v%d: frame %v: want a whole frame with correlation id 9", v, out)
		}
	}
}

func TestKafkaNames(t *testing.T) {
	for name, want := range map[string]int16{"produce": 0, "EndTxn": 26, "init-producer-id": 22, "InitProducerID": 22, "describetransactions": 65, "Fetch": 1} {
		if got, ok := KafkaAPIKey(name); !ok || got != want {
			t.Errorf("KafkaAPIKey(%q) = %d, %v; want %d", name, got, ok, want)
		}
	}
	if _, ok := KafkaAPIKey("gossip"); ok {
		t.Error("KafkaAPIKey(gossip) found a key")
	}
	if c, ok := KafkaErrorCode("not_coordinator"); !ok || c != 16 {
		t.Errorf("KafkaErrorCode(not_coordinator) = %d, %v", c, ok)
	}
	if c, ok := KafkaErrorCode("47"); !ok || c != 47 || KafkaErrorName(c) != "INVALID_PRODUCER_EPOCH" {
		t.Errorf("KafkaErrorCode(47) = %d, %v (%s)", c, ok, KafkaErrorName(c))
	}
	if _, ok := KafkaErrorCode("OOPS"); ok {
		t.Error("KafkaErrorCode(OOPS) found a code")
	}
}

// TestAddOffsetsMatchesEitherRequest: a fault on add-offsets acts on AddOffsetsToTxn and on a
// TxnOffsetCommit of version 5 or later (transaction version 2's implicit add), never on an
// earlier TxnOffsetCommit, which follows an AddOffsetsToTxn the fault has already met.
func TestAddOffsetsMatchesEitherRequest(t *testing.T) {
	for _, name := range []string{KafkaAddOffsets, "AddOffsets", "add_offsets"} {
		f := &KafkaFault{}
		var ok bool
		if f.api, ok = faultAPI(name); !ok {
			t.Fatalf("faultAPI(%q) refused", name)
		}
		add := kmsg.NewPtrAddOffsetsToTxnRequest()
		add.SetVersion(3)
		if !f.matches(1, mustParse(t, add)) {
			t.Errorf("%s: AddOffsetsToTxn v3 not matched", name)
		}
		for v, want := range map[int16]bool{3: false, 4: false, 5: true, 6: true} {
			c := kmsg.NewPtrTxnOffsetCommitRequest()
			c.SetVersion(v)
			if got := f.matches(1, mustParse(t, c)); got != want {
				t.Errorf("%s: TxnOffsetCommit v%d matched %v, want %v", name, v, got, want)
			}
		}
		end := kmsg.NewPtrEndTxnRequest()
		end.SetVersion(5)
		if f.matches(1, mustParse(t, end)) {
			t.Errorf("%s: EndTxn matched", name)
		}
	}
	// The plain type keeps its meaning: addoffsetstotxn never matches a TxnOffsetCommit.
	f := &KafkaFault{}
	f.api, _ = faultAPI("addoffsetstotxn")
	c := kmsg.NewPtrTxnOffsetCommitRequest()
	c.SetVersion(5)
	if f.matches(1, mustParse(t, c)) {
		t.Error("addoffsetstotxn matched a TxnOffsetCommit v5")
	}
	if KafkaFaultAPI("add-offsetz") {
		t.Error("KafkaFaultAPI accepted add-offsetz")
	}
}

func mustParse(t *testing.T, req kmsg.Request) *request {
	t.Helper()
	r, err := parseRequest(frameOf(req, 1), nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
