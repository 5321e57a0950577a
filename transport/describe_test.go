package transport_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/transport"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// describeFixture is a 3-broker kfake cluster and a transport whose admin client has already
// described role once, so it has cached the role's transaction coordinator.
type describeFixture struct {
	c      *kfake.Cluster
	tr     *transport.BrokerTransport
	role   transport.Role
	id     string // the role's transactional id
	minted transport.FencingToken
	coord  int32 // the coordinator the admin client cached
}

func newDescribeFixture(t *testing.T, requestTimeout time.Duration) *describeFixture {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cfg := transport.NewConfig(strings.Join(c.ListenAddrs(), ","), 10*time.Second)
	cfg.RequestTimeout = requestTimeout
	tr, err := transport.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close(context.Background()) })
	f := &describeFixture{c: c, tr: tr, role: "r1"}
	f.id = transport.TransactionalID(tr.Config().Topic, f.role)
	if f.minted, err = tr.AcquireEpoch(context.Background(), f.role); err != nil {
		t.Fatal(err)
	}
	tok, held, err := tr.Describe(context.Background(), f.role)
	if err != nil || !held || tok != f.minted {
		t.Fatalf("Describe of a freshly acquired role = (%v, %v, %v), want (%v, true, nil)", tok, held, err, f.minted)
	}
	f.coord = c.CoordinatorFor(f.id)
	return f
}

// answerFromOldState makes broker node answer DescribeTransactions for every transactional id
// as the coordinator of tok, in state Empty, whatever the cluster holds now. That is what an
// Apache Kafka broker cut from its peers does: it still believes it is the coordinator and
// answers from the state it had when it was cut off. Other brokers answer normally.
func (f *describeFixture) answerFromOldState(node int32, tok transport.FencingToken) {
	f.c.ControlKey(int16(kmsg.DescribeTransactions), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		f.c.KeepControl()
		if f.c.CurrentNode() != node {
			return nil, nil, false
		}
		req := kreq.(*kmsg.DescribeTransactionsRequest)
		resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
		for _, id := range req.TransactionalIDs {
			st := kmsg.NewDescribeTransactionsResponseTransactionState()
			st.TransactionalID = id
			st.State = "Empty"
			st.TimeoutMillis = 10_000
			st.ProducerID = tok.ProducerID
			st.ProducerEpoch = tok.Epoch
			resp.TransactionStates = append(resp.TransactionStates, st)
		}
		return resp, nil, true
	})
}

// TestDescribeRefusesADeposedCoordinator: the coordinator of a role moves to another broker,
// a new holder takes the role there, and the old coordinator, unaware, still answers Describe
// with the old holder's token. Describe must not report that token as held.
func TestDescribeRefusesADeposedCoordinator(t *testing.T) {
	f := newDescribeFixture(t, 5*time.Second)
	for i := 0; f.c.CoordinatorFor(f.id) == f.coord; i++ {
		if i == 100 {
			t.Fatal("the coordinator of the role did not move in 100 rehashes")
		}
		f.c.RehashCoordinators()
	}
	f.answerFromOldState(f.coord, f.minted)
	next, err := f.tr.AcquireEpoch(context.Background(), f.role) // through the new coordinator
	if err != nil {
		t.Fatal(err)
	}
	if next.Compare(f.minted) <= 0 {
		t.Fatalf("the second acquire minted %v, not above the first's %v", next, f.minted)
	}

	tok, held, err := f.tr.Describe(context.Background(), f.role)
	if err == nil {
		if held && tok != next {
			t.Fatalf("Describe = (%v, held), the deposed coordinator %d's answer; the role is held by %v", tok, f.coord, next)
		}
		t.Fatalf("Describe = (%v, %v, nil), want an error: the broker that answered is not the coordinator", tok, held)
	}
	if !errors.Is(err, transport.ErrAdmin) || !errors.Is(err, kerr.NotCoordinator) || transport.Classify(err) != transport.Fail {
		t.Fatalf("Describe error = %v (outcome %v), want ErrAdmin wrapping NOT_COORDINATOR, outcome fail", err, transport.Classify(err))
	}
	t.Logf("Describe: %v", err)
}

// TestDescribeRefusedWhenAnotherBrokerKnowsNoCoordinator: another broker that sees no
// coordinator for the role (COORDINATOR_NOT_AVAILABLE: no leader of its transaction-state
// partition) does not confirm the broker that answered either.
func TestDescribeRefusedWhenAnotherBrokerKnowsNoCoordinator(t *testing.T) {
	f := newDescribeFixture(t, 5*time.Second)
	f.c.ControlKey(int16(kmsg.FindCoordinator), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		f.c.KeepControl()
		if f.c.CurrentNode() == f.coord {
			return nil, nil, false
		}
		req := kreq.(*kmsg.FindCoordinatorRequest)
		resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
		resp.ErrorCode, resp.NodeID = kerr.CoordinatorNotAvailable.Code, -1
		for _, key := range req.CoordinatorKeys {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key, c.NodeID, c.ErrorCode = key, -1, kerr.CoordinatorNotAvailable.Code
			resp.Coordinators = append(resp.Coordinators, c)
		}
		return resp, nil, true
	})
	tok, held, err := f.tr.Describe(context.Background(), f.role)
	if !errors.Is(err, transport.ErrAdmin) || !errors.Is(err, kerr.NotCoordinator) {
		t.Fatalf("Describe = (%v, %v, %v), want ErrAdmin wrapping NOT_COORDINATOR", tok, held, err)
	}
}

// TestDescribeWithTheOtherBrokersUnreachable: when no other broker can confirm the
// coordinator (their connections fail, or they never answer), Describe still returns the
// coordinator's answer, within its deadline, instead of failing every call during a link
// fault.
func TestDescribeWithTheOtherBrokersUnreachable(t *testing.T) {
	for _, tc := range []struct {
		name string
		// cut handles a FindCoordinator request a broker other than the coordinator received.
		// It may hold the request until healed is closed.
		cut func(c *kfake.Cluster, healed <-chan struct{}) (kmsg.Response, error, bool)
	}{
		{"connections closed", func(*kfake.Cluster, <-chan struct{}) (kmsg.Response, error, bool) {
			return nil, errors.New("link cut"), true
		}},
		{"no answer", func(c *kfake.Cluster, healed <-chan struct{}) (kmsg.Response, error, bool) {
			c.SleepControl(func() { <-healed })
			return nil, errors.New("link cut"), true
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const requestTimeout = 5 * time.Second
			f := newDescribeFixture(t, requestTimeout)
			healed := make(chan struct{})
			t.Cleanup(func() { close(healed) }) // before the cluster closes
			var asked atomic.Int32
			f.c.ControlKey(int16(kmsg.FindCoordinator), func(kmsg.Request) (kmsg.Response, error, bool) {
				f.c.KeepControl()
				if f.c.CurrentNode() == f.coord {
					return nil, nil, false
				}
				asked.Add(1)
				return tc.cut(f.c, healed)
			})
			start := time.Now()
			tok, held, err := f.tr.Describe(context.Background(), f.role)
			took := time.Since(start)
			if err != nil || !held || tok != f.minted {
				t.Fatalf("Describe = (%v, %v, %v), want (%v, true, nil): unreachable brokers have no say", tok, held, err, f.minted)
			}
			if took >= requestTimeout {
				t.Fatalf("Describe took %v, not within the request timeout %v", took, requestTimeout)
			}
			if asked.Load() == 0 {
				t.Fatal("Describe asked no other broker to confirm the coordinator")
			}
			t.Logf("Describe took %v, %d other brokers asked", took, asked.Load())
		})
	}
}
