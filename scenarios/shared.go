package scenarios

import (
	"fmt"
	"slices"
	"strings"
)

// brokerFaults are the faults that act on brokers themselves rather than on a run's own links
// or members: they kill, pause, restart or isolate a broker, or move a coordinator (which on
// Apache Kafka kills its broker, and on kfake rehashes every coordinator).
var brokerFaults = []string{"kill", "pause", "restart", "isolate", "move-coordinator"}

// SharesCluster reports whether s may run on a cluster other runs use too (Options.Cluster):
// true unless its schedule can inject a broker fault. Link and Kafka-request faults act on the
// run's own process links and are healed at its end, and per-run topics keep the records
// apart; a killed, paused or restarted broker changes the cluster under every later run (its
// leaders, coordinators and logs), so such a scenario gets a cluster of its own.
func SharesCluster(s *Scenario) bool {
	for _, f := range s.Nemesis.Faults() {
		if slices.Contains(brokerFaults, f) {
			return false
		}
	}
	return true
}

// RepeatCommand is the `fencecheck run` command line that repeats one run of s, named by arg
// (a built-in name or a file), with the transport under test ("" or "real" for the real one):
// every setting that shapes the run, but not the seed, which Run appends once it knows it
// (Options.Command).
func RepeatCommand(arg string, s *Scenario, transport string) string {
	parts := []string{"fencecheck", "run", arg}
	add := func(flag string, v any, set bool) {
		if set {
			parts = append(parts, flag, ShellQuote(fmt.Sprint(v)))
		}
	}
	add("--cluster", s.Cluster.Kind, s.Cluster.Kind != KindEmbedded)
	add("--duration", s.Duration, true)
	add("--txn-version", s.Cluster.TransactionVersion, s.Cluster.TransactionVersion != 0)
	add("--kafka-version", s.Cluster.KafkaVersion, s.Cluster.KafkaVersion != "")
	add("--kafka-image", s.Cluster.KafkaImage, s.Cluster.KafkaImage != "")
	add("--toxiproxy-image", s.Cluster.ToxiproxyImage, s.Cluster.ToxiproxyImage != "")
	add("--bootstrap", s.Cluster.Bootstrap, s.Cluster.Bootstrap != "")
	add("--toxiproxy-api", s.Cluster.ToxiproxyAPI, s.Cluster.ToxiproxyAPI != "")
	add("--links", s.Cluster.Links, s.Cluster.Links != "")
	add("--broker-commands", s.Cluster.BrokerCommands, s.Cluster.BrokerCommands != "")
	// The mode only: an external cluster's credentials stay in the FENCECHECK_* variables.
	add("--security", s.Cluster.Security, s.Cluster.Security != "")
	add("--processes", s.Workload.Processes, true)
	add("--roles", s.Workload.Roles, true)
	add("--members", s.Workload.MembersPerRole, true)
	add("--transport", transport, transport != "" && transport != "real")
	return strings.Join(parts, " ")
}

// ShellQuote quotes v for a POSIX shell when it holds anything but plain word characters (an
// exec transport's command line has blanks): a stored command must repeat the run when pasted.
func ShellQuote(v string) string {
	if v != "" && strings.Trim(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:=,+-@") == "" {
		return v
	}
	return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'"
}
