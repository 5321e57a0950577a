package history_test

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/fencecheck/fencecheck/checker/history"
)

// TestFastPathAgreesWithTheLexer: every line the fast path takes, it decodes to the event the
// lexer decodes; it takes nearly every invoke and completion the writer writes; and it gives
// back every line that the writer would not have written, byte for byte, to the lexer.
func TestFastPathAgreesWithTheLexer(t *testing.T) {
	var lines []string
	for seed := range uint64(4) {
		h := generated(t, seed)
		for i := range h.Len() {
			op := h.Op(i)
			if op.Type != history.TypeOK && !op.Pending && i%3 == 0 {
				op.Message = fmt.Sprintf("write %q: fenced (op %d, é)", op.Role, op.ID) // escapes
			} else if op.Type == history.TypeFail {
				op.Message = "fenced: PRODUCER_FENCED"
			}
			h.SetOp(i, op)
		}
		lines = append(lines, strings.Split(strings.TrimSpace(string(encode(t, h))), "\n")...)
	}
	fast, writerOps := 0, 0
	agree := func(line string) bool {
		got, ok := history.DecodeFast([]byte(line))
		want, err := history.DecodeLex([]byte(line))
		if !ok {
			if !reflect.DeepEqual(got, history.Event{}) {
				t.Fatalf("the fast path declined %s but left %+v", line, got)
			}
			return false
		}
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("line %s\nfast  %+v\nlexer %+v (%v)", line, got, want, err)
		}
		return true
	}
	for _, line := range lines {
		if strings.HasPrefix(line, `{"type":"header"`) || strings.HasPrefix(line, `{"type":"fault`) {
			continue
		}
		writerOps++
		if agree(line) {
			fast++
		}
	}
	if escaped := strings.Count(strings.Join(lines, "\n"), `\"`); fast < writerOps-escaped || fast == writerOps {
		t.Fatalf("the fast path took %d of %d lines, %d of which have escapes", fast, writerOps, escaped)
	}
	// Lines the writer would not write: the lexer decodes (or refuses) them.
	declined := []string{
		`{"type":"invoke","time":5,"id":1,"client":0,"role":"r","kind":"acquire"}`,  // key order
		`{"type":"invoke", "id":1,"time":5,"client":0,"role":"r","kind":"acquire"}`, // a space
		`{"type":"invoke","id":01,"time":5,"client":0,"role":"r","kind":"acquire"}`, // a leading zero
		`{"type":"invoke","id":1,"time":5,"client":0,"role":"r","kind":"steal"}`,    // unknown kind
		`{"type":"invoke","id":1,"time":5,"client":0,"role":"r\u0041","kind":"acquire"}`,
		`{"type":"invoke","id":1,"time":5,"client":0,"role":"r","kind":"acquire","x":1}`, // unknown key
		`{"type":"invoke","id":1,"time":5,"client":0,"role":"r","kind":"acquire"} `,
		`{"type":"invoke","id":1,"time":5,"client":0,"role":"r","kind":"acquire"`,
		`{"type":"invoke","id":1234567890123456789,"time":5,"client":0,"role":"r","kind":"acquire"}`,
		`{"type":"invoke","id":1,"time":5.0,"client":0,"role":"r","kind":"acquire"}`,
		`{"type":"invoke","id":1,"time":5,"client":0,"role":"r","kind":"work","args":{"work_partition":1,"token":{"producer_id":1,"epoch":0},"write_id":"w"}}`,
		`{"type":"invoke","id":1,"time":5,"client":0,"role":"r","kind":"write-lease","args":{"token":{"producer_id":1,"epoch":40000},"write_id":"w"}}`,
		`{"type":"invoke","id":1,"time":5,"client":0,"role":"r","kind":"work","args":{"token":{"producer_id":1,"epoch":0},"write_id":"w","work_partition":1,"records":65536}}`,
		`{"type":"invoke","id":1,"time":5,"client":0,"role":"r","kind":"work","args":{"token":{"producer_id":1,"epoch":0},"write_id":"w","records":2,"work_partition":1}}`,
		`{"type":"ok","id":1,"time":5,"result":{"records":[{"offset":0,"kind":"work","token":{"producer_id":1,"epoch":0},"write_id":"w","count":2,"index":1}]}}`,
		`{"type":"ok","id":1,"time":5,"result":{"records":[{"offset":0,"kind":"work","token":{"producer_id":1,"epoch":0},"write_id":"w","index":1}]}}`,
		`{"type":"ok","id":1,"time":5,"result":{"records":[{"offset":0,"kind":"work","token":{"producer_id":1,"epoch":0},"write_id":"w","index":1,"count":-1}]}}`,
		`{"type":"ok","id":1,"time":5,"result":{}}`,
		`{"type":"ok","id":1,"time":5,"result":{"token":{"producer_id":1,"epoch":0},"held":true}}`,
		`{"type":"ok","id":1,"time":5,"result":{"records":[{"offset":0,"kind":"gossip"}]}}`,
		`{"type":"ok","id":1,"time":5,"result":{"records":[{"kind":"lease","offset":0}]}}`,
		`{"type":"ok","id":1,"time":5,"result":{"records":[{"offset":0,"kind":"lease","token":{"producer_id":1,"epoch":0},"write_id":"w"},]}}`,
		`{"type":"fail","id":1,"time":5,"error":"fenced","message":"a \"quoted\" word"}`,
		`{"type":"info","id":1,"time":5,"message":"m","error":"timeout"}`,
		`{"type":"invoke","id":1,"time":5,"client":0,"kind":"send","args":{"pipe":null}}`,
		`{"type":"invoke","id":1,"time":5,"client":0,"kind":"send","args":{"pipe":{"id":"i\u0030"}}}`,
		`{"type":"invoke","id":1,"time":5,"client":0,"kind":"txn","args":{"pipe":{"inputs":[]}}}`,
		`{"type":"invoke","id":1,"time":5,"client":0,"kind":"txn","args":{"pipe":{"group":"g","id":"i0"}}}`,
		`{"type":"invoke","id":1,"time":5,"client":0,"kind":"txn","args":{"pipe":{"group":"g","extra":1}}}`,
		`{"type":"invoke","id":1,"time":5,"client":0,"kind":"txn","args":{"pipe":{"inputs":[{"partition":0,"to":5,"from":0}]}}}`,
		`{"type":"invoke","id":1,"time":5,"client":0,"kind":"send","args":{"token":{"producer_id":1,"epoch":0},"pipe":{"id":"i0"}}}`,
		`{"type":"invoke","id":1,"time":5,"client":0,"kind":"describe","args":{"pipe":{"id":"i0"}}}`,
		`{"type":"ok","id":1,"time":5,"result":{"pipe":{"sent":null}}}`,
		`{"type":"ok","id":1,"time":5,"result":{"pipe":{"token":null}}}`,
		`{"type":"ok","id":1,"time":5,"result":{"pipe":{"outputs":[]}}}`,
		`{"type":"ok","id":1,"time":5,"result":{"pipe":{"outputs":[{"partition":0,"offset":0,"in":{"partition":0,"offset":0},"txn":3,"id":"i0"}]}}}`,
		`{"type":"ok","id":1,"time":5,"result":{"pipe":{"offsets":[{"partition":0,"offset":1}],"sent":{"partition":0,"offset":0}}}}`,
		`{"type":"ok","id":1,"time":5,"result":{"pipe":{"offsets":[{"partition":0,"offset":1},]}}}`,
		`{"type":"ok","id":1,"time":5,"result":{"pipe":{"sent":{"partition":0,"offset":0}},"held":true}}`,
	}
	for _, line := range declined {
		if agree(line) {
			t.Errorf("the fast path took %s", line)
		}
	}
	// And lines it takes that the generated histories may lack.
	taken := []string{
		`{"type":"invoke","id":-3,"time":0,"client":-1,"kind":"describe"}`,
		`{"type":"invoke","id":1,"time":5,"client":0,"process":"p1","member":"m1","role":"r","kind":"work","args":{"token":{"producer_id":-1,"epoch":-1},"write_id":"w","work_partition":3}}`,
		`{"type":"invoke","id":1,"time":5,"client":0,"role":"r","kind":"final-read","args":{"work_partition":0}}`,
		`{"type":"ok","id":1,"time":5,"result":{"held":true,"token":{"producer_id":9,"epoch":32767}}}`,
		`{"type":"ok","id":1,"time":5,"result":{"offset":0}}`,
		`{"type":"ok","id":1,"time":5,"result":{"records":[]}}`,
		`{"type":"ok","id":1,"time":5,"result":{"records":[{"offset":0,"kind":"registration","member":"m1"},{"offset":1,"kind":"work","member":"m1","role":"r","token":{"producer_id":1,"epoch":0}}]}}`,
		`{"type":"info","id":1,"time":5,"error":"timeout","message":"é, ü"}`,
		`{"type":"invoke","id":1,"time":5,"client":0,"process":"seeder","kind":"send","args":{"pipe":{"id":"i0"}}}`,
		`{"type":"invoke","id":1,"time":5,"client":0,"kind":"send","args":{"pipe":{}}}`,
		`{"type":"invoke","id":2,"time":5,"client":3,"process":"p1","member":"m1","kind":"txn","args":{"pipe":{"group":"g","member_id":"m-1","generation":-7,"txn_id":"t","inputs":[{"partition":0,"from":0,"to":5},{"partition":2,"from":-1,"to":0}],"offsets":[{"partition":0,"offset":5},{"partition":2,"offset":0}]}}}`,
		`{"type":"invoke","id":3,"time":5,"client":0,"process":"final","kind":"final-output"}`,
		`{"type":"ok","id":1,"time":5,"result":{"pipe":{"sent":{"partition":0,"offset":0}}}}`,
		`{"type":"ok","id":1,"time":5,"result":{"pipe":{}}}`,
		`{"type":"ok","id":2,"time":5,"result":{"pipe":{"token":{"producer_id":1,"epoch":0}}}}`,
		`{"type":"fail","id":2,"time":5,"error":"fenced","message":"UNKNOWN_MEMBER_ID"}`,
		`{"type":"ok","id":3,"time":5,"result":{"pipe":{"outputs":[{"partition":0,"offset":0,"in":{"partition":0,"offset":0},"id":"i0","txn":2,"member":"m1","generation":1},{"partition":1,"offset":9,"in":{"partition":0,"offset":1},"id":"","txn":2}]}}}`,
		`{"type":"ok","id":4,"time":5,"result":{"pipe":{"offsets":[{"partition":0,"offset":7}],"input_ends":[{"partition":0,"offset":8},{"partition":1,"offset":0}]}}}`,
	}
	for _, line := range taken {
		if !agree(line) {
			t.Errorf("the fast path declined %s", line)
		}
	}
	if !bytes.Contains([]byte(strings.Join(lines, "")), []byte(`"records":[{`)) {
		t.Fatal("the generated histories hold no records: the test proves less than it says")
	}
}

