//go:build !kafka

package scenarios_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/scenarios"
	"github.com/fencecheck/fencecheck/scenarios/harness"
)

func TestWarningsNameCappedFreezesAndStepsAfterTheEnd(t *testing.T) {
	s, err := scenarios.Parse("t.yaml", []byte(`name: t
description: d
workload:
  preset: low
  request_timeout: 5s
nemesis:
  script:
    - at 4s freeze holder of r1 with point=before-lease-commit for 8s
    - at 5s freeze holder of r2 with point=before-work for 8s
    - at 6s freeze holder of r1 for 4s
    - at 30s partition holder of r1 from all for 2s
duration: 20s
`))
	if err != nil {
		t.Fatal(err)
	}
	ws := s.Warnings()
	if len(ws) != 2 {
		t.Fatalf("warnings %q, want two: the capped freeze and the step after the end", ws)
	}
	for _, want := range []string{`nemesis.script[0] "at 4s freeze holder of r1 with point=before-lease-commit for 8s"`, "4.5s", "5s request timeout", "not 8s"} {
		if !strings.Contains(ws[0], want) {
			t.Errorf("warning %q does not say %q", ws[0], want)
		}
	}
	for _, want := range []string{`nemesis.script[3] "at 30s partition holder of r1 from all for 2s"`, "20s run", "will not run"} {
		if !strings.Contains(ws[1], want) {
			t.Errorf("warning %q does not say %q", ws[1], want)
		}
	}

	// A random schedule's freeze without a duration lasts twice the lease.
	r, err := scenarios.Parse("r.yaml", []byte(`name: r
description: d
workload:
  preset: low
  lease: 3s
nemesis:
  random:
    faults:
      - fault: freeze
duration: 20s
`))
	if err != nil {
		t.Fatal(err)
	}
	if ws := r.Warnings(); len(ws) != 1 || !strings.Contains(ws[0], "nemesis.random.faults[0]") || !strings.Contains(ws[0], "not 6s") {
		t.Fatalf("warnings %q, want one for the random freeze of twice the 3s lease", ws)
	}
	for _, name := range scenarios.Names() {
		b, _, _ := scenarios.Builtin(name)
		for _, kind := range []string{scenarios.KindEmbedded, scenarios.KindLocal} {
			b.UseCluster(kind)
			if ws := b.Warnings(); len(ws) > 0 {
				t.Errorf("built-in %s on %s warns: %q", name, kind, ws)
			}
		}
	}
}

func TestOnKafkaTimingAppliesToKafkaClustersOnly(t *testing.T) {
	yaml := `name: k
description: d
nemesis:
  script:
    - at 4s kill coordinator of r1 for 6s
duration: 20s
on_kafka:
  duration: 50s
  script:
    - at 5s kill coordinator of r1 for 8s
`
	for _, tc := range []struct {
		kind     string
		duration time.Duration
		step     string
	}{
		{scenarios.KindEmbedded, 20 * time.Second, "at 4s kill coordinator of r1 for 6s"},
		{scenarios.KindLocal, 50 * time.Second, "at 5s kill coordinator of r1 for 8s"},
		{scenarios.KindContainers, 50 * time.Second, "at 5s kill coordinator of r1 for 8s"},
	} {
		s, err := scenarios.Parse("k.yaml", []byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		s.UseCluster(tc.kind)
		if s.Duration.D() != tc.duration || len(s.Nemesis.Script) != 1 || s.Nemesis.Script[0] != tc.step {
			t.Errorf("on %s: duration %v, script %q; want %v and %q", tc.kind, s.Duration, s.Nemesis.Script, tc.duration, tc.step)
		}
		if err := s.Validate(); err != nil {
			t.Errorf("on %s: %v", tc.kind, err)
		}
	}

	rr, _, err := scenarios.Builtin("rolling-restart")
	if err != nil {
		t.Fatal(err)
	}
	embedded := rr.Duration
	rr.UseCluster(scenarios.KindLocal)
	if rr.Duration <= embedded {
		t.Errorf("rolling-restart lasts %v on local Kafka, no longer than the %v of the embedded cluster", rr.Duration, embedded)
	}

	for _, bad := range []struct{ yaml, want string }{
		{"on_kafka:\n  script:\n    - at 1s earthquake all for 2s\n", "on_kafka.script[0]"},
		{"on_kafka:\n  duration: soon\n", "soon"},
		{"on_kafka:\n  durration: 5s\n", "durration"},
		{"nemesis:\n  random: {}\non_kafka:\n  script:\n    - at 1s kill random for 2s\n", "on_kafka.script"},
	} {
		_, err := scenarios.Parse("b.yaml", []byte("name: b\ndescription: d\nduration: 10s\n"+bad.yaml))
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: error %v, want one naming %s", bad.yaml, err, bad.want)
		}
	}
}

