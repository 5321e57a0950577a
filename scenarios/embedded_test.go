//go:build !kafka

package scenarios_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/internal/units"
	"github.com/fencecheck/fencecheck/scenarios"
	"github.com/fencecheck/fencecheck/scenarios/harness"
)

// TestRunWithoutSeedEmbedded runs a short scenario with faults without a seed, as
// `fencecheck run` does without --seed: the stored repeat command names the run directory and
// the seed Run picked, the directory's scenario.yaml loads as the scenario run.json keeps and
// FromRun returns, and the harness log names every key once per line.
func TestRunWithoutSeedEmbedded(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a scenario")
	}
	// Embedded runs mostly wait on lease timers: they overlap one another (parallel tests
	// start once the Kafka tests, which are not parallel, are done).
	t.Parallel()
	s, _, err := scenarios.Builtin("flapping")
	if err != nil {
		t.Fatal(err)
	}
	s.Duration = scenarios.Duration(6 * time.Second) // the first fault starts at 4 s
	out, err := harness.Run(context.Background(), s, harness.Options{Root: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	info, err := out.Dir.ReadRunInfo()
	if err != nil {
		t.Fatal(err)
	}
	if info.Seed == 0 || info.Seed != out.Seed {
		t.Fatalf("run.json seed %d, outcome seed %d", info.Seed, out.Seed)
	}
	if want := "fencecheck run " + string(out.Dir) + " --seed " + strconv.FormatUint(info.Seed, 10); info.Command != want || out.Command != want {
		t.Errorf("stored command %q (outcome %q), want %q", info.Command, out.Command, want)
	}
	if rs := info.Resources; rs == nil || rs.WallSeconds < 6 || rs.CPUSeconds <= 0 || rs.PeakRSSBytes < 1<<20 {
		t.Errorf("run.json resources %+v: want the run's wall time (over its 6 s), CPU time and peak RSS", rs)
	}
	fromRun, _, err := scenarios.FromRun(string(out.Dir))
	if err != nil {
		t.Fatal(err)
	}
	fromFile, err := scenarios.Find(out.Dir.Scenario())
	if err != nil {
		t.Fatalf("scenario.yaml does not load: %v", err)
	}
	a, _ := json.Marshal(fromRun)
	if b, _ := json.Marshal(fromFile); string(a) != string(b) {
		t.Errorf("scenario.yaml loads as\n%s\nrun.json holds\n%s", b, a)
	}
	if fromFile.Duration.D() != 6*time.Second {
		t.Errorf("scenario.yaml runs for %v, the run ran 6s", fromFile.Duration)
	}

	b, err := os.ReadFile(out.Dir.HarnessLog())
	if err != nil {
		t.Fatal(err)
	}
	components := map[string]bool{}
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		seen := map[string]bool{}
		for _, kv := range logfmt(line) {
			if seen[kv[0]] {
				t.Errorf("harness.log line %d has %s twice: %s", i+1, kv[0], line)
			}
			seen[kv[0]] = true
			if kv[0] == "component" {
				components[kv[1]] = true
			}
		}
	}
	for _, c := range []string{"workload", "nemesis", "checker"} {
		if !components[c] {
			t.Errorf("harness.log has no line of component=%s", c)
		}
	}
}

// logfmt splits a line of slog's text handler into its key=value pairs; a quoted value may
// hold spaces, equals signs and escaped quotes.
func logfmt(line string) [][2]string {
	var out [][2]string
	for line = strings.TrimSpace(line); line != ""; line = strings.TrimSpace(line) {
		k, rest, ok := strings.Cut(line, "=")
		if !ok {
			break
		}
		v := rest
		if strings.HasPrefix(rest, `"`) {
			end := 1
			for end < len(rest) && rest[end] != '"' {
				if rest[end] == '\\' {
					end++
				}
				end++
			}
			v, line = rest[:min(end+1, len(rest))], rest[min(end+1, len(rest)):]
		} else {
			v, line, _ = strings.Cut(rest, " ")
		}
		out = append(out, [2]string{k, v})
	}
	return out
}

// TestBuiltinScenariosEmbedded runs every built-in scenario that the embedded cluster can run,
// all at once, and then judges each in a subtest of its name. An embedded run spends most of
// its time waiting on lease timers (about 5% of a core each, measured by the soak): one after
// another they cost CI six minutes of an idle machine, four at a time (go test's -parallel)
// a minute and a half, all at once about as long as the longest scenario.
func TestBuiltinScenariosEmbedded(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every scenario for its full duration")
	}
	// Embedded runs mostly wait on lease timers: they overlap one another (parallel tests
	// start once the Kafka tests, which are not parallel, are done).
	t.Parallel()
	type run struct {
		name string
		out  *harness.Outcome
		err  error
	}
	var runs []*run
	for _, name := range scenarios.Names() {
		if s, _, _ := scenarios.Builtin(name); s.Supports(scenarios.KindEmbedded) == nil {
			runs = append(runs, &run{name: name})
		}
	}
	var wg sync.WaitGroup
	for _, r := range runs {
		root := t.TempDir()
		wg.Go(func() { r.out, r.err = startScenario(r.name, scenarios.KindEmbedded, 11, root, nil) })
	}
	wg.Wait()
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			rerun := func() (*harness.Outcome, error) {
				return startScenario(r.name, scenarios.KindEmbedded, 11, t.TempDir(), nil)
			}
			mustBeValid(t, r.name, scenarios.KindEmbedded, 11, r.out, r.err, rerun)
		})
	}
}

