package record

import (
	"bytes"
	"testing"
	"time"
)

func TestCodecRoundTrip(t *testing.T) {
	values := []Value{
		{Kind: KindRegistration, Member: "m-1"},
		{Kind: KindLease, Member: "m-2", Token: FencingToken{ProducerID: 1 << 40, Epoch: -1},
			Lease: Lease{Holder: "m-2", Seq: 99, Duration: 3 * time.Second, WrittenAt: time.Unix(1700000000, 123)}},
		{Kind: KindWork, Member: "m-3", Token: FencingToken{ProducerID: 5, Epoch: 32767}, WriteID: 7, Payload: []byte("payload")},
		{Kind: KindRegistration, Member: "<script>\"é\xff"},
		{Kind: KindWork, Member: "m-4", Token: FencingToken{ProducerID: 5, Epoch: 2}, WriteID: 8, Payload: []byte("p"), Index: 2, Count: 3},
		{Kind: KindWork, Member: "m-4", WriteID: 8, Index: MaxWorkRecords - 1, Count: MaxWorkRecords},
	}
	for _, v := range values {
		got, err := DecodeValue(AppendValue(nil, v))
		if err != nil {
			t.Fatalf("%s: decode: %v", v.Kind, err)
		}
		if got.Kind != v.Kind || got.Member != v.Member || got.Token != v.Token || got.WriteID != v.WriteID ||
			got.Index != v.Index || got.Count != v.Count ||
			!bytes.Equal(got.Payload, v.Payload) || got.Lease.Seq != v.Lease.Seq || got.Lease.Duration != v.Lease.Duration ||
			!got.Lease.WrittenAt.Equal(v.Lease.WrittenAt) && v.Kind == KindLease {
			t.Fatalf("%s: round trip = %+v, want %+v", v.Kind, got, v)
		}
	}
	for _, role := range []Role{"", "r", "role/with/slashes", "\x00\xff"} {
		got, err := DecodeKey(EncodeKey(role))
		if err != nil || got != role {
			t.Fatalf("key %q: round trip = %q, %v", role, got, err)
		}
	}
}

// TestWorkOfOneRecordIsKind3: a work write of one record (Count 0 or 1) keeps the encoding it
// had before writes of several records existed, so stored records and histories stay as they
// were; a record of several is kind 4.
func TestWorkOfOneRecordIsKind3(t *testing.T) {
	v := Value{Kind: KindWork, Member: "m", Token: FencingToken{ProducerID: 5, Epoch: 1}, WriteID: 7, Payload: []byte("x")}
	single := AppendValue(nil, v)
	if want := []byte{0xFC, 1, 3, 10, 2, 1, 'm', 7, 1, 'x'}; !bytes.Equal(single, want) {
		t.Fatalf("one record = %x, want %x", single, want)
	}
	v.Count = 1
	if got := AppendValue(nil, v); !bytes.Equal(got, single) {
		t.Fatalf("Count 1 = %x, want %x (as Count 0)", got, single)
	}
	v.Index, v.Count = 1, 2
	part := AppendValue(nil, v)
	if want := []byte{0xFC, 1, 4, 10, 2, 1, 'm', 7, 1, 2, 1, 'x'}; !bytes.Equal(part, want) {
		t.Fatalf("record 1 of 2 = %x, want %x", part, want)
	}
	got, err := DecodeValue(part)
	if err != nil || got.Kind != KindWork || got.Index != 1 || got.Count != 2 {
		t.Fatalf("decode record 1 of 2 = %+v, %v", got, err)
	}
}

func TestDecodeValueRejects(t *testing.T) {
	good := AppendValue(nil, Value{Kind: KindLease, Member: "m", Lease: Lease{Holder: "m", Seq: 1}})
	tests := []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"wrong magic", []byte{0x00, 1, 1, 0}},
		{"future version", []byte{0xFC, 2, 1, 0}},
		{"unknown kind", []byte{0xFC, 1, 9, 0}},
		{"truncated lease", good[:len(good)-1]},
		{"trailing bytes", append(append([]byte{}, good...), 0)},
		{"length past the end", []byte{0xFC, 1, 1, 0x7f, 'a'}},
		{"epoch out of range", AppendValue(nil, Value{Kind: KindWork, Token: FencingToken{Epoch: 1}})[:3]},
		{"a part of one record", []byte{0xFC, 1, 4, 0, 0, 0, 1, 0, 1, 0}},
		{"a part past its count", []byte{0xFC, 1, 4, 0, 0, 0, 1, 2, 2, 0}},
		{"a count above the most", AppendValue(nil, Value{Kind: KindWork, Index: 0, Count: MaxWorkRecords + 1})},
		{"a truncated part", AppendValue(nil, Value{Kind: KindWork, Index: 0, Count: 2})[:8]},
	}
	for _, tc := range tests {
		if _, err := DecodeValue(tc.in); err == nil {
			t.Errorf("%s: decoded without error", tc.name)
		}
	}
	if _, err := DecodeKey([]byte{0xFC}); err == nil {
		t.Error("short key decoded")
	}
}

func TestPartitionForIsStable(t *testing.T) {
	// Processes on different machines must agree: pin a few values of FNV-1a mod 12
	// (computed independently of this code).
	for role, want := range map[Role]int32{"role-0": 0, "role-1": 11, "": 1, "leader": 0} {
		if got := PartitionFor(role, 12); got != want || got < 0 || got >= 12 {
			t.Errorf("PartitionFor(%q, 12) = %d, want %d", role, got, want)
		}
	}
}

// FuzzDecodeValue: any bytes decode to a value or an error, never a panic, and a decoded value
// re-encodes to the same bytes.
func FuzzDecodeValue(f *testing.F) {
	f.Add(AppendValue(nil, Value{Kind: KindRegistration, Member: "m"}))
	f.Add(AppendValue(nil, Value{Kind: KindLease, Token: FencingToken{ProducerID: 3, Epoch: 4}, Lease: Lease{Holder: "h", Seq: 2}}))
	f.Add(AppendValue(nil, Value{Kind: KindWork, Token: FencingToken{ProducerID: 3, Epoch: 4}, Member: "w", WriteID: 9, Payload: []byte{1}}))
	f.Add(AppendValue(nil, Value{Kind: KindWork, Token: FencingToken{ProducerID: 3, Epoch: 4}, Member: "w", WriteID: 9, Index: 1, Count: 3}))
	f.Add([]byte{0xFC, 1, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := DecodeValue(b)
		if err != nil {
			return
		}
		if re := AppendValue(nil, v); !bytes.Equal(re, b) {
			t.Fatalf("re-encoding %x gave %x", b, re)
		}
	})
}
