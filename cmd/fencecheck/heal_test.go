//go:build !kafka

package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/cluster/embedded"
)

// TestHealRunsLeftoverCommands: heal resumes a broker the state file of a crashed run lists
// as paused and unisolates one it lists as isolated, and clears the state file.
func TestHealRunsLeftoverCommands(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	k, err := embedded.New(ctx, embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close(context.Background())
	dir := t.TempDir()
	ran := filepath.Join(dir, "ran")
	cmds := "pause: echo pause {name} >> " + ran + "\nresume: echo resume {name} >> " + ran +
		"\nisolate: echo isolate {name} >> " + ran + "\nunisolate: echo unisolate {name} >> " + ran + "\nstate_file: state.json\n"
	file := filepath.Join(dir, "cmds.yaml")
	state := `[{"id": 1, "host": "127.0.0.1", "port": "1", "state": "paused"}, {"id": 2, "host": "127.0.0.1", "port": "1", "state": "isolated"}]`
	if err := os.WriteFile(file, []byte(cmds), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "state.json"), []byte(state), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", t.TempDir()) // heal keeps its command output in a temporary folder
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"heal", "--bootstrap", strings.Join(k.Bootstrap(), ","), "--broker-commands", file})
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatalf("heal: %v\n%s", err, out.String())
	}
	if data, _ := os.ReadFile(ran); strings.TrimSpace(string(data)) != "resume b1\nunisolate b2" {
		t.Errorf("commands run: %q, want resume b1, unisolate b2", data)
	}
	if _, err := os.Stat(filepath.Join(dir, "state.json")); !os.IsNotExist(err) {
		t.Errorf("state file left: %v", err)
	}
	root = newRoot()
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"heal", "--bootstrap", "127.0.0.1:1"})
	var ee *exitError
	if err := root.ExecuteContext(ctx); !errors.As(err, &ee) || ee.code != 254 {
		t.Errorf("heal without --broker-commands: %v, want a usage error", err)
	}
}
