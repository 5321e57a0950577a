package transport_test

import (
	"strings"
	"testing"

	"github.com/fencecheck/fencecheck/transport/transporttest"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kversion"
)

// newKfake starts a 3-broker kfake cluster for the test and returns its bootstrap list.
func newKfake(t testing.TB, opts ...kfake.Opt) string {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(3)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return strings.Join(c.ListenAddrs(), ",")
}

func TestConformanceKfake(t *testing.T) {
	t.Run("TV2 negotiated", func(t *testing.T) {
		t.Parallel()
		transporttest.Run(t, transporttest.Env{Bootstrap: newKfake(t), TransactionVersion: 2, New: transporttest.Start})
	})
	t.Run("TV2 required", func(t *testing.T) {
		t.Parallel()
		transporttest.Run(t, transporttest.Env{Bootstrap: newKfake(t), TransactionVersion: 2,
			PinTransactionVersion: true, New: transporttest.Start})
	})
	t.Run("TV1 pinned by the client", func(t *testing.T) {
		t.Parallel()
		transporttest.Run(t, transporttest.Env{Bootstrap: newKfake(t), TransactionVersion: 1,
			PinTransactionVersion: true, New: transporttest.Start})
	})
	t.Run("TV1 cluster (3.9 protocol)", func(t *testing.T) {
		t.Parallel()
		transporttest.Run(t, transporttest.Env{Bootstrap: newKfake(t, kfake.MaxVersions(kversion.V3_9_0())),
			TransactionVersion: 1, New: transporttest.Start})
	})
}
