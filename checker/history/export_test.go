package history

import "bytes"

// DecodeFast decodes line by the fast path alone; ok is false when the fast path declined.
func DecodeFast(line []byte) (e Event, ok bool) {
	var d decoder
	ok = d.fastLine(line, &e)
	return e, ok
}

// DecodeLex decodes line by the lexer alone.
func DecodeLex(line []byte) (e Event, err error) {
	var d decoder
	err = d.lexLine(line, &e)
	return e, err
}

// SetSplitOutputs sets the length from which an array of outputs is decoded in two halves,
// until the function it returns restores it.
func SetSplitOutputs(n int) (restore func()) {
	old := splitOutputs
	splitOutputs = n
	return func() { splitOutputs = old }
}

// ReadLex reads a history line by line with the lexer alone: no fast path, no read repeating
// another.
func ReadLex(data []byte) (*History, error) {
	b := NewBuilder(0)
	var d decoder
	for line := range bytes.Lines(data) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		var e Event
		if err := d.lexLine(line, &e); err != nil {
			return nil, err
		}
		if err := b.Add(&e); err != nil {
			return nil, err
		}
	}
	return b.History(), nil
}

// PrefixCounts are the reads of a Read that repeated an earlier read (see decoder.extend).
type PrefixCounts struct{ InPlace, Copied, Decoded int }

// ReadCounting reads data as Read does and counts the reads that repeated an earlier one.
func ReadCounting(data []byte) (*History, PrefixCounts, error) {
	var counts PrefixCounts
	readHook = func(b *Builder) { counts = PrefixCounts{b.prefixes.inPlace, b.prefixes.copied, b.prefixes.decoded} }
	defer func() { readHook = nil }()
	h, err := Read(bytes.NewReader(data))
	return h, counts, err
}
