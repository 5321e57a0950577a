package links

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file reads and rewrites Kafka frames for the Kafka-aware faults (kafkafault.go): a
// frame is a 4-byte big-endian size and that many bytes. A request's header is its API key,
// version, correlation id and client id (plus tagged fields when the version is flexible); a
// response's header is the correlation id (plus tagged fields when flexible, except
// ApiVersions).

// maxKafkaKey bounds the API keys searched by name.
const maxKafkaKey = 200

// KafkaAPIKey returns the API key of a request type by its name as franz-go's kmsg spells it
// ("Produce", "EndTxn", "InitProducerID"), compared without case and with "-" and "_"
// ignored, so "endtxn" and "init-producer-id" work too.
func KafkaAPIKey(name string) (int16, bool) {
	want := apiWord(name)
	for k := int16(0); k < maxKafkaKey; k++ {
		n := kmsg.NameForKey(k)
		if n != "Unknown" && apiWord(n) == want {
			return k, true
		}
	}
	return 0, false
}

// KafkaAddOffsets names a class of requests, not one request type: the request by which a
// transaction takes in its consumer group's offsets. Under transaction version 1 that is
// AddOffsetsToTxn. Under version 2 KIP-890's clients (kafka-clients 4.x, franz-go) send no
// AddOffsetsToTxn: their TxnOffsetCommit, version 5 or later, adds the offsets to the
// transaction by itself. A fault on add-offsets acts on whichever of the two the client
// sends, so one scenario step reaches a transaction's offsets through every client on every
// transaction version. (A TxnOffsetCommit of version 4 or earlier follows an AddOffsetsToTxn,
// which the fault has already matched; it is not matched again.)
const KafkaAddOffsets = "add-offsets"

// apiMatch is the requests a fault spec's API names: one request type, or, for a request
// class, a second type from a minimum version on.
type apiMatch struct {
	key    int16
	alt    int16 // -1: none
	altMin int16 // alt matches from this version on
}

func (m apiMatch) matches(key, version int16) bool {
	return key == m.key || key == m.alt && version >= m.altMin
}

// faultAPI reads a fault spec's API: a request type KafkaAPIKey knows or KafkaAddOffsets.
func faultAPI(name string) (apiMatch, bool) {
	if apiWord(name) == apiWord(KafkaAddOffsets) {
		return apiMatch{key: kmsg.AddOffsetsToTxn.Int16(), alt: kmsg.TxnOffsetCommit.Int16(), altMin: 5}, true
	}
	k, ok := KafkaAPIKey(name)
	return apiMatch{key: k, alt: -1}, ok
}

// KafkaFaultAPI reports whether a Kafka-aware fault may act on the requests name names: a
// request type KafkaAPIKey knows, or the request class KafkaAddOffsets.
func KafkaFaultAPI(name string) bool {
	_, ok := faultAPI(name)
	return ok
}

// KafkaAPIName is the kmsg name of key, lower case ("endtxn"), as fault specs write it.
func KafkaAPIName(key int16) string { return apiWord(kmsg.NameForKey(key)) }

func apiWord(s string) string { return apiWordReplacer.Replace(strings.ToLower(s)) }

// apiWordReplacer is built once: building it on every call (KafkaAPIKey calls apiWord once per
// API key) took a quarter of the CPU of planning the matrix suite (scenarios/suite's
// TestSelectRunner plans it 60 times, parsing every scenario's fault specs).
var apiWordReplacer = strings.NewReplacer("-", "", "_", "")

// KafkaErrorCode returns the code of a Kafka error by its protocol name
// ("NOT_COORDINATOR", case-insensitive) or by its number.
func KafkaErrorCode(name string) (int16, bool) {
	var n int16
	if _, err := fmt.Sscan(name, &n); err == nil && n > 0 {
		return n, kerr.TypedErrorForCode(n) != nil
	}
	want := strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
	for code := int16(1); code < 300; code++ {
		if e := kerr.TypedErrorForCode(code); e != nil && e.Message == want {
			return code, true
		}
	}
	return 0, false
}

// KafkaErrorName is the protocol name of code, or its number when kerr does not know it.
func KafkaErrorName(code int16) string {
	if e := kerr.TypedErrorForCode(code); e != nil {
		return e.Message
	}
	return fmt.Sprint(code)
}

