package transport

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"
)

// DefaultTopic is the coordination topic used when Config.Topic is empty.
const DefaultTopic = "fencecheck.coordination"

// Defaults applied by Start to zero fields of Config.
const (
	DefaultRequestTimeout    = 10 * time.Second
	DefaultFetchMaxWait      = 100 * time.Millisecond
	DefaultFetchPartitionMax = 1 << 20
	DefaultTopicPartitions   = 12
	DefaultTopicReplication  = 3
)

// SASL mechanisms accepted in ClientSecurity.SASLMechanism.
const (
	SASLPlain       = "PLAIN"
	SASLScramSHA256 = "SCRAM-SHA-256"
	SASLScramSHA512 = "SCRAM-SHA-512"
)

// ClientSecurity configures TLS and SASL for every broker connection.
type ClientSecurity struct {
	// TLS, when non-nil, wraps every connection; ServerName defaults to the broker's host.
	TLS *tls.Config
	// SASLMechanism is empty (no SASL), SASLPlain, SASLScramSHA256 or SASLScramSHA512.
	SASLMechanism string
	Username      string
	Password      string
}

// Format keeps the password out of every fmt verb, so a logged Config shows no secret: it
// prints the mechanism and the user, and whether TLS is on.
func (s ClientSecurity) Format(f fmt.State, _ rune) {
	out := "plaintext"
	switch {
	case s.TLS != nil && s.SASLMechanism != "":
		out = "TLS, SASL " + s.SASLMechanism + " as " + s.Username
	case s.TLS != nil:
		out = "TLS"
	case s.SASLMechanism != "":
		out = "SASL " + s.SASLMechanism + " as " + s.Username
	}
	_, _ = f.Write([]byte(out))
}

// Config configures a BrokerTransport. NewConfig fills in the defaults. Start rejects a
// non-positive LeaseDuration, RequestTimeout, TopicPartitions or TopicReplication; the other
// zero fields take the documented defaults.
type Config struct {
	// Bootstrap is "host:port", or several separated by commas. Required.
	Bootstrap string
	// ClientID is sent to the brokers and names this process in their logs. Default "fencecheck".
	ClientID string
	// Topic is the coordination topic. Default DefaultTopic. The transactional id of role R is
	// Topic + "/" + R, so two topics never share roles.
	Topic string
	// LeaseDuration becomes the transaction timeout of every role: the coordinator aborts (and,
	// on Kafka, fences) a holder's transaction that stays open longer. Required.
	LeaseDuration time.Duration
	// RequestTimeout bounds every call. Required; NewConfig sets DefaultRequestTimeout.
	RequestTimeout time.Duration
	// FetchMaxWait is the MaxWait of each fetch of a read. Default DefaultFetchMaxWait.
	FetchMaxWait time.Duration
	// FetchPartitionMax is the byte limit of each fetch of a read. Default DefaultFetchPartitionMax.
	FetchPartitionMax int32
	// TopicPartitions is the partition count used when creating the topic. Required; NewConfig
	// sets DefaultTopicPartitions. An existing topic keeps its count; roles hash onto what exists.
	TopicPartitions int32
	// TopicReplication is the replication factor used when creating the topic. Required;
	// NewConfig sets DefaultTopicReplication.
	TopicReplication int16
	// Security configures TLS and SASL; nil means plaintext.
	Security *ClientSecurity
	// TransactionVersion: 0 negotiates (TV2 where the cluster has it), 1 pins TV1 by speaking
	// pre-KIP-890 protocol versions, 2 requires TV2 (Start fails if the cluster lacks it).
	TransactionVersion int
	// Dial, when set, makes every broker connection. It receives the broker's advertised
	// host:port, as kgo.Dialer does.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Logger receives the transport's and franz-go's warnings. Default: discard.
	Logger *slog.Logger
}

// NewConfig returns a Config for the cluster at bootstrap with the given lease duration and
// every other field at its default.
func NewConfig(bootstrap string, lease time.Duration) Config {
	return Config{
		Bootstrap:        bootstrap,
		LeaseDuration:    lease,
		RequestTimeout:   DefaultRequestTimeout,
		TopicPartitions:  DefaultTopicPartitions,
		TopicReplication: DefaultTopicReplication,
	}
}

// withDefaults validates c and returns it with defaults filled in, and the bootstrap
// addresses. Errors name the field; Start wraps them in ErrInvalidConfig.
func (c Config) withDefaults() (Config, []string, error) {
	bad := func(field, format string, args ...any) (Config, []string, error) {
		return c, nil, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...))
	}
	var seeds []string
	for _, a := range strings.Split(c.Bootstrap, ",") {
		if a = strings.TrimSpace(a); a != "" {
			seeds = append(seeds, a)
		}
	}
	if len(seeds) == 0 {
		return bad("Bootstrap", "no address")
	}
	for _, a := range seeds {
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			return bad("Bootstrap", "%q is not host:port", a)
		}
		if _, err := net.LookupPort("tcp", port); err != nil {
			return bad("Bootstrap", "%q has a bad port", a)
		}
		// With a custom Dial the address may be a name only the dialer knows; without one it
		// must resolve here.
		if c.Dial == nil {
			if _, err := net.LookupHost(host); err != nil {
				return bad("Bootstrap", "%q does not resolve: %v", a, err)
			}
		}
	}
	if c.LeaseDuration <= 0 {
		return bad("LeaseDuration", "must be positive, got %v", c.LeaseDuration)
	}
	if c.RequestTimeout <= 0 {
		return bad("RequestTimeout", "must be positive, got %v", c.RequestTimeout)
	}
	if c.FetchMaxWait < 0 {
		return bad("FetchMaxWait", "must not be negative, got %v", c.FetchMaxWait)
	}
	if c.FetchPartitionMax < 0 {
		return bad("FetchPartitionMax", "must be positive, got %d", c.FetchPartitionMax)
	}
	if c.TopicPartitions <= 0 {
		return bad("TopicPartitions", "must be positive, got %d", c.TopicPartitions)
	}
	if c.TopicReplication <= 0 {
		return bad("TopicReplication", "must be positive, got %d", c.TopicReplication)
	}
	if c.TransactionVersion < 0 || c.TransactionVersion > 2 {
		return bad("TransactionVersion", "must be 0 (negotiate), 1 or 2, got %d", c.TransactionVersion)
	}
	if s := c.Security; s != nil {
		switch s.SASLMechanism {
		case "", SASLPlain, SASLScramSHA256, SASLScramSHA512:
		default:
			return bad("Security.SASLMechanism", "unknown mechanism %q", s.SASLMechanism)
		}
		if s.SASLMechanism != "" && s.Username == "" {
			return bad("Security.Username", "required with SASL")
		}
	}
	if c.ClientID == "" {
		c.ClientID = "fencecheck"
	}
	if c.Topic == "" {
		c.Topic = DefaultTopic
	}
	if c.FetchMaxWait == 0 {
		c.FetchMaxWait = DefaultFetchMaxWait
	}
	if c.FetchPartitionMax == 0 {
		c.FetchPartitionMax = DefaultFetchPartitionMax
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, seeds, nil
}
