package checker

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/fencecheck/fencecheck/checker/history"
)

// ErrOptions marks invalid Options (a usage error: exit code ExitUsage).
var ErrOptions = errors.New("invalid checker options")

// Defaults for zero Options fields.
const (
	DefaultTimeout      = 10 * time.Second
	DefaultMaxAnomalies = 100
)

// DefaultAdvisory are the checks that are advisory when Options.Advisory is nil.
var DefaultAdvisory = []string{SpuriousFence}

// Options configure Check. The zero value is usable: every zero field takes the default its
// comment names.
type Options struct {
	// Timeout bounds each role's porcupine search; a search that runs out is unknown, never
	// valid. Zero means DefaultTimeout.
	Timeout time.Duration
	// Workers is how many roles are searched at once. Porcupine starts every partition at once
	// when it partitions by itself, which ran a 1M-operation history out of memory; the checker
	// partitions by role and feeds a bounded pool instead. Zero means GOMAXPROCS.
	Workers int
	// LeaseDuration is the transport's lease (= transaction timeout). The history header's
	// lease_ns wins when present. It decides whether a fenced write stayed open long enough to
	// be aborted by timeout, and how long a holder believes it holds (exposure). Zero (and
	// none in the header) means unknown: no fence is then called spurious.
	LeaseDuration time.Duration
	// Promises are coverage requirements beyond final-read and ops-succeeded, added to those
	// the history header names. See Promises for the known names.
	Promises []string
	// Advisory names checks whose violations are reported but do not make the run invalid
	// (read-monotonic can be allowed by policy after leader changes). Nil means
	// DefaultAdvisory; an empty non-nil slice makes every check count.
	Advisory []string
	// Visualize, when set, is called for every role whose model check failed, and receives
	// porcupine's HTML visualization of that role with the fault windows drawn as annotations.
	// It may be called for several roles at once. The caller owns where a role's page goes
	// (a run directory names it, so the report can link to it); the checker only promises
	// that recorded text in the page cannot run as script.
	Visualize func(role string) (io.WriteCloser, error)
	// MaxAnomalies caps the anomalies kept per check (the count is in Details). Zero means
	// DefaultMaxAnomalies.
	MaxAnomalies int
	// Logger receives progress and problems. Nil discards.
	Logger *slog.Logger
}

// config is Options with defaults applied and the history's metadata merged in.
type config struct {
	timeout      time.Duration
	workers      int
	lease        int64 // ns, 0 = unknown
	promises     []string
	advisory     map[string]bool
	visualize    func(role string) (io.WriteCloser, error)
	maxAnomalies int
	log          *slog.Logger
	hashedPIDs   bool
	// meta is the history's header: which process speaks which transaction version
	// (abortBumps).
	meta *history.Meta
}

// abortBumps reports whether the acquires of rd's role may bump the epoch twice
// (model.AbortBump): when any of its members runs transaction version 1, whose open
// transaction an InitProducerId aborts under a bump of its own. Per role, not per acquire:
// the bump comes from the holder's transaction, which a TV2 member's acquire may abort too.
func (c *config) abortBumps(rd *roleData) bool {
	if len(rd.members) == 0 {
		return c.meta.TransactionVersion == 1
	}
	for _, m := range rd.members {
		if c.meta.ProcessTransactionVersion(m.process) == 1 {
			return true
		}
	}
	return false
}

func (o Options) config(meta *history.Meta) (config, error) {
	headerLease, headerPromises, producerIDs := meta.LeaseDuration, meta.Promises, meta.ProducerIDs
	c := config{
		timeout: o.Timeout, workers: o.Workers, lease: int64(o.LeaseDuration),
		visualize: o.Visualize, maxAnomalies: o.MaxAnomalies, log: o.Logger,
		advisory: map[string]bool{}, meta: meta,
	}
	if c.timeout < 0 || c.workers < 0 || c.lease < 0 || c.maxAnomalies < 0 {
		return c, fmt.Errorf("negative timeout, workers, lease duration or max anomalies: %w", ErrOptions)
	}
	if c.timeout == 0 {
		c.timeout = DefaultTimeout
	}
	if c.workers == 0 {
		c.workers = runtime.GOMAXPROCS(0)
	}
	if headerLease > 0 {
		c.lease = headerLease
	}
	if c.maxAnomalies == 0 {
		c.maxAnomalies = DefaultMaxAnomalies
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	advisory := o.Advisory
	if advisory == nil {
		advisory = DefaultAdvisory
	}
	for _, name := range advisory {
		if _, ok := sentinels[name]; !ok || name == WellFormed {
			return c, fmt.Errorf("advisory check %q: not a check (want one of %s): %w",
				name, strings.Join(append(append([]string{}, Guarantees...), SpuriousFence), ", "), ErrOptions)
		}
		c.advisory[name] = true
	}
	seen := map[string]bool{}
	known := Promises()
	if meta.Workload == history.WorkloadPipeline {
		known = PipelinePromises()
	}
	for _, p := range append(append([]string{}, headerPromises...), o.Promises...) {
		if !slices.Contains(known, p) {
			return c, fmt.Errorf("promise %q: unknown (want one of %s): %w", p, strings.Join(known, ", "), ErrOptions)
		}
		if !seen[p] {
			seen[p] = true
			c.promises = append(c.promises, p)
		}
	}
	switch producerIDs {
	case "", "ordered":
	case "hashed":
		c.hashedPIDs = true
	default:
		return c, fmt.Errorf("history header producer_ids %q: want ordered or hashed: %w", producerIDs, ErrOptions)
	}
	return c, nil
}
