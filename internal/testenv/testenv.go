// Package testenv holds the switches the project's tests share.
//
// make test runs the tests in two lanes at once, chosen by the build tag kafka. A test file
// whose tests start Kafka JVMs or containers carries //go:build kafka (as do all the test
// files of cluster/local and cluster/containers, packages that exist to start brokers); the
// other test files of a package with such files carry //go:build !kafka, and files of helpers
// both use carry none. The light lane is plain `go test ./...`; the Kafka lane is
// `go test -tags kafka` over the packages with kafka files, one at a time. NeedKafka and
// NeedDocker exist only under the tag, so a broker test in an untagged file fails to compile
// in the light lane instead of starting JVMs there.
package testenv

import (
	"os"
	"testing"

	"github.com/fencecheck/fencecheck/internal/adapters"
)

// EnvRequireKafka makes missing Kafka jars (or a missing adapter) fail a test instead of
// skipping it: FENCECHECK_REQUIRE_KAFKA=1, as `make test` sets it after fetching them.
const EnvRequireKafka = "FENCECHECK_REQUIRE_KAFKA"

// EnvLong turns on the long tests: FENCECHECK_LONG=1, as `make test-long` sets it.
const EnvLong = "FENCECHECK_LONG"

// Long skips t unless EnvLong is 1. A long test repeats at full length what `make test`
// already covers more briefly (the same scenario on another backend, a longer run), so CI
// stays within its time while the long target keeps the whole check runnable.
func Long(t testing.TB) {
	t.Helper()
	if os.Getenv(EnvLong) != "1" {
		t.Skipf("a long test: runs with %s=1 (make test-long)", EnvLong)
	}
}

// Adapter returns the command of the repository's adapter of client name (internal/adapters),
// skipping t when it is not built, which EnvRequireKafka (set by make test, which builds them)
// turns into a failure, except for an optional adapter, which make test does not build.
func Adapter(t testing.TB, name string) []string {
	t.Helper()
	c, ok := adapters.Lookup(name)
	if !ok {
		t.Fatalf("no adapter %q in internal/adapters", name)
	}
	root, err := adapters.Root(".")
	if err != nil {
		t.Fatal(err)
	}
	argv, err := c.Command(root)
	if err != nil {
		if os.Getenv(EnvRequireKafka) == "1" && !c.Optional {
			t.Fatalf("%s=1 and %v", EnvRequireKafka, err)
		}
		t.Skip(err)
	}
	return argv
}
