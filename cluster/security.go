package cluster

import (
	"crypto/tls"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// SASL mechanisms a Security may name.
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
)

// Security is how a client authenticates to a cluster's client listener: TLS (server
// verification, and a client certificate for mutual TLS) and SASL. The zero value is
// plaintext. Password is a secret: Security's String and LogValue never show it, and nothing
// in the cluster package logs or returns it in an error.
type Security struct {
	// TLS, when non-nil, wraps every client connection. Its RootCAs verify the brokers; its
	// Certificates, when set, are the client certificate of mutual TLS. ServerName defaults
	// to the host of the address dialed.
	TLS *tls.Config
	// SASLMechanism is "" (no SASL), SASLPlain, SASLScramSHA256 or SASLScramSHA512.
	SASLMechanism string
	// Username and Password are the SASL credentials.
	Username string
	Password string
}

// Enabled reports whether s asks for TLS or SASL.
func (s *Security) Enabled() bool { return s != nil && (s.TLS != nil || s.SASLMechanism != "") }

// Protocol is Kafka's name for the listener security protocol s speaks: PLAINTEXT, SSL,
// SASL_PLAINTEXT or SASL_SSL.
func (s *Security) Protocol() string {
	switch {
	case !s.Enabled():
		return "PLAINTEXT"
	case s.TLS != nil && s.SASLMechanism != "":
		return "SASL_SSL"
	case s.TLS != nil:
		return "SSL"
	}
	return "SASL_PLAINTEXT"
}

// String describes s without its password, e.g. "SASL_SSL SCRAM-SHA-256 as fencecheck".
func (s *Security) String() string {
	if !s.Enabled() {
		return "PLAINTEXT"
	}
	out := s.Protocol()
	if s.SASLMechanism != "" {
		out += " " + s.SASLMechanism + " as " + s.Username
	}
	if s.TLS != nil && len(s.TLS.Certificates) > 0 {
		out += " with a client certificate"
	}
	return out
}

// LogValue keeps the password out of structured logs.
func (s *Security) LogValue() slog.Value { return slog.StringValue(s.String()) }

// Format keeps the password out of every fmt verb (%v, %+v, %#v, %s, ...), of a Security
// and of a pointer to one.
func (s Security) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(s.String())) }

// SASLOnly returns s without TLS, for a client whose dial function already speaks TLS (the
// links of a secured cluster, see Network.SetTLS); nil when s has no SASL.
func (s *Security) SASLOnly() *Security {
	if s == nil || s.SASLMechanism == "" {
		return nil
	}
	c := *s
	c.TLS = nil
	return &c
}

// KgoOpts are the franz-go options that make a client on the bootstrap addresses (no links)
// speak s.
func (s *Security) KgoOpts() []kgo.Opt {
	if !s.Enabled() {
		return nil
	}
	var opts []kgo.Opt
	if s.TLS != nil {
		opts = append(opts, kgo.DialTLSConfig(s.TLS.Clone()))
	}
	return append(opts, s.SASL()...)
}

// SASL returns the option that makes a client authenticate with s's SASL credentials, nil
// without SASL.
func (s *Security) SASL() []kgo.Opt {
	if s == nil {
		return nil
	}
	switch s.SASLMechanism {
	case SASLPlain:
		return []kgo.Opt{kgo.SASL(plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism())}
	case SASLScramSHA256:
		return []kgo.Opt{kgo.SASL(scram.Auth{User: s.Username, Pass: s.Password}.AsSha256Mechanism())}
	case SASLScramSHA512:
		return []kgo.Opt{kgo.SASL(scram.Auth{User: s.Username, Pass: s.Password}.AsSha512Mechanism())}
	}
	return nil
}

// Secured is implemented by a cluster whose client listener is not plaintext. Its
// ClientSecurity is what the harness's own clients (health checks, admin requests, final
// reads) use on the bootstrap addresses: the cluster's administrator.
type Secured interface {
	ClientSecurity() *Security
}

// ClientSecurity returns c's client security, nil for a plaintext cluster.
func ClientSecurity(c Cluster) *Security {
	if s, ok := c.(Secured); ok {
		if sec := s.ClientSecurity(); sec.Enabled() {
			return sec
		}
	}
	return nil
}

// AdminClient is NewAdminClient on c's bootstrap addresses with c's client security. Extra
// options cannot change the principal: kgo uses the first SASL mechanism it is given.
func AdminClient(c Cluster, log *slog.Logger, extra ...kgo.Opt) (*kgo.Client, error) {
	return NewAdminClient(c.Bootstrap(), log, append(ClientSecurity(c).KgoOpts(), extra...)...)
}
