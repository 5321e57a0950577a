package checker

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/fencecheck/fencecheck/checker/history"
)

// The names of the guarantees of docs/checker.md ("The guarantees"), stable in results, reports and tests.
const (
	TokenMonotonic     = "token-monotonic"
	FencedStaleWrite   = "fenced-stale-write"
	DescribeConsistent = "describe-consistent"
	LogTokenOrder      = "log-token-order"
	NoLostWrite        = "no-lost-write"
	NoZombieCommit     = "no-zombie-commit"
	RegistrationOrder  = "registration-order"
	ReadPrefix         = "read-prefix"
	ReadMonotonic      = "read-monotonic"
	NoTornTxn          = "no-torn-txn"
	// SpuriousFence is a fence of the current holder that nothing explains: a liveness bug,
	// not a safety one, so it is advisory by default (see Options.Advisory).
	SpuriousFence = "spurious-fence"
	// WellFormed checks the recording itself (unique write ids, writes under a token, ...).
	// Its failure is a harness error.
	WellFormed = "well-formed"
)

// Guarantees lists the ten named guarantees in the order of docs/checker.md ("The guarantees").
var Guarantees = []string{
	TokenMonotonic, FencedStaleWrite, DescribeConsistent, LogTokenOrder, NoLostWrite,
	NoZombieCommit, RegistrationOrder, ReadPrefix, ReadMonotonic, NoTornTxn,
}

// meanings are the guarantees' one-line meanings, shortened from docs/checker.md.
var meanings = map[string]string{
	TokenMonotonic:     "each acquire's token is unique and above every token acquired before it",
	FencedStaleWrite:   "no write under a token is acknowledged once a newer token was acquired or the token was fenced",
	DescribeConsistent: "a describe reports the last token minted before it, or no holder only while none was minted",
	LogTokenOrder:      "in every final log, records carry non-decreasing tokens in offset order",
	NoLostWrite:        "every acknowledged write is exactly once in its final log",
	NoZombieCommit:     "no write reported failed shows up in a committed read",
	RegistrationOrder:  "each acknowledged registration is in its role's log once, at its offset, in real-time order",
	ReadPrefix:         "every read returns a prefix of the final log; a settled read the whole of it",
	ReadMonotonic:      "one process's successive reads of a log never shrink",
	NoTornTxn:          "no committed read shows some but not all of a transaction's records",
	SpuriousFence:      "no current holder is fenced without a newer acquire, an unknown outcome or a long-open transaction to explain it (liveness, advisory)",
	WellFormed:         "the recording itself is well formed (unique write ids, writes under a token, ...)",
}

// Meaning is the one-line meaning of the guarantee or check name ("" when name is none).
func Meaning(name string) string { return meanings[name] }

// One sentinel per check, so callers can branch with errors.Is on Results.Err.
var (
	ErrTokenMonotonic     = errors.New(TokenMonotonic)
	ErrFencedStaleWrite   = errors.New(FencedStaleWrite)
	ErrDescribeConsistent = errors.New(DescribeConsistent)
	ErrLogTokenOrder      = errors.New(LogTokenOrder)
	ErrNoLostWrite        = errors.New(NoLostWrite)
	ErrNoZombieCommit     = errors.New(NoZombieCommit)
	ErrRegistrationOrder  = errors.New(RegistrationOrder)
	ErrReadPrefix         = errors.New(ReadPrefix)
	ErrReadMonotonic      = errors.New(ReadMonotonic)
	ErrNoTornTxn          = errors.New(NoTornTxn)
	ErrSpuriousFence      = errors.New(SpuriousFence)
	ErrWellFormed         = errors.New(WellFormed)
)

var sentinels = map[string]error{
	TokenMonotonic: ErrTokenMonotonic, FencedStaleWrite: ErrFencedStaleWrite,
	DescribeConsistent: ErrDescribeConsistent, LogTokenOrder: ErrLogTokenOrder,
	NoLostWrite: ErrNoLostWrite, NoZombieCommit: ErrNoZombieCommit,
	RegistrationOrder: ErrRegistrationOrder, ReadPrefix: ErrReadPrefix,
	ReadMonotonic: ErrReadMonotonic, NoTornTxn: ErrNoTornTxn, SpuriousFence: ErrSpuriousFence, WellFormed: ErrWellFormed,
}

// Result is the judgement of one check (docs/extending.md, "A check") or of one coverage
// requirement.
type Result struct {
	Name    string  `json:"name"`
	Verdict Verdict `json:"verdict"`
	// Advisory results are reported but do not count towards the run's verdict.
	Advisory  bool      `json:"advisory,omitempty"`
	Anomalies []Anomaly `json:"anomalies,omitempty"`
	// FirstAt is the history time (ns since the run's start) at which the earliest anomaly,
	// capped ones included, became observable: when the last of its operations other than
	// final reads completed. Zero when no anomaly names such an operation.
	FirstAt int64 `json:"first_at_ns,omitempty"`
	// Details are check-specific facts: what was checked, what was skipped and why, counts.
	Details map[string]any `json:"details,omitempty"`
}

