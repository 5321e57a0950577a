package main

import (
	"encoding/binary"
	"io"
	"net"
	"strings"
	"testing"
)

// The adapter's flags: --offsets metadata (the default) or group-id; anything else is refused,
// naming the flag.
func TestParseArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want offsetsAPI
	}{
		{nil, offsetsGroupMetadata},
		{[]string{"--offsets", "group-id"}, offsetsGroupID},
		{[]string{"--offsets=metadata"}, offsetsGroupMetadata},
	} {
		if got, err := parseArgs(tc.args); err != nil || got != tc.want {
			t.Errorf("parseArgs(%q) = %q, %v; want %q", tc.args, got, err, tc.want)
		}
	}
	for _, args := range [][]string{{"--offsets", "generation"}, {"--verbose"}, {"--offsets"}} {
		if _, err := parseArgs(args); err == nil || !strings.Contains(err.Error(), "--offsets") {
			t.Errorf("parseArgs(%q): %v, want an error naming --offsets", args, err)
		}
	}
}

// The producer's connections count the EndTxn requests written (API key 26), and only those:
// what tells a CommitTxn refused before its EndTxn (fail) from one that may have committed.
func TestWireCountsEndTxn(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go func() { _, _ = io.Copy(io.Discard, b) }()
	w := &wireCount{}
	conn := &countingConn{Conn: a, w: w}
	frame := func(key int16) []byte {
		f := make([]byte, 12)
		binary.BigEndian.PutUint32(f, 8)
		binary.BigEndian.PutUint16(f[4:], uint16(key))
		return f
	}
	for _, key := range []int16{25, 28, 26, 0, 26} { // AddOffsetsToTxn, TxnOffsetCommit, EndTxn, Produce, EndTxn
		if _, err := conn.Write(frame(key)); err != nil {
			t.Fatal(err)
		}
	}
	if n := w.endTxns.Load(); n != 2 {
		t.Fatalf("%d EndTxn counted, want 2", n)
	}
}
