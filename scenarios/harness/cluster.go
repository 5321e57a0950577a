package harness

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/cluster/containers"
	"github.com/fencecheck/fencecheck/cluster/embedded"
	"github.com/fencecheck/fencecheck/cluster/external"
	"github.com/fencecheck/fencecheck/cluster/links"
	"github.com/fencecheck/fencecheck/cluster/local"
	"github.com/fencecheck/fencecheck/scenarios"
)

// StartCluster starts (or, for external, connects to) the cluster spec describes, with its
// broker logs in logsDir. It returns once the cluster is healthy; on error nothing is left
// running.
func StartCluster(ctx context.Context, spec scenarios.ClusterSpec, logsDir string, log *slog.Logger) (cluster.Cluster, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	mode := links.LinkMode(spec.Links)
	switch spec.Kind {
	case scenarios.KindEmbedded:
		return embedded.New(ctx, embedded.Options{Brokers: spec.Brokers, TxnVersion: spec.TransactionVersion, Logger: log,
			Network: links.NetworkOptions{ProcessLinks: mode}})
	case scenarios.KindLocal:
		return local.New(ctx, local.Options{Version: spec.KafkaVersion, Brokers: spec.Brokers,
			TxnVersion: spec.TransactionVersion, LogsDir: logsDir, Logger: log, Security: spec.Security,
			Network: links.NetworkOptions{ProcessLinks: mode}})
	case scenarios.KindContainers:
		return containers.New(ctx, containers.Options{Version: spec.KafkaVersion, KafkaImage: spec.KafkaImage,
			ToxiproxyImage: spec.ToxiproxyImage, Brokers: spec.Brokers, TxnVersion: spec.TransactionVersion,
			LogsDir: logsDir, Logger: log, Security: spec.Security,
			Network: links.NetworkOptions{ProcessLinks: mode}})
	case scenarios.KindExternal:
		bootstrap := bootstrapList(spec.Bootstrap)
		var cmds external.Commands
		if spec.BrokerCommands != "" {
			var err error
			if cmds, err = external.LoadCommands(spec.BrokerCommands); err != nil {
				return nil, fmt.Errorf("cluster.broker_commands: %w", err)
			}
		}
		sec, err := externalSecurity(spec.Security)
		if err != nil {
			return nil, err
		}
		return external.New(ctx, external.Options{Bootstrap: bootstrap,
			Network: links.NetworkOptions{Toxiproxy: spec.ToxiproxyAPI, ProcessLinks: mode, Logger: log}, Logger: log,
			Commands: cmds, LogsDir: logsDir, Security: sec})
	}
	return nil, fmt.Errorf("cluster.kind %q: %w", spec.Kind, cluster.Unsupported(spec.Kind, "start", "unknown kind"))
}

// bootstrapList splits cluster.bootstrap ("host:port,host:port") into its addresses.
func bootstrapList(s string) []string {
	var out []string
	for _, b := range strings.Split(s, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// ToxiproxyVersion is the toxiproxy release a containers cluster's toxiproxy image runs.
const ToxiproxyVersion = containers.ToxiproxyVersion
