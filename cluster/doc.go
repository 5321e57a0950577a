// Package cluster gives fencecheck a Kafka cluster to attack: the Cluster
// interface, and what every backend shares (health, security, errors).
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
// Links. Every process reaches every broker through its own link, and the
// nemesis's faults act on links; both live in package links (the mechanism),
// which every backend builds its Network from. A cluster without peer links
// may isolate a broker by its own means instead (Isolator: the external
// backend's isolate command).
//
// Blocking calls take a context first; loggers are passed in (nil discards).
package cluster
