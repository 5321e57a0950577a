package checker

// Verdict is the judgement of one check, of a coverage requirement, or of a whole run
// (docs/checker.md, "Verdicts and exit codes").
type Verdict string

// Verdicts, from best to worst (see Worse).
const (
	// VerdictValid: the check held and had something to check.
	VerdictValid Verdict = "valid"
	// VerdictNotCovered: a check had nothing to judge because the run could not exercise it
	// (describe-consistent when no describe completed, as with a client that cannot
	// describe). It is a check's verdict, never a run's: it counts as valid for the run, and
	// reports show it apart, so it is never mistaken for a pass.
	VerdictNotCovered Verdict = "not-covered"
	// VerdictInconclusive: nothing was violated, but coverage was missing (no final read, no
	// fault took hold, no handoff although promised...), so the pass would be vacuous.
	VerdictInconclusive Verdict = "inconclusive"
	// VerdictUnknown: the check could not decide (a porcupine timeout, a checker panic,
	// tokens that cannot be compared).
	VerdictUnknown Verdict = "unknown"
	// VerdictError: the harness failed (a history that cannot be read, an inconsistent
	// recording, a cluster that never became healthy).
	VerdictError Verdict = "error"
	// VerdictInvalid: a guarantee was violated.
	VerdictInvalid Verdict = "invalid"
)

// Exit codes besides those of verdicts (see ExitCode).
const (
	// ExitUsage is the exit code of a usage error: bad flags, a bad scenario file.
	ExitUsage = 254
	// ExitHarness is the exit code of a harness error (VerdictError).
	ExitHarness = 255
)

func (v Verdict) rank() int {
	switch v {
	case VerdictValid, VerdictNotCovered:
		return 0
	case VerdictInconclusive:
		return 1
	case VerdictUnknown:
		return 2
	case VerdictError:
		return 3
	case VerdictInvalid:
		return 4
	}
	return 3 // an unknown verdict string is a harness error
}

// Worse reports whether v is worse than w. The order is invalid > error > unknown >
// inconclusive > valid: docs/checker.md ("Verdicts and exit codes") orders the four check verdicts; a harness error ranks
// below invalid because a violation found in the recorded history is real whatever failed
// afterwards, and above the rest so that CI sees a broken harness.
func (v Verdict) Worse(w Verdict) bool { return v.rank() > w.rank() }

// Worst returns the worst of vs, or VerdictValid when vs is empty.
func Worst(vs ...Verdict) Verdict {
	worst := VerdictValid
	for _, v := range vs {
		if v.Worse(worst) {
			worst = v
		}
	}
	return worst
}

// ExitCode returns the process exit code of a run with verdict v, following Jepsen: valid 0,
// invalid 1, unknown or inconclusive 2, harness error 255.
func ExitCode(v Verdict) int {
	switch v {
	case VerdictValid, VerdictNotCovered:
		return 0
	case VerdictInvalid:
		return 1
	case VerdictUnknown, VerdictInconclusive:
		return 2
	}
	return ExitHarness
}
