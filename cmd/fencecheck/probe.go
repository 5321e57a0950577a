package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/fencecheck/fencecheck/scenarios"
	"github.com/fencecheck/fencecheck/scenarios/harness"
)

// probeStartTimeout bounds connecting to (or starting) the cluster to probe.
const probeStartTimeout = 2 * time.Minute

func newProbeCmd() *cobra.Command {
	spec := scenarios.ClusterSpec{Kind: scenarios.KindExternal}
	c := &cobra.Command{
		Use:   "probe --bootstrap HOST:PORT",
		Short: "Ask a broker whether it can do what fencecheck needs, before attacking it",
		Long: `probe is the preflight that runs before every run on an external cluster, on its own.
It lists every broker's API versions against the ones the transport uses (Produce, Fetch and
ListOffsets with isolation levels, FindCoordinator, InitProducerId, AddPartitionsToTxn, EndTxn,
DescribeTransactions, CreateTopics), then runs a smoke test on a topic and a transactional id of
its own: a committed record is visible at read_committed, an aborted one is hidden, a producer
whose epoch a successor bumped is fenced, DescribeTransactions answers. It prints a table, one
line per check; a check that needs a missing API is "not tried" and names what it needed. The
topic is deleted afterwards.

A run on an external cluster that fails the preflight stops before its workload with verdict
error (exit 255), naming what is missing: a verdict about fencing is never given on a broker
that cannot fence.

Exit codes: 0 the broker can do everything, 1 it cannot (the table says what), 254 usage,
255 the cluster could not be reached.`,
		Example: `  fencecheck probe --bootstrap 127.0.0.1:9092
  fencecheck probe --cluster local --kafka-version 4.1.2`,
		Args: exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error {
			if spec.Kind == scenarios.KindExternal && spec.Bootstrap == "" {
				return usageErr("--bootstrap: required: host:port of a broker to probe (or --cluster embedded, local or containers for one fencecheck starts)")
			}
			if spec.Kind != scenarios.KindExternal && spec.Bootstrap != "" {
				return usageErr("--bootstrap: only an external cluster has one (--cluster is %s)", spec.Kind)
			}
			ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			rep, err := probe(ctx, c, spec)
			if err != nil {
				return err
			}
			fmt.Fprint(c.OutOrStdout(), rep.Table())
			if !rep.OK() {
				return &exitError{code: 1}
			}
			return nil
		},
	}
	fl := c.Flags()
	fl.StringVar(&spec.Bootstrap, "bootstrap", "", "seed brokers of the cluster to probe, host:port[,host:port...]")
	fl.StringVar(&spec.Kind, "cluster", scenarios.KindExternal, "cluster kind: "+strings.Join(scenarios.ClusterKinds, ", ")+" (every kind but external is one fencecheck starts for the probe)")
	fl.StringVar(&spec.Security, "security", "", "the listener's security: "+strings.Join(scenarios.SecurityModes, ", ")+" (external takes credentials from FENCECHECK_* variables, see docs/security.md)")
	fl.StringVar(&spec.KafkaVersion, "kafka-version", "", "Kafka release of a local cluster (default: what make kafka fetched)")
	fl.IntVar(&spec.TransactionVersion, "txn-version", 0, "transaction.version of a cluster fencecheck starts: 1 or 2")
	return c
}

// probe runs the preflight: straight on the addresses of an external cluster (fencecheck's
// connection to one waits for health checks that a lacking broker may never pass), on a cluster
// it starts for any other kind. Connecting or starting is bounded by probeStartTimeout.
func probe(ctx context.Context, c *cobra.Command, spec scenarios.ClusterSpec) (harness.PreflightReport, error) {
	var none harness.PreflightReport
	bctx, cancel := context.WithTimeout(ctx, probeStartTimeout)
	defer cancel()
	if spec.Kind == scenarios.KindExternal {
		fmt.Fprintf(c.ErrOrStderr(), "probe: asking %s (up to %v to reach it)\n", spec.Bootstrap, probeStartTimeout)
		rep, err := harness.PreflightSpec(bctx, spec)
		switch {
		case err != nil && bctx.Err() != nil && ctx.Err() == nil:
			return none, harnessErr(fmt.Errorf("no broker at %s answered within %v", spec.Bootstrap, probeStartTimeout))
		case err != nil && strings.HasPrefix(err.Error(), "cluster."):
			return none, usageErr("%v", err)
		case err != nil:
			return none, harnessErr(err)
		}
		return rep, nil
	}
	fmt.Fprintf(c.ErrOrStderr(), "probe: starting the %s cluster\n", spec.Kind)
	logs, err := os.MkdirTemp("", "fencecheck-probe-logs-")
	if err != nil {
		return none, harnessErr(err)
	}
	defer os.RemoveAll(logs)
	cl, err := harness.StartCluster(bctx, spec, logs, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return none, harnessErr(fmt.Errorf("cluster: %w", err))
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_ = cl.Close(cctx)
	}()
	rep, err := harness.PreflightCluster(ctx, cl)
	if err != nil {
		return none, harnessErr(err)
	}
	return rep, nil
}
