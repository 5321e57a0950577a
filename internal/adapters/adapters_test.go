package adapters

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckBuilt: a launcher of a known adapter without its build beside it is refused, naming
// the make target; once built, or for any other program, it passes.
func TestCheckBuilt(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "adapters", "librdkafka")
	launcher := filepath.Join(dir, "fencecheck-librdkafka-adapter")
	err := CheckBuilt(launcher)
	if !errors.Is(err, ErrNotBuilt) || !strings.Contains(err.Error(), "make librdkafka-adapter") {
		t.Fatalf("CheckBuilt of an unbuilt adapter = %v; want ErrNotBuilt naming make librdkafka-adapter", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "target"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "target", ".built"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CheckBuilt(launcher); err != nil {
		t.Fatalf("CheckBuilt of a built adapter = %v", err)
	}
	if err := CheckBuilt("/usr/bin/my-own-adapter"); err != nil {
		t.Fatalf("CheckBuilt of another program = %v", err)
	}
	root, err := Root(".")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "adapters", "java")); err != nil {
		t.Fatalf("Root %q holds no adapters/java: %v", root, err)
	}
}

// ServesProtocol: a client that names its group protocols serves those only; one that names
// none serves both. Sarama has no KIP-848 consumer.
func TestServesProtocol(t *testing.T) {
	sarama, ok := Lookup("sarama")
	if !ok || !sarama.Pipelines {
		t.Fatalf("Lookup(sarama) = %+v, %v; want the Sarama adapter, serving pipelines", sarama, ok)
	}
	if !sarama.ServesProtocol("classic") || sarama.ServesProtocol("consumer") {
		t.Errorf("Sarama serves classic %v, consumer %v; want classic only", sarama.ServesProtocol("classic"), sarama.ServesProtocol("consumer"))
	}
	if java, _ := Lookup("java"); !java.ServesProtocol("classic") || !java.ServesProtocol("consumer") {
		t.Errorf("the Java adapter names no group protocols, so it serves both; got %+v", java.GroupProtocols)
	}
}
