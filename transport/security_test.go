package transport

import (
	"crypto/x509"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestAuthorizationFailuresAreFailAndNamed: an ACL refusal of an acquire minted nothing, so it
// is Fail (any other failed acquire stays Unknown), and every refused call says it was not
// authorized.
func TestAuthorizationFailuresAreFailAndNamed(t *testing.T) {
	denied := &Error{Op: OpAcquire, Role: "r", Kind: ErrProducer, Stage: StageSend,
		Err: fmt.Errorf("unable to initialize a producer ID due to request failures: %w", kerr.TransactionalIDAuthorizationFailed)}
	if got := Classify(denied); got != Fail {
		t.Errorf("Classify(denied acquire) = %v, want fail", got)
	}
	if !strings.Contains(denied.Error(), "not authorized by the cluster's ACLs") {
		t.Errorf("%q does not name the authorization failure", denied)
	}
	other := &Error{Op: OpAcquire, Role: "r", Kind: ErrProducer, Stage: StageSend, Err: kerr.CoordinatorNotAvailable}
	if got := Classify(other); got != Unknown {
		t.Errorf("Classify(other failed acquire) = %v, want unknown", got)
	}
	if strings.Contains(other.Error(), "not authorized") {
		t.Errorf("%q claims an authorization failure", other)
	}
}

// TestSecurityCauseNamesTheFailure: each TLS and SASL failure Start can meet is named, with
// the username but never a password.
func TestSecurityCauseNamesTheFailure(t *testing.T) {
	sec := &ClientSecurity{SASLMechanism: SASLScramSHA256, Username: "alice", Password: "s3cret"}
	tests := []struct {
		err  error
		want string
	}{
		{fmt.Errorf("unable to dial: %w", x509.UnknownAuthorityError{}), "unknown certificate authority"},
		{fmt.Errorf("unable to dial: %w", x509.CertificateInvalidError{Reason: x509.Expired}), "expired"},
		{fmt.Errorf("unable to dial: %w", x509.HostnameError{Host: "h", Certificate: &x509.Certificate{}}), "does not name the host"},
		{&net.OpError{Op: "remote error", Err: fmt.Errorf("tls: bad certificate")}, "rejected this client's certificate"},
		{fmt.Errorf("x: %w", kerr.SaslAuthenticationFailed), "SASL authentication failed as user alice with SCRAM-SHA-256"},
		{fmt.Errorf("x: %w", kerr.UnsupportedSaslMechanism), "does not enable this mechanism"},
		{kerr.CoordinatorNotAvailable, ""},
	}
	for _, tc := range tests {
		got := securityCause(tc.err, sec)
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("securityCause(%v) = %q, want it to name %q", tc.err, got, tc.want)
		}
		if strings.Contains(got, sec.Password) {
			t.Errorf("securityCause(%v) = %q shows the password", tc.err, got)
		}
	}
}

// TestClientSecurityNeverPrintsThePassword: a logged Config or ClientSecurity, in any fmt
// verb, shows the mechanism and the user, never the password.
func TestClientSecurityNeverPrintsThePassword(t *testing.T) {
	sec := &ClientSecurity{SASLMechanism: SASLScramSHA512, Username: "alice", Password: "hunter2-secret"}
	cfg := NewConfig("h:1", time.Second)
	cfg.Security = sec
	for _, got := range []string{fmt.Sprintf("%v %+v %#v %s", sec, sec, sec, sec), fmt.Sprintf("%+v", *sec), fmt.Sprintf("%+v %#v", cfg, cfg)} {
		if strings.Contains(got, sec.Password) {
			t.Errorf("%q shows the password", got)
		}
		if !strings.Contains(got, "alice") {
			t.Errorf("%q does not name the user", got)
		}
	}
}
