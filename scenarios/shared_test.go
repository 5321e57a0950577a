//go:build !kafka

package scenarios_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/scenarios"
	"github.com/fencecheck/fencecheck/scenarios/harness"
	"github.com/twmb/franz-go/pkg/kadm"
)

// TestSharesCluster: a scenario that can kill, pause, restart or isolate a broker (or move a
// coordinator, or draw from the default random menu, which kills) needs a cluster of its own.
func TestSharesCluster(t *testing.T) {
	want := map[string]bool{
		"steady": true, "holder-partition": true, "coordinator-partition": true, "zombie-holder": true,
		"black-hole": true, "slow-links": true, "flapping": true,
		"kill-coordinator": false, "kill-leader": false, "pause-broker": false, "isolate-broker": false,
		"rolling-restart": false, "chaos": false, "pipeline-steady": true, "pipeline-zombie": true,
		"pipeline-rebalance-storm": true, "pipeline-txn-faults": true, "pipeline-zombie-commit": true,
		"pipeline-kill-group-coordinator": false, "pipeline-kill-txn-coordinator": false,
		// Kafka-aware faults act on the processes' own requests: the cluster is left as it was.
		"chaos-kafka": true, "lost-commit": true, "pipeline-chaos-kafka": true,
	}
	for _, name := range scenarios.Names() {
		s, _, err := scenarios.Builtin(name)
		if err != nil {
			t.Fatal(err)
		}
		w, ok := want[name]
		if !ok {
			t.Errorf("catalogue scenario %s: say here whether it may share a cluster", name)
			continue
		}
		if got := scenarios.SharesCluster(s); got != w {
			t.Errorf("%s: SharesCluster %v, want %v (faults %v)", name, got, w, s.Nemesis.Faults())
		}
	}
}

// TestRunsOnSharedCluster hands one embedded cluster to two runs in turn (Options.Cluster):
// neither may judge the other's records (both come out valid), each writes its own topics, and
// the cluster is still up after both (Run does not stop a cluster it did not start). A
// scenario whose kind is not the cluster's is refused.
func TestRunsOnSharedCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two scenarios")
	}
	// Embedded runs mostly wait on lease timers: they overlap one another (parallel tests
	// start once the Kafka tests, which are not parallel, are done).
	t.Parallel()
	ctx := context.Background()
	cl, err := harness.StartCluster(ctx, scenarios.ClusterSpec{Kind: scenarios.KindEmbedded}, t.TempDir(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close(ctx)
	root := t.TempDir()
	for i := range 2 {
		s, _, err := scenarios.Builtin("steady")
		if err != nil {
			t.Fatal(err)
		}
		s.Duration = scenarios.Duration(4 * time.Second)
		out, err := harness.Run(ctx, s, harness.Options{Root: root, Cluster: cl})
		if err != nil {
			t.Fatal(err)
		}
		if v := out.Results.Verdict; v == checker.VerdictInvalid || v == checker.VerdictError {
			t.Fatalf("run %d on the shared cluster: %s: %v", i+1, v, out.Results.Error)
		}
	}
	adm, err := cluster.NewAdminClient(cl.Bootstrap(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	topics, err := kadm.NewClient(adm).ListTopics(ctx)
	if err != nil {
		t.Fatalf("the cluster after both runs: %v", err)
	}
	runs := map[string]bool{}
	for _, name := range topics.Names() {
		if id, ok := strings.CutPrefix(name, "fencecheck."); ok {
			runs[id[:strings.Index(id, ".")]] = true
		}
	}
	if len(runs) != 2 {
		t.Errorf("topics %v: want those of two runs", topics.Names())
	}

	s, _, _ := scenarios.Builtin("steady")
	s.UseCluster(scenarios.KindLocal)
	if _, err := harness.Run(ctx, s, harness.Options{Root: root, Cluster: cl}); err == nil || !strings.Contains(err.Error(), "embedded") {
		t.Errorf("a local scenario on an embedded cluster: %v", err)
	}
}

// TestShellQuote: a value with blanks or quotes (a run directory's path, an exec transport's
// command line) is quoted for a POSIX shell, so a stored command repeats the run when pasted;
// plain values stay bare.
func TestShellQuote(t *testing.T) {
	for v, want := range map[string]string{
		"runs/steady/20261204T010000Z-7": "runs/steady/20261204T010000Z-7",
		"my runs/steady":                 "'my runs/steady'",
		"exec:sh -c 'x'":                 `'exec:sh -c '\''x'\'''`,
		"mutant:ack-fenced":              "mutant:ack-fenced",
		"":                               "''",
	} {
		if got := scenarios.ShellQuote(v); got != want {
			t.Errorf("ShellQuote(%q) = %s, want %s", v, got, want)
		}
	}
}
