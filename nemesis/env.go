package nemesis

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/cluster/links"
)

// Env is what the nemesis acts on and needs to know about the run.
type Env struct {
	// Cluster is the cluster under test, with its links. Required.
	Cluster cluster.Cluster
	// Processes is the number of processes (transport instances); they are p1..pN, and
	// process i dials through Cluster.Links(ctx, i). Required for link faults.
	Processes int
	// Roles are the run's role names, from which "a random role" is picked.
	Roles []string
	// Resolve maps a role to its transactional id and coordination partition (the
	// transport's TransactionalID and PartitionFor: the nemesis does not import the
	// transport). Required for coordinator and leader selectors and move-coordinator.
	Resolve func(role string) (RoleKeys, error)
	// Freezer freezes members (the workload). Nil: freeze is unsupported.
	Freezer MemberFreezer
	// Lease is the transport's lease duration; a freeze without For lasts twice as long.
	Lease time.Duration
	// Start is the run's start, the zero of history times. Default: when New is called.
	Start time.Time
	// ProbeTimeout is how long a probe waits for a broker's answer before it calls the link
	// silent (a black hole, a paused broker). Default 2s.
	ProbeTimeout time.Duration
	// WaitTimeout bounds WaitForInjected and WaitForRecovered when the nemesis calls them.
	// Default 30s.
	WaitTimeout time.Duration
	// HealTimeout bounds healing (one injection's, or HealAll's including the health check).
	// Default 3m: a real broker restarts in 10–30s.
	HealTimeout time.Duration
	// NextFaultID numbers fault windows; share it with anything else that records windows in
	// the same history. Default: the nemesis numbers them 1, 2, 3, ...
	NextFaultID func() int64
}

func (e *Env) defaults() error {
	if e.Cluster == nil {
		return errors.New("nemesis env: Cluster is required")
	}
	if e.Processes < 0 {
		return fmt.Errorf("nemesis env: Processes=%d must not be negative", e.Processes)
	}
	if e.Start.IsZero() {
		e.Start = time.Now()
	}
	if e.ProbeTimeout <= 0 {
		e.ProbeTimeout = 2 * time.Second
	}
	if e.WaitTimeout <= 0 {
		e.WaitTimeout = 30 * time.Second
	}
	if e.HealTimeout <= 0 {
		e.HealTimeout = 3 * time.Minute
	}
	return nil
}

// RoleKeys are the Kafka keys of a role.
type RoleKeys struct {
	TransactionalID string // transport.TransactionalID(topic, role)
	Topic           string // the coordination topic
	Partition       int32  // transport.PartitionFor(role, partitions)
	// Group is the consumer group of a pipeline run's role ("" in a lease run): the
	// group-coordinator selector picks its coordinator.
	Group string
}

// Member is one member: a candidate identity of a process for a role.
type Member struct {
	Process int // 1-based, as in links.ProcessName
	Role    string
	ID      string
}

// String is the member's target name in fault windows: "p2/leader/m2".
func (m Member) String() string {
	return fmt.Sprintf("%s/%s/%s", links.ProcessName(m.Process), m.Role, m.ID)
}

// MemberFreezer freezes members at their pause points. The workload implements it; the nemesis
// records the windows (kind member-pause), so the freezer must not.
type MemberFreezer interface {
	// Holder returns the member that holds role now, by its own belief; when several believe
	// (a deposed one that has not noticed yet), the one that minted last.
	Holder(role string) (Member, bool)
	// SettledHolder is Holder once the role's handoff has settled: no member has an acquire
	// of it in flight and the holder has renewed since it acquired. A freeze aims at it, since
	// a holder about to be deposed never reaches its pause point.
	SettledHolder(role string) (Member, bool)
	// Freeze arms a freeze: m stops at its next pause point named point ("" = the workload's
	// default point) and stays there until Thaw, or until d has passed, whichever comes first
	// (the bound keeps a member from staying frozen when the nemesis is gone). It returns
	// without waiting for m to get there.
	Freeze(ctx context.Context, m Member, point string, d time.Duration) error
	// Frozen reports whether m is stopped at a pause point now.
	Frozen(m Member) bool
	// Thaw lets m go on, and disarms a freeze it has not reached yet. Thawing a member that
	// is not frozen is not an error.
	Thaw(ctx context.Context, m Member) error
}

// FreezeSpanner is implemented by a MemberFreezer that knows when a member actually froze and
// resumed. A freeze's window then records that span (see the package documentation) instead
// of the time from arming the freeze to thawing it: the member reaches its pause point some
// time after Freeze, and a freezer may bound a freeze below what was asked (a commit held
// back must stay under the request timeout).
type FreezeSpanner interface {
	// LastFreeze returns when m froze at the pause point of the freeze last armed for it and
	// when it resumed (0 while it is frozen), as durations since Env.Start; ok is false when
	// m has not frozen since that Freeze call.
	LastFreeze(m Member) (froze, resumed time.Duration, ok bool)
}

// Recorder receives fault windows. *history.Writer implements it.
type Recorder interface {
	Append(history.Event) error
}