// frameSize returns the length of the first whole frame in b, or 0 when b holds none yet.
func frameSize(b []byte) int {
	if len(b) < 4 {
		return 0
	}
	n := int(binary.BigEndian.Uint32(b)) + 4
	if n < 4 || len(b) < n {
		return 0
	}
	return n
}

// request is a request frame with its header read.
type request struct {
	frame   []byte // the whole frame, size included
	key     int16
	version int16
	corr    int32
	body    []byte // after the header

	decoded bool
	names   func(id [16]byte) string // topic names by id, learned from Metadata responses
	txnIDs  []string
	parts   []TopicPartition
	noResp  bool // a Produce with acks=0: the broker sends no response
}

// parseRequest reads the header of a request frame.
func parseRequest(frame []byte, names func([16]byte) string) (*request, error) {
	if len(frame) < 12 {
		return nil, errors.New("request frame too short")
	}
	r := &request{frame: frame, names: names}
	rd := kbin.Reader{Src: frame[4:]}
	r.key = rd.Int16()
	r.version = rd.Int16()
	r.corr = rd.Int32()
	rd.NullableString() // client id
	if req := kmsg.RequestForKey(r.key); req != nil {
		req.SetVersion(r.version)
		if req.IsFlexible() {
			kmsg.SkipTags(&rd)
		}
	}
	if err := rd.Complete(); err != nil {
		return nil, fmt.Errorf("request header: %w", err)
	}
	r.body = rd.Src
	if r.key == 0 && len(r.body) >= 2 {
		// Produce: a transactional id, then acks; decode to find acks=0.
		r.decode()
	}
	return r, nil
}

// decode fills txnIDs, parts and noResp from the body, once. A body kmsg cannot read
// leaves them empty: the request then matches no narrowed fault.
func (r *request) decode() {
	if r.decoded {
		return
	}
	r.decoded = true
	req := kmsg.RequestForKey(r.key)
	if req == nil {
		return
	}
	req.SetVersion(r.version)
	if req.ReadFrom(r.body) != nil {
		return
	}
	switch q := req.(type) {
	case *kmsg.FindCoordinatorRequest:
		if q.CoordinatorType == 1 { // transaction coordinator
			if q.CoordinatorKey != "" {
				r.txnIDs = append(r.txnIDs, q.CoordinatorKey)
			}
			r.txnIDs = append(r.txnIDs, q.CoordinatorKeys...)
		}
		return
	case *kmsg.ProduceRequest:
		r.noResp = q.Acks == 0
		if q.TransactionID != nil && *q.TransactionID != "" {
			r.txnIDs = append(r.txnIDs, *q.TransactionID) // kmsg's spelling here
		}
	}
	r.walk(reflect.ValueOf(req))
}

// walk collects transactional ids (fields TransactionalID, TransactionalIDs) and
// topic-partitions (a struct with Topic and Partitions) from a kmsg request.
func (r *request) walk(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			r.walk(v.Elem())
		}
	case reflect.Slice:
		if k := v.Type().Elem().Kind(); k == reflect.Struct || k == reflect.Pointer {
			for i := range v.Len() {
				r.walk(v.Index(i))
			}
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f, fv := t.Field(i), v.Field(i)
			switch {
			case f.Name == "TransactionalID" && fv.Kind() == reflect.String && fv.String() != "":
				r.txnIDs = append(r.txnIDs, fv.String())
			case f.Name == "TransactionalID" && fv.Kind() == reflect.Pointer && !fv.IsNil() && fv.Elem().Kind() == reflect.String:
				r.txnIDs = append(r.txnIDs, fv.Elem().String())
			case f.Name == "TransactionalIDs" && fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() == reflect.String:
				for j := range fv.Len() {
					r.txnIDs = append(r.txnIDs, fv.Index(j).String())
				}
			case f.Name == "Partitions" && fv.Kind() == reflect.Slice:
				topic, name := v.FieldByName("Topic"), ""
				if topic.IsValid() && topic.Kind() == reflect.String {
					name = topic.String()
				}
				// Requests from Produce v13 and Fetch v13 name topics by id.
				if idf := v.FieldByName("TopicID"); idf.IsValid() && name == "" && r.names != nil {
					if id, ok := idf.Interface().([16]byte); ok {
						name = r.names(id)
					}
				}
				if topic.IsValid() || name != "" {
					r.partitions(name, fv)
				}
			case fv.Kind() == reflect.Slice || fv.Kind() == reflect.Pointer || fv.Kind() == reflect.Struct:
				r.walk(fv)
			}
		}
	}
}

