//go:build !kafka

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestUsageErrors(t *testing.T) {
	bin := buildBinary(t)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"run", "no-such-scenario"}, "no built-in scenario"},
		{[]string{"run", "--count", "0"}, "--count"},
		{[]string{"run", "--cluster", "cloud"}, "cluster.kind"},
		{[]string{"run", "--no-such-flag"}, "unknown flag"},
		{[]string{"run", "isolate-broker", "--cluster", "embedded"}, "local"},
		{[]string{"run", "--transport", "mutant:nope"}, "no such mutant"},
		{[]string{"run", "--cluster", "local", "--security", "kerberos"}, "cluster.security"},
		{[]string{"run", "--security", "sasl-ssl"}, "embedded cluster (kfake) has no TLS or SASL listener"},
		{[]string{"check"}, "takes 1 argument"},
		{[]string{"check", t.TempDir()}, "not a run directory"},
		{[]string{"shrink"}, "takes 1 argument"},
		{[]string{"shrink", t.TempDir()}, "cannot shrink"},
		{[]string{"selftest", "--parallel", "-1"}, "--parallel"},
		{[]string{"selftest", "--tries", "-1"}, "--tries -1"},
		{[]string{"selftest", "--txn-version", "3"}, "cluster.transaction_version: 3"},
		{[]string{"probe"}, "--bootstrap: required"},
		{[]string{"rn"}, `unknown command "rn" for "fencecheck"; did you mean run?`},
		{[]string{"scenarios", "lst"}, `unknown command "lst" for "fencecheck scenarios"; did you mean list?`},
		{[]string{"run", "--seed", "-1"}, `--seed "-1": want a whole number, 0 or more`},
		{[]string{"run", "--duration", "5"}, `--duration "5": want a duration with a unit`},
		{[]string{"probe", "--cluster", "embedded", "--bootstrap", "127.0.0.1:9092"}, "--bootstrap: only an external cluster"},
		{[]string{"run", "steady", "--cluster", "external"}, "--cluster external needs --bootstrap HOST:PORT"},
		{[]string{"soak", "--cluster", "external", "--duration", "1s"}, "--cluster external needs --bootstrap HOST:PORT"},
		{[]string{"selftest", "--cluster", "external"}, "--cluster external needs --bootstrap HOST:PORT"},
		{[]string{"explore"}, "takes 1 argument"},
		{[]string{"explore", "steady"}, "explore needs a bound: --budget D (such as 10m) or --runs N"},
		{[]string{"explore", "stedy", "--runs", "2"}, "no built-in scenario"},
		{[]string{"explore", "steady", "--budget", "-1m"}, "--budget -1m0s: want a positive duration"},
		{[]string{"explore", "steady", "--runs", "-3"}, "--runs -3: want 0 (no bound) or more"},
		{[]string{"explore", "steady", "--runs", "2", "--faults", "dorp"}, `--faults: "dorp" is not a fault explore draws; did you mean drop?`},
		{[]string{"explore", "steady", "--runs", "2", "--faults", "isolate"}, "--faults: none of isolate can run on the embedded cluster"},
		{[]string{"explore", "steady", "--runs", "2", "--max-faults", "0"}, "--max-faults 0: want 1 or more"},
		{[]string{"explore", "steady", "--runs", "2", "--duration", "2s"}, "--duration 2s: want at least 4s"},
		{[]string{"explore", "steady", "--runs", "2", "--shrink-budget", "-1s"}, "--shrink-budget -1s"},
		{[]string{"explore", "steady", "--runs", "2", "--probe", "-5s"}, "--probe -5s: want a duration"},
		{[]string{"explore", "steady", "--runs", "2", "--transport", "mutant:nope"}, "no such mutant"},
	}
	for _, tc := range tests {
		out, err := exec.Command(bin, tc.args...).CombinedOutput()
		if code := exitCode(t, err); code != 254 {
			t.Errorf("%v: exit %d, want 254 (usage); output:\n%s", tc.args, code, out)
		}
		if !strings.Contains(string(out), tc.want) {
			t.Errorf("%v: output %q does not say %q", tc.args, out, tc.want)
		}
		if strings.Contains(string(out), "strconv.") {
			t.Errorf("%v: Go's parser reached the user:\n%s", tc.args, out)
		}
		if strings.Contains(string(out), "goroutine ") {
			t.Errorf("%v: a stack trace reached the user:\n%s", tc.args, out)
		}
	}
}

// TestHarnessErrorWhenClusterCannotStart: a cluster that cannot start is a harness error
// (255), not a verdict on the transport, and the run directory still says why.
func TestHarnessErrorWhenClusterCannotStart(t *testing.T) {
	bin := buildBinary(t)
	out := t.TempDir()
	b, err := exec.Command(bin, "run", "steady", "--cluster", "local", "--kafka-version", "9.9.9", "--out", out).CombinedOutput()
	if code := exitCode(t, err); code != 255 {
		t.Fatalf("exit %d, want 255; output:\n%s", code, b)
	}
	if !strings.Contains(string(b), "make kafka KAFKA_VERSION=9.9.9") {
		t.Errorf("output does not say how to install the missing version:\n%s", b)
	}
	res, err := os.ReadFile(filepath.Join(out, "latest", "results.json"))
	if err != nil || !strings.Contains(string(res), `"verdict": "error"`) || strings.Contains(string(res), "history.jsonl") {
		t.Errorf("results.json (%v) must hold the error verdict and only the cluster's reason:\n%s", err, res)
	}
}
