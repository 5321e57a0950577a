package history

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestCountLinesAtAgreesWithCountLines holds the two-goroutine line count of a file to the
// sequential one and to the truth on inputs whose long lines (longer than a chunk, the ones
// the read must know) cross the middle where the halves meet, or fill a half, or the whole,
// with and without a last newline.
func TestCountLinesAtAgreesWithCountLines(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 44))
	line := func(n int) []byte { return append(bytes.Repeat([]byte{'x'}, n), '\n') }
	cases := map[string][]byte{
		"empty":              nil,
		"one newline":        {'\n'},
		"no newline":         bytes.Repeat([]byte{'x'}, 3*chunkSize),
		"long over the half": append(append(line(10), line(2*chunkSize)...), line(5)...),
		"long first line":    append(line(3*chunkSize), line(7)...),
		"long last, no end":  append(line(7), bytes.Repeat([]byte{'y'}, 2*chunkSize+3)...),
		"newline at the half": func() []byte {
			b := bytes.Repeat([]byte{'x'}, 2*chunkSize)
			b[chunkSize-1] = '\n'
			return b
		}(),
	}
	for i := range 20 {
		var b []byte
		for len(b) < 3*chunkSize {
			n := rng.IntN(200)
			if rng.IntN(8) == 0 {
				n = chunkSize + rng.IntN(chunkSize)
			}
			b = append(b, line(n)...)
		}
		if i%2 == 1 {
			b = b[:len(b)-1-rng.IntN(50)]
		}
		cases[string(rune('a'+i))+" random"] = b
	}
	for name, b := range cases {
		check := func(how string, rest []byte, lines, longest int, err error) {
			t.Helper()
			wantLines := bytes.Count(rest, []byte{'\n'}) + 1
			wantLongest := 0
			for l := range bytes.SplitSeq(rest, []byte{'\n'}) {
				wantLongest = max(wantLongest, len(l))
			}
			if err != nil {
				t.Fatalf("%s, %s: %v", name, how, err)
			}
			if lines != wantLines {
				t.Errorf("%s, %s: %d lines, want %d", name, how, lines, wantLines)
			}
			if longest > wantLongest || (wantLongest > chunkSize && longest != wantLongest) {
				t.Errorf("%s, %s: longest %d, want %d (exact above %d)", name, how, longest, wantLongest, chunkSize)
			}
		}
		lines, longest, err := countLines(bytes.NewReader(b))
		check("countLines", b, lines, longest, err)
		for _, start := range []int{0, 3} {
			if start > len(b) {
				continue
			}
			r := bytes.NewReader(b)
			lines, longest, err := countLinesAt(r, int64(start), r)
			check("countLinesAt", b[start:], lines, longest, err)
		}
	}
}
