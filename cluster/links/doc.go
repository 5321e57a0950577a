// Package links is fencecheck's fault mechanism: the paths between processes
// and brokers, and the faults that act on them. The nemesis decides what to
// break and when (policy); this package breaks it; the cluster backends start,
// kill and pause brokers and build their Network from this package.
//
// Links. Every process (one transport instance) reaches every broker through
// its own toxiproxy proxy, the link "p3→b1" (toxiproxy name "p3-b1"). A
// process gets a dial function from Cluster.Links and passes it to
// kgo.Dialer; the function receives the broker's advertised address and
// connects to the process's proxy for that broker, and refuses addresses of
// no known broker (ErrUnknownAddress) rather than bypass the links. The local
// and containers backends also route the harness's admin path ("admin→b1") and
// broker-to-broker traffic ("b1→b2", replication and Raft) through links,
// which is how a broker is isolated from its peers.
//
// The nemesis drives links through Network: by (process, broker), by name,
// or all at once; a Link can be disabled (connections refused, open ones
// closed), given toxics (latency, timeout as a black hole, reset_peer, ...)
// and healed. The same HTTP client serves an in-process toxiproxy server (the
// default, its API on a loopback port) and an external one.
//
// Kafka-aware faults (KafkaFault) read every connection of a process as Kafka
// frames, whatever carries it, and drop, delay, hold, duplicate or answer with
// an error the requests that match a spec.
//
// Blocking calls take a context first; loggers are passed in (nil discards).
package links
