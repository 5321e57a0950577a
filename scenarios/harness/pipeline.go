package harness

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/nemesis"
	"github.com/fencecheck/fencecheck/scenarios"
	"github.com/fencecheck/fencecheck/transport/lineproto"
	"github.com/fencecheck/fencecheck/transport/pipeline"
	pipewl "github.com/fencecheck/fencecheck/workload/pipeline"
)

// pipelineMember is the member a pipeline run uses under --transport: the scenario's own for
// real (or none given), a pipeline mutant by name, or an exec adapter's (the adapter must list
// the pipelines workload in hello; its command line names the member in the history).
func pipelineMember(transportOpt string, cfg pipewl.Config) (string, error) {
	switch {
	case transportOpt == "" || transportOpt == "real":
		return cfg.Member, nil
	case strings.HasPrefix(transportOpt, "exec:"):
		return transportOpt, nil
	case strings.HasPrefix(transportOpt, pipeline.MutantPrefix):
		name := strings.TrimPrefix(transportOpt, pipeline.MutantPrefix)
		var names []string
		for _, m := range pipeline.Mutants {
			names = append(names, m.Name)
		}
		if !slices.Contains(names, name) {
			return "", fmt.Errorf("--transport %s: no pipeline mutant %q (want one of %s)", transportOpt, name, strings.Join(names, ", "))
		}
		return transportOpt, nil
	}
	return "", fmt.Errorf("--transport %s: a pipeline runs fencecheck's own members (workload.pipeline.member: session or plain), a pipeline mutant (mutant:NAME) or an exec adapter that serves pipelines (exec:COMMAND)", transportOpt)
}

// execMember returns how to start the members of an exec transport ("exec:COMMAND"), nil for
// any other.
func execMember(transportOpt string) (func(ctx context.Context, cfg pipeline.Config) (pipeline.Member, error), error) {
	command, ok := strings.CutPrefix(transportOpt, "exec:")
	if !ok {
		return nil, nil
	}
	argv, err := adapterArgv(transportOpt, command)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, cfg pipeline.Config) (pipeline.Member, error) {
		m, err := lineproto.StartMember(ctx, argv, cfg)
		if err != nil {
			return nil, err
		}
		return m, nil
	}, nil
}

// openPipeline opens the history, the pipeline workload and the nemesis on r.cl: the
// pipeline's counterpart of the rest of openWorkload.
func (r *runner) openPipeline(ctx context.Context, meta history.Meta) error {
	cfg, err := r.s.Workload.PipelineConfig()
	if err != nil {
		return fmt.Errorf("%w: workload.pipeline: %w", scenarios.ErrScenario, err)
	}
	member, err := pipelineMember(r.opts.Transport, cfg)
	if err != nil {
		return fmt.Errorf("%w: %w", scenarios.ErrScenario, err)
	}
	newMember, err := execMember(member)
	if err != nil {
		return fmt.Errorf("%w: %w", scenarios.ErrScenario, err)
	}
	if newMember == nil {
		cfg.Member = member
	} else if meta.TransactionVersion != 0 {
		// A client behind the exec protocol speaks what it speaks (KafkaJS, Sarama and
		// librdkafka send TV1 transactions on a cluster that finalized 2), and it has sent
		// nothing yet: the header claims no version for it, only the cluster's. Its committed
		// transactions record the version their EndTxn was sent in, as its gateway saw it,
		// and the check reports that (checker: Results.Run).
		meta.ClusterTransactionVersion, meta.TransactionVersion = meta.TransactionVersion, 0
	}
	if r.hist, err = history.Open(r.dir.History(), history.WriterOptions{FlushInterval: time.Second}); err != nil {
		return err
	}
	r.pipe, err = pipewl.New(ctx, cfg, r.cl, r.hist, pipewl.Options{
		Tag: fmt.Sprintf("%d-%d", r.started.Unix(), r.opts.Seed), Start: r.started, Seed: r.opts.Seed,
		Logger: r.log.With("component", "workload"), NewMember: newMember, Member: member,
	})
	if err != nil {
		return err
	}
	r.pipe.Meta(&meta)
	var faultIDs atomic.Int64
	err = r.headerAndNemesis(meta, func() nemesis.Env {
		// The nemesis's roles are the input partitions (in0, in1, ...): "holder of in0" is
		// the member that owns input partition 0, and a freeze makes it a zombie.
		return nemesis.Env{
			Cluster: r.cl, Processes: cfg.Processes, Roles: r.pipe.Roles(), Freezer: pipelineFreezer{r.pipe},
			Resolve: r.pipelineKeys,
			Lease:   cfg.SessionTimeout.D(), Start: r.pipe.Start(),
			NextFaultID: func() int64 { return faultIDs.Add(1) },
		}
	})
	if err != nil {
		return err
	}
	// The header is written: members may start now (and join, and fetch), before the clock.
	r.pipe.StartMembers(ctx)
	info := r.cl.Info()
	r.say("cluster      %s %s, TV%d, bootstrap %s", info.Kind, info.Version, info.TxnVersion, strings.Join(r.cl.Bootstrap(), ","))
	r.say("pipeline     %d members (%s, %s protocol) on %d processes, %d input partitions",
		cfg.Members, member, cfg.Protocol, cfg.Processes, cfg.Partitions)
	return nil
}

