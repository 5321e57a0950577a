package workload

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/internal/units"
	"github.com/fencecheck/fencecheck/transport"
)

// ErrConfig marks a Config that Validate rejects. The error names the field.
var ErrConfig = errors.New("invalid workload config")

// Config is the workload of a run as plain data: how many processes, roles and members, the
// lease, the topics, and the load (rates and mix). Start from a preset (Preset) and change
// fields; zero values are not defaults, except where a field's comment says so. Validate
// names the first bad field.
type Config struct {
	// Processes is the number of transport instances (client hosts). Each dials the cluster
	// through its own links.
	Processes int `json:"processes" yaml:"processes"`
	// Roles is the number of leadership slots, named r1, r2, ...
	Roles int `json:"roles" yaml:"roles"`
	// MembersPerRole is the number of candidates of each role, named m1, m2, ... Members of one
	// role live on distinct processes (a transport keeps one holding per role), so it is at
	// most Processes. Member j of role r lives on process (r*MembersPerRole+j) mod Processes,
	// which spreads members over all processes.
	MembersPerRole int `json:"members_per_role" yaml:"members_per_role"`
	// Readers is the number of reader loops; reader i runs on process i mod Processes.
	Readers int `json:"readers" yaml:"readers"`

	// Lease is the transport's lease duration, which is also every role's transaction
	// timeout. Holders renew every Lease/3.
	Lease units.Duration `json:"lease" yaml:"lease"`
	// RequestTimeout bounds every transport call.
	RequestTimeout units.Duration `json:"request_timeout" yaml:"request_timeout"`

	// Topic is the coordination topic. Empty means "fencecheck.coordination".
	Topic string `json:"topic,omitempty" yaml:"topic,omitempty"`
	// TopicPartitions is the coordination topic's partition count when the run creates it.
	TopicPartitions int32 `json:"topic_partitions" yaml:"topic_partitions"`
	// WorkTopic is the topic of the holders' fenced application writes. Empty means
	// "fencecheck.work".
	WorkTopic string `json:"work_topic,omitempty" yaml:"work_topic,omitempty"`
	// WorkPartitions is the work topic's partition count. Role i (0-based) writes to
	// partition i mod WorkPartitions. Zero means one partition per role.
	WorkPartitions int32 `json:"work_partitions,omitempty" yaml:"work_partitions,omitempty"`
	// Replication is the replication factor of both topics. Zero means min(3, brokers).
	Replication int16 `json:"replication,omitempty" yaml:"replication,omitempty"`
	// TransactionVersion is passed to the transport: 0 negotiates, 1 pins TV1, 2 requires TV2.
	TransactionVersion int `json:"transaction_version,omitempty" yaml:"transaction_version,omitempty"`
	// Retention, when positive, sets retention.ms on both topics when the run creates them,
	// so a long load run does not keep every record (kfake keeps them in memory, and every
	// read scans from the log start). Deleted records are missing from the final reads, so
	// the checker reports the writes they held as lost: use it only for load runs that are
	// not checked. (kfake applies retention every log.cleaner.backoff.ms, a broker config.)
	Retention units.Duration `json:"retention,omitempty" yaml:"retention,omitempty"`

	// Load is the rates and the mix of operations.
	Load Load `json:"load" yaml:"load"`
}

// Load is the rates and the mix of a run's operations. Every interval is a mean; each draw
// is spread uniformly by ±Jitter of it, from the run's seeded generator.
type Load struct {
	// Look is the interval between a candidate's looks at its role (a read of the role's
	// records, or a describe). A look that finds no lease renewed within Lease (by the
	// member's clock), or a describe that finds the role never held, makes the member acquire.
	Look units.Duration `json:"look" yaml:"look"`
	// DescribeShare is the fraction of looks that are describes rather than reads.
	DescribeShare float64 `json:"describe_share" yaml:"describe_share"`
	// Contend is the mean interval between a member's contention attempts: at those moments a
	// candidate acquires even though the role looks held, deposing the holder. Zero means no
	// contention schedule: candidates acquire only when the role looks free.
	Contend units.Duration `json:"contend" yaml:"contend"`
	// WorkRate is the number of work writes per second of a holder. Zero means none.
	WorkRate float64 `json:"work_rate" yaml:"work_rate"`
	// WorkPayload is the payload size of a work record, in bytes.
	WorkPayload int `json:"work_payload" yaml:"work_payload"`
	// WorkRecords is how many records each work write carries, all in its one transaction:
	// a number, or a range drawn per write from the member's seeded stream. Zero means one,
	// as before the field existed.
	WorkRecords RecordCount `json:"work_records,omitzero" yaml:"work_records,omitempty"`
	// BackoffMin and BackoffMax bound the backoff after a lost holding or a failed acquire:
	// attempt n waits uniformly in [BackoffMin, min(BackoffMax, BackoffMin*2^n)] (jitter, so
	// fenced members do not come back in step).
	BackoffMin units.Duration `json:"backoff_min" yaml:"backoff_min"`
	BackoffMax units.Duration `json:"backoff_max" yaml:"backoff_max"`
	// Jitter spreads every interval by ±Jitter of its mean, in [0, 1).
	Jitter float64 `json:"jitter" yaml:"jitter"`
	// ReadEvery is the interval between a reader's operations.
	ReadEvery units.Duration `json:"read_every" yaml:"read_every"`
	// ReadMix weighs what a reader does.
	ReadMix Mix `json:"read_mix" yaml:"read_mix"`
}