// FuzzFastPathAgreesWithTheLexer: whatever line the fast path takes, the lexer decodes to the
// same event.
func FuzzFastPathAgreesWithTheLexer(f *testing.F) {
	for _, s := range []string{
		`{"type":"invoke","id":2,"time":5,"client":3,"process":"p1","member":"m1","kind":"txn","args":{"pipe":{"group":"g","member_id":"m-1","generation":-7,"txn_id":"t","inputs":[{"partition":0,"from":0,"to":5}],"offsets":[{"partition":0,"offset":5}]}}}`,
		`{"type":"ok","id":3,"time":5,"result":{"pipe":{"outputs":[{"partition":0,"offset":0,"in":{"partition":0,"offset":0},"id":"i0","txn":2,"member":"m1","generation":1}]}}}`,
		`{"type":"ok","id":4,"time":5,"result":{"pipe":{"token":{"producer_id":1,"epoch":0},"sent":{"partition":0,"offset":0},"offsets":[{"partition":0,"offset":7}],"input_ends":[{"partition":0,"offset":8}]}}}`,
		`{"type":"ok","id":1,"time":5,"result":{"records":[{"offset":0,"kind":"registration","member":"m1"},{"offset":1,"kind":"work","member":"m1","role":"r","token":{"producer_id":1,"epoch":0}}]}}`,
		`{"type":"invoke","id":1,"time":5,"client":0,"process":"p1","member":"m1","role":"r","kind":"work","args":{"token":{"producer_id":-1,"epoch":-1},"write_id":"w","work_partition":3}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		got, ok := history.DecodeFast(line)
		if !ok {
			return
		}
		want, err := history.DecodeLex(line)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("line %s\nfast  %+v\nlexer %+v (%v)", line, got, want, err)
		}
	})
}