// pipelineKeys resolves a pipeline role (an input partition) for the nemesis: its
// group-coordinator is the group's, its leader the input partition's, its coordinator the
// transaction coordinator of the member that owns the partition now.
func (r *runner) pipelineKeys(role string) (nemesis.RoleKeys, error) {
	k, ok := r.pipe.Keys(role)
	if !ok {
		return nemesis.RoleKeys{}, fmt.Errorf("%w: %q is not an input partition of the run (in0..in%d)", nemesis.ErrNoTarget, role, len(r.pipe.Roles())-1)
	}
	return nemesis.RoleKeys{TransactionalID: k.TransactionalID, Topic: k.Input, Partition: k.Partition, Group: k.Group}, nil
}

// pipelineFreezer lets the nemesis freeze a pipeline's members (nemesis.MemberFreezer and
// FreezeSpanner): the holder of a role is the owner of the input partition it names.
type pipelineFreezer struct{ wl *pipewl.Workload }

func (f pipelineFreezer) Holder(role string) (nemesis.Member, bool) {
	o, ok := f.wl.Owner(role)
	return nemesis.Member{Process: o.Process, Role: role, ID: o.Member}, ok
}

// SettledHolder is Holder: a partition's owner has polled it, which is all a freeze after a
// poll needs.
func (f pipelineFreezer) SettledHolder(role string) (nemesis.Member, bool) { return f.Holder(role) }

func (f pipelineFreezer) Freeze(_ context.Context, m nemesis.Member, point string, d time.Duration) error {
	return f.wl.Freeze(m.ID, point, d)
}

func (f pipelineFreezer) Frozen(m nemesis.Member) bool { return f.wl.Frozen(m.ID) }

func (f pipelineFreezer) Thaw(_ context.Context, m nemesis.Member) error {
	f.wl.Thaw(m.ID)
	return nil
}

func (f pipelineFreezer) LastFreeze(m nemesis.Member) (froze, resumed time.Duration, ok bool) {
	return f.wl.LastFreeze(m.ID)
}

// pipelineStatus is the line shown while a pipeline runs.
func pipelineStatus(st pipewl.Stats, elapsed, duration time.Duration, faults []string) string {
	line := fmt.Sprintf("  %v/%v  sent %d  committed %d  aborted %d  unknown %d  restarts %d",
		min(elapsed, duration).Round(time.Second), duration, st.Sent, st.Committed, st.Failed, st.Unknown, st.Restarts)
	return line + faultsSuffix(faults)
}
