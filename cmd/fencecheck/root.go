package main

import (
	"fmt"
	"runtime/debug"

	"github.com/spf13/cobra"
)

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "fencecheck",
		Short: "Chaos and conformance harness for a Kafka-backed lease transport",
		Long: `fencecheck runs many lease-transport instances that register, acquire fencing tokens,
renew leases and write fenced work on Kafka while faults cut, slow and kill broker links and
brokers; it records every operation, checks the history for fencing safety and writes an HTML
report and JUnit XML.

Exit codes: 0 valid, 1 invalid (a guarantee was violated), 2 unknown or inconclusive,
254 usage error, 255 harness error.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageErr("%s: %v (see %s --help)", c.CommandPath(), err, c.CommandPath())
	})
	root.AddCommand(newCheck(), newReport(), newVersion())
	for _, add := range extraCommands {
		root.AddCommand(add())
	}
	return root
}

// extraCommands are added by the files that define them, so root.go needs no edit per command.
var extraCommands []func() *cobra.Command

// exactArgs is cobra.ExactArgs with a usage exit code.
func exactArgs(n int) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) != n {
			return usageErr("%s takes %d argument(s), got %d (see %s --help)", c.CommandPath(), n, len(args), c.CommandPath())
		}
		return nil
	}
}

func newVersion() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print fencecheck's version and the versions of its main dependencies",
		Args:  exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error {
			fmt.Fprintln(c.OutOrStdout(), versionString())
			return nil
		},
	}
}

// versionString names the build's revision and the dependencies a report reader cares about.
func versionString() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "fencecheck (unknown build)"
	}
	s := "fencecheck " + bi.Main.Version
	for _, kv := range bi.Settings {
		if kv.Key == "vcs.revision" {
			s += " " + kv.Value
		}
	}
	for _, d := range bi.Deps {
		switch d.Path {
		case "github.com/twmb/franz-go", "github.com/anishathalye/porcupine", "github.com/Shopify/toxiproxy/v2":
			s += fmt.Sprintf("\n  %s %s", d.Path, d.Version)
		}
	}
	return s + "\n  " + bi.GoVersion
}
