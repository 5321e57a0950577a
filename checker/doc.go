// Package checker judges a fencecheck history against docs/checker.md: the ten named guarantees,
// spurious fences, coverage, and split-brain exposure. It reads a history (package history) and
// nothing else, so a stored run can be re-checked anywhere, offline.
//
// # How a history is checked
//
// Check first indexes the history: operations by role and by log, writes by write id, the
// final committed log of every log (the last successful final read), and for every write the
// first committed read that returned its record. Reads that are prefixes of the final log, the
// normal case, cost one comparison pass; only the others are walked record by record.
//
// The linear checks run next (log-token-order, no-lost-write, no-zombie-commit,
// registration-order, read-prefix, read-monotonic). They need no search. Two of their rules
// close gaps between what the log shows and what the operations did:
//
//   - log-token-order: every committed record's stamped token equals the token its writer's
//     operation ran under (the log order trusts the stamp, the model the operation; a record
//     stamped otherwise is a violation), and the order is judged on the writers' tokens, so
//     an old holder's record stamped with a newer token cannot hide a reorder.
//   - registration-order: a registration that failed (certainly not applied) is not in the
//     log: a member of the run with more registration records than registrations that did
//     not fail is a violation, including a member whose every registration failed.
//
// Then the porcupine model of package model runs per role, in a pool of Options.Workers
// searches. A role whose operations linearize places in an order the model accepts, without
// going back, needs no search: that order proves it (see linearize). Writes of unknown
// outcome are resolved from the committed log before the search: a write a committed read
// returned did commit (it ends no later than that read), one the final log lacks did not (a
// credit). Only acquires of unknown outcome stay nondeterministic, as credits. A search that
// times out is unknown, never valid. Only the roles that come out Illegal are searched
// again: with the lenient model (is the only fault a spurious fence?), by witnesses and
// projections (which guarantee, which operations), and verbosely for porcupine's
// visualization with the fault windows drawn in.
//
// # Well-formedness
//
// The index also checks the recording itself (well-formed): every time in [0,
// history.MaxTime], no operation that completes before it is invoked, unique write ids,
// writes under a token, every operation naming its role and log. A violation is a harness
// error, never a model verdict: a role with an ill-formed operation is not searched (its
// model-checked guarantees are error, the role listed under ill_formed_roles), and an anomaly
// of any other check that cites an ill-formed operation is dropped, that check becoming error
// (ill_formed_anomalies). The well-formed anomaly is the one message that says what is wrong.
//
// # Verdicts
//
// Each check's verdict is invalid when it found anomalies, unknown when it could not decide,
// inconclusive when it lacked what it needs (a final read), and valid otherwise. The run's
// verdict is the worst non-advisory check or coverage requirement (see Verdict.Worse), and
// ExitCode maps it to Jepsen's exit codes.
package checker
