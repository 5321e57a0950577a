//go:build kafka

package shrink

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/cluster/local"
	"github.com/fencecheck/fencecheck/internal/testenv"
	"github.com/fencecheck/fencecheck/scenarios"
	"github.com/fencecheck/fencecheck/scenarios/harness"
)

// budgetSlackReal is budgetSlack on a real cluster: a try cut off at the end of the budget
// heals and reads back from Kafka before it is checked.
const budgetSlackReal = 45 * time.Second

// TestShrinkExternalKafka shrinks a mutant's failing run on an external cluster (a local
// Kafka cluster given by its bootstrap address, as a user's own cluster would be): every try
// must run on that external cluster, the shrink must end within its budget, and the result
// must load with the external cluster in it.
func TestShrinkExternalKafka(t *testing.T) {
	testenv.NeedKafka(t, "starts a Kafka cluster")
	// About 3 minutes: a Kafka cluster, the failing run and a 2-minute shrink. The shrink's
	// steps are the same as on the embedded cluster, which the other tests cover.
	testenv.Long(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	lc, err := local.New(ctx, local.Options{Brokers: 3, LogsDir: t.TempDir()})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lc.Close(context.Background()) })
	text := fmt.Sprintf(`
name: external-short
cluster: {kind: external, bootstrap: %q}
workload:
  preset: high
  processes: 4
  roles: 2
  members_per_role: 3
nemesis:
  script:
    - at 3s partition p1 from all for 3s
duration: 12s
`, strings.Join(lc.Bootstrap(), ","))
	s, err := scenarios.Parse("external-short.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	var dir string
	for seed := uint64(1); seed <= 3 && dir == ""; seed++ {
		out, err := harness.Run(context.Background(), s, harness.Options{Root: root, Seed: seed, Transport: mutantName})
		if err != nil {
			t.Fatal(err)
		}
		if len(Failed(out.Results)) > 0 {
			dir = string(out.Dir)
		}
	}
	if dir == "" {
		t.Fatal("the mutant's runs of seeds 1 to 3 on the external cluster were all valid")
	}
	o, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	var progress strings.Builder
	const budget = 2 * time.Minute
	began := time.Now()
	res, err := Run(context.Background(), o, Options{Out: out, Budget: budget, Confirm: 2, Progress: &progress})
	took := time.Since(began)
	t.Logf("took %v; progress:\n%s", took, progress.String())
	if err != nil {
		t.Fatal(err)
	}
	if took > budget+budgetSlackReal {
		t.Errorf("the shrink took %v, more than its %v budget and %v", took, budget, budgetSlackReal)
	}
	if res.Cluster != scenarios.KindExternal || len(res.Candidates) == 0 {
		t.Errorf("cluster %q, %d candidates: want candidates tried on the external cluster", res.Cluster, len(res.Candidates))
	}
	runs, _ := filepath.Glob(filepath.Join(out, "runs", "*", "*", "run.json"))
	if len(runs) == 0 {
		t.Fatal("no tries in the output folder")
	}
	for _, f := range runs {
		var info struct{ Cluster, Transport string }
		b, err := os.ReadFile(f)
		if err == nil {
			err = json.Unmarshal(b, &info)
		}
		if err != nil || info.Cluster != scenarios.KindExternal || info.Transport != mutantName {
			t.Errorf("%s: cluster %q, transport %q (%v): want the external cluster and %s", f, info.Cluster, info.Transport, err, mutantName)
		}
	}
	r, err := scenarios.Find(filepath.Join(out, ScenarioFile))
	if err != nil {
		t.Fatalf("the result does not load: %v", err)
	}
	if r.Cluster.Kind != scenarios.KindExternal || r.Cluster.Bootstrap != s.Cluster.Bootstrap {
		t.Errorf("the result runs on %s %q, want the external cluster %q", r.Cluster.Kind, r.Cluster.Bootstrap, s.Cluster.Bootstrap)
	}
}
