package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWriteReplacesAndLeavesNoTemporary: Write replaces an existing file's content, and no
// temporary file is left beside it; a path in a missing folder is an error that writes nothing.
func TestWriteReplacesAndLeavesNoTemporary(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f.json")
	for _, content := range []string{"old", "new"} {
		if err := Write(p, []byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != "new" {
		t.Fatalf("content %q (%v), want new", b, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("%d entries beside the file, want only it", len(entries))
	}
	if err := Write(filepath.Join(dir, "no", "f"), []byte("x")); err == nil {
		t.Fatal("a write into a missing folder succeeded")
	}
}
