package transport

import (
	"crypto/x509"
	"errors"
	"net"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// securityCause names, in words an operator can act on, why a broker connection failed TLS
// or SASL, or returns "" when err is no such failure. It never includes a credential:
// neither crypto/tls's nor franz-go's errors carry one, and the username is not a secret.
func securityCause(err error, sec *ClientSecurity) string {
	var (
		unknownCA x509.UnknownAuthorityError
		invalid   x509.CertificateInvalidError
		hostname  x509.HostnameError
		op        *net.OpError
	)
	switch {
	case errors.As(err, &unknownCA):
		return "TLS: the broker's certificate is signed by an unknown certificate authority (check the CA the client trusts)"
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return "TLS: the broker's certificate has expired or is not yet valid"
	case errors.As(err, &invalid):
		return "TLS: the broker's certificate is not valid for a server"
	case errors.As(err, &hostname):
		return "TLS: the broker's certificate does not name the host dialed"
	case errors.As(err, &op) && op.Op == "remote error" && strings.HasPrefix(op.Err.Error(), "tls: "):
		// The broker sent a TLS alert: it did not accept this client's certificate (or its
		// absence).
		return "TLS: the broker rejected this client's certificate (" + op.Err.Error() + ")"
	case err != nil && strings.Contains(err.Error(), "first record does not look like a TLS handshake"):
		return "TLS: the listener does not speak TLS"
	case errors.Is(err, kerr.SaslAuthenticationFailed):
		who := ""
		if sec != nil {
			who = " as user " + sec.Username + " with " + sec.SASLMechanism
		}
		return "SASL authentication failed" + who + " (wrong username or password, or no credentials for this mechanism)"
	case errors.Is(err, kerr.UnsupportedSaslMechanism):
		return "SASL: the listener does not enable this mechanism"
	case errors.Is(err, kerr.IllegalSaslState):
		return "SASL: the listener expected another SASL exchange"
	}
	return ""
}

// isAuthorization reports whether err is the broker's refusal of an ACL: the request was
// rejected before it did anything.
func isAuthorization(err error) bool {
	return errors.Is(err, kerr.TransactionalIDAuthorizationFailed) ||
		errors.Is(err, kerr.TopicAuthorizationFailed) ||
		errors.Is(err, kerr.ClusterAuthorizationFailed) ||
		errors.Is(err, kerr.GroupAuthorizationFailed)
}
