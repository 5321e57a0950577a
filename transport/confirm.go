package transport

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// confirmers is how many brokers other than the one that answered Describe are asked to
// confirm it as the coordinator. Two is every other broker of a 3-broker cluster, so the
// broker the coordinator moved to is always among them there.
const confirmers = 2

// confirmCoordinator asks other brokers whether node, which has just answered
// DescribeTransactions for the transactional id id, is still its coordinator. It returns an
// error wrapping kerr.NotCoordinator when one of them names another broker, or none.
//
// Why: an Apache Kafka broker cut off from its peers keeps answering as the coordinator, from
// the state it had when it was cut off. Meanwhile the controller has moved the coordinator to
// another broker, which may have minted a newer epoch, and the isolated broker still names the
// old holder. The client keeps sending DescribeTransactions to the broker it cached as the
// coordinator until that broker itself says it is not. The brokers that still hear the
// controller learn of the move, so their FindCoordinator names the new coordinator.
//
// Up to confirmers other brokers are asked in parallel, the ones following node in id order.
// The wait is bounded by RequestTimeout/5 and by ctx. A broker that cannot be reached, that
// does not answer in time, or that fails the request for another reason has no say: a link
// fault that hides the other brokers leaves Describe unconfirmed, as it was before this check,
// rather than failing every call. What stays open: the answer is trusted when the brokers
// asked agree with it but have not yet learnt of a move themselves, and when none of them can
// be reached.
func (t *BrokerTransport) confirmCoordinator(ctx context.Context, id string, node int32) error {
	others, err := t.otherBrokers(ctx, node)
	if err != nil || len(others) == 0 {
		return nil // no broker to ask: the answer stays unconfirmed
	}
	ctx, cancel := context.WithTimeout(ctx, t.cfg.RequestTimeout/5)
	defer cancel()
	type answer struct {
		broker, coordinator int32
		err                 error
	}
	answers := make(chan answer, len(others)) // buffered: an answer after the wait is dropped
	for _, b := range others {
		go func() {
			c, err := t.findCoordinator(ctx, b, id)
			answers <- answer{b, c, err}
		}()
	}
	for range others {
		select {
		case <-ctx.Done():
			return nil // the brokers that did not answer in time have no say
		case a := <-answers:
			switch {
			case a.err != nil:
				t.log.Debug("describe: a broker did not confirm the coordinator", "txn_id", id, "broker", a.broker, "err", a.err)
			case a.coordinator < 0:
				return fmt.Errorf("broker %d answered DescribeTransactions for %q, but broker %d knows no coordinator for it: %w",
					node, id, a.broker, kerr.NotCoordinator)
			case a.coordinator != node:
				return fmt.Errorf("broker %d answered DescribeTransactions for %q, but broker %d names broker %d as its coordinator: %w",
					node, id, a.broker, a.coordinator, kerr.NotCoordinator)
			}
		}
	}
	return nil
}

// otherBrokers returns up to confirmers brokers other than node, those following it in node
// id order, from the brokers the admin client knows. It sends nothing when the admin client
// has loaded the brokers, which it has after any request.
func (t *BrokerTransport) otherBrokers(ctx context.Context, node int32) ([]int32, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{} // brokers only; nil would ask for every topic
	resp, err := t.admin.RequestCachedMetadata(ctx, req, 0)
	if err != nil {
		return nil, err
	}
	var ids []int32
	for _, b := range resp.Brokers {
		if b.NodeID != node && !slices.Contains(ids, b.NodeID) {
			ids = append(ids, b.NodeID)
		}
	}
	slices.Sort(ids)
	// Rotate so the brokers with ids above node come first, then wrap around.
	i, _ := slices.BinarySearch(ids, node)
	ids = append(ids[i:], ids[:i]...)
	return ids[:min(len(ids), confirmers)], nil
}

// findCoordinator asks broker b which broker coordinates the transactional id id. The result
// is -1 when b knows no coordinator for it (COORDINATOR_NOT_AVAILABLE: b sees no leader of
// the id's transaction-state partition).
func (t *BrokerTransport) findCoordinator(ctx context.Context, b int32, id string) (int32, error) {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType = 1 // transaction
	req.CoordinatorKey = id // versions 0 to 3
	req.CoordinatorKeys = []string{id}
	kresp, err := t.admin.Broker(int(b)).Request(ctx, req)
	if err != nil {
		return 0, err
	}
	resp := kresp.(*kmsg.FindCoordinatorResponse)
	code, coordinator := resp.ErrorCode, resp.NodeID
	for _, c := range resp.Coordinators { // versions 4 and later
		if c.Key == id {
			code, coordinator = c.ErrorCode, c.NodeID
		}
	}
	switch err := kerr.ErrorForCode(code); {
	case errors.Is(err, kerr.CoordinatorNotAvailable):
		return -1, nil
	case err != nil:
		return 0, err
	}
	return coordinator, nil
}