// Anomaly is one violation: the guarantee, the operations (history op ids) and records
// (offsets in Log) that show it, and one sentence on what went wrong.
type Anomaly struct {
	Guarantee   string  `json:"guarantee"`
	Role        string  `json:"role,omitempty"`
	Log         string  `json:"log,omitempty"`
	Ops         []int64 `json:"ops,omitempty"`
	Offsets     []int64 `json:"offsets,omitempty"`
	Explanation string  `json:"explanation"`
}

// ResultsFormat is the version of the results.json format.
const ResultsFormat = 1

// Results is the outcome of checking one history: what results.json holds.
type Results struct {
	Format   int     `json:"format"`
	Verdict  Verdict `json:"verdict"`
	ExitCode int     `json:"exit_code"`
	// Error describes a harness error (VerdictError).
	Error   string       `json:"error,omitempty"`
	Run     history.Meta `json:"run"`
	History Stats        `json:"history"`
	// Checks are the guarantees (in the order of Guarantees), spurious-fence and well-formed.
	Checks []Result `json:"checks"`
	// Coverage are the coverage requirements: final-read and ops-succeeded always, plus
	// every promise.
	Coverage []Result `json:"coverage"`
	// Exposure is the measured split-brain exposure (not a verdict).
	Exposure Exposure `json:"exposure"`
	// Liveness is how well the roles were held and renewed (advisory, not a verdict).
	Liveness Liveness `json:"liveness"`
	// Visualized are the roles whose porcupine visualization was written.
	Visualized []string `json:"visualized,omitempty"`
	Timings    Timings  `json:"timings"`
}

// Stats summarize the history that was checked.
type Stats struct {
	Format        int   `json:"format"`
	Ops           int   `json:"ops"`
	Pending       int   `json:"pending"`
	Faults        int   `json:"faults"`
	Roles         int   `json:"roles"`
	Logs          int   `json:"logs"`
	Records       int   `json:"records"` // records in all reads, final reads included
	End           int64 `json:"end_ns"`
	Truncated     bool  `json:"truncated,omitempty"`
	TruncatedLine int   `json:"truncated_line,omitempty"`
}

// Timings are how long each phase of Check took, in nanoseconds. The linear checks run while
// the model search (Porcupine, then Explain) does, so Linear overlaps the other two.
type Timings struct {
	Index     int64 `json:"index_ns"`
	Linear    int64 `json:"linear_ns"`
	Porcupine int64 `json:"porcupine_ns"`
	Explain   int64 `json:"explain_ns"` // attribution and visualization of failing roles
	Total     int64 `json:"total_ns"`
}

// Check returns the check or coverage result named name, or nil.
func (r *Results) Check(name string) *Result {
	for i := range r.Checks {
		if r.Checks[i].Name == name {
			return &r.Checks[i]
		}
	}
	for i := range r.Coverage {
		if r.Coverage[i].Name == name {
			return &r.Coverage[i]
		}
	}
	return nil
}

// Err returns nil when the run is valid, and otherwise an error that joins the sentinel of
// every invalid non-advisory check (ErrFencedStaleWrite, ...), so errors.Is names them. A run
// that is only unknown or inconclusive returns an error wrapping no sentinel.
func (r *Results) Err() error {
	if r.Verdict == VerdictValid {
		return nil
	}
	var errs []error
	for _, c := range r.Checks {
		if c.Verdict == VerdictInvalid && !c.Advisory {
			errs = append(errs, fmt.Errorf("%w: %d anomalies", sentinels[c.Name], anomalyCount(&c)))
		}
	}
	if len(errs) == 0 {
		return fmt.Errorf("run is %s", r.Verdict)
	}
	return errors.Join(errs...)
}

func anomalyCount(c *Result) int {
	if n, ok := c.Details["anomalies"].(int); ok {
		return n
	}
	return len(c.Anomalies)
}

// SetHarnessError records a harness failure (the cluster never became healthy, the run
// panicked): the verdict becomes error unless the history already showed a violation.
func (r *Results) SetHarnessError(err error) {
	if err == nil {
		return
	}
	r.Error = err.Error()
	r.Verdict = Worst(r.Verdict, VerdictError)
	r.ExitCode = ExitCode(r.Verdict)
}

// WriteFile writes the results as indented JSON (results.json).
func (r *Results) WriteFile(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode results: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	return nil
}

// ReadResultsFile reads a results.json that WriteFile wrote.
func ReadResultsFile(path string) (*Results, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read results: %w", err)
	}
	var r Results
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("decode results %s: %w", path, err)
	}
	return &r, nil
}

// NotValid names what made the run not valid, one line each: every non-advisory check and
// coverage requirement whose verdict is not valid ("no-lost-write: invalid"), and the first
// line of a harness error ("error: ..."). It is empty for a valid run.
func (r *Results) NotValid() []string {
	var why []string
	for _, list := range [][]Result{r.Checks, r.Coverage} {
		for _, c := range list {
			if c.Verdict != VerdictValid && !c.Advisory {
				why = append(why, c.Name+": "+string(c.Verdict))
			}
		}
	}
	if r.Error != "" {
		msg, _, _ := strings.Cut(r.Error, "\n")
		why = append(why, "error: "+msg)
	}
	return why
}
