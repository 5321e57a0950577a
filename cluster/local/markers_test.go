//go:build kafka

package local_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/cluster/clustertest"
	"github.com/fencecheck/fencecheck/cluster/local"
	"github.com/fencecheck/fencecheck/internal/testenv"
)

// TestProduceAfterTimeoutAbort (KAFKA-19690): a transactional Produce that passes the
// coordinator's verification while the coordinator is writing its timeout abort, and reaches
// the log after the abort marker, must be refused INVALID_PRODUCER_EPOCH (recoverable), not
// INVALID_TXN_STATE (fatal to kafka-clients and Kafka Streams). Its own four-broker cluster
// at transaction version 1 (see clustertest.ProduceAfterTimeoutAbort); the release is
// FENCECHECK_KAFKA_HOME's. A long test: make regressions runs it on each release.
func TestProduceAfterTimeoutAbort(t *testing.T) {
	testenv.Long(t)
	needKafka(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := local.New(ctx, local.Options{Brokers: 4, TxnVersion: 1, Logger: testLogger(t), Dir: os.Getenv("FENCECHECK_TEST_KAFKA_DIR")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	p := clustertest.ProduceAfterTimeoutAbort(t, c)
	t.Logf("Kafka %s: %s", c.Info().Version, p)
	if p.Bug {
		t.Errorf("KAFKA-19690: the late Produce was refused %s at the append (%s), want INVALID_PRODUCER_EPOCH", p.Produce, p.Append)
	}
	if p.Produce == "accepted" {
		t.Errorf("the Produce into the aborting transaction was accepted: its verification answer arrived before the abort marker, the window was missed (%s)", p)
	}
}

// TestMarkerRetryAfterLostAnswer (KAFKA-19999): a commit marker that the coordinator sends
// again with the same epoch, because the answer to the first was lost, must be accepted, and
// the transaction must complete. The shared cluster (transaction version 2 on 4.x).
func TestMarkerRetryAfterLostAnswer(t *testing.T) {
	testenv.Long(t)
	m := clustertest.MarkerRetry(t, sharedCluster(t))
	t.Logf("Kafka %s: %s", sharedCluster(t).Info().Version, m)
	if m.Hung {
		t.Errorf("KAFKA-19999: after the retried marker the transaction is %s and a successor's InitProducerId answered %s", m.Final, m.Successor)
	}
	if !m.Retried {
		t.Errorf("the retried marker never reached the partition (%d commit markers of the producer in the log, the fix's log line absent): the probe did not provoke the retry (%s)", m.Commits, m)
	}
}
