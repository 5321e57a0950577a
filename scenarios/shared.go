package scenarios

import (
	"strings"

	"github.com/fencecheck/fencecheck/nemesis"
)

// SharesCluster reports whether s may run on a cluster other runs use too (Options.Cluster):
// true unless its schedule can inject a broker fault. Link and Kafka-request faults act on the
// run's own process links and are healed at its end, and per-run topics keep the records
// apart; a killed, paused or restarted broker changes the cluster under every later run (its
// leaders, coordinators and logs), so such a scenario gets a cluster of its own.
func SharesCluster(s *Scenario) bool {
	for _, f := range s.Nemesis.Faults() {
		if len(nemesis.BrokerOps(f)) > 0 {
			return false
		}
	}
	return true
}

// ShellQuote quotes v for a POSIX shell when it holds anything but plain word characters (an
// exec transport's command line has blanks): a stored command must repeat the run when pasted.
func ShellQuote(v string) string {
	if v != "" && strings.Trim(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:=,+-@") == "" {
		return v
	}
	return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'"
}
