package pipeline_test

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/fencecheck/fencecheck/transport/pipeline"
	"github.com/fencecheck/fencecheck/transport/pipeline/pipelinetest"
)

// mutantEnv names the mutant a child test process runs the suite on (TestMutantsFailTheSuite).
const mutantEnv = "FENCECHECK_PIPELINE_MUTANT"

// TestConformanceKfake runs the conformance suite for each member and group protocol on kfake,
// with session timeouts short enough for the zombie test: the classic protocol's minimum
// below the members' 2 s, and the consumer protocol's own (the group's, not the member's) 2 s.
func TestConformanceKfake(t *testing.T) {
	kinds := pipeline.Kinds
	if m := os.Getenv(mutantEnv); m != "" {
		kinds = []string{pipeline.MutantPrefix + m}
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.BrokerConfigs(pipelinetest.KfakeBrokerConfigs()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close) // after the parallel subtests, which run once this function returns
	for _, kind := range kinds {
		for _, protocol := range []string{pipeline.ProtocolClassic, pipeline.ProtocolConsumer} {
			t.Run(kind+"/"+protocol, func(t *testing.T) {
				// Side by side: each test of the suite has its own topics and group, and the
				// suite mostly waits (on session timeouts, on the group's rebalances); it waits
				// for events, never for a time, so a busier kfake only makes it slower.
				t.Parallel()
				pipelinetest.Run(t, pipelinetest.Env{Bootstrap: c.ListenAddrs()[0], Kind: kind, Protocol: protocol})
			})
		}
	}
}

// TestMutantsFailTheSuite runs the suite's test a mutant member names on it, in a child test
// process, under both protocols, and requires it to fail there: a suite that passes a broken
// member proves nothing. Only that test runs in the child, so that five mutants cost seconds.
func TestMutantsFailTheSuite(t *testing.T) {
	if os.Getenv(mutantEnv) != "" {
		t.Skip("the child runs the suite only")
	}
	for _, m := range pipeline.Mutants {
		t.Run(m.Name, func(t *testing.T) {
			t.Parallel()
			named := strings.ReplaceAll(m.Fails, " ", "_") + "_-_"
			run := "^TestConformanceKfake$/^" + regexp.QuoteMeta(pipeline.MutantPrefix+m.Name) + "$/.*/^" + regexp.QuoteMeta(named)
			cmd := exec.Command(os.Args[0], "-test.run", run, "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), mutantEnv+"="+m.Name)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed mutant %s (%s):\n%s", m.Name, m.Summary, out)
			}
			for _, protocol := range []string{pipeline.ProtocolClassic, pipeline.ProtocolConsumer} {
				want := regexp.MustCompile(`--- FAIL: TestConformanceKfake/` + regexp.QuoteMeta(pipeline.MutantPrefix+m.Name+"/"+protocol+"/"+strings.ReplaceAll(m.Fails, " ", "_")) + `_-_`)
				if !want.Match(out) {
					t.Errorf("mutant %s under the %s protocol: the suite did not fail its %q test:\n%s", m.Name, protocol, m.Fails, out)
				}
			}
		})
	}
}
