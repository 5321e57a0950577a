//go:build !kafka

package nemesis

import (
	"slices"
	"testing"

	"github.com/fencecheck/fencecheck/cluster/links"
)

// Every request type and error the random mix may draw is one the links know, and every
// draw makes a spec that validates.
func TestMixNamesAreKafkas(t *testing.T) {
	for _, m := range mixAPIs {
		if _, ok := links.KafkaAPIKey(m.api); !ok {
			t.Errorf("request type %q: the links do not know it", m.api)
		}
		if m.until != "" {
			if _, ok := links.KafkaAPIKey(m.until); !ok {
				t.Errorf("%s: until %q: the links do not know it", m.api, m.until)
			}
		}
		if len(m.errors) == 0 {
			t.Errorf("%s: no error for error-response", m.api)
		}
		for _, e := range m.errors {
			if _, ok := links.KafkaErrorCode(e); !ok {
				t.Errorf("%s: error %q: the links do not know it", m.api, e)
			}
		}
	}
}

// candidates offers only what was sent, and per action only what the action can do.
func TestMixCandidates(t *testing.T) {
	sent := []string{"produce", "endtxn", "describetransactions", "metadata"}
	names := func(ms []mixAPI) (out []string) {
		for _, m := range ms {
			out = append(out, m.api)
		}
		return out
	}
	for _, tc := range []struct {
		k    kafkaMixAction
		want []string
	}{
		{kafkaMixAction{action: "drop-response"}, []string{"produce", "endtxn", "describetransactions"}},
		{kafkaMixAction{action: "hold"}, []string{"produce", "endtxn"}},
		{kafkaMixAction{action: "hold", until: "endtxn"}, []string{"produce"}},
		{kafkaMixAction{action: "duplicate"}, []string{"produce", "endtxn"}},
		{kafkaMixAction{action: "error-response", err: "CONCURRENT_TRANSACTIONS"}, []string{"endtxn"}},
		{kafkaMixAction{action: "delay", api: "fetch"}, nil},
	} {
		if got := names(tc.k.candidates(sent)); !slices.Equal(got, tc.want) {
			t.Errorf("%+v: candidates %v, want %v", tc.k, got, tc.want)
		}
	}
}
