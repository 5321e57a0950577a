package owner

import (
	"os/exec"
	"strings"
	"testing"
)

func TestGone(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	dead := Label(cmd.Process.Pid) // a zombie until Wait: its start time is still readable
	if strings.HasSuffix(dead, "/") {
		t.Fatalf("label of an existing process without a start time: %q", dead)
	}
	cmd.Wait()
	tests := []struct {
		label, host string
		want        bool
	}{
		{Self(), Host(), false},          // this process
		{dead, Host(), true},             // exited
		{dead, "another-boot/ns", false}, // its pid says nothing here
		{"garbage", Host(), false},
		{"", Host(), false},
	}
	for _, tc := range tests {
		if got := Gone(tc.label, tc.host); got != tc.want {
			t.Errorf("Gone(%q, %q) = %v, want %v", tc.label, tc.host, got, tc.want)
		}
	}
	if !Exited(cmd.Process.Pid) {
		t.Errorf("Exited(%d) = false after Wait", cmd.Process.Pid)
	}
}
