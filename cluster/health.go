package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/plugin/kslog"
)

// HealthTxnID is the transactional id WaitHealthy looks up. Looking it up
// also makes Kafka create __transaction_state, which a cluster needs before
// it can serve any transaction.
const HealthTxnID = "fencecheck-health"

// NewAdminClient returns a kgo client on seeds (no links) for the harness's
// own requests, logging through log at warn level and above.
func NewAdminClient(seeds []string, log *slog.Logger, extra ...kgo.Opt) (*kgo.Client, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.WithLogger(kslog.New(warnLogger(log))),
		kgo.RequestTimeoutOverhead(5 * time.Second),
		kgo.RetryTimeout(5 * time.Second),
		kgo.MetadataMinAge(250 * time.Millisecond),
	}
	return kgo.NewClient(append(opts, extra...)...)
}

// WaitHealthy returns nil once the cluster serves: a Metadata request lists
// every broker the backend reports running (or, if it knows no states, every
// broker it lists), and FindCoordinator for HealthTxnID names one of them. It
// polls until then or until ctx ends, and then returns the last problem.
func WaitHealthy(ctx context.Context, c Cluster, log *slog.Logger) error {
	cl, err := AdminClient(c, log)
	if err != nil {
		return err
	}
	defer cl.Close()
	var last error
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		if last = healthyOnce(ctx, c, cl); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster not healthy: %w (%w)", last, context.Cause(ctx))
		case <-tick.C:
		}
	}
}

func healthyOnce(ctx context.Context, c Cluster, cl *kgo.Client) error {
	bs, err := c.Brokers(ctx, RoleQuery{})
	if err != nil && len(bs) == 0 {
		return err
	}
	var want []int32
	for _, b := range bs {
		if b.State == StateRunning || b.State == StateUnknown {
			want = append(want, b.ID)
		}
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	m, err := freshMetadata(rctx, cl)
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	var got []int32
	for _, b := range m.Brokers {
		got = append(got, b.NodeID)
	}
	slices.Sort(got)
	for _, id := range want {
		if !slices.Contains(got, id) {
			return fmt.Errorf("metadata lists brokers %v, want %v", got, want)
		}
	}
	r, ok := kadm.NewClient(cl).FindTxnCoordinators(rctx, HealthTxnID)[HealthTxnID]
	if !ok {
		return errors.New("find coordinator: no answer")
	}
	if r.Err != nil {
		return fmt.Errorf("find coordinator: %w", r.Err)
	}
	if !slices.Contains(want, r.NodeID) {
		return fmt.Errorf("find coordinator: broker %d is not one of %v", r.NodeID, want)
	}
	return nil
}

// freshMetadata sends a Metadata request to a broker. kadm's Metadata and
// BrokerMetadata answer from the client's cache, whose broker list is only as
// new as kgo's last metadata refresh (up to MetadataMaxAge, 5 minutes): a
// broker that joined after the client's first request stays missing.
//
// A request goes to kgo's next broker in turn, and one that is killed or paused behind a link
// fails at once with an error kgo does not retry ("closed the connection immediately"): so a
// failed request is tried again, up to metadataTries times, which moves on to other brokers.
func freshMetadata(ctx context.Context, cl *kgo.Client, topics ...string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{}
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	var err error
	for range metadataTries {
		var m *kmsg.MetadataResponse
		if m, err = req.RequestWith(ctx, cl); err == nil || ctx.Err() != nil {
			return m, err
		}
	}
	return nil, err
}

// metadataTries bounds freshMetadata's tries. kgo cycles through the brokers it discovered and
// then one seed, so with one broker down in a cluster of up to five, eight tries reach a live one
// however the cycle starts.
const metadataTries = 8

// DescribeRoles fills in the roles of bs for the keys of q, plus the
// controller, by asking the cluster through cl (fresh Metadata and
// FindCoordinator requests). Lookups that fail are returned joined; roles
// that could be found are still set.
func DescribeRoles(ctx context.Context, cl *kgo.Client, bs []Broker, q RoleQuery) error {
	adm := kadm.NewClient(cl)
	add := func(id int32, r BrokerRole) {
		for i := range bs {
			if bs[i].ID == id {
				bs[i].Roles = append(bs[i].Roles, r)
			}
		}
	}
	var errs []error
	topics := make([]string, 0, len(q.Partitions))
	for _, tp := range q.Partitions {
		if !slices.Contains(topics, tp.Topic) {
			topics = append(topics, tp.Topic)
		}
	}
	m, err := freshMetadata(ctx, cl, topics...)
	if err != nil {
		errs = append(errs, fmt.Errorf("metadata: %w", err))
	} else {
		if m.ControllerID >= 0 {
			add(m.ControllerID, BrokerRole{Kind: RoleController})
		}
		for _, tp := range q.Partitions {
			errs = append(errs, leaderRole(m, tp, add))
		}
	}
	coords := func(kind BrokerRoleKind, rs kadm.FindCoordinatorResponses, keys []string) {
		for _, k := range keys {
			r, ok := rs[k]
			err := r.Err
			if !ok {
				err = errors.New("no answer")
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("coordinator of %q: %w", k, err))
				continue
			}
			add(r.NodeID, BrokerRole{Kind: kind, Key: k})
		}
	}
	if len(q.TransactionalIDs) > 0 {
		coords(RoleTxnCoordinator, adm.FindTxnCoordinators(ctx, q.TransactionalIDs...), q.TransactionalIDs)
	}
	if len(q.Groups) > 0 {
		coords(RoleGroupCoordinator, adm.FindGroupCoordinators(ctx, q.Groups...), q.Groups)
	}
	return errors.Join(errs...)
}

// warnLogger drops records below warn: franz-go is chatty at info and the
// harness log should carry what matters (STYLE: kslog at warn).
func warnLogger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(minLevel{l.Handler(), slog.LevelWarn})
}

type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(as), h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.min}
}

func leaderRole(m *kmsg.MetadataResponse, tp TopicPartition, add func(int32, BrokerRole)) error {
	for _, t := range m.Topics {
		if t.Topic == nil || *t.Topic != tp.Topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return fmt.Errorf("leader of %s/%d: %w", tp.Topic, tp.Partition, err)
		}
		for _, p := range t.Partitions {
			if p.Partition != tp.Partition {
				continue
			}
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("leader of %s/%d: %w", tp.Topic, tp.Partition, err)
			}
			if p.Leader >= 0 {
				add(p.Leader, BrokerRole{Kind: RoleLeader, Topic: tp.Topic, Partition: tp.Partition})
			}
			return nil
		}
	}
	return fmt.Errorf("leader of %s/%d: partition not in metadata", tp.Topic, tp.Partition)
}
