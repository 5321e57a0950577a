// Package checker judges a fencecheck history against docs/checker.md: the nine named guarantees,
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
// registration-order, read-prefix, read-monotonic). They need no search.
//
// Then the porcupine model of package model runs per role, in a pool of Options.Workers
// searches. Writes of unknown outcome are resolved from the committed log before the search: a
// write a committed read returned did commit (it ends no later than that read), one the final
// log lacks did not (a credit). Only acquires of unknown outcome stay nondeterministic, as
// credits. A search that times out is unknown, never valid. Only the roles that come out
// Illegal are searched again: with the lenient model (is the only fault a spurious fence?),
// by witnesses and projections (which guarantee, which operations), and verbosely for
// porcupine's visualization with the fault windows drawn in.
//
// # Verdicts
//
// Each check's verdict is invalid when it found anomalies, unknown when it could not decide,
// inconclusive when it lacked what it needs (a final read), and valid otherwise. The run's
// verdict is the worst non-advisory check or coverage requirement (see Verdict.Worse), and
// ExitCode maps it to Jepsen's exit codes.
package checker
