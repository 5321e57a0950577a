//go:build kafka

package containers_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencecheck/fencecheck/cluster/containers"
)

// engineHost runs `docker/engine.sh host` of the checkout at root.
func engineHost(t *testing.T, root string, env ...string) string {
	t.Helper()
	cmd := exec.Command("bash", filepath.Join(root, "docker", "engine.sh"), "host")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s/docker/engine.sh host: %v", root, err)
	}
	return strings.TrimSpace(string(out))
}

// TestEnginePerCheckout: two checkouts on one machine get two engines (socket and data root),
// and the Go default (what fencecheck uses with DOCKER_HOST unset) is the engine the checkout's
// engine.sh serves.
func TestEnginePerCheckout(t *testing.T) {
	t.Setenv(containers.EnvEngineDir, "")
	script, err := os.ReadFile("../../docker/engine.sh")
	if err != nil {
		t.Fatal(err)
	}
	var hosts []string
	for _, name := range []string{"a", "b"} {
		root := filepath.Join(t.TempDir(), name)
		if err := os.MkdirAll(filepath.Join(root, "docker"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "docker", "engine.sh"), script, 0o755); err != nil {
			t.Fatal(err)
		}
		h := engineHost(t, root)
		if want := "unix://" + containers.EngineDir(root) + "/docker.sock"; h != want {
			t.Errorf("checkout %s: engine.sh serves %s, cluster/containers expects %s", root, h, want)
		}
		hosts = append(hosts, h)
	}
	if hosts[0] == hosts[1] {
		t.Fatalf("two checkouts share one engine: %s", hosts[0])
	}

	// This checkout: the Go default, found from the working directory (the package's folder),
	// is what engine.sh (and so the Makefile and docker/with-engine.sh) uses.
	want := engineHost(t, "../..")
	if got := containers.DefaultEngineHost(); got != want {
		t.Errorf("DefaultEngineHost() = %q, engine.sh host = %q", got, want)
	}
	// FENCECHECK_DOCKER_DIR overrides both the same way.
	t.Setenv(containers.EnvEngineDir, "/tmp/fencecheck-docker-mine")
	if got, sh := containers.DefaultEngineHost(), engineHost(t, "../.."); got != sh || got != "unix:///tmp/fencecheck-docker-mine/docker.sock" {
		t.Errorf("with %s set: DefaultEngineHost() = %q, engine.sh host = %q", containers.EnvEngineDir, got, sh)
	}
}
