package pipeline

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/fencecheck/fencecheck/internal/units"
	"github.com/fencecheck/fencecheck/transport/pipeline"
)

// ErrConfig marks a Config that cannot run; the error names the field.
var ErrConfig = errors.New("pipeline workload")

// Config is the shape of a pipeline run: how many members on how many processes, the input
// they copy, and the timings. Zero fields take the defaults of WithDefaults.
type Config struct {
	// Member is the member implementation: session (kgo.GroupTransactSession), plain, or a
	// deliberately broken one, mutant:NAME. Default plain.
	Member string `json:"member,omitempty" yaml:"member,omitempty"`
	// Protocol is the group protocol: classic (default) or consumer (KIP-848, Kafka 4.0+).
	Protocol string `json:"protocol,omitempty" yaml:"protocol,omitempty"`
	// Processes is how many processes the members run in, each behind its own links.
	// Default 2.
	Processes int `json:"processes,omitempty" yaml:"processes,omitempty"`
	// Members is how many members the group has, spread over the processes in turn.
	// Default 3.
	Members int `json:"members,omitempty" yaml:"members,omitempty"`
	// Partitions is the input topic's partition count (the output's is the same). Default 4.
	Partitions int32 `json:"partitions,omitempty" yaml:"partitions,omitempty"`
	// InputPartitions is how many of the input partitions the input is written to: the first
	// N, in turn; the others stay empty, so a member can hold a partition with nothing to
	// commit beside one with output in its open transaction (KAFKA-18943's window, where
	// Kafka Streams 3.9.0 commits that output without its offsets). Default 0: all.
	InputPartitions int32 `json:"input_partitions,omitempty" yaml:"input_partitions,omitempty"`
	// Preload is how many input records are written before the members start. Default 40.
	Preload int `json:"preload,omitempty" yaml:"preload,omitempty"`
	// Rate is how many input records per second are written while the run lasts. Default 50.
	Rate float64 `json:"rate,omitempty" yaml:"rate,omitempty"`
	// AbortedInput is the share of input records (0 to 1) the seeder writes in a transaction
	// that it then aborts: no member may copy them (eos-read-committed). Default 0.
	AbortedInput float64 `json:"aborted_input,omitempty" yaml:"aborted_input,omitempty"`
	// TxnIDs is whose transactional ids the members use: member (default: one producer per
	// member, EOS v2, fenced across rebalances by the group's generation) or partition (one
	// producer per input partition, the id shared by every member: the older style, where a
	// new owner's producer fences the old owner's by the id's epoch; the plain member only).
	TxnIDs string `json:"txn_ids,omitempty" yaml:"txn_ids,omitempty"`
	// Stateful makes the members keep a running aggregate per input partition (the count and
	// the sum of the records' numbers), written in each output and restored from the last
	// committed output when a member starts a partition or a transaction did not commit
	// (eos-fold). Default false.
	Stateful bool `json:"stateful,omitempty" yaml:"stateful,omitempty"`
	// MaxPoll is the most records one transaction carries. Default 5.
	MaxPoll int `json:"max_poll,omitempty" yaml:"max_poll,omitempty"`
	// Restart is how often, on average, a member leaves the group and a new one joins in its
	// place: rebalances in a run without faults. 0 (default): never.
	Restart units.Duration `json:"restart,omitempty" yaml:"restart,omitempty"`
	// SessionTimeout is the members' group session timeout (the classic protocol's; under
	// the consumer protocol the cluster's group setting rules). Default 3s.
	SessionTimeout units.Duration `json:"session_timeout,omitempty" yaml:"session_timeout,omitempty"`
	// TransactionTimeout is the members' transaction timeout. Default 10s.
	TransactionTimeout units.Duration `json:"transaction_timeout,omitempty" yaml:"transaction_timeout,omitempty"`
	// RequestTimeout bounds each request of a member. Default 5s.
	RequestTimeout units.Duration `json:"request_timeout,omitempty" yaml:"request_timeout,omitempty"`
}

// The values of Config.TxnIDs.
const (
	TxnIDsMember    = "member"
	TxnIDsPartition = "partition"
)

// Validate reports the first field of c that cannot run, naming it (ErrConfig).
func (c Config) Validate() error {
	_, err := c.WithDefaults()
	return err
}

