// Package testenv holds the switches the project's tests share.
package testenv

import (
	"os"
	"testing"
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