// Mix weighs a reader's operations: reading a random role's records, describing a random
// role, or reading a random work partition. Weights are relative; at least one is positive.
type Mix struct {
	Read     int `json:"read" yaml:"read"`
	Describe int `json:"describe" yaml:"describe"`
	ReadWork int `json:"read_work" yaml:"read_work"`
}

// MaxWorkRecords is the most records a work write may carry (load.work_records).
const MaxWorkRecords = transport.MaxWorkRecords

// Default topic names.
const (
	DefaultTopic     = "fencecheck.coordination"
	DefaultWorkTopic = "fencecheck.work"
)

// The preset names, from the least to the most contended.
const (
	PresetLow    = "low"
	PresetMedium = "medium"
	PresetHigh   = "high"
)

// PresetNames lists the presets Preset knows.
func PresetNames() []string { return []string{PresetLow, PresetMedium, PresetHigh} }

// Preset returns a complete, valid Config: 20 processes × 10 roles × 3 members, a 2 s lease,
// and the load of the named preset:
//
//   - low: candidates acquire only when the role looks free; handoffs are rare.
//   - medium: each member contends about every 4 leases, so with 3 members (2 candidates)
//     a role changes hands about every 2 leases.
//   - high: each member contends about every lease, looks more often and writes more work;
//     a role changes hands about every half lease with 3 members.
func Preset(name string) (Config, error) {
	cfg := Config{
		Processes:       20,
		Roles:           10,
		MembersPerRole:  3,
		Readers:         4,
		Lease:           units.Duration(2 * time.Second),
		RequestTimeout:  units.Duration(5 * time.Second),
		TopicPartitions: 12,
		Load: Load{
			Look:          units.Duration(time.Second),
			DescribeShare: 0.25,
			WorkRate:      3,
			WorkPayload:   32,
			BackoffMin:    units.Duration(100 * time.Millisecond),
			BackoffMax:    units.Duration(2 * time.Second),
			Jitter:        0.3,
			ReadEvery:     units.Duration(500 * time.Millisecond),
			ReadMix:       Mix{Read: 3, Describe: 2, ReadWork: 1},
		},
	}
	switch name {
	case PresetLow:
		cfg.Load.Look = units.Duration(2 * time.Second)
		cfg.Load.WorkRate = 1
	case PresetMedium:
		cfg.Load.Contend = units.Duration(8 * time.Second)
	case PresetHigh:
		cfg.Load.Look = units.Duration(500 * time.Millisecond)
		cfg.Load.Contend = units.Duration(2 * time.Second)
		cfg.Load.WorkRate = 5
		cfg.Load.ReadEvery = units.Duration(250 * time.Millisecond)
	default:
		return Config{}, fmt.Errorf("preset %q: unknown (want one of %s): %w", name, strings.Join(PresetNames(), ", "), ErrConfig)
	}
	return cfg, nil
}