// TestFleetFilesLoad: every fleet scenario (scenarios/fleet, run by make scale) loads and
// asks for the fleet it is named for.
func TestFleetFilesLoad(t *testing.T) {
	files, err := filepath.Glob("fleet/*.yaml")
	if err != nil || len(files) < 4 {
		t.Fatalf("fleet files %v (%v): want the four of make scale", files, err)
	}
	for _, file := range files {
		s, err := scenarios.Find(file)
		if err != nil {
			t.Errorf("%s: %v", file, err)
			continue
		}
		if s.Workload.Processes < 500 {
			t.Errorf("%s: %d processes; a fleet has at least 500", file, s.Workload.Processes)
		}
	}
}

// TestPipelineRolesNameBrokers: in a pipeline run the nemesis's broker selectors resolve the
// roles (input partitions): group-coordinator of in0 is the group's coordinator, leader of in1
// the input partition's leader, coordinator of in2 the transaction coordinator of its owner.
// Pauses (kfake stalls the broker's connections; no leader epoch moves) keep the run valid.
func TestPipelineRolesNameBrokers(t *testing.T) {
	s, err := scenarios.Parse("roles.yaml", []byte(`name: pipeline-roles
description: pauses aimed by a pipeline's roles
cluster:
  kind: embedded
workload:
  kind: pipeline
  pipeline:
    processes: 2
    members: 3
    partitions: 3
nemesis:
  script:
    - at 2s pause group-coordinator of in0 for 2s
    - at 5s pause leader of in1 for 2s
    - at 8s pause coordinator of in2 for 2s
duration: 12s
promises: [fault-took-hold]
`))
	if err != nil {
		t.Fatal(err)
	}
	run := func() (*harness.Outcome, error) {
		return harness.Run(context.Background(), s, harness.Options{Root: t.TempDir(), Seed: 1})
	}
	out, err := run()
	out = mustBeValid(t, s.Name, scenarios.KindEmbedded, 1, out, err, run)
	h, err := history.ReadFile(out.Dir.History())
	if err != nil {
		t.Fatal(err)
	}
	var descs []string
	for _, f := range h.Faults {
		descs = append(descs, f.Desc)
	}
	for _, want := range []string{"group-coordinator of in0 (b", "leader of in1 (b", "coordinator of in2 (b"} {
		if !slices.ContainsFunc(descs, func(d string) bool { return strings.Contains(d, want) }) {
			t.Errorf("no fault window says %q: %q", want, descs)
		}
	}
}

// TestPartitionTxnIDsFenceTheZombie: with a transactional id per input partition (the older
// style of exactly-once) the new owner's producer fences the zombie's, so pipeline-zombie
// stays valid even for a member that sends its offsets with the group id alone
// (mutant:group-id-only, invalid with an id per member: selftest): the zombie's transaction is
// refused (txn-aborted, promised by the scenario, must hold) and every transaction ran under
// its partition's id.
func TestPartitionTxnIDsFenceTheZombie(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipeline-zombie twice")
	}
	base, _, err := scenarios.Builtin("pipeline-zombie")
	if err != nil {
		t.Fatal(err)
	}
	for _, member := range []string{"", "mutant:group-id-only"} {
		t.Run(map[string]string{"": "plain"}[member]+member, func(t *testing.T) {
			s := *base
			s.Duration = units.Duration(12 * time.Second)
			cfg, err := s.Workload.PipelineConfig()
			if err != nil {
				t.Fatal(err)
			}
			cfg.TxnIDs = "partition"
			s.Workload.Pipeline = &cfg
			run := func() (*harness.Outcome, error) {
				return harness.Run(context.Background(), &s, harness.Options{Root: t.TempDir(), Seed: 2, Transport: member})
			}
			out, err := run()
			out = mustBeValid(t, s.Name, scenarios.KindEmbedded, 2, out, err, run)
			h, err := history.ReadFile(out.Dir.History())
			if err != nil {
				t.Fatal(err)
			}
			for _, op := range h.All() {
				if op.Kind != history.KindTxn {
					continue
				}
				want := fmt.Sprintf("%s-in-%d", h.Meta.Pipeline.Group, op.Args.Pipe.Inputs[0].Partition)
				if op.Args.Pipe.TransactionalID != want || len(op.Args.Pipe.Offsets) != 1 {
					t.Fatalf("txn op %d ran under %q with offsets %v, want %q and one partition", op.ID, op.Args.Pipe.TransactionalID, op.Args.Pipe.Offsets, want)
				}
			}
		})
	}
}

