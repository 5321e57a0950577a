// Package history is the one definition of a fencecheck run's history: the events the workload,
// the nemesis and the runner record, their JSON Lines encoding, and the joined, in-memory
// [History] the checker judges. It imports only the standard library, so any tool can read a
// stored run.
//
// # The file
//
// A history file holds one JSON object per line, appended as the run goes (see [Writer]).
// The first line is the header; every other line is an event. Time is int64 nanoseconds since
// the run started, read from a monotonic clock, so lines may appear slightly out of time order
// when many goroutines record at once. The format carries a version ([FormatVersion]) in the
// header; a reader refuses a newer one.
//
//	{"type":"header","time":0,"format":1,"meta":{"scenario":"handoff","seed":7,"lease_ns":2000000000,"transaction_version":2}}
//	{"type":"invoke","id":1,"time":1000,"client":0,"process":"p1","member":"m1","role":"leader","kind":"register"}
//	{"type":"ok","id":1,"time":2000,"result":{"offset":0}}
//	{"type":"invoke","id":2,"time":3000,"client":0,"process":"p1","member":"m1","role":"leader","kind":"acquire"}
//	{"type":"ok","id":2,"time":4000,"result":{"token":{"producer_id":1000,"epoch":0}}}
//	{"type":"invoke","id":3,"time":5000,"client":0,"process":"p1","member":"m1","role":"leader","kind":"write-lease","args":{"token":{"producer_id":1000,"epoch":0},"write_id":"w3"}}
//	{"type":"info","id":3,"time":9000,"error":"timeout"}
//	{"type":"invoke","id":4,"time":9500,"client":1,"process":"p1","member":"m1","role":"leader","kind":"work","args":{"token":{"producer_id":1000,"epoch":0},"write_id":"w4","work_partition":2}}
//	{"type":"fail","id":4,"time":9900,"error":"fenced","message":"write \"leader\": fenced: INVALID_PRODUCER_EPOCH"}
//	{"type":"invoke","id":5,"time":10000,"client":2,"process":"p2","member":"m2","role":"leader","kind":"describe"}
//	{"type":"ok","id":5,"time":11000,"result":{"held":true,"token":{"producer_id":1000,"epoch":1}}}
//	{"type":"fault-start","fault":1,"time":12000,"kind":"partition","targets":["p1->b1"],"desc":"cut p1 from b1"}
//	{"type":"fault-start","fault":2,"time":12500,"kind":"member-pause","process":"p2","role":"leader","member":"m2","targets":["p2/leader/m2"]}
//	{"type":"fault-end","fault":1,"time":15000,"took_hold":true}
//	{"type":"invoke","id":6,"time":20000,"client":3,"process":"final","role":"leader","kind":"final-read"}
//	{"type":"ok","id":6,"time":21000,"result":{"records":[{"offset":0,"kind":"registration","member":"m1"},{"offset":1,"kind":"lease","member":"m1","token":{"producer_id":1000,"epoch":0},"write_id":"w3"}]}}
//	{"type":"invoke","id":7,"time":22000,"client":4,"process":"final","kind":"final-read","args":{"work_partition":2}}
//	{"type":"ok","id":7,"time":23000,"result":{"records":[]}}
//
// # Operations
//
// An operation is recorded twice: an invoke when it starts and one completion when it ends
// (docs/checker.md, "What a completion means"): "ok" (it happened; here is the result), "fail" (it certainly did not happen)
// or "info" (unknown). A completion names its operation by id and carries the error class as a
// string, and what the transport said as the message; the checker interprets only
// [ErrorFenced], and never the message. An operation without a completion (a killed
// run) is pending: the reader keeps it as "info" that never returned.
//
// Which fields an operation carries depends on its kind:
//
//	kind         args                                   ok result
//	register     -                                      offset (the join sequence)
//	acquire      -                                      token (the minted token)
//	write-lease  token (minted), write_id               -
//	work         token (minted), write_id, work_partition -
//	describe     -                                      held, token (the coordinator's current pair) when held
//	read         work_partition for a work partition    records
//	final-read   work_partition for a work partition    records
//
// # Logs
//
// Reads name the committed log they scanned ([LogID]): without args.work_partition, the lease
// log of the operation's role (the role's registrations and lease records, filtered out of the
// coordination partition it shares with other roles); with it, that partition of the work
// topic, which several roles may share (each work record names its role). The reader fills
// [Args.Log] for every operation that reads or writes a log, so the checker never guesses.
//
// # Faults
//
// The nemesis records each fault as a window: "fault-start" (fault id, kind, targets,
// description, "step", the number of the scripted step it carries out, when the header's
// meta lists a script, and "spec", the fault as injected in the script's one-line form with
// its targets resolved to what it acted on, so that replaying it repeats the fault) and "fault-end" (with took_hold when the nemesis verified that the fault
// held). A paused member is a window of kind [KindMemberPause] that also names the process,
// role and member; its window is the time the member was actually frozen, from reaching its
// pause point until it resumed, not the time the freeze was armed or asked for. A window
// without an end lasted until the run stopped.
package history
