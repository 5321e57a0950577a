package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/fencecheck/fencecheck/scenarios"
	"github.com/fencecheck/fencecheck/scenarios/harness"
)

// newHealCmd heals an external cluster after a fencecheck process died mid-fault: attaching
// to it runs the unisolate, resume and restart commands for every broker its state file lists.
func newHealCmd() *cobra.Command {
	spec := scenarios.ClusterSpec{Kind: scenarios.KindExternal}
	c := &cobra.Command{
		Use:   "heal",
		Short: "Heal the brokers of an external cluster that a crashed run left faulted",
		Long: `heal attaches to an external cluster with its broker commands, unisolates every broker the
commands file's state file lists as isolated, resumes every one it lists as paused and restarts
every one it lists as killed, waits until the cluster is healthy, and exits. A run does the same when it starts; heal is for when
no run is due. See docs/external.md.`,
		Args: exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error {
			if spec.Bootstrap == "" || spec.BrokerCommands == "" {
				return usageErr("heal needs --bootstrap and --broker-commands")
			}
			ctx, stop := signal.NotifyContext(c.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			log := slog.New(slog.NewTextHandler(c.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelInfo}))
			logs, err := os.MkdirTemp("", "fencecheck-heal-")
			if err != nil {
				return harnessErr(err)
			}
			cl, err := harness.StartCluster(ctx, spec, logs, log)
			if err != nil {
				return harnessErr(fmt.Errorf("heal: %w (command output: %s)", err, logs))
			}
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			if err := cl.Close(cctx); err != nil {
				return harnessErr(err)
			}
			fmt.Fprintf(c.OutOrStdout(), "healthy; command output in %s\n", logs)
			return nil
		},
	}
	c.Flags().StringVar(&spec.Bootstrap, "bootstrap", "", "seed brokers of the external cluster, host:port[,host:port...]")
	c.Flags().StringVar(&spec.BrokerCommands, "broker-commands", "", "the broker commands file the crashed run used")
	c.Flags().StringVar(&spec.ToxiproxyAPI, "toxiproxy-api", "", "toxiproxy API, host:port (default: toxiproxy in this process)")
	return c
}
