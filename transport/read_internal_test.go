package transport

import (
	"context"
	"testing"
)

// Every lease write looks up the coordination topic; once it is known, the lookup must cost
// no allocation (a per-call deadline did: its context and timer were a measurable part of the
// write's overhead over a bare kgo transaction).
func TestCoordinationTopicKnownAllocatesNothing(t *testing.T) {
	tr := &BrokerTransport{cfg: Config{Topic: "fc"}, topics: map[string]*topicInfo{"fc": {partitions: 3}}}
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		info, err := tr.coordinationTopic(ctx, OpWrite, "r1")
		if err != nil || info.partitions != 3 {
			t.Fatalf("coordinationTopic = %+v, %v; want the cached topic", info, err)
		}
	})
	if allocs != 0 {
		t.Errorf("coordinationTopic of a known topic: %v allocations per call, want 0", allocs)
	}
}
