package cluster_test

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/fencecheck/fencecheck/cluster"
)

// TestSecurityNeverPrintsThePassword: every way a Security can reach a log or an error
// (fmt verbs, slog) shows the protocol and the user, never the password.
func TestSecurityNeverPrintsThePassword(t *testing.T) {
	s := &cluster.Security{TLS: &tls.Config{}, SASLMechanism: cluster.SASLScramSHA512, Username: "alice", Password: "hunter2-secret"}
	var logged strings.Builder
	slog.New(slog.NewTextHandler(&logged, nil)).Info("x", "security", s)
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("x", "security", s)
	for _, got := range []string{fmt.Sprint(s), fmt.Sprintf("%v %+v %#v %s %q", s, s, s, s, s), fmt.Sprintf("%+v", *s), logged.String()} {
		if strings.Contains(got, s.Password) {
			t.Errorf("%q shows the password", got)
		}
	}
	if got := s.String(); got != "SASL_SSL SCRAM-SHA-512 as alice" {
		t.Errorf("String() = %q", got)
	}
	if o := s.SASLOnly(); o.TLS != nil || o.Password != s.Password || s.TLS == nil {
		t.Errorf("SASLOnly = %v; want the SASL part only, s unchanged", o)
	}
}
