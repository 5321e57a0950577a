package harness

import (
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/nemesis"
	"github.com/fencecheck/fencecheck/workload"
)

// TestHolderIsTheNewestBeliever: when several members believe they hold a role (a deposed
// one keeps believing until its next write fails), the holder a fault targets is the one that
// minted last, not the first in member order. A deposed member's next lease write fails before
// its commit, so a before-lease-commit freeze aimed at it never took hold (zombie-holder through
// the Java adapter, whose slower start left the first acquires' scramble near the 4 s step).
func TestHolderIsTheNewestBeliever(t *testing.T) {
	h := func(member string, pid int64, epoch int16, since time.Duration, frozen bool) workload.Holding {
		return workload.Holding{Process: int(member[1] - '0'), Role: "r1", Member: member,
			Token: history.Token{ProducerID: pid, Epoch: epoch}, Since: since, Frozen: frozen}
	}
	other := workload.Holding{Process: 9, Role: "r2", Member: "m9", Token: history.Token{ProducerID: 7, Epoch: 99}, Since: time.Hour}
	tests := []struct {
		name string
		hs   []workload.Holding
		want string // member, "" for none
	}{
		{"one holder", []workload.Holding{other, h("m1", 5, 3, time.Second, false)}, "m1"},
		{"a deposed m1 still believes - the higher epoch", []workload.Holding{
			h("m1", 5, 3, 2*time.Second, false), h("m3", 5, 4, time.Second, false), other}, "m3"},
		{"another producer id (rotated) - the later acquire", []workload.Holding{
			h("m1", 5, 32766, time.Second, false), h("m2", 6, 0, 2*time.Second, false)}, "m2"},
		{"the newest is frozen - the newest of the others", []workload.Holding{
			h("m1", 5, 2, time.Second, false), h("m2", 5, 4, time.Second, true), h("m3", 5, 3, time.Second, false)}, "m3"},
		{"only a frozen one", []workload.Holding{h("m1", 5, 2, time.Second, true), other}, ""},
		{"nobody", []workload.Holding{other}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, ok := newestHolder(tc.hs, "r1")
			m := memberOf(h)
			if tc.want == "" {
				if ok {
					t.Fatalf("holder %v, want none", m)
				}
				return
			}
			want := nemesis.Member{Process: int(tc.want[1] - '0'), Role: "r1", ID: tc.want}
			if !ok || m != want {
				t.Fatalf("holder %v (%v), want %v", m, ok, want)
			}
		})
	}
}