// TestCappedFreezeRecordsItsRealLength: a before-lease-commit freeze asked for 6s is capped a
// tenth under the 3s request timeout; its window in the history is the 2.7s the member was
// frozen, not the 6s asked for.
func TestCappedFreezeRecordsItsRealLength(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 10s scenario")
	}
	// Embedded runs mostly wait on lease timers: they overlap one another (parallel tests
	// start once the Kafka tests, which are not parallel, are done).
	t.Parallel()
	s, err := scenarios.Parse("capped.yaml", []byte(`name: capped
description: a freeze longer than a commit can be held back
workload:
  preset: low
  processes: 3
  roles: 1
  members_per_role: 2
  request_timeout: 3s
nemesis:
  script:
    - at 2s freeze holder of r1 with point=before-lease-commit for 6s
duration: 10s
`))
	if err != nil {
		t.Fatal(err)
	}
	if ws := s.Warnings(); len(ws) != 1 || !strings.Contains(ws[0], "2.7s") {
		t.Fatalf("warnings %q, want the 2.7s cap", ws)
	}
	out, err := harness.Run(context.Background(), s, harness.Options{Root: t.TempDir(), Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	h, err := history.ReadFile(out.Dir.History())
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Faults) != 1 || !h.Faults[0].TookHold || h.Faults[0].Step != 1 {
		t.Fatalf("faults %+v, want the freeze of step 1, held", h.Faults)
	}
	f := h.Faults[0]
	// At least the cap (the member is held that long), and short of the 6s asked for, which
	// leaves a loaded machine 3 s to resume the member.
	if d := time.Duration(f.End - f.Start); d < 2600*time.Millisecond || d >= 6*time.Second {
		t.Fatalf("the freeze's window lasts %v, want the 2.7s the member was frozen (asked: 6s)", d)
	}
	if out.Results.Verdict != checker.VerdictValid {
		t.Fatalf("verdict %s, want valid; run directory %s", out.Results.Verdict, out.Dir)
	}
}

// TestWarningsNameRefusalOnlyErrorResponses: an error-response on EndTxn with an error a
// coordinator gives only before acting warns, naming the step and the realistic fault; one
// with an error that can follow a commit (NOT_COORDINATOR) does not.
func TestWarningsNameRefusalOnlyErrorResponses(t *testing.T) {
	s, err := scenarios.Parse("t.yaml", []byte(`name: t
description: d
workload:
  preset: low
nemesis:
  script:
    - at 4s error-response endtxn of p1 first 1 with error=CONCURRENT_TRANSACTIONS for 2s
    - at 8s error-response endtxn of p1 first 1 with error=NOT_COORDINATOR for 2s
    - at 9s error-response addpartitionstotxn of p1 first 1 with error=CONCURRENT_TRANSACTIONS for 2s
duration: 20s
`))
	if err != nil {
		t.Fatal(err)
	}
	ws := s.Warnings()
	if len(ws) != 1 || !strings.Contains(ws[0], "nemesis.script[0]") || !strings.Contains(ws[0], "drop-response endtxn") {
		t.Fatalf("warnings %q; want one, for step 0, naming drop-response endtxn", ws)
	}
}

// TestWarningsNameDuplicatedEndTxn: a duplicate of EndTxn is warned of (a client that sends it
// once never has a copy in the network); a duplicate of Produce, which clients retry, is not.
func TestWarningsNameDuplicatedEndTxn(t *testing.T) {
	s, err := scenarios.Parse("t.yaml", []byte(`name: t
description: d
workload:
  preset: low
nemesis:
  script:
    - at 4s duplicate produce of p1 first 1 for 2s
    - at 8s duplicate End_Txn of p1 until addpartitionstotxn first 1 for 2s
duration: 20s
`))
	if err != nil {
		t.Fatal(err)
	}
	ws := s.Warnings()
	if len(ws) != 1 || !strings.Contains(ws[0], "nemesis.script[1]") || !strings.Contains(ws[0], "sends EndTxn once") {
		t.Fatalf("warnings %q; want one, for step 1, naming the clients that send EndTxn once", ws)
	}
}
