// Package nemesis injects fencecheck's faults — on toxiproxy links, on brokers, on members and
// on transaction coordinators — on a schedule, records every injection as a fault window in the
// history, and heals everything at the end.
//
// # Model
//
// A fault is described as data, a [Spec]: a registered fault name ([Faults] lists them), a
// [Target] (which processes, brokers or role) and [Params] (latency, mode, ...). Specs are what
// scenario files hold; [Spec.Validate] names the bad field.
//
// An [Injection] is one fault applied once. Its lifecycle, after CockroachDB's failure
// injection, is
//
//	Setup → Inject → WaitForInjected → Recover → WaitForRecovered → Cleanup
//
// and the Injection is a state machine that refuses a call in the wrong state ([ErrWrongState]).
// Setup resolves the target to concrete links, brokers or members and claims them: at most one
// injection holds a target at a time ([ErrTargetBusy]). Inject opens a fault window in the
// history (fault-start, written before anything is touched, so a crash leaves the window open);
// Recover closes it (fault-end, with took_hold when WaitForInjected saw the fault hold).
// Cleanup recovers first when the fault is still injected. [Injection.Heal] does whatever of
// Recover, WaitForRecovered and Cleanup is left, and may be called any number of times.
//
// "Took hold" is checked against the cluster, not assumed: a probe (a Kafka ApiVersions request
// sent over the process's own link, or straight to a broker) is refused, cut off or unanswered;
// toxiproxy lists the toxic on every link; the cluster reports the broker killed; a killed
// broker's open connections are closed; the member freezer reports the member frozen.
//
// # Running
//
// A [Nemesis] drives injections from a [Schedule]: random (every interval, a fault and targets
// picked with the run's seeded RNG, then a stable period with nothing injected) or scripted (a
// timeline: "at 5s partition p1 from coordinator of role-3 for 12s"). When the run's context
// ends, or a fault fails in a way the nemesis cannot work around, [Nemesis.Run] heals every
// fault and confirms the cluster is healthy. Healing runs on [context.WithoutCancel] with its
// own timeout, so a cancelled run still leaves no toxic, no link down, no broker paused or
// killed and no member frozen behind.
//
// The nemesis does not import the transport or the workload: the caller gives it the role →
// (transactional id, partition) mapping ([Env.Resolve]) and a [MemberFreezer].
package nemesis
