package cluster

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestFreshMetadataSkipsDeadBroker: with one of three brokers closing every connection at once,
// as a killed broker behind a link does, each fresh metadata request still gets an answer.
func TestFreshMetadataSkipsDeadBroker(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dead := c.ListenAddrs()[0]
	var d net.Dialer
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...),
		kgo.Dialer(func(ctx context.Context, network, addr string) (net.Conn, error) {
			if addr == dead {
				here, there := net.Pipe()
				there.Close()
				return here, nil
			}
			return d.DialContext(ctx, network, addr)
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 30 {
		m, err := freshMetadata(ctx, cl)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if len(m.Brokers) != 3 {
			t.Fatalf("request %d: %d brokers listed, want 3", i, len(m.Brokers))
		}
	}
}