// partitions adds topic's partitions from a Partitions slice: int32s, or structs with a
// Partition field.
func (r *request) partitions(topic string, ps reflect.Value) {
	for i := range ps.Len() {
		p := ps.Index(i)
		if p.Kind() == reflect.Struct {
			p = p.FieldByName("Partition")
		}
		if p.IsValid() && p.Kind() == reflect.Int32 {
			r.parts = append(r.parts, TopicPartition{Topic: topic, Partition: int32(p.Int())})
		}
	}
}

// replaceErrorCodes returns a response frame like frame, to a request of key and version,
// with every ErrorCode field set to code: the top-level one and those of every topic,
// partition or transaction in it.
func replaceErrorCodes(frame []byte, key, version, code int16) ([]byte, error) {
	resp := kmsg.ResponseForKey(key)
	if resp == nil || len(frame) < 8 {
		return nil, fmt.Errorf("response to API key %d: unknown to kmsg", key)
	}
	resp.SetVersion(version)
	rd := kbin.Reader{Src: frame[8:]}
	flexHeader := resp.IsFlexible() && key != 18 // ApiVersions answers with header v0
	if flexHeader {
		kmsg.SkipTags(&rd)
	}
	if err := rd.Complete(); err != nil {
		return nil, err
	}
	if err := resp.ReadFrom(rd.Src); err != nil {
		return nil, fmt.Errorf("read %s response v%d: %w", kmsg.NameForKey(key), version, err)
	}
	setErrorCodes(reflect.ValueOf(resp), code)
	out := make([]byte, 8, len(frame)+16)
	copy(out[4:8], frame[4:8]) // correlation id
	if flexHeader {
		out = append(out, 0) // no tagged fields
	}
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out, nil
}

func setErrorCodes(v reflect.Value, code int16) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			setErrorCodes(v.Elem(), code)
		}
	case reflect.Slice:
		if k := v.Type().Elem().Kind(); k == reflect.Struct || k == reflect.Pointer {
			for i := range v.Len() {
				setErrorCodes(v.Index(i), code)
			}
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f, fv := t.Field(i), v.Field(i)
			if f.Name == "ErrorCode" && fv.Kind() == reflect.Int16 && fv.CanSet() {
				fv.SetInt(int64(code))
				continue
			}
			setErrorCodes(fv, code)
		}
	}
}

// responseErrorCode returns the first non-zero ErrorCode of a response frame, for logs and
// for what a held request's late delivery got back.
func responseErrorCode(frame []byte, key, version int16) int16 {
	resp := kmsg.ResponseForKey(key)
	if resp == nil || len(frame) < 8 {
		return 0
	}
	resp.SetVersion(version)
	rd := kbin.Reader{Src: frame[8:]}
	if resp.IsFlexible() && key != 18 {
		kmsg.SkipTags(&rd)
	}
	if rd.Complete() != nil || resp.ReadFrom(rd.Src) != nil {
		return 0
	}
	return firstErrorCode(reflect.ValueOf(resp))
}

func firstErrorCode(v reflect.Value) int16 {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			return firstErrorCode(v.Elem())
		}
	case reflect.Slice:
		if k := v.Type().Elem().Kind(); k == reflect.Struct || k == reflect.Pointer {
			for i := range v.Len() {
				if c := firstErrorCode(v.Index(i)); c != 0 {
					return c
				}
			}
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f, fv := t.Field(i), v.Field(i)
			if f.Name == "ErrorCode" && fv.Kind() == reflect.Int16 {
				if c := int16(fv.Int()); c != 0 {
					return c
				}
				continue
			}
			if c := firstErrorCode(fv); c != 0 {
				return c
			}
		}
	}
	return 0
}

// topicIDs returns the topic names by id of a Metadata response frame to a request of
// version.
func topicIDs(frame []byte, version int16) map[[16]byte]string {
	resp := kmsg.NewPtrMetadataResponse()
	resp.SetVersion(version)
	if len(frame) < 8 {
		return nil
	}
	rd := kbin.Reader{Src: frame[8:]}
	if resp.IsFlexible() {
		kmsg.SkipTags(&rd)
	}
	if rd.Complete() != nil || resp.ReadFrom(rd.Src) != nil {
		return nil
	}
	out := make(map[[16]byte]string)
	for _, t := range resp.Topics {
		if t.Topic != nil && t.TopicID != [16]byte{} {
			out[t.TopicID] = *t.Topic
		}
	}
	return out
}
