//go:build !kafka

package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// checkHistory runs `fencecheck check` in process on a run directory holding history and
// returns what it printed and its error.
func checkHistory(t *testing.T, history string) (string, error) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "history.jsonl"), []byte(history), 0o644); err != nil {
		t.Fatal(err)
	}
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"check", dir})
	err := root.Execute()
	return out.String(), err
}

const checkHeader = `{"type":"header","time":0,"format":1,"meta":{"scenario":"unit","lease_ns":100}}`

// TestCheckSaysTheHistoryWasTruncated: a last line cut short showed only in results.json and
// the report; the terminal must say it too.
func TestCheckSaysTheHistoryWasTruncated(t *testing.T) {
	out, _ := checkHistory(t, checkHeader+"\n"+
		`{"type":"invoke","id":1,"time":10,"client":1,"process":"p1","member":"m1","role":"r","kind":"acquire"}`+"\n"+
		`{"type":"ok","id":1,"time":12,"result":{"tok`)
	if !strings.Contains(out, "line 3") || !strings.Contains(out, "cut short") {
		t.Fatalf("output does not say line 3 was cut short:\n%s", out)
	}
}

// TestCheckNamesAnUnknownEventType: an unknown event type is valid JSON; the error (a usage
// error: the history cannot be read) names the type and the line.
func TestCheckNamesAnUnknownEventType(t *testing.T) {
	_, err := checkHistory(t, checkHeader+"\n"+`{"type":"fault-begin","time":5,"fault":1}`+"\n")
	var ex *exitError
	if !errors.As(err, &ex) || ex.code != 254 {
		t.Fatalf("got %v, want a usage error", err)
	}
	for _, want := range []string{"line 2", `unknown event type "fault-begin"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "invalid JSON") {
		t.Errorf("error %q calls valid JSON invalid", err)
	}
}
