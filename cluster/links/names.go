package links

import (
	"context"
	"errors"
	"fmt"
	"net"
)

// DialFunc has the signature of kgo.Dialer's function: it receives the broker's advertised
// host:port.
type DialFunc = func(ctx context.Context, network, host string) (net.Conn, error)

// BrokerName is the short name of broker id in link names and logs: "b1".
func BrokerName(id int32) string { return fmt.Sprintf("b%d", id) }

// ProcessName is the short name of a process (one transport instance) in link names and logs:
// "p3".
func ProcessName(p int) string { return fmt.Sprintf("p%d", p) }

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// ErrClosed is matched by errors of calls made after Close, of a Network and of the cluster
// that owns it.
var ErrClosed = errors.New("cluster closed")

// ErrUnknownBroker is matched by errors for a broker id the network, or the cluster, does not
// have.
var ErrUnknownBroker = errors.New("unknown broker")

// ErrUnknownAddress is matched by the error of a dial function when it is asked for an address
// that is not the advertised address of a known broker. Dialing such an address directly would
// bypass the process's links, so it is refused.
var ErrUnknownAddress = errors.New("address is not a known broker's advertised address")

// OptionError is returned for an invalid option of a network, a Kafka fault or a cluster
// backend; Field names the option as it is spelled in its Options or Spec struct.
type OptionError struct {
	Field  string
	Value  any
	Reason string
}

// Error implements error.
func (e *OptionError) Error() string {
	return fmt.Sprintf("option %s=%v: %s", e.Field, e.Value, e.Reason)
}
