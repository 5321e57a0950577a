// Package testenv holds the switches the project's tests share.
package testenv

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/cluster/containers"
	"github.com/fencecheck/fencecheck/cluster/local"
	"github.com/fencecheck/fencecheck/internal/adapters"
)

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

// EnvLane picks one of make test's two lanes, which run at the same time: LaneKafka runs only
// the tests that start Kafka JVMs or containers (NeedKafka, NeedDocker), one package at a
// time; LaneLight runs only the others (Light, and every test of a package without Kafka).
// Unset, every test runs.
const EnvLane = "FENCECHECK_LANE"

// The values of EnvLane.
const (
	LaneKafka = "kafka"
	LaneLight = "light"
)

// Light marks a test that starts no Kafka JVM or container in a package whose other tests do:
// the Kafka lane skips it, so it runs beside the Kafka tests rather than after them.
func Light(t testing.TB) {
	t.Helper()
	if os.Getenv(EnvLane) == LaneKafka {
		t.Skipf("runs in the light lane (%s=%s)", EnvLane, LaneLight)
	}
}

// heavy skips a Kafka or Docker test in the light lane.
func heavy(t testing.TB) {
	t.Helper()
	if os.Getenv(EnvLane) == LaneLight {
		t.Skipf("runs in the Kafka lane (%s=%s)", EnvLane, LaneKafka)
	}
}

// EnvRequireKafka makes missing Kafka jars fail a test instead of skipping it:
// FENCECHECK_REQUIRE_KAFKA=1, as `make test` sets it after fetching them.
const EnvRequireKafka = "FENCECHECK_REQUIRE_KAFKA"

// NeedKafka skips t under -short (what), in the light lane, and unless the default version's
// Kafka jars are installed, which EnvRequireKafka turns into a failure.
func NeedKafka(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Skip(what)
	}
	heavy(t)
	if _, err := local.FindHome("", ""); err != nil {
		if os.Getenv(EnvRequireKafka) == "1" {
			t.Fatalf("%s=1 and the Kafka jars are missing: %v", EnvRequireKafka, err)
		}
		t.Skipf("local Kafka not installed (%v); run make kafka", err)
	}
}

// EnvRequireDocker makes a missing Docker engine or image fail a test instead of skipping it:
// FENCECHECK_REQUIRE_DOCKER=1, as `make test` sets it after starting the engine.
const EnvRequireDocker = "FENCECHECK_REQUIRE_DOCKER"

// NeedDocker skips t under -short (what), in the light lane, and unless a Docker engine
// answers and holds images (default: the Kafka image of containers.DefaultVersion), which
// EnvRequireDocker turns into a failure.
func NeedDocker(t testing.TB, what string, images ...string) {
	t.Helper()
	if testing.Short() {
		t.Skip(what)
	}
	heavy(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := containers.Available(ctx, images...); err != nil {
		if os.Getenv(EnvRequireDocker) == "1" {
			t.Fatalf("%s=1: %v", EnvRequireDocker, err)
		}
		t.Skip(err)
	}
}

// Adapter returns the command of the repository's adapter of client name (internal/adapters),
// skipping t when it is not built, which EnvRequireKafka (set by make test, which builds them)
// turns into a failure.
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
		if os.Getenv(EnvRequireKafka) == "1" {
			t.Fatalf("%s=1 and %v", EnvRequireKafka, err)
		}
		t.Skip(err)
	}
	return argv
}
