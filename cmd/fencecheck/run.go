package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/reports"
	"github.com/fencecheck/fencecheck/scenarios"
	"github.com/fencecheck/fencecheck/scenarios/harness"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"
)

// DefaultScenario runs when `fencecheck run` names none.
const DefaultScenario = "steady"

// runFlags are the overrides `run` applies to every scenario it runs.
type runFlags struct {
	cluster, kafkaVersion, out string
	seed                       uint64
	duration                   time.Duration
	count, repeat, txnVersion  int
	processes, roles, members  int
	checkTimeout               time.Duration
	transport                  string
	kafkaImage, toxiImage      string
	bootstrap, toxiproxyAPI    string
	brokerCommands             string
	security                   string
	links                      string
}

func newRun() *cobra.Command {
	var f runFlags
	c := &cobra.Command{
		Use:   "run [SCENARIO|FILE|RUN-DIR]...",
		Short: "Run scenarios and check their histories (default: " + DefaultScenario + " on the embedded cluster)",
		Long: `run executes each scenario (a built-in name, see ` + "`fencecheck scenarios list`" + `, or a YAML
file): it starts the cluster, runs the workload and the faults for the duration, heals, reads
the final logs, checks the history and writes runs/<scenario>/<time>-<seed>/ with run.json,
history.jsonl, results.json, report.html and junit.xml (runs/latest points at the newest).

The seed decides every choice fencecheck makes (faults, targets, timing, operations): repeat a
run with --seed. A real cluster's timing is not deterministic, so reproducing a rare failure
means running the same schedule again: --repeat N runs it N times (the same seed each time).
--count N runs N schedules instead: seeds S, S+1, ... with --seed S, random ones without.
Both stop at the first invalid run.

A run directory as the argument repeats that run: the scenario as it ran (from its run.json,
whatever became of the file since), its seed and its transport, unless flags say otherwise.

Ctrl-C stops a run early: it still heals, reads, checks and reports (exit 2 unless a violation
was found). Exit codes: 0 valid, 1 invalid, 2 unknown/inconclusive, 254 usage, 255 harness error.`,
		Example: `  fencecheck run
  fencecheck run holder-partition zombie-holder --duration 20s
  fencecheck run chaos --count 10            # ten schedules
  fencecheck run chaos --seed 42 --repeat 5  # one schedule, five times
  fencecheck run kill-coordinator --cluster local --txn-version 1
  fencecheck run pipeline-zombie             # an exactly-once pipeline whose member becomes a zombie
  fencecheck run pipeline-zombie --cluster local --transport exec:adapters/java/fencecheck-java-adapter
  fencecheck run my-scenario.yaml
  fencecheck run runs/latest                 # that run again: its scenario as it ran, its seed and transport`,
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				args = []string{DefaultScenario}
			}
			var list []*scenarios.Scenario
			flags := make([]runFlags, len(args)) // per argument: a run directory brings its seed and transport
			for j, a := range args {
				flags[j] = f
				var s *scenarios.Scenario
				var err error
				if scenarios.IsRunDir(a) {
					var info *reports.RunInfo
					if s, info, err = scenarios.FromRun(a); err != nil {
						return usageErr("%v", err)
					}
					if !c.Flags().Changed("seed") {
						flags[j].seed = info.Seed
					}
					if !c.Flags().Changed("transport") && info.Transport != "" {
						flags[j].transport = info.Transport
					}
				} else if s, err = scenarios.Find(a); err != nil {
					return usageErr("%v", err)
				}
				if err := f.apply(c, s); err != nil {
					return usageErr("%s: %v", s.Name, err)
				}
				list = append(list, s)
			}
			ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			worst := checker.VerdictValid
			var repeatSeed uint64 // the seed of the schedule --repeat runs again
			for j, s := range list {
				f := flags[j]
				for i := 0; i < f.count*f.repeat; i++ {
					seed := f.seed
					if seed != 0 {
						seed += uint64(i / f.repeat) // schedule n of seed s is s+n: each is itself repeatable
					}
					if i%f.repeat > 0 {
						seed = repeatSeed // the same schedule again
					}
					out, err := harness.Run(ctx, s, harness.Options{
						Root: f.out, Seed: seed, Console: c.OutOrStdout(), CheckTimeout: f.checkTimeout,
						StatusEvery: statusEvery(c), Live: isTerminal(c), Transport: f.transport,
					})
					if err != nil {
						if errors.Is(err, scenarios.ErrScenario) {
							return usageErr("%v", err)
						}
						return harnessErr(err)
					}
					repeatSeed = out.Seed
					printFailures(c, out.Results)
					worst = checker.Worst(worst, out.Results.Verdict)
					if out.Interrupted || ctx.Err() != nil || out.Results.Verdict == checker.VerdictInvalid {
						return verdictExit(worst)
					}
				}
			}
			return verdictExit(worst)
		},
	}
	fl := c.Flags()
	fl.Uint64Var(&f.seed, "seed", 0, "root seed of every choice; 0 picks one at random (printed and stored)")
	fl.IntVar(&f.count, "count", 1, "run N schedules of each scenario (seeds S, S+1, ... with --seed S), stopping at the first invalid run")
	fl.IntVar(&f.repeat, "repeat", 1, "run each schedule N times (the same seed), stopping at the first invalid run")
	fl.StringVar(&f.out, "out", reports.DefaultRoot, "folder of run directories")
	f.addScenarioFlags(fl)
	return c
}