// Validate reports the first unusable field of c, naming it (wrapping ErrConfig).
func (c Config) Validate() error {
	bad := func(field string, format string, args ...any) error {
		return fmt.Errorf("%s: %s: %w", field, fmt.Sprintf(format, args...), ErrConfig)
	}
	l := c.Load
	switch {
	case c.Processes < 1:
		return bad("processes", "must be at least 1, got %d", c.Processes)
	case c.Roles < 1:
		return bad("roles", "must be at least 1, got %d", c.Roles)
	case c.MembersPerRole < 1:
		return bad("members_per_role", "must be at least 1, got %d", c.MembersPerRole)
	case c.MembersPerRole > c.Processes:
		return bad("members_per_role", "%d members of a role need as many processes, have %d (a transport keeps one holding per role)", c.MembersPerRole, c.Processes)
	case c.Readers < 0:
		return bad("readers", "must not be negative, got %d", c.Readers)
	case c.Lease <= 0:
		return bad("lease", "must be positive, got %v", c.Lease)
	case c.RequestTimeout <= 0:
		return bad("request_timeout", "must be positive, got %v", c.RequestTimeout)
	case c.TopicPartitions < 1:
		return bad("topic_partitions", "must be at least 1, got %d", c.TopicPartitions)
	case c.WorkPartitions < 0:
		return bad("work_partitions", "must not be negative, got %d", c.WorkPartitions)
	case c.Replication < 0:
		return bad("replication", "must not be negative, got %d", c.Replication)
	case c.TransactionVersion < 0 || c.TransactionVersion > 2:
		return bad("transaction_version", "must be 0 (negotiate), 1 or 2, got %d", c.TransactionVersion)
	case c.Retention < 0:
		return bad("retention", "must not be negative, got %v", c.Retention)
	case c.topic() == c.workTopic():
		return bad("work_topic", "must differ from the coordination topic")
	case l.Look <= 0:
		return bad("load.look", "must be positive, got %v", l.Look)
	case l.DescribeShare < 0 || l.DescribeShare > 1:
		return bad("load.describe_share", "must be in [0, 1], got %v", l.DescribeShare)
	case l.Contend < 0:
		return bad("load.contend", "must not be negative, got %v", l.Contend)
	case l.WorkRate < 0:
		return bad("load.work_rate", "must not be negative, got %v", l.WorkRate)
	case l.WorkPayload < 0:
		return bad("load.work_payload", "must not be negative, got %d", l.WorkPayload)
	case !l.WorkRecords.IsZero() && (l.WorkRecords.Min < 1 || l.WorkRecords.Max < l.WorkRecords.Min || l.WorkRecords.Max > MaxWorkRecords):
		return bad("load.work_records", "must be a number or a range MIN-MAX within 1 to %d, got %s", MaxWorkRecords, l.WorkRecords)
	case l.BackoffMin <= 0:
		return bad("load.backoff_min", "must be positive, got %v", l.BackoffMin)
	case l.BackoffMax < l.BackoffMin:
		return bad("load.backoff_max", "must be at least load.backoff_min (%v), got %v", l.BackoffMin, l.BackoffMax)
	case l.Jitter < 0 || l.Jitter >= 1:
		return bad("load.jitter", "must be in [0, 1), got %v", l.Jitter)
	case c.Readers > 0 && l.ReadEvery <= 0:
		return bad("load.read_every", "must be positive with readers, got %v", l.ReadEvery)
	case l.ReadMix.Read < 0 || l.ReadMix.Describe < 0 || l.ReadMix.ReadWork < 0:
		return bad("load.read_mix", "weights must not be negative, got %+v", l.ReadMix)
	case c.Readers > 0 && l.ReadMix.Read+l.ReadMix.Describe+l.ReadMix.ReadWork == 0:
		return bad("load.read_mix", "needs a positive weight with readers")
	}
	return nil
}

// topic returns the coordination topic in effect.
func (c Config) topic() string {
	if c.Topic == "" {
		return DefaultTopic
	}
	return c.Topic
}

// workTopic returns the work topic in effect.
func (c Config) workTopic() string {
	if c.WorkTopic == "" {
		return DefaultWorkTopic
	}
	return c.WorkTopic
}

// workPartitions returns the work topic's partition count in effect.
func (c Config) workPartitions() int32 {
	if c.WorkPartitions == 0 {
		return int32(c.Roles)
	}
	return c.WorkPartitions
}

// replication returns the replication factor in effect on a cluster of the given size.
func (c Config) replication(brokers int) int16 {
	if c.Replication > 0 {
		return c.Replication
	}
	return int16(max(1, min(3, brokers)))
}

// RoleName is the name of role i (0-based): "r1", "r2", ...
func RoleName(i int) string { return fmt.Sprintf("r%d", i+1) }

// MemberName is the id of member j (0-based) of a role: "m1", "m2", ...
func MemberName(j int) string { return fmt.Sprintf("m%d", j+1) }

// processOf returns the process number (1-based, as links.ProcessName counts) of member j of
// role r.
func (c Config) processOf(r, j int) int { return (r*c.MembersPerRole+j)%c.Processes + 1 }

// Meta returns the history header fields this workload determines on a cluster: the lease
// duration, the transaction version and the producer-id ordering. The runner adds its own
// (run, scenario, seed, promises) before writing the header.
func (c Config) Meta(info cluster.Info) history.Meta {
	m := history.Meta{
		Cluster:            info.Kind,
		TransactionVersion: info.TxnVersion,
		LeaseDuration:      int64(c.Lease),
		ProducerIDs:        history.ProducerIDsOrdered,
	}
	if c.TransactionVersion != 0 {
		m.TransactionVersion = c.TransactionVersion
	}
	// kfake derives producer ids from a hash of the transactional id (docs/clusters.md, "embedded").
	if info.Version == "kfake" {
		m.ProducerIDs = history.ProducerIDsHashed
	}
	return m
}
