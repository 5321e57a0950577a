package scenarios_test

import (
	"testing"

	"github.com/fencecheck/fencecheck/internal/testenv"
)

// adapterTransport returns the exec transport of the repository's adapter of client name
// (adapters/NAME, internal/adapters), skipping t when it is not built, or failing it under
// FENCECHECK_REQUIRE_KAFKA=1, which make test sets after building the adapters.
func adapterTransport(t *testing.T, name string) string {
	t.Helper()
	return "exec:" + testenv.Adapter(t, name)[0]
}
