package scenarios

import (
	"context"
	"io"
	"log/slog"

	"github.com/fencecheck/fencecheck/transport/lineproto"
)

// ServeAdapter runs fencecheck's own transport behind the line protocol (`fencecheck
// adapter`): it reads requests from in and answers on out until close or the end of in. The
// transport's warnings go to errw, which the harness copies into the run's log. version is
// what hello reports after "fencecheck".
func ServeAdapter(ctx context.Context, in io.Reader, out, errw io.Writer, version string) error {
	log := slog.New(slog.NewTextHandler(errw, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return lineproto.Serve(ctx, in, out, log, "fencecheck "+version, lineproto.StartReal)
}
