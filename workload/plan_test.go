package workload_test

import (
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/workload"
)

// choices draws n of every kind of choice from a member and a reader of p.
func choices(p *workload.Plan, n int) []any {
	var out []any
	m, r := p.Member(2, 1), p.Reader(3)
	out = append(out, m.FirstLook())
	for i := range n {
		out = append(out, m.NextLook(), m.NextContend(), m.Backoff(i%6+1), m.NextRenew(), m.NextWork(), r.Next())
	}
	return out
}

func TestPlan(t *testing.T) {
	cfg := preset(t, workload.PresetMedium)
	t.Run("same seed and config - same choices", func(t *testing.T) {
		a, b := choices(workload.NewPlan(cfg, 9), 200), choices(workload.NewPlan(cfg, 9), 200)
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("choice %d: %v vs %v", i, a[i], b[i])
			}
		}
	})
	t.Run("another seed - other choices", func(t *testing.T) {
		a, b := choices(workload.NewPlan(cfg, 9), 50), choices(workload.NewPlan(cfg, 10), 50)
		same := 0
		for i := range a {
			if a[i] == b[i] {
				same++
			}
		}
		if same > len(a)/10 {
			t.Fatalf("%d of %d choices equal across seeds", same, len(a))
		}
	})
	t.Run("streams are independent - one kind drawn more leaves the others as they were", func(t *testing.T) {
		p1, p2 := workload.NewPlan(cfg, 9), workload.NewPlan(cfg, 9)
		m1, m2 := p1.Member(0, 0), p2.Member(0, 0)
		for range 17 {
			m2.NextLook() // a member that looked more often (it was a candidate longer)
		}
		for i := range 50 {
			if a, b := m1.NextContend(), m2.NextContend(); a != b {
				t.Fatalf("contention gap %d: %v vs %v", i, a, b)
			}
		}
	})
	t.Run("work records - one by default, the number, or every count of the range", func(t *testing.T) {
		if n := workload.NewPlan(cfg, 9).Member(0, 0).WorkRecords(); n != 1 {
			t.Fatalf("default: %d records, want 1", n)
		}
		fixed := cfg
		fixed.Load.WorkRecords = workload.RecordCount{Min: 4, Max: 4}
		if n := workload.NewPlan(fixed, 9).Member(0, 0).WorkRecords(); n != 4 {
			t.Fatalf("fixed: %d records, want 4", n)
		}
		ranged := cfg
		ranged.Load.WorkRecords = workload.RecordCount{Min: 2, Max: 5}
		m, again := workload.NewPlan(ranged, 9).Member(0, 0), workload.NewPlan(ranged, 9).Member(0, 0)
		seen := map[int]bool{}
		for range 200 {
			n := m.WorkRecords()
			if n < 2 || n > 5 || n != again.WorkRecords() {
				t.Fatalf("range 2-5: drew %d, or not the same with the same seed", n)
			}
			seen[n] = true
		}
		if len(seen) != 4 {
			t.Fatalf("range 2-5 drew only %v", seen)
		}
		// The other streams are where they were without a range.
		if a, b := workload.NewPlan(ranged, 9).Member(0, 0).NextWork(), workload.NewPlan(cfg, 9).Member(0, 0).NextWork(); a != b {
			t.Fatalf("a range of records moved the work stream: %v vs %v", a, b)
		}
	})
	t.Run("members differ from one another", func(t *testing.T) {
		p := workload.NewPlan(cfg, 9)
		if p.Member(0, 0).NextContend() == p.Member(0, 1).NextContend() {
			t.Fatal("two members drew the same contention gap")
		}
	})
	t.Run("backoff - jittered within [min, min(max, min·2^n)]", func(t *testing.T) {
		m := workload.NewPlan(cfg, 9).Member(0, 0)
		lo, hi := cfg.Load.BackoffMin.D(), cfg.Load.BackoffMax.D()
		for n := 1; n <= 8; n++ {
			ceil := min(hi, lo<<n)
			seen := map[time.Duration]bool{}
			for range 100 {
				d := m.Backoff(n)
				if d < lo || d > ceil {
					t.Fatalf("Backoff(%d) = %v, want in [%v, %v]", n, d, lo, ceil)
				}
				seen[d] = true
			}
			if len(seen) < 90 {
				t.Fatalf("Backoff(%d) took %d distinct values in 100 draws: no jitter", n, len(seen))
			}
		}
	})
	t.Run("renewal - never later than lease/3", func(t *testing.T) {
		m := workload.NewPlan(cfg, 9).Member(0, 0)
		third := cfg.Lease.D() / 3
		for range 1000 {
			if d := m.NextRenew(); d > third || d < third-time.Duration(cfg.Load.Jitter*float64(third))-1 {
				t.Fatalf("NextRenew = %v, want in [(1-jitter)·%v, %v]", d, third, third)
			}
		}
	})
	t.Run("rates - means as configured", func(t *testing.T) {
		m := workload.NewPlan(cfg, 9).Member(0, 0)
		r := workload.NewPlan(cfg, 9).Reader(0)
		const n = 20000
		var look, contend, work, read time.Duration
		describes := 0
		kinds := map[workload.ReadKind]int{}
		for range n {
			l := m.NextLook()
			look += l.Wait
			if l.Describe {
				describes++
			}
			contend += m.NextContend()
			work += m.NextWork()
			c := r.Next()
			read += c.Wait
			kinds[c.Kind]++
		}
		near := func(what string, got, want float64) {
			if got < 0.95*want || got > 1.05*want {
				t.Errorf("%s: mean %.3g, want %.3g", what, got, want)
			}
		}
		near("look", float64(look/n), float64(cfg.Load.Look))
		near("contend", float64(contend/n), float64(cfg.Load.Contend))
		near("work", float64(work/n), float64(time.Second)/cfg.Load.WorkRate)
		near("read", float64(read/n), float64(cfg.Load.ReadEvery))
		near("describe share", float64(describes)/n, cfg.Load.DescribeShare)
		mix := cfg.Load.ReadMix
		total := float64(mix.Read + mix.Describe + mix.ReadWork)
		near("read mix", float64(kinds[workload.ReadRole])/n, float64(mix.Read)/total)
		near("describe mix", float64(kinds[workload.DescribeRole])/n, float64(mix.Describe)/total)
	})
}
