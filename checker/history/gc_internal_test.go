package history

import (
	"runtime/debug"
	"testing"
)

// gcPercent returns the collector's setting without changing it.
func gcPercent() int {
	p := debug.SetGCPercent(-1)
	debug.SetGCPercent(p)
	return p
}

// TestReadsPauseTheCollectorTogether: the collector is off while any read runs, and back to
// its setting once the last ends, however the reads overlap.
func TestReadsPauseTheCollectorTogether(t *testing.T) {
	before := debug.SetGCPercent(150)
	defer debug.SetGCPercent(before)
	first := pauseGC()
	second := pauseGC()
	if p := gcPercent(); p != -1 {
		t.Fatalf("collector at %d during two reads, want off", p)
	}
	first()
	if p := gcPercent(); p != -1 {
		t.Fatalf("collector at %d while a read still runs, want off", p)
	}
	second()
	if p := gcPercent(); p != 150 {
		t.Fatalf("collector at %d after the reads, want 150", p)
	}
}
