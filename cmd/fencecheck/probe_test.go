//go:build !kafka

package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// TestProbe runs `fencecheck probe` as a user would: on a kfake it starts (exit 0, every check
// ok), and on a broker without EndTxn (exit 1, the table names it and what was not tried).
func TestProbe(t *testing.T) {
	bin := buildBinary(t)
	out, err := exec.Command(bin, "probe", "--cluster", "embedded").CombinedOutput()
	if code := exitCode(t, err); code != 0 || !strings.Contains(string(out), "the broker can do everything fencecheck needs") {
		t.Fatalf("probe --cluster embedded: exit %d, want 0; output:\n%s", code, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		// The one advisory check kfake fails (it lists every transaction on every node) refuses nothing.
		if (strings.Contains(l, "missing") || strings.Contains(l, "not tried")) && !strings.Contains(l, "(advisory)") {
			t.Errorf("probe of kfake found something missing: %s\n%s", l, out)
		}
	}

	v := kversion.Stable()
	v.SetMaxKeyVersion(kmsg.EndTxn.Int16(), -1)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.MaxVersions(v))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	out, err = exec.Command(bin, "probe", "--bootstrap", strings.Join(c.ListenAddrs(), ",")).CombinedOutput()
	if code := exitCode(t, err); code != 1 {
		t.Fatalf("probe of a broker without EndTxn: exit %d, want 1; output:\n%s", code, out)
	}
	for _, want := range []string{"missing    EndTxn v0+", "not tried  commit", "the broker cannot do EndTxn v0+ ("} {
		if !strings.Contains(string(out), want) {
			t.Errorf("probe output lacks %q:\n%s", want, out)
		}
	}
}
