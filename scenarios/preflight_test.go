//go:build !kafka

package scenarios_test

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/internal/units"
	"github.com/fencecheck/fencecheck/scenarios"
	"github.com/fencecheck/fencecheck/scenarios/harness"
)

// TestPreflightRefusesABrokerThatCannotEndTransactions: an external cluster that routes
// InitProducerId but not EndTxn or DescribeTransactions (kfake capped with MaxVersions, as
// some Kafka-compatible brokers are) stops the run before its workload. The verdict is error,
// naming the missing APIs, the console shows the preflight's table, and the history holds no
// operation, so nothing in the run can read as a fencing violation.
func TestPreflightRefusesABrokerThatCannotEndTransactions(t *testing.T) {
	v := kversion.Stable()
	v.SetMaxKeyVersion(kmsg.EndTxn.Int16(), -1)
	v.SetMaxKeyVersion(kmsg.DescribeTransactions.Int16(), -1)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.MaxVersions(v))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	s, _, err := scenarios.Builtin("steady")
	if err != nil {
		t.Fatal(err)
	}
	s.UseCluster(scenarios.KindExternal)
	s.Cluster.Bootstrap = strings.Join(c.ListenAddrs(), ",")
	s.Duration = units.Duration(5 * time.Second)
	var console bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := harness.Run(ctx, s, harness.Options{Root: t.TempDir(), Seed: 1, Console: &console})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + console.String())
	res := out.Results
	if res.Verdict != checker.VerdictError || res.ExitCode != checker.ExitHarness {
		t.Fatalf("verdict %s (exit %d), want error (255); console:\n%s", res.Verdict, res.ExitCode, console.String())
	}
	for _, want := range []string{harness.ErrBrokerCannot.Error(), "EndTxn v0+", "DescribeTransactions v0+"} {
		if !strings.Contains(res.Error, want) {
			t.Errorf("results error %q does not name %q", res.Error, want)
		}
	}
	if !strings.Contains(console.String(), "missing    EndTxn v0+") || !strings.Contains(console.String(), "not tried  commit") {
		t.Errorf("console lacks the preflight table:\n%s", console.String())
	}
	hist, err := os.ReadFile(out.Dir.History())
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if bytes.Contains(hist, []byte(`"type":"invoke"`)) {
		t.Errorf("the refused run recorded operations:\n%s", hist)
	}
}