// TestPipelineRecordsTheMembersTransactionVersion: a pipeline run records the transaction
// version its members spoke, not the cluster's. Through the Sarama adapter (Sarama v1.61.1 has
// no KIP-890: EndTxn v3) on kfake finalized at TV2, the header claims no version for the
// members, only the cluster's; every committed transaction records TV1, as the member's
// gateway saw its EndTxn; and the results (the report's "the client speaks") say TV1 on a TV2
// cluster. fencecheck's in-process member follows the cluster: TV2, as the header says.
// Before, both runs' headers and results said TV2.
func TestPipelineRecordsTheMembersTransactionVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("runs pipeline-steady twice")
	}
	t.Parallel()
	base, _, err := scenarios.Builtin("pipeline-steady")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, transport         string
		header, cluster, member int // header's transaction_version and cluster_transaction_version; each committed txn's
		results, resultsCluster int
	}{
		{name: "sarama", transport: adapterTransport(t, "sarama"), header: 0, cluster: 2, member: 1, results: 1, resultsCluster: 2},
		{name: "in-process", transport: "", header: 2, cluster: 0, member: 0, results: 2, resultsCluster: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := *base
			s.Duration = units.Duration(6 * time.Second)
			s.Cluster.TransactionVersion = 2
			out, err := harness.Run(context.Background(), &s, harness.Options{Root: t.TempDir(), Seed: 1, Transport: tc.transport})
			if err != nil {
				t.Fatal(err)
			}
			h, err := history.ReadFile(out.Dir.History())
			if err != nil {
				t.Fatal(err)
			}
			if h.Meta.TransactionVersion != tc.header || h.Meta.ClusterTransactionVersion != tc.cluster {
				t.Errorf("header: transaction_version %d, cluster_transaction_version %d; want %d and %d",
					h.Meta.TransactionVersion, h.Meta.ClusterTransactionVersion, tc.header, tc.cluster)
			}
			committed := 0
			for _, op := range h.All() {
				if op.Kind != history.KindTxn || op.Type != history.TypeOK {
					continue
				}
				committed++
				if got := op.Result.Pipe.TxnVersion; got != tc.member {
					t.Fatalf("committed txn op %d recorded txn_version %d, want %d", op.ID, got, tc.member)
				}
			}
			if committed == 0 {
				t.Fatalf("no transaction committed in %s", out.Dir)
			}
			if r := out.Results.Run; r.TransactionVersion != tc.results || r.ClusterTransactionVersion != tc.resultsCluster {
				t.Errorf("results: the client speaks TV%d, the cluster TV%d; want TV%d and TV%d (0: not said)",
					r.TransactionVersion, r.ClusterTransactionVersion, tc.results, tc.resultsCluster)
			}
		})
	}
}

// TestAddOffsetsFaultReachesEveryTransactionVersion: a Kafka-aware fault on add-offsets takes
// hold on the session member under both transaction versions. Under version 1 kgo sends
// AddOffsetsToTxn; under version 2 it sends none (its TxnOffsetCommit adds the offsets), and a
// fault on addoffsetstotxn never took hold there, which left pipeline-txn-faults inconclusive
// for KIP-890 clients. The transaction the error answer hits must abort (txn-aborted) and the
// member start again at its committed offsets (no loss, no duplicate).
func TestAddOffsetsFaultReachesEveryTransactionVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two scenarios")
	}
	for _, tv := range []int{1, 2} {
		t.Run(fmt.Sprintf("TV%d", tv), func(t *testing.T) {
			t.Parallel()
			s, err := scenarios.Parse("add-offsets.yaml", []byte(fmt.Sprintf(`name: add-offsets
description: the requests that take a transaction's offsets in answered TRANSACTION_ABORTABLE
cluster:
  kind: embedded
  transaction_version: %d
workload:
  kind: pipeline
  pipeline:
    processes: 1
    members: 2
    partitions: 2
    member: session
nemesis:
  script:
    - at 1s error-response add-offsets of p1 with error=TRANSACTION_ABORTABLE first 2 for 3s
duration: 7s
promises: [fault-took-hold, txn-aborted]
`, tv)))
			if err != nil {
				t.Fatal(err)
			}
			run := func() (*harness.Outcome, error) {
				return harness.Run(context.Background(), s, harness.Options{Root: t.TempDir(), Seed: 1})
			}
			out, err := run()
			mustBeValid(t, s.Name, fmt.Sprintf("%s TV%d", scenarios.KindEmbedded, tv), 1, out, err, run)
		})
	}
}
