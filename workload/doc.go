// Package workload drives fencecheck's subject through the life of a leader while the nemesis
// injects faults, and records every call into the history (package checker/history).
//
// # Processes, roles, members
//
// A run has Config.Processes processes, each one transport.BrokerTransport dialing the cluster
// through its own links (cluster.Cluster.Links), so the nemesis can cut one process from one
// broker. Config.Roles roles (r1, r2, ...) each have Config.MembersPerRole members (m1, m2,
// ...), placed on distinct processes because a transport keeps one holding per role. A member
// registers once, then loops:
//
//   - as a candidate it looks at its role now and then (reads the role's records, or
//     describes it) and acquires when the role looks free (no lease renewed within its
//     duration by the member's own clock, or never held), or at its contention moments,
//     deposing the holder;
//   - as a holder it writes its lease at once and then every Lease/3, and writes work records
//     (fenced application writes, each a transaction through the bound producer to the work
//     topic) at Load.WorkRate;
//   - when a write fails (fenced, or failed, or unknown: the transport drops the holding on
//     any write error) or an acquire fails, it backs off with jitter and becomes a candidate.
//
// Readers read and describe random roles and read random work partitions. After Run, the
// runner heals the faults and calls FinalReads, which reads every role's lease log and every
// work partition as the reference for the checker.
//
// # Recording
//
// One recording client turns transport calls into history events: an invoke before the call,
// a completion after it, typed by transport.Classify, the one place that decides ok / fail /
// unknown. Every operation has a run-unique id; lease records carry it as Lease.Seq and work
// records as their write id, so the checker matches records to operations ("w<id>" in the
// history). Each actor (member, reader) has a porcupine client id and takes a fresh one after
// an operation with an unknown outcome. The history is appended as the run goes, flushed
// every 100 ms and at the end of each phase, and synced after the final reads, so a killed
// run leaves a checkable file.
//
// # Generator
//
// Every choice (when a member looks, reads or describes, contends, how long it backs off,
// when it writes work, what a reader does) comes from a Plan: one math/rand/v2 stream per
// kind of choice and actor, derived from the run's seed. The same seed and Config give the
// same choices; the cluster decides only which of them get used.
//
// # Pause points
//
// Freeze lets the nemesis freeze a member (or the current holder of a role) at a named Point:
// after an acquire, inside a lease write before its commit, or before a work write. The member
// stops there for the given time and then goes on with its stale view: the classic fencing
// test of a holder that sleeps past its lease and wakes up believing it still leads. Each
// pause is recorded as a window of kind history.KindMemberPause.
//
// # Scale
//
// Each process costs 35–53 file descriptors through in-process links on the embedded cluster
// (four per broker connection: client, two proxy sockets, kfake's; more roles per process
// reach more brokers); New refuses a run that RLIMIT_NOFILE cannot hold, with the numbers. kfake keeps every record in memory and
// every read scans from the log start: Config.Retention bounds both on long load runs.
package workload
