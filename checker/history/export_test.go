package history

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
