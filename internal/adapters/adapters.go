// Package adapters knows the exec-protocol adapters that ship in the repository's adapters/
// folder: fencecheck's transport design on third-party Kafka clients (docs/clients.md). Each
// lives in adapters/NAME, is built by `make NAME-adapter`, which leaves target/.built behind,
// and runs as adapters/NAME/fencecheck-NAME-adapter.
package adapters

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// Client is one adapter and what its client can do.
type Client struct {
	// Name is the adapter's folder under adapters/ and the stem of its launcher and make target.
	Name string
	// TransactionVersion is what the client's producers speak whatever the cluster
	// finalized: 1 for a client without KIP-890; 0 when it follows the cluster.
	TransactionVersion int
	// Optional: built only on request (make NAME-adapter), not by make adapters or make test,
	// so its tests skip it when it is not built, even under FENCECHECK_REQUIRE_KAFKA=1.
	Optional bool
	// Pipelines: the adapter serves the pipeline workload too (hello lists it;
	// docs/exec-protocol.md). A suite skips a pipeline on the column of one that does not.
	Pipelines bool
	// GroupProtocols are the group protocols its pipeline member speaks (pipeline.Protocol*);
	// nil: both, classic and consumer. A suite skips the others on its column.
	GroupProtocols []string
	// GroupIDOnlyArgs, when set, are the adapter's arguments that make its pipeline member add
	// its offsets to a transaction with the group id alone (no member id, generation -1), an
	// API its client offers beside the one that sends the group's metadata. A zombie of that
	// member is not fenced by the group (KIP-447): the conformance suites run it too, with
	// pipelinetest.Env.GroupIDOnly, which expects its zombie to commit.
	GroupIDOnlyArgs []string
	// GroupIDOnly: the client has no other way than the group id alone to add offsets to a
	// transaction (KafkaJS 2.2.4's transaction.sendOffsets({consumerGroupId, topics}) sends
	// TxnOffsetCommit v0-1, which has no member id or generation), so its pipeline member always
	// does, and a zombie of it with one transactional id per member commits (KIP-447's group
	// fence never applies). Its conformance suites run with pipelinetest.Env.GroupIDOnly, which
	// requires exactly that and fails if the client ever sends the group's metadata.
	GroupIDOnly bool
	// PipelinesOnly: the adapter serves no leases (its hello lists pipelines alone), so the
	// lease suites and scenarios skip it.
	PipelinesOnly bool
	// SelfDriven: the pipeline member runs its own loop (hello lists the self-driven
	// capability: Kafka Streams), so the conformance suites run it with
	// pipelinetest.Env.SelfDriven.
	SelfDriven bool
}

// ServesProtocol reports whether the client's pipeline member speaks the group protocol.
func (c Client) ServesProtocol(protocol string) bool {
	return c.GroupProtocols == nil || slices.Contains(c.GroupProtocols, protocol)
}

