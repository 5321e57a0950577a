package main

import (
	"errors"
	"os"
	"strings"

	"github.com/fencecheck/fencecheck/scenarios"
	"github.com/fencecheck/fencecheck/scenarios/harness"
	"github.com/spf13/cobra"
)

func newAdapter() *cobra.Command {
	var (
		mutantName   string
		capabilities []string
		member       string
	)
	c := &cobra.Command{
		Use:   "adapter",
		Short: "Serve fencecheck's own transport behind the exec line protocol (for --transport exec:...)",
		Long: `adapter is the reference adapter of the exec protocol (docs/exec-protocol.md): it reads
JSON-line requests on stdin, runs them on fencecheck's own transport and answers on stdout; the
transport's warnings go to stderr. The harness starts it once per process:

  fencecheck run steady --transport exec:'fencecheck adapter'

In a pipeline run (workload kind pipeline) the harness starts it once per member instead, and
it serves fencecheck's own member (--member plain or session, or a pipeline mutant):

  fencecheck run pipeline-zombie --transport exec:'fencecheck adapter --member session'

It is also the model for an adapter of your own. --mutant NAME serves one of selftest's
deliberately broken transports instead, to see what a finding against an adapter looks like.
--capability NAME announces a limit of a client it does not have (gateway-token: answer no
token, as a client that does not expose it; no-describe: refuse describe), so you can see how
the harness treats an adapter with that limit.`,
		Args: exactArgs(0),
		RunE: func(c *cobra.Command, _ []string) error {
			version, _, _ := strings.Cut(versionString(), "\n")
			if err := harness.ServeAdapter(c.Context(), os.Stdin, os.Stdout, os.Stderr, strings.TrimPrefix(version, "fencecheck "), mutantName, capabilities, member); err != nil {
				if errors.Is(err, scenarios.ErrScenario) {
					return usageErr("%v", err)
				}
				return harnessErr(err)
			}
			return nil
		},
	}
	c.Flags().StringVar(&mutantName, "mutant", "", "serve this deliberately broken transport (see: fencecheck selftest --list)")
	c.Flags().StringVar(&member, "member", "plain", "the pipeline member it serves in a pipeline run: plain, session, or a pipeline mutant (mutant:NAME)")
	c.Flags().StringSliceVar(&capabilities, "capability", nil, "announce this capability in hello and answer as a client with it would: gateway-token, no-describe (repeatable)")
	return c
}
