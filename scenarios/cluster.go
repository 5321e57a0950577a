package scenarios

import (
	"fmt"
	"slices"
	"strings"

	"github.com/fencecheck/fencecheck/cluster/links"
)

// Cluster kinds.
const (
	KindEmbedded   = "embedded"
	KindLocal      = "local"
	KindContainers = "containers"
	KindExternal   = "external"
)

// ClusterKinds lists the kinds a scenario or --cluster may name.
var ClusterKinds = []string{KindEmbedded, KindLocal, KindContainers, KindExternal}

// ClusterSpec is the cluster part of a scenario.
type ClusterSpec struct {
	// Kind is embedded (kfake in this process, the default), local (Apache Kafka JVMs from
	// Maven jars: `make kafka`), containers or external.
	Kind string `json:"kind" yaml:"kind"`
	// Brokers is the broker count. Default 3.
	Brokers int `json:"brokers,omitempty" yaml:"brokers,omitempty"`
	// KafkaVersion selects the local cluster's Kafka release. Default: what `make kafka` fetched.
	KafkaVersion string `json:"kafka_version,omitempty" yaml:"kafka_version,omitempty"`
	// TransactionVersion is the cluster's transaction.version, 1 or 2. Default 2 (1 on 3.x).
	TransactionVersion int `json:"transaction_version,omitempty" yaml:"transaction_version,omitempty"`
	// KafkaImage and ToxiproxyImage select the containers cluster's images. Default
	// fencecheck/kafka:<kafka_version> (built by `make images`) and toxiproxy in this process;
	// with an ordinary Docker setup, e.g. apache/kafka:4.1.2 and ghcr.io/shopify/toxiproxy:2.12.0.
	KafkaImage     string `json:"kafka_image,omitempty" yaml:"kafka_image,omitempty"`
	ToxiproxyImage string `json:"toxiproxy_image,omitempty" yaml:"toxiproxy_image,omitempty"`
	// Bootstrap and ToxiproxyAPI describe an external cluster.
	Bootstrap    string `json:"bootstrap,omitempty" yaml:"bootstrap,omitempty"`
	ToxiproxyAPI string `json:"toxiproxy_api,omitempty" yaml:"toxiproxy_api,omitempty"`
	// Links is how the processes' links to brokers are built: "proxy" (a toxiproxy proxy per
	// link, the default) or "conn" (toxiproxy's toxic engine inside each process's own
	// connections: no listener and no extra socket per link; see docs/faults.md).
	Links string `json:"links,omitempty" yaml:"links,omitempty"`
	// BrokerCommands is the YAML file of an external cluster's broker commands (see
	// external.Commands); without it an external cluster has no broker faults.
	BrokerCommands string `json:"broker_commands,omitempty" yaml:"broker_commands,omitempty"`
	// Security secures the client listener: "" (plaintext), tls (mutual TLS), sasl-scram
	// (SASL_PLAINTEXT) or sasl-ssl (SASL_SSL), with SCRAM. A local or containers cluster makes
	// its certificates and credentials at start; an external one takes them from the
	// environment (EnvSASLUsername and the others). Never a secret itself.
	Security string `json:"security,omitempty" yaml:"security,omitempty"`
	// UnauthorizedProcesses (1-based) authenticate as UnauthorizedUser, whom the ACLs deny
	// every transactional id: their members can never hold a role. Needs a local or
	// containers cluster with security sasl-scram or sasl-ssl.
	UnauthorizedProcesses []int `json:"unauthorized_processes,omitempty" yaml:"unauthorized_processes,omitempty"`
}

// validate names the first bad field.
func (c *ClusterSpec) Validate() error {
	if c.Kind == "" {
		c.Kind = KindEmbedded
	}
	if !slices.Contains(ClusterKinds, c.Kind) {
		return fmt.Errorf("cluster.kind: %q is not one of %s", c.Kind, strings.Join(ClusterKinds, ", "))
	}
	if c.Brokers == 0 {
		c.Brokers = 3
	}
	if c.Brokers < 1 || c.Brokers > 9 {
		return fmt.Errorf("cluster.brokers: %d, want 1 to 9", c.Brokers)
	}
	if c.TransactionVersion != 0 && c.TransactionVersion != 1 && c.TransactionVersion != 2 {
		return fmt.Errorf("cluster.transaction_version: %d, want 1 or 2", c.TransactionVersion)
	}
	if strings.HasPrefix(c.KafkaVersion, "3.") && c.TransactionVersion == 2 {
		return fmt.Errorf("cluster.transaction_version: Kafka %s has no transaction.version 2", c.KafkaVersion)
	}
	if err := validSecurity(c.Security, c.Kind); err != nil {
		return err
	}
	if len(c.UnauthorizedProcesses) > 0 {
		if c.Security != SecuritySASLScram && c.Security != SecuritySASLSSL {
			return fmt.Errorf("cluster.unauthorized_processes: needs cluster.security %s or %s (the principal is a SCRAM user)", SecuritySASLScram, SecuritySASLSSL)
		}
		if c.Kind != KindLocal && c.Kind != KindContainers {
			return fmt.Errorf("cluster.unauthorized_processes: needs a local or containers cluster, whose administrator fencecheck is (kind is %s)", c.Kind)
		}
	}
	if c.Kind == KindExternal && c.Bootstrap == "" {
		return fmt.Errorf("cluster.bootstrap: required for an external cluster")
	}
	if c.Kind != KindExternal && c.BrokerCommands != "" {
		return fmt.Errorf("cluster.broker_commands: only an external cluster runs broker commands (kind is %s)", c.Kind)
	}
	mode, err := links.ParseLinkMode(c.Links)
	if err != nil {
		return fmt.Errorf("cluster.links: %w", err)
	}
	if mode == links.LinkModeConn && c.ToxiproxyImage != "" {
		// Process links then dial brokers straight from this process, by addresses only the
		// toxiproxy container may resolve.
		return fmt.Errorf("cluster.links: conn needs toxiproxy in this process, not cluster.toxiproxy_image")
	}
	if c.Kind != KindContainers && (c.KafkaImage != "" || c.ToxiproxyImage != "") {
		return fmt.Errorf("cluster.kafka_image, cluster.toxiproxy_image: only a containers cluster runs images (kind is %s)", c.Kind)
	}
	return nil
}