// maxRate bounds Config.Rate: the seeder's ticker needs an interval of a microsecond or more.
const maxRate = 1_000_000

// WithDefaults validates c and fills in its defaults. Errors wrap ErrConfig and name the field
// as a scenario file spells it.
func (c Config) WithDefaults() (Config, error) {
	bad := func(field, format string, args ...any) (Config, error) {
		return c, fmt.Errorf("%w: %s: %s", ErrConfig, field, fmt.Sprintf(format, args...))
	}
	switch {
	case c.Processes < 0:
		return bad("processes", "must not be negative, got %d", c.Processes)
	case c.Members < 0:
		return bad("members", "must not be negative, got %d", c.Members)
	case c.Partitions < 0:
		return bad("partitions", "must not be negative, got %d", c.Partitions)
	case c.InputPartitions < 0:
		return bad("input_partitions", "must not be negative, got %d", c.InputPartitions)
	case c.Preload < 0:
		return bad("preload", "must not be negative, got %d", c.Preload)
	case c.Rate < 0 || c.Rate > maxRate || math.IsNaN(c.Rate):
		return bad("rate", "%v records per second, want 0 to %d", c.Rate, maxRate)
	case c.AbortedInput < 0 || c.AbortedInput > 1 || math.IsNaN(c.AbortedInput):
		return bad("aborted_input", "%v, want a share from 0 to 1", c.AbortedInput)
	case c.MaxPoll < 0:
		return bad("max_poll", "must not be negative, got %d", c.MaxPoll)
	case c.Restart < 0:
		return bad("restart", "must not be negative, got %v", c.Restart)
	case c.SessionTimeout < 0, c.TransactionTimeout < 0, c.RequestTimeout < 0:
		return bad("session_timeout, transaction_timeout, request_timeout", "must not be negative")
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Processes, 2)
	def(&c.Members, 3)
	def(&c.Preload, 40)
	def(&c.MaxPoll, 5)
	if c.Partitions == 0 {
		c.Partitions = 4
	}
	if c.Rate == 0 {
		c.Rate = 50
	}
	if c.InputPartitions > c.Partitions {
		return bad("input_partitions", "%d, more than the %d partitions", c.InputPartitions, c.Partitions)
	}
	for _, d := range []struct {
		v *units.Duration
		d time.Duration
	}{{&c.SessionTimeout, 3 * time.Second}, {&c.TransactionTimeout, 10 * time.Second}, {&c.RequestTimeout, 5 * time.Second}} {
		if *d.v == 0 {
			*d.v = units.Duration(d.d)
		}
	}
	if c.Member == "" {
		c.Member = pipeline.KindPlain
	}
	if name, mutant := strings.CutPrefix(c.Member, pipeline.MutantPrefix); mutant {
		if !slices.ContainsFunc(pipeline.Mutants, func(m pipeline.Mutant) bool { return m.Name == name }) {
			return bad("member", "%q: no pipeline mutant %q", c.Member, name)
		}
	} else if c.Member != pipeline.KindSession && c.Member != pipeline.KindPlain {
		return bad("member", "%q, want %s, %s or %sNAME", c.Member, pipeline.KindSession, pipeline.KindPlain, pipeline.MutantPrefix)
	}
	if c.Protocol == "" {
		c.Protocol = pipeline.ProtocolClassic
	}
	if c.Protocol != pipeline.ProtocolClassic && c.Protocol != pipeline.ProtocolConsumer {
		return bad("protocol", "%q, want %s or %s", c.Protocol, pipeline.ProtocolClassic, pipeline.ProtocolConsumer)
	}
	switch c.TxnIDs {
	case "":
		c.TxnIDs = TxnIDsMember
	case TxnIDsMember:
	case TxnIDsPartition:
		if c.Member == pipeline.KindSession {
			return bad("txn_ids", "%s: the %s member has one producer; use member", c.TxnIDs, pipeline.KindSession)
		}
	default:
		return bad("txn_ids", "%q, want %s or %s", c.TxnIDs, TxnIDsMember, TxnIDsPartition)
	}
	if c.TransactionTimeout.D() < c.RequestTimeout.D() {
		return bad("transaction_timeout", "%v is shorter than the request timeout %v: a transaction would time out while its commit is still allowed to run", c.TransactionTimeout, c.RequestTimeout)
	}
	return c, nil
}
