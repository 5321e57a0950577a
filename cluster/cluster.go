package cluster

import (
	"context"
	"fmt"

	"github.com/fencecheck/fencecheck/cluster/links"
)

// Cluster is a running Kafka(-compatible) cluster with its links. Backends:
// embedded (kfake in this process), local (Apache Kafka JVMs on loopback),
// containers (the same JVMs in containers) and external (a cluster someone
// else runs).
//
// Every broker fault (Kill, Pause, Resume, Restart) either happens or returns
// an error matching ErrUnsupported; none is a silent no-op. All methods are
// safe for concurrent use.
type Cluster interface {
	// Info describes the cluster for run metadata and logs.
	Info() Info

	// Bootstrap returns seed addresses (host:port) a client can use
	// without links: the harness's own admin path and health checks. They
	// are advertised broker addresses, so a per-process DialFunc maps them
	// as well.
	Bootstrap() []string

	// Brokers lists every broker the cluster was started with, killed ones
	// included (State says which), sorted by ID. For the keys in q it adds
	// role hints, asked of the cluster over the Kafka protocol. When that
	// lookup fails the brokers are still returned, without those roles,
	// together with the error.
	Brokers(ctx context.Context, q RoleQuery) ([]Broker, error)

	// Links returns the dial function of one process (one transport
	// instance), creating the process's links p→b to every broker if they
	// do not exist yet. Give it to kgo.Dialer: every connection the client
	// makes to a broker then goes through that process's own proxy, which
	// the nemesis can cut, slow or reset (see links.Network).
	Links(ctx context.Context, process int) (DialFunc, error)

	// Network gives the links themselves, for faults.
	Network() *links.Network

	// Kill stops a broker abruptly (SIGKILL for a JVM): no controlled
	// shutdown, connections drop.
	Kill(ctx context.Context, broker int32) error
	// Pause freezes a broker (SIGSTOP for a JVM): connections stay open
	// and nothing answers.
	Pause(ctx context.Context, broker int32) error
	// Resume undoes Pause.
	Resume(ctx context.Context, broker int32) error
	// Restart starts a killed broker again with its data, or kills and
	// restarts a running one, and returns once it serves again (or ctx
	// ends; then the broker may still be starting).
	Restart(ctx context.Context, broker int32) error

	// Close stops every broker and proxy the cluster started and removes
	// the data it owns. It is idempotent; ctx bounds the wait for
	// processes to exit, which are killed regardless.
	Close(ctx context.Context) error
}

// Isolator is implemented by a cluster that can cut a broker from its peers
// by means of its own rather than through peer links of its Network: the
// external cluster runs the user's isolate and unisolate commands. While a
// broker is isolated, Brokers reports it in StateIsolated.
type Isolator interface {
	// Isolate cuts broker from its peers: inter-broker and controller
	// traffic stop, clients may still reach it. It returns once the
	// cluster's means acted, not once the cluster noticed; an error
	// matching ErrUnsupported means nothing was done.
	Isolate(ctx context.Context, broker int32) error
	// Unisolate undoes Isolate.
	Unisolate(ctx context.Context, broker int32) error
}

// BrokerOp names an operation on one broker: a Cluster method (Kill, Pause,
// Resume, Restart) or an Isolator's (Isolate, Unisolate). A fault says which
// it calls (the nemesis's registry); a backend that runs them by the user's
// commands (external) says which it has.
type BrokerOp string

// The broker operations.
const (
	OpKill      BrokerOp = "kill"
	OpPause     BrokerOp = "pause"
	OpResume    BrokerOp = "resume"
	OpRestart   BrokerOp = "restart"
	OpIsolate   BrokerOp = "isolate"
	OpUnisolate BrokerOp = "unisolate"
)

// DialFunc has the signature of kgo.Dialer's function: it receives the
// broker's advertised host:port.
type DialFunc = links.DialFunc

// Info describes a cluster.
type Info struct {
	Kind       string // "embedded", "local", "containers", "external"
	Version    string // broker version: "kfake", "4.1.2", or "" when unknown
	TxnVersion int    // transaction.version in effect (1 or 2), 0 when unknown
	Brokers    int    // brokers started with
	LogsDir    string // where broker logs go, "" when none
	ClusterID  string
}

// BrokerState is what the harness last did to a broker.
type BrokerState int

// Broker states.
const (
	StateUnknown BrokerState = iota // external cluster: not ours to know
	StateRunning
	StatePaused
	StateKilled
	// StateIsolated: cut from its peers by the cluster's own means (an
	// external cluster's isolate command, see Isolator); clients may still
	// reach it.
	StateIsolated
)

// String is "running", "paused", "killed", "isolated" or "unknown".
func (s BrokerState) String() string {
	switch s {
	case StateIsolated:
		return "isolated"
	case StateRunning:
		return "running"
	case StatePaused:
		return "paused"
	case StateKilled:
		return "killed"
	}
	return "unknown"
}

// Broker is one broker of a cluster.
type Broker struct {
	ID    int32        // Kafka node id
	Addr  string       // advertised client address, host:port
	State BrokerState  // what the harness last did to it
	Roles []BrokerRole // role hints for the keys of the RoleQuery, and "controller"
}

// Name is the broker's short name in link names and logs: "b1".
func (b Broker) Name() string { return links.BrokerName(b.ID) }

// RoleQuery names the keys whose owners Brokers should look up.
type RoleQuery struct {
	TransactionalIDs []string         // coordinator of each transactional id
	Groups           []string         // coordinator of each consumer group
	Partitions       []TopicPartition // leader of each partition
}

// TopicPartition names a partition (the same type as the links' Kafka faults filter on).
type TopicPartition = links.TopicPartition

// BrokerRoleKind is the kind of a role hint.
type BrokerRoleKind int

// Role kinds.
const (
	RoleController       BrokerRoleKind = iota + 1 // the active controller (as metadata reports it)
	RoleTxnCoordinator                             // transaction coordinator of Key
	RoleGroupCoordinator                           // group coordinator of Key
	RoleLeader                                     // leader of Topic/Partition
)

// BrokerRole is a hint of what a broker does at the time of the lookup.
type BrokerRole struct {
	Kind      BrokerRoleKind
	Key       string // transactional id or group
	Topic     string
	Partition int32
}

// String reads like "coordinator of transactional id X" or "leader of t/0".
func (r BrokerRole) String() string {
	switch r.Kind {
	case RoleController:
		return "controller"
	case RoleTxnCoordinator:
		return fmt.Sprintf("coordinator of transactional id %s", r.Key)
	case RoleGroupCoordinator:
		return fmt.Sprintf("coordinator of group %s", r.Key)
	case RoleLeader:
		return fmt.Sprintf("leader of %s/%d", r.Topic, r.Partition)
	}
	return "unknown role"
}

// Has reports whether b holds role r.
func (b Broker) Has(r BrokerRole) bool {
	for _, x := range b.Roles {
		if x == r {
			return true
		}
	}
	return false
}

// Find returns the broker with id.
func Find(bs []Broker, id int32) (Broker, bool) {
	for _, b := range bs {
		if b.ID == id {
			return b, true
		}
	}
	return Broker{}, false
}