// Clients are the adapters in adapters/, in the order the docs list them.
var Clients = []Client{
	{Name: "java", Pipelines: true},
	{Name: "librdkafka", TransactionVersion: 1, Pipelines: true},
	// Sarama has no KIP-848 consumer; its producer offers both AddOffsetsToTxn(offsets, groupID)
	// and AddOffsetsToTxnWithGroupMetadata (adapters/sarama/README.md, "Pipelines").
	{Name: "sarama", TransactionVersion: 1, Pipelines: true, GroupProtocols: []string{"classic"},
		GroupIDOnlyArgs: []string{"--offsets", "group-id"}},
	// KafkaJS has no KIP-848 consumer and adds offsets by group id only
	// (adapters/kafkajs/README.md, "Pipelines").
	{Name: "kafkajs", TransactionVersion: 1, Pipelines: true, GroupProtocols: []string{"classic"}, GroupIDOnly: true},
	// krabka follows the cluster's transaction.version, as kafka-clients does. Its cold build
	// compiles about 380 crates, so make test does not build it yet (mk/krabka-adapter.mk).
	// Its pipeline member passes the conformance suite under the classic protocol. Under the
	// consumer protocol (KIP-848) krabka 0.7.1 sends no heartbeat while polled more often than
	// the heartbeat interval, so a member that joins a group with members never copies
	// (docs/regressions.md, krabka-polls-starve-heartbeats): the suites run it under classic
	// only.
	{Name: "krabka", Pipelines: true, Optional: true, GroupProtocols: []string{"classic"}},
	// kafka-python (pure Python) caps EndTxn and AddPartitionsToTxn at v3: no KIP-890.
	{Name: "kafkapython", TransactionVersion: 1},
	// @platformatic/kafka implements EndTxn up to v4 and Produce up to v11: TV1 on any cluster.
	// Optional: each adapter boot costs about 1.1 s of CPU (the client compiles its option
	// schemas at import), which made its tests about twice KafkaJS's in make test
	// (docs/clients.md, "@platformatic/kafka").
	{Name: "platformatic", TransactionVersion: 1, Optional: true},
	// Kafka Streams (exactly_once_v2) on the Java adapter's kafka-clients: a pipeline member
	// only, self-driven, classic protocol only (adapters/streams/README.md). Last, so that the
	// others keep their seeds and link numbers in the tests that number them by position.
	{Name: "streams", Pipelines: true, PipelinesOnly: true, GroupProtocols: []string{"classic"}, SelfDriven: true},
}

// Speaks returns the transaction version the client's producers run on a cluster that
// finalized clusterTV, and whether a test should pin that version in the transport's config:
// only a client that follows the cluster can be asked to.
func (c Client) Speaks(clusterTV int) (tv int, pin bool) {
	if c.TransactionVersion != 0 {
		return c.TransactionVersion, false
	}
	return clusterTV, true
}

// Lookup returns the client named name.
func Lookup(name string) (Client, bool) {
	for _, c := range Clients {
		if c.Name == name {
			return c, true
		}
	}
	return Client{}, false
}

// ErrNotBuilt: the adapter's build has not run (its target/.built is missing).
var ErrNotBuilt = errors.New("adapter not built")

// Launcher returns the adapter's launcher under the repository root.
func (c Client) Launcher(root string) string {
	return filepath.Join(root, "adapters", c.Name, "fencecheck-"+c.Name+"-adapter")
}

// Make is the make target that builds the adapter.
func (c Client) Make() string { return c.Name + "-adapter" }

// Command returns the command that starts the adapter of a repository at root, or an error
// wrapping ErrNotBuilt that names the make target.
func (c Client) Command(root string) ([]string, error) {
	if err := CheckBuilt(c.Launcher(root)); err != nil {
		return nil, err
	}
	return []string{c.Launcher(root)}, nil
}

// ByProgram returns the adapter whose launcher program is (by its name,
// fencecheck-NAME-adapter); false for any other program.
func ByProgram(program string) (Client, bool) {
	for _, c := range Clients {
		if filepath.Base(program) == "fencecheck-"+c.Name+"-adapter" {
			return c, true
		}
	}
	return Client{}, false
}

// CheckBuilt returns an error wrapping ErrNotBuilt when program is the launcher of one of the
// adapters (by its name, fencecheck-NAME-adapter) and that adapter's build is missing beside
// it; nil for any other program.
func CheckBuilt(program string) error {
	for _, c := range Clients {
		if filepath.Base(program) != "fencecheck-"+c.Name+"-adapter" {
			continue
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(program), "target", ".built")); err != nil {
			return fmt.Errorf("%w: %s (run make %s)", ErrNotBuilt, program, c.Make())
		}
	}
	return nil
}

// Root returns the repository's root: the nearest folder above dir (a test's working
// directory, say) that holds the adapters/ folder and go.mod.
func Root(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if fi, err := os.Stat(filepath.Join(d, "adapters")); err == nil && fi.IsDir() {
			if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
				return d, nil
			}
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no repository root (a folder with adapters/ and go.mod) above %s", dir)
		}
	}
}