// addScenarioFlags adds the flags that change a scenario before it runs (its cluster, shape,
// duration and transport), which run and explore share.
func (f *runFlags) addScenarioFlags(fl *pflag.FlagSet) {
	fl.StringVar(&f.cluster, "cluster", "", "cluster kind: "+strings.Join(scenarios.ClusterKinds, ", ")+" (default: the scenario's, usually embedded)")
	fl.DurationVar(&f.duration, "duration", 0, "how long the workload runs (default: the scenario's)")
	fl.IntVar(&f.txnVersion, "txn-version", 0, "transaction.version of the cluster: 1 or 2 (default: the scenario's)")
	fl.StringVar(&f.kafkaVersion, "kafka-version", "", "Kafka release for a local cluster (default: what make kafka fetched)")
	fl.StringVar(&f.kafkaImage, "kafka-image", "", "broker image of a containers cluster (default fencecheck/kafka:<version>, built by make images; or e.g. apache/kafka:4.1.2)")
	fl.StringVar(&f.toxiImage, "toxiproxy-image", "", "run a containers cluster's toxiproxy in this image (default: in this process; e.g. fencecheck/toxiproxy:"+harness.ToxiproxyVersion+")")
	fl.StringVar(&f.bootstrap, "bootstrap", "", "seed brokers of an external cluster, host:port[,host:port...]")
	fl.StringVar(&f.toxiproxyAPI, "toxiproxy-api", "", "toxiproxy API of an external cluster's links, host:port (default: toxiproxy in this process)")
	fl.StringVar(&f.links, "links", "", "how processes' links to brokers are built: proxy (toxiproxy proxies) or conn (toxics inside each process's connections, no extra file descriptors) (default: the scenario's, proxy)")
	fl.StringVar(&f.brokerCommands, "broker-commands", "", "YAML file of an external cluster's broker commands (kill, pause, resume, restart, isolate, unisolate, health; see docs/external.md)")
	fl.StringVar(&f.security, "security", "", "secure the client listener: "+strings.Join(scenarios.SecurityModes, ", ")+" (local and containers make their certificates and credentials; external takes them from FENCECHECK_* variables, see docs/security.md)")
	fl.IntVar(&f.processes, "processes", 0, "transport instances; a pipeline's processes (default: the scenario's)")
	fl.IntVar(&f.roles, "roles", 0, "roles (default: the scenario's)")
	fl.IntVar(&f.members, "members", 0, "members per role; a pipeline's members (default: the scenario's)")
	fl.StringVar(&f.transport, "transport", "real", "transport under test: real, mutant:NAME (a deliberately broken one; see: fencecheck selftest --list), or exec:COMMAND (an adapter program per process speaking the line protocol of docs/exec-protocol.md, e.g. exec:'fencecheck adapter')")
	fl.DurationVar(&f.checkTimeout, "check-timeout", checker.DefaultTimeout, "bound of each role's linearizability search")
}

