// Package cluster gives fencecheck a Kafka cluster to attack: the Cluster
// interface, its links, and what every backend shares.
//
// A Cluster hands out bootstrap addresses, lists its brokers with role hints
// (controller, coordinator of a transactional id or group, leader of a
// partition), and controls brokers: Kill, Pause, Resume, Restart. A backend
// that cannot do one of these returns an error matching ErrUnsupported; it
// never does nothing quietly. Backends live in sub-packages:
//
//   - embedded: kfake in this process (fast, not Kafka; see its deviations).
//   - local: Apache Kafka JVMs on loopback from Maven-fetched jars.
//   - containers: the same Kafka, each JVM in a container (testcontainers-go,
//     host networking).
//   - external: a cluster you run, optionally with your toxiproxy server.
//
// Links. Every process (one transport instance) reaches every broker through
// its own toxiproxy proxy, the link "p3→b1" (toxiproxy name "p3-b1"). A
// process gets a dial function from Cluster.Links and passes it to
// kgo.Dialer; the function receives the broker's advertised address and
// connects to the process's proxy for that broker, and refuses addresses of
// no known broker (ErrUnknownAddress) rather than bypass the links. The local
// and containers backends also route the harness's admin path ("admin→b1") and
// broker-to-broker traffic ("b1→b2", replication and Raft) through links,
// which is how a broker is isolated from its peers; a cluster without them
// may isolate a broker by its own means instead (Isolator: the external
// backend's isolate command).
//
// The nemesis drives links through Network: by (process, broker), by name,
// or all at once; a Link can be disabled (connections refused, open ones
// closed), given toxics (latency, timeout as a black hole, reset_peer, ...)
// and healed. The same HTTP client serves an in-process toxiproxy server (the
// default, its API on a loopback port) and an external one.
//
// Blocking calls take a context first; loggers are passed in (nil discards).
package cluster
