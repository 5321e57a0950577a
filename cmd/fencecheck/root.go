package main

import (
	"fmt"
	"regexp"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "fencecheck",
		Short: "Chaos and conformance harness for fencing on Kafka: lease transports and exactly-once pipelines",
		Long: `fencecheck runs many lease-transport instances that register, acquire fencing tokens,
renew leases and write fenced work on Kafka while faults cut, slow and kill broker links and
brokers; it records every operation, checks the history for fencing safety and writes an HTML
report and JUnit XML.

It tests exactly-once pipelines the same way (scenarios named pipeline-*: poll, produce in a
transaction, commit the input offsets with the group's metadata): members are frozen into
zombies, the group rebalances, and the history is checked for loss, duplicates and zombie
commits. Any client can be tested behind the exec protocol (--transport exec:...).

Exit codes: 0 valid, 1 invalid (a guarantee was violated), 2 unknown or inconclusive,
254 usage error, 255 harness error.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageErr("%s: %s (see %s --help)", c.CommandPath(), flagProblem(err), c.CommandPath())
	})
	// Every command, in one place: running (run, suite, soak, selftest, shrink, explore), reading a
	// run (check, report), what there is (scenarios, faults), clusters (probe, cluster, heal)
	// and the adapter of the exec protocol.
	root.AddCommand(
		newRun(), newSuite(), newSoak(), newSelftest(), newShrink(), newExplore(),
		newCheck(), newReport(),
		newScenariosCmd(), newFaultsCmd(),
		newProbeCmd(), newClusterCmd(), newHealCmd(),
		newAdapter(), newVersion(),
	)
	refuseUnknownSubcommands(root)
	return root
}

// refuseUnknownSubcommands makes every command that only groups others (fencecheck scenarios,
// suite, cluster) refuse an argument that names none of them, as a usage error with cobra's
// suggestions, instead of printing its help and exiting 0. Alone, such a command prints its
// help.
func refuseUnknownSubcommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		refuseUnknownSubcommands(sub)
	}
	if c.Runnable() || !c.HasSubCommands() || !c.HasParent() {
		return
	}
	c.Args = cobra.ArbitraryArgs
	c.RunE = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return c.Help()
		}
		return usageErr("%s", unknownCommand(c, args[0]))
	}
}

// unknownCommand says that name is no subcommand of c, with the names it may have meant.
func unknownCommand(c *cobra.Command, name string) string {
	msg := fmt.Sprintf("unknown command %q for %q", name, c.CommandPath())
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2 // cobra's default, which it sets only for the root
	}
	if s := c.SuggestionsFor(name); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return msg + fmt.Sprintf(" (see %s --help)", c.CommandPath())
}

// flagValue matches pflag's message for a value that does not parse.
var flagValue = regexp.MustCompile(`^invalid argument "(.*)" for "(.*?)" flag: (.*)$`)

// flagProblem rewrites a flag error in the user's words: the flag and the value typed, and
// what the flag wants, instead of Go's parser ("strconv.ParseUint: parsing ...").
func flagProblem(err error) string {
	m := flagValue.FindStringSubmatch(err.Error())
	if m == nil {
		return err.Error()
	}
	flag, value, why := m[2], m[1], m[3]
	if i := strings.LastIndex(flag, "--"); i >= 0 {
		flag = flag[i:] // "-s, --seed" names the long form
	}
	want := ""
	switch {
	case strings.Contains(why, "strconv.ParseUint"):
		want = "a whole number, 0 or more"
	case strings.Contains(why, "strconv.ParseInt"):
		want = "a whole number"
	case strings.Contains(why, "strconv.ParseFloat"):
		want = "a number"
	case strings.Contains(why, "strconv.ParseBool"):
		want = "true or false"
	case strings.Contains(why, "time: "):
		want = "a duration with a unit, such as 30s, 2m or 1h30m"
	}
	if want == "" {
		return fmt.Sprintf("%s %q: %s", flag, value, why)
	}
	if strings.Contains(why, "out of range") {
		want += " that fits the flag"
	}
	return fmt.Sprintf("%s %q: want %s", flag, value, want)
}

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
