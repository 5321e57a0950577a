package scenarios_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/internal/testenv"
	"github.com/fencecheck/fencecheck/scenarios"
)

// adapterEnv makes this test binary `fencecheck adapter`: the exec transport of the tests
// below starts it again with the variable set.
const adapterEnv = "FENCECHECK_SCENARIOS_TEST_ADAPTER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(adapterEnv); mode != "" {
		mutantName := ""
		if mode != "real" {
			mutantName = mode
		}
		if err := scenarios.ServeAdapter(context.Background(), os.Stdin, os.Stdout, os.Stderr, "test", mutantName); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestExecTransportEmbedded runs fencecheck's own transport behind the exec protocol, one
// adapter process per process of the run, in two fault scenarios: a frozen holder whose
// commit is held back in the process's links (through the adapter's gateway) and a holder cut
// from every broker. With the seed TestBuiltinScenariosEmbedded runs them in-process, they
// must come out valid too, every scripted fault having taken hold.
func TestExecTransportEmbedded(t *testing.T) {
	testenv.Light(t)
	if testing.Short() {
		t.Skip("runs scenarios")
	}
	// Embedded runs mostly wait on lease timers: they overlap one another (parallel tests
	// start once the Kafka tests, which are not parallel, are done).
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	transport := fmt.Sprintf("exec:env %s=real '%s'", adapterEnv, self)
	for _, name := range []string{"zombie-holder", "holder-partition"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, _, err := scenarios.Builtin(name)
			if err != nil {
				t.Fatal(err)
			}
			out, err := scenarios.Run(context.Background(), s, scenarios.Options{Root: t.TempDir(), Seed: 11, Transport: transport})
			if err != nil {
				t.Fatal(err)
			}
			if out.Results.Verdict != checker.VerdictValid {
				for _, r := range append(out.Results.Checks, out.Results.Coverage...) {
					if r.Verdict != checker.VerdictValid {
						t.Errorf("%s: %s %v %v", r.Name, r.Verdict, r.Anomalies, r.Details)
					}
				}
				t.Fatalf("%s through the exec protocol: %s %s; run directory %s", name, out.Results.Verdict, out.Results.Error, out.Dir)
			}
			log, err := os.ReadFile(out.Dir.HarnessLog())
			if err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(string(log), `msg="adapter started"`); n < s.Workload.Processes {
				t.Fatalf("harness.log names %d adapter starts, want one per process (%d)", n, s.Workload.Processes)
			}
		})
	}
	// A broken transport behind the protocol is caught as it is in-process: its findings
	// survive the protocol.
	t.Run("mutant ack-fenced", func(t *testing.T) {
		t.Parallel()
		s, _, err := scenarios.Builtin("steady")
		if err != nil {
			t.Fatal(err)
		}
		s.Duration = scenarios.Duration(8 * time.Second)
		out, err := scenarios.Run(context.Background(), s, scenarios.Options{Root: t.TempDir(), Seed: 1,
			Transport: fmt.Sprintf("exec:env %s=ack-fenced '%s'", adapterEnv, self)})
		if err != nil {
			t.Fatal(err)
		}
		if out.Results.Verdict != checker.VerdictInvalid || checkVerdict(out.Results, "no-lost-write") != checker.VerdictInvalid {
			t.Fatalf("ack-fenced behind the protocol: %s, no-lost-write %s; want invalid; run directory %s",
				out.Results.Verdict, checkVerdict(out.Results, "no-lost-write"), out.Dir)
		}
	})
}

func checkVerdict(res *checker.Results, name string) checker.Verdict {
	for _, r := range res.Checks {
		if r.Name == name {
			return r.Verdict
		}
	}
	return ""
}
