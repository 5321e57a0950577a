// Package testenv holds the switches the project's tests share.
package testenv

import (
	"os"
	"testing"

	"github.com/fencecheck/fencecheck/cluster/local"
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

// EnvRequireKafka makes missing Kafka jars fail a test instead of skipping it:
// FENCECHECK_REQUIRE_KAFKA=1, as `make test` sets it after fetching them.
const EnvRequireKafka = "FENCECHECK_REQUIRE_KAFKA"

// NeedKafka skips t under -short (what), and unless the default version's Kafka jars are
// installed, which EnvRequireKafka turns into a failure.
func NeedKafka(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Skip(what)
	}
	if _, err := local.FindHome("", ""); err != nil {
		if os.Getenv(EnvRequireKafka) == "1" {
			t.Fatalf("%s=1 and the Kafka jars are missing: %v", EnvRequireKafka, err)
		}
		t.Skipf("local Kafka not installed (%v); run make kafka", err)
	}
}
