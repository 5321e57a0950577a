// Package atomicfile writes a file so that a reader, or a process killed while writing, sees
// the old file or the new one, never half of one. It is a leaf every package may use.
package atomicfile

import "os"

// Write replaces path with b (mode 0644) through a temporary file next to it and a rename. The
// temporary file is removed when the rename fails.
func Write(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
