package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/fencecheck/fencecheck/scenarios"
	"github.com/fencecheck/fencecheck/scenarios/harness"
	"github.com/spf13/cobra"
)

func newClusterCmd() *cobra.Command {
	c := &cobra.Command{Use: "cluster", Short: "Start a cluster by hand"}
	var spec scenarios.ClusterSpec
	var processes int
	var logs string
	up := &cobra.Command{
		Use:   "up",
		Short: "Start a cluster with per-process links and keep it up until Ctrl-C",
		Long: `up starts a cluster, prints its bootstrap addresses and the links of --processes
processes, and stays up until Ctrl-C or SIGTERM; then it stops every broker and proxy.

Kinds:
  embedded    kfake in this process
  local       Apache Kafka JVMs from the jars ` + "`make kafka`" + ` fetched
  containers  the same Kafka in containers (testcontainers-go, host networking); needs a Docker
              engine (` + "`make docker-engine`" + ` starts the project's own) and the images
              (` + "`make images`" + `), or --kafka-image apache/kafka:<version> with an ordinary Docker`,
		Args: exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			log := slog.New(slog.NewTextHandler(c.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelInfo}))
			if logs == "" {
				var err error
				if logs, err = os.MkdirTemp("", "fencecheck-cluster-logs-"); err != nil {
					return harnessErr(err)
				}
			}
			began := time.Now()
			cl, err := harness.StartCluster(ctx, spec, logs, log)
			if err != nil {
				return harnessErr(fmt.Errorf("cluster up: %w", err))
			}
			defer func() {
				cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
				defer cancel()
				if err := cl.Close(cctx); err != nil {
					fmt.Fprintln(c.ErrOrStderr(), "close:", err)
				}
				fmt.Fprintln(c.OutOrStdout(), "cluster stopped")
			}()
			info := cl.Info()
			out := c.OutOrStdout()
			fmt.Fprintf(out, "%s cluster %s ready in %v: %d brokers, TV%d\n", info.Kind, info.Version, time.Since(began).Round(time.Millisecond), info.Brokers, info.TxnVersion)
			fmt.Fprintf(out, "bootstrap: %v\n", cl.Bootstrap())
			if info.LogsDir != "" {
				fmt.Fprintf(out, "broker logs: %s\n", info.LogsDir)
			}
			for _, l := range harness.ConnectionHelp(cl) {
				fmt.Fprintln(out, l)
			}
			for p := 1; p <= processes; p++ {
				if _, err := cl.Links(ctx, p); err != nil {
					return harnessErr(fmt.Errorf("links of %s: %w", scenarios.ProcessName(p), err))
				}
			}
			for _, l := range cl.Network().Links() {
				fmt.Fprintf(out, "link %s\n", l)
			}
			fmt.Fprintln(out, "up; Ctrl-C to stop")
			<-ctx.Done()
			return nil
		},
	}
	up.Flags().StringVar(&spec.Kind, "kind", scenarios.KindEmbedded, "cluster kind: embedded, local or containers")
	up.Flags().IntVar(&spec.Brokers, "brokers", 3, "number of brokers")
	up.Flags().IntVar(&spec.TransactionVersion, "txn-version", 0, "transaction.version: 1 or 2 (default: 2 on Kafka 4.x, 1 on 3.x)")
	up.Flags().StringVar(&spec.KafkaVersion, "kafka-version", "", "Kafka release of a local cluster (default: what make kafka fetched)")
	up.Flags().StringVar(&spec.KafkaImage, "kafka-image", "", "broker image of a containers cluster (default fencecheck/kafka:<version>)")
	up.Flags().StringVar(&spec.ToxiproxyImage, "toxiproxy-image", "", "run a containers cluster's toxiproxy in this image (default: in this process)")
	up.Flags().StringVar(&spec.Security, "security", "", "secure the client listener of a local or containers cluster: "+strings.Join(scenarios.SecurityModes, ", ")+" (prints where the CA, certificate and password files are, never the password)")
	up.Flags().IntVar(&processes, "processes", 2, "make the links of this many processes (p1→b1 ...)")
	up.Flags().StringVar(&logs, "logs", "", "folder for broker logs (default: a new temporary folder)")
	c.AddCommand(up)
	return c
}
