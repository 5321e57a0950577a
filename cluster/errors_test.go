package cluster_test

import (
	"errors"
	"testing"

	"github.com/fencecheck/fencecheck/cluster"
)

// TestUnsupportedError: a backend's refusal matches ErrUnsupported and says who refused what.
func TestUnsupportedError(t *testing.T) {
	err := cluster.Unsupported("external", "kill b1", "not ours")
	if !errors.Is(err, cluster.ErrUnsupported) {
		t.Fatal("Unsupported does not match ErrUnsupported")
	}
	if got, want := err.Error(), "external cluster: kill b1: unsupported (not ours)"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
}
