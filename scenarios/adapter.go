package scenarios

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/fencecheck/fencecheck/transport"
	"github.com/fencecheck/fencecheck/transport/lineproto"
	"github.com/fencecheck/fencecheck/transport/mutant"
)

// ServeAdapter runs fencecheck's own transport behind the line protocol (`fencecheck
// adapter`): it reads requests from in and answers on out until close or the end of in. The
// transport's warnings go to errw, which the harness copies into the run's log. version is
// what hello reports after "fencecheck". A non-empty mutantName serves that deliberately
// broken transport instead (see Mutants), so a finding against an adapter can be seen end to
// end.
func ServeAdapter(ctx context.Context, in io.Reader, out, errw io.Writer, version, mutantName string) error {
	log := slog.New(slog.NewTextHandler(errw, &slog.HandlerOptions{Level: slog.LevelWarn}))
	name, start := "fencecheck "+version, lineproto.StartReal
	if mutantName != "" {
		if !known(mutantName) {
			return fmt.Errorf("%w: no mutant %q (see fencecheck selftest --list)", ErrScenario, mutantName)
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
	return lineproto.Serve(ctx, in, out, log, name, start)
}

func known(mutantName string) bool {
	for _, m := range mutant.List() {
		if m.Name == mutantName {
			return true
		}
	}
	return false
}
