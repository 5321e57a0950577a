package workload

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestEndTxnCommit checks the commit gate's parser on requests as kgo encodes them.
func TestEndTxnCommit(t *testing.T) {
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("fencecheck-p1"))
	endTxn := func(version int16, commit bool) kmsg.Request {
		req := kmsg.NewPtrEndTxnRequest()
		req.SetVersion(version)
		req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = "topic/r1", 7, 3, commit
		return req
	}
	for _, tc := range []struct {
		name string
		req  kmsg.Request
		want bool
	}{
		{"EndTxn v5 (flexible, TV2) commit - recognised", endTxn(5, true), true},
		{"EndTxn v3 (first flexible version) commit - recognised", endTxn(3, true), true},
		{"EndTxn v1 (TV1) commit - recognised", endTxn(1, true), true},
		{"EndTxn v5 abort - ignored", endTxn(5, false), false},
		{"InitProducerId - ignored", func() kmsg.Request {
			req := kmsg.NewPtrInitProducerIDRequest()
			req.SetVersion(5)
			s := "topic/r1"
			req.TransactionalID = &s
			return req
		}(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := endTxnCommit(f.AppendRequest(nil, tc.req, 7))
			if ok != tc.want || (ok && got != "topic/r1") {
				t.Fatalf("endTxnCommit = %q, %v; want %q, %v", got, ok, "topic/r1", tc.want)
			}
		})
	}
	t.Run("short or garbage - ignored", func(t *testing.T) {
		for _, b := range [][]byte{nil, {0, 0, 0, 1}, []byte(strings.Repeat("\x00\x1a", 8))} {
			if _, ok := endTxnCommit(b); ok {
				t.Fatalf("%x taken for a commit", b)
			}
		}
	})
}
