package harness

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"

	"github.com/fencecheck/fencecheck/scenarios"
	"github.com/fencecheck/fencecheck/transport"
	"github.com/fencecheck/fencecheck/transport/lineproto"
	"github.com/fencecheck/fencecheck/transport/mutant"
	"github.com/fencecheck/fencecheck/transport/pipeline"
	pipewl "github.com/fencecheck/fencecheck/workload/pipeline"
)

// ServeAdapter runs fencecheck's own transport behind the line protocol (`fencecheck
// adapter`): it reads requests from in and answers on out until close or the end of in. The
// transport's warnings go to errw, which the harness copies into the run's log. version is
// what hello reports after "fencecheck". A non-empty mutantName serves that deliberately
// broken transport instead (see scenarios.Mutants), so a finding against an adapter can be seen end to
// end.
//
// member is the pipeline member it serves when the harness asks for one (member_start):
// plain (default), session or a pipeline mutant (mutant:NAME).
//
// capabilities are announced in hello and honoured as a client with those limits would
// (lineproto.Adapter): with lineproto.CapGatewayToken no answer carries a token, with
// lineproto.CapNoDescribe describe fails.
func ServeAdapter(ctx context.Context, in io.Reader, out, errw io.Writer, version, mutantName string, capabilities []string, member string) error {
	log := slog.New(slog.NewTextHandler(errw, &slog.HandlerOptions{Level: slog.LevelWarn}))
	for _, c := range capabilities {
		if !slices.Contains(lineproto.Capabilities(), c) {
			return fmt.Errorf("%w: --capability %q: unknown (want one of %s)", scenarios.ErrScenario, c, strings.Join(lineproto.Capabilities(), ", "))
		}
	}
	name, start := "fencecheck "+version, lineproto.StartReal
	if mutantName != "" {
		if !known(mutantName) {
			return fmt.Errorf("%w: no mutant %q (see fencecheck selftest --list)", scenarios.ErrScenario, mutantName)
		}
		name += " mutant:" + mutantName
		start = func(ctx context.Context, cfg transport.Config) (lineproto.Subject, error) {
			m, err := mutant.Start(ctx, mutantName, cfg)
			if err != nil {
				return nil, err
			}
			return m, nil
		}
	}
	if member == "" {
		member = pipeline.KindPlain
	}
	if !slices.Contains(pipeline.Kinds, member) {
		if _, err := pipelineMember(member, pipewl.Config{}); err != nil || !strings.HasPrefix(member, pipeline.MutantPrefix) {
			return fmt.Errorf("%w: --member %q: want %s, %s or a pipeline mutant (mutant:NAME)", scenarios.ErrScenario, member, pipeline.KindPlain, pipeline.KindSession)
		}
	}
	newMember := func(ctx context.Context, cfg pipeline.Config) (pipeline.Member, error) {
		return pipeline.New(ctx, member, cfg)
	}
	return lineproto.Serve(ctx, in, out, log, lineproto.Adapter{Name: name, Start: start, Capabilities: capabilities, Pipeline: newMember})
}

func known(mutantName string) bool {
	for _, m := range mutant.List() {
		if m.Name == mutantName {
			return true
		}
	}
	return false
}
