package kraft

import (
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
)

// peerHost is the name broker i advertises for its REPL and CONTROLLER
// listeners. Each JVM resolves these names through its own hosts file
// (-Djdk.net.hosts.file) so that, seen from broker i, broker j lives at the
// address of the proxy i→j: every broker-to-broker connection then goes
// through its own link.
func peerHost(id int32) string { return fmt.Sprintf("fc-b%d", id) }

// peerIP is where the proxies of link from→to listen: 127.77.<from+1>.<to+1>.
// All of 127.0.0.0/8 is loopback on Linux.
func peerIP(from, to int32) string { return fmt.Sprintf("127.77.%d.%d", from+1, to+1) }

// testSettings are the broker settings for fencing tests (docs/clusters.md, "Broker settings"), for
// n brokers. Config.Configs override them.
func testSettings(n int) map[string]string {
	rf := min(3, n)
	isr := min(2, rf)
	return map[string]string{
		"default.replication.factor":                       itoa(rf),
		"min.insync.replicas":                              itoa(isr),
		"offsets.topic.replication.factor":                 itoa(rf),
		"transaction.state.log.replication.factor":         itoa(rf),
		"transaction.state.log.min.isr":                    itoa(isr),
		"share.coordinator.state.topic.replication.factor": itoa(rf),
		"share.coordinator.state.topic.min.isr":            itoa(isr),
		"unclean.leader.election.enable":                   "false",
		"auto.leader.rebalance.enable":                     "false",
		"group.initial.rebalance.delay.ms":                 "0",
		// Pipeline members are made zombies by being cut off past their session timeout:
		// allow short sessions, in both group protocols (the consumer protocol's is the
		// group's, 45 s by default, and its floor 45 s too). 3 s, the pipeline workload's
		// classic session: the catalogue's zombies are frozen for 4.5 s, and at 6 s no
		// consumer-protocol member was ever fenced.
		"group.min.session.timeout.ms":                                "1000",
		"group.consumer.min.session.timeout.ms":                       "2000",
		"group.consumer.session.timeout.ms":                           "3000",
		"group.consumer.min.heartbeat.interval.ms":                    "500",
		"group.consumer.heartbeat.interval.ms":                        "1000",
		"transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
		"transaction.max.timeout.ms":                                  "3600000",
		// Like kfake's default, so both backends agree on topic creation.
		"auto.create.topics.enable": "false",
		"num.partitions":            "1",
		// Fewer internal partitions than the 50 default: the first
		// FindCoordinator creates them all, RF 3, on a 2-core box.
		"transaction.state.log.num.partitions": "8",
		"offsets.topic.num.partitions":         "8",
		// Its 128 MiB default sits on a 512 MiB heap.
		"log.cleaner.dedupe.buffer.size":    "8388608",
		"log.cleaner.threads":               "1",
		"num.network.threads":               "2",
		"num.io.threads":                    "4",
		"background.threads":                "4",
		"num.recovery.threads.per.data.dir": "1",
	}
}

// clientProtocol is the CLIENT listener's security protocol.
func (c *Cluster) clientProtocol() string {
	if c.sec == nil {
		return "PLAINTEXT"
	}
	return c.sec.protocol()
}

func itoa(i int) string { return fmt.Sprint(i) }

// serverProperties renders node's server.properties.
func (c *Cluster) serverProperties(n *node) string {
	var voters []string
	for _, m := range c.nodes {
		voters = append(voters, fmt.Sprintf("%d@%s:%d", m.id, peerHost(m.id), m.ctrlPort))
	}
	p := map[string]string{
		"process.roles":                  "broker,controller",
		"node.id":                        fmt.Sprint(n.id),
		"controller.quorum.voters":       strings.Join(voters, ","),
		"controller.listener.names":      "CONTROLLER",
		"inter.broker.listener.name":     "REPL",
		"listener.security.protocol.map": "CLIENT:" + c.clientProtocol() + ",REPL:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"listeners":                      fmt.Sprintf("CLIENT://%s,REPL://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", n.clientBind, n.replPort, n.ctrlPort),
		"advertised.listeners":           fmt.Sprintf("CLIENT://%s,REPL://%s:%d,CONTROLLER://%s:%d", n.clientAdv, peerHost(n.id), n.replPort, peerHost(n.id), n.ctrlPort),
		"log.dirs":                       n.dataDir,
	}
	maps.Copy(p, testSettings(len(c.nodes)))
	if c.sec != nil {
		maps.Copy(p, c.sec.properties())
	}
	maps.Copy(p, c.cfg.Configs)
	var b strings.Builder
	b.WriteString("# Written by fencecheck for this run only.\n")
	for _, k := range slices.Sorted(maps.Keys(p)) {
		fmt.Fprintf(&b, "%s=%s\n", k, p[k])
	}
	return b.String()
}

// hostsFile renders node's hosts file: its own name on loopback (it binds
// its listeners there), every peer at the proxy from this node to it, and the
// names the JVM may look up itself (a hosts file replaces DNS entirely: a
// name missing here does not resolve).
func (c *Cluster) hostsFile(n *node) string {
	var b strings.Builder
	b.WriteString("127.0.0.1 localhost\n::1 localhost\n")
	if h, err := os.Hostname(); err == nil && h != "" && net.ParseIP(h) == nil {
		fmt.Fprintf(&b, "127.0.0.1 %s\n", h)
	}
	for _, m := range c.nodes {
		ip := peerIP(n.id, m.id)
		if m.id == n.id {
			ip = "127.0.0.1"
		}
		fmt.Fprintf(&b, "%s %s\n", ip, peerHost(m.id))
	}
	return b.String()
}