// apply puts the flags that were set on top of s and validates the result.
func (f *runFlags) apply(c *cobra.Command, s *scenarios.Scenario) error {
	set := c.Flags().Changed
	if f.count < 1 {
		return fmt.Errorf("--count %d: want 1 or more", f.count)
	}
	if f.repeat < 1 {
		return fmt.Errorf("--repeat %d: want 1 or more", f.repeat)
	}
	kind := s.Cluster.Kind
	if set("cluster") {
		kind = f.cluster
	}
	s.UseCluster(kind) // the timing for the kind first: the flags below win over it
	if set("txn-version") {
		s.Cluster.TransactionVersion = f.txnVersion
	}
	if set("kafka-version") {
		s.Cluster.KafkaVersion = f.kafkaVersion
	}
	if set("kafka-image") {
		s.Cluster.KafkaImage = f.kafkaImage
	}
	if set("toxiproxy-image") {
		s.Cluster.ToxiproxyImage = f.toxiImage
	}
	if set("bootstrap") {
		s.Cluster.Bootstrap = f.bootstrap
	}
	if set("toxiproxy-api") {
		s.Cluster.ToxiproxyAPI = f.toxiproxyAPI
	}
	if set("links") {
		s.Cluster.Links = f.links
	}
	if set("broker-commands") {
		s.Cluster.BrokerCommands = f.brokerCommands
	}
	if set("security") {
		s.Cluster.Security = f.security
	}
	if set("duration") {
		s.Duration = scenarios.Duration(f.duration)
	}
	if s.Workload.IsPipeline() {
		// A pipeline has processes and members, and no roles.
		if set("roles") {
			return fmt.Errorf("--roles: scenario %s is a pipeline, which has no roles (--processes and --members shape it)", s.Name)
		}
		if set("processes") {
			s.Workload.ShapePipeline(f.processes, 0)
		}
		if set("members") {
			s.Workload.ShapePipeline(0, f.members)
		}
	} else {
		if set("processes") {
			s.Workload.Processes = f.processes
		}
		if set("roles") {
			s.Workload.Roles = f.roles
		}
		if set("members") {
			s.Workload.MembersPerRole = f.members
		}
	}
	if set("cluster") && s.Cluster.Kind == scenarios.KindExternal && s.Cluster.Bootstrap == "" {
		// Name the flag the user typed, not the scenario field it fills.
		return errors.New("--cluster external needs --bootstrap HOST:PORT[,HOST:PORT...]: the seed brokers of your cluster (or cluster.bootstrap in the scenario file)")
	}
	if err := s.Validate(); err != nil {
		return err
	}
	if err := s.Supports(s.Cluster.Kind); err != nil {
		return err
	}
	printWarnings(c, s)
	return nil
}

// printWarnings says, before anything runs, what the scenario asks for that will not happen
// as written (see Scenario.Warnings).
func printWarnings(c *cobra.Command, s *scenarios.Scenario) {
	for _, w := range s.Warnings() {
		fmt.Fprintf(c.ErrOrStderr(), "warning: %s: %s\n", s.Name, w)
	}
}

func isTerminal(c *cobra.Command) bool {
	f, ok := c.OutOrStdout().(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// statusEvery: a live line every second on a terminal, a log line every 10 s otherwise (CI).
func statusEvery(c *cobra.Command) time.Duration {
	if isTerminal(c) {
		return time.Second
	}
	return 10 * time.Second
}

func newScenariosCmd() *cobra.Command {
	c := &cobra.Command{Use: "scenarios", Short: "List and show the built-in scenarios"}
	c.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List the built-in scenarios with their descriptions",
		Args:  exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error {
			w := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "SCENARIO\tCLUSTER\tWHAT IT TESTS (fencecheck scenarios show NAME for all of it)")
			for _, name := range append(scenarios.Names(), scenarios.RegressionNames()...) {
				find := scenarios.Builtin
				if strings.HasPrefix(name, scenarios.RegressionPrefix) {
					find = scenarios.Regression
				}
				s, _, err := find(name)
				if err != nil {
					return harnessErr(err)
				}
				desc := strings.Join(strings.Fields(s.Description), " ")
				if i := strings.Index(desc, ". "); i > 0 {
					desc = desc[:i+1]
				}
				fmt.Fprintf(w, "%s\t%s\t%s\n", name, s.Cluster.Kind, desc)
			}
			return w.Flush()
		},
	})
	c.AddCommand(&cobra.Command{
		Use:   "show NAME|FILE",
		Short: "Print a scenario fully expanded (preset and defaults filled in), as YAML",
		Args:  exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			s, err := scenarios.Find(args[0])
			if err != nil {
				return usageErr("%v", err)
			}
			printWarnings(c, s)
			b, err := s.Marshal()
			if err != nil {
				return harnessErr(err)
			}
			_, err = c.OutOrStdout().Write(b)
			return err
		},
	})
	return c
}

func newFaultsCmd() *cobra.Command {
	c := &cobra.Command{Use: "faults", Short: "List the faults the nemesis can inject"}
	c.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "List every fault with a one-line description",
		Args:  exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error {
			for _, f := range scenarios.Faults() {
				fmt.Fprintf(c.OutOrStdout(), "%-18s %s\n", f.Name, f.Description)
			}
			return nil
		},
	})
	return c
}
