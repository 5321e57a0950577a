package harness

import (
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/workload"
)

func TestStatusLine(t *testing.T) {
	st := workload.Stats{Elapsed: 12 * time.Second, OpsPerSecond: 850, Handoffs: 4, Fences: 2}
	tests := []struct {
		name              string
		rolesHeld, belief int
		faults            []string
		want              string
	}{
		{"every role held by one believer - roles only", 6, 6, nil,
			"  12s/40s  850 ops/s  roles held 6/6  handoffs 4  fences 2"},
		{"a zombie still believes - roles held and believers", 6, 7, []string{},
			"  12s/40s  850 ops/s  roles held 6/6 (7 members believe they hold)  handoffs 4  fences 2  faults: none"},
		{"a role free - roles held below roles", 5, 5, []string{"freeze p2/r1/m1"},
			"  12s/40s  850 ops/s  roles held 5/6  handoffs 4  fences 2  faults: freeze p2/r1/m1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st.RolesHeld, st.Believers = tc.rolesHeld, tc.belief
			if got := statusLine(st, 6, 40*time.Second, tc.faults); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
	// Past the duration the members are stepping down: no roles held is shown then.
	stopping := workload.Stats{Elapsed: 40 * time.Second, OpsPerSecond: 10, Handoffs: 4, Fences: 2}
	if got, want := statusLine(stopping, 6, 40*time.Second, nil), "  40s/40s  10 ops/s  stopping  handoffs 4  fences 2"; got != want {
		t.Errorf("stopping: got %q, want %q", got, want)
	}
}
