package workload_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/cluster/embedded"
	"github.com/fencecheck/fencecheck/cluster/links"
	"github.com/fencecheck/fencecheck/cluster/local"
	"github.com/fencecheck/fencecheck/internal/units"
	"github.com/fencecheck/fencecheck/workload"
)

// TestScale runs the scale targets when FENCECHECK_SCALE lists them as PxR (processes x
// roles, every process a member of every role unless FENCECHECK_SCALE_MEMBERS caps the members
// per role) or PxRxM (M members per role, spread over the processes: 2000x400x5 is a fleet of
// 2,000 processes of one role each, 500x400x5 one of 500 processes of four roles each), e.g.
// FENCECHECK_SCALE=300x1,100x5. There is one reader per 10 processes. Each run lasts
// FENCECHECK_SCALE_DURATION (default 30s) on the low preset, lease FENCECHECK_SCALE_LEASE
// (default the preset's; the load's intervals stretch with it, see scaleLoad), process
// links FENCECHECK_SCALE_LINKS (proxy, the default, or conn), on FENCECHECK_SCALE_CLUSTER
// (embedded, the default, or local: three Kafka JVMs from make kafka),
// and reports descriptors, memory, CPU, rates, history size, check time, renewal lateness,
// the held fraction and a timeline of acquires and renewals per 10 s; the history must check
// valid, the held fraction be at least 0.8 and the p99 renewal gap at most 1.1 renewal periods
// (Lease/3). `make scale` runs the fleet shapes. For studying a local cluster:
// FENCECHECK_SCALE_WORK_PARTITIONS sets the work topic's partitions (default one per role),
// FENCECHECK_SCALE_JVM the brokers' JVM flags (space-separated, replacing the defaults) and
// FENCECHECK_SCALE_LOGS a folder that keeps the brokers' logs.
func TestScale(t *testing.T) {
	spec := os.Getenv("FENCECHECK_SCALE")
	if spec == "" {
		t.Skip("set FENCECHECK_SCALE=300x1,100x5 to run the scale targets")
	}
	d := envDuration(t, "FENCECHECK_SCALE_DURATION", 30*time.Second)
	lease := envDuration(t, "FENCECHECK_SCALE_LEASE", 0)
	capMembers, _ := strconv.Atoi(os.Getenv("FENCECHECK_SCALE_MEMBERS"))
	mode, err := links.ParseLinkMode(os.Getenv("FENCECHECK_SCALE_LINKS"))
	if err != nil {
		t.Fatalf("FENCECHECK_SCALE_LINKS: %v", err)
	}
	for _, s := range strings.Split(spec, ",") {
		var p, r, m int
		if n, _ := fmt.Sscanf(s, "%dx%dx%d", &p, &r, &m); n < 2 || p < 1 || r < 1 {
			t.Fatalf("FENCECHECK_SCALE: %q is not PxR or PxRxM", s)
		}
		t.Run(s, func(t *testing.T) {
			cfg := preset(t, workload.PresetLow)
			cfg.Processes, cfg.Roles, cfg.MembersPerRole, cfg.Readers = p, r, p, max(1, p/10)
			if m > 0 {
				cfg.MembersPerRole = min(p, m)
			} else if capMembers > 0 {
				cfg.MembersPerRole = min(p, capMembers)
			}
			if lease > 0 {
				scaleLoad(&cfg.Load, float64(lease)/float64(cfg.Lease))
				cfg.Lease = units.Duration(lease)
			}
			cfg.RequestTimeout = units.Duration(10 * time.Second)
			if n, _ := strconv.Atoi(os.Getenv("FENCECHECK_SCALE_WORK_PARTITIONS")); n > 0 {
				cfg.WorkPartitions = int32(n)
			}
			scaleRun(t, cfg, d, mode)
		})
	}
}

// scaleLoad stretches the load's intervals by f (and its work rate by 1/f) for a lease f
// times the preset's, so that members look, back off and work as often per lease as the
// preset has them do: a longer lease with the preset's looks only adds reads.
func scaleLoad(l *workload.Load, f float64) {
	for _, d := range []*units.Duration{&l.Look, &l.Contend, &l.BackoffMin, &l.BackoffMax, &l.ReadEvery} {
		*d = units.Duration(float64(*d) * f)
	}
	l.WorkRate /= f
}

func scaleRun(t *testing.T, cfg workload.Config, d time.Duration, mode links.LinkMode) {
	fds0 := openFDs()
	var peakFDs, peakRSS atomic.Int64
	var cpu0 time.Duration
	during := func(ctx context.Context, _ *workload.Workload, _ string) {
		cpu0 = cpuTime()
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		deadline := time.After(d)
		for {
			select {
			case <-deadline:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				peakFDs.Store(max(peakFDs.Load(), int64(openFDs())))
				peakRSS.Store(max(peakRSS.Load(), rssKB()))
			}
		}
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	var c cluster.Cluster
	var err error
	netOpts := links.NetworkOptions{ProcessLinks: mode}
	switch kind := os.Getenv("FENCECHECK_SCALE_CLUSTER"); kind {
	case "", embedded.Kind:
		c, err = embedded.New(ctx, embedded.Options{Network: netOpts})
	case local.Kind:
		var flags []string // the default: local.DefaultJVMFlags
		if f := os.Getenv("FENCECHECK_SCALE_JVM"); f != "" {
			flags = strings.Fields(f)
		}
		logs := os.Getenv("FENCECHECK_SCALE_LOGS") // the brokers' logs, kept when set
		if logs == "" {
			logs = t.TempDir()
		}
		c, err = local.New(ctx, local.Options{Network: netOpts, LogsDir: logs, JVMFlags: flags})
	default:
		t.Fatalf("FENCECHECK_SCALE_CLUSTER: %q is not %s or %s", kind, embedded.Kind, local.Kind)
	}
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	res := runWorkloadOn(t, c, cfg, 1, d, during)
	cpu := cpuTime() - cpu0
	wall := time.Since(began)
	st := res.stats
	t.Logf("%d processes × %d roles × %d members, %d readers, %v, lease %v, %s links, GOMAXPROCS %d",
		cfg.Processes, cfg.Roles, cfg.MembersPerRole, cfg.Readers, d, cfg.Lease, mode, runtime.GOMAXPROCS(0))
	t.Logf("fds: %d before, peak %d: %.1f per process; peak RSS %d MiB; CPU %.1f cores over %v (incl. final reads)",
		fds0, peakFDs.Load(), float64(peakFDs.Load()-int64(fds0))/float64(cfg.Processes), peakRSS.Load()>>10,
		cpu.Seconds()/wall.Seconds(), wall.Round(time.Second))
	t.Logf("ops %d (%.0f/s), lease writes %v, acquires %v, reads %v, describes %v, handoffs %d, fences %d, held %.3f (min %.3f)",
		st.Ops, st.OpsPerSecond, st.Kinds[history.KindWriteLease], st.Kinds[history.KindAcquire],
		st.Kinds[history.KindRead], st.Kinds[history.KindDescribe], st.Handoffs, st.Fences, st.HeldFraction, st.MinHeldFraction)
	logTimeline(t, res.h, 10*time.Second)
	logFinalReads(t, res.h)
	gaps := renewalGaps(res.h)
	period := cfg.Lease.D() / 3
	if len(gaps) > 0 {
		t.Logf("renewal gaps (period %v): p50 %v p99 %v max %v; over the lease: %d of %d",
			period, pct(gaps, 50), pct(gaps, 99), gaps[len(gaps)-1], countOver(gaps, cfg.Lease.D()), len(gaps))
		if p99 := pct(gaps, 99); p99 > period*11/10 {
			t.Errorf("p99 renewal gap %v, want ≤ 1.1 × %v", p99, period)
		}
	}
	var size int64
	if fi, err := os.Stat(res.path); err == nil {
		size = fi.Size()
	}
	checkStart := time.Now()
	check(t, res.h)
	t.Logf("history %d ops, %.1f MB; check took %v", len(res.h.Ops), float64(size)/1e6, time.Since(checkStart).Round(time.Millisecond))
	if st.HeldFraction < 0.8 {
		t.Errorf("held fraction %.3f, want ≥ 0.8", st.HeldFraction)
	}
}

// logTimeline logs, per window of the run, the acquires (ok / failed / unknown, and the
// median latency of the ok ones), the ok lease writes and the roles that renewed: how a
// fleet got started, or how it collapsed.
func logTimeline(t *testing.T, h *history.History, window time.Duration) {
	if len(h.Ops) == 0 {
		return
	}
	type bin struct {
		acq          [3]int // ok, fail, info
		acqLat       []time.Duration
		leases, fail int
		roles        map[string]bool
	}
	start := h.Ops[0].Invoke
	var bins []*bin
	at := func(ts int64) *bin {
		i := int((ts - start) / int64(window))
		for len(bins) <= i {
			bins = append(bins, &bin{roles: map[string]bool{}})
		}
		return bins[i]
	}
	for _, op := range h.Ops {
		switch op.Kind {
		case history.KindAcquire:
			b := at(op.Invoke)
			switch op.Type {
			case history.TypeOK:
				b.acq[0]++
				b.acqLat = append(b.acqLat, time.Duration(op.Return-op.Invoke))
			case history.TypeFail:
				b.acq[1]++
			default:
				b.acq[2]++
			}
		case history.KindWriteLease:
			b := at(op.Invoke)
			if op.Type == history.TypeOK {
				b.leases++
				b.roles[op.Role] = true
			} else {
				b.fail++
			}
		}
	}
	for i, b := range bins {
		slices.Sort(b.acqLat)
		p50 := time.Duration(0)
		if len(b.acqLat) > 0 {
			p50 = pct(b.acqLat, 50)
		}
		t.Logf("  %3ds: acquires ok %d fail %d unknown %d (ok p50 %v); lease writes ok %d failed %d; roles renewed %d",
			int((time.Duration(i) * window).Seconds()), b.acq[0], b.acq[1], b.acq[2], p50, b.leases, b.fail, len(b.roles))
	}
}

// logFinalReads logs how long the final reads and the settled reads after them took, from
// the first invoke to the last return of each, and how many there were.
func logFinalReads(t *testing.T, h *history.History) {
	var finals, settled int
	first, last := int64(-1), int64(0) // of the final reads
	for _, op := range h.Ops {
		if op.Kind == history.KindFinalRead {
			finals++
			if first < 0 || op.Invoke < first {
				first = op.Invoke
			}
			last = max(last, op.Return)
		}
	}
	if finals == 0 {
		return
	}
	var sLast int64
	for _, op := range h.Ops {
		if op.Kind == history.KindRead && op.Invoke >= first && op.Process != workload.FinalProcess {
			settled++
			sLast = max(sLast, op.Return)
		}
	}
	t.Logf("final reads: %d in %v; settled reads: %d, done %v after the final reads",
		finals, time.Duration(last-first).Round(time.Millisecond), settled, time.Duration(max(0, sLast-last)).Round(time.Millisecond))
}

// renewalGaps returns, sorted, the gaps between consecutive ok lease writes of one holding
// (same role and token), invoke to invoke.
func renewalGaps(h *history.History) []time.Duration {
	last := map[string]int64{}
	var gaps []time.Duration
	for _, op := range h.Ops {
		if op.Kind != history.KindWriteLease || op.Type != history.TypeOK {
			continue
		}
		k := op.Role + "/" + op.Args.Token.String()
		if prev, ok := last[k]; ok {
			gaps = append(gaps, time.Duration(op.Invoke-prev))
		}
		last[k] = op.Invoke
	}
	slices.Sort(gaps)
	return gaps
}

func pct(sorted []time.Duration, p int) time.Duration {
	return sorted[min(len(sorted)-1, len(sorted)*p/100)].Round(time.Millisecond)
}

func countOver(sorted []time.Duration, d time.Duration) int {
	i, _ := slices.BinarySearch(sorted, d)
	return len(sorted) - i
}

func openFDs() int {
	ents, _ := os.ReadDir("/proc/self/fd")
	return len(ents)
}

func rssKB() int64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return n
		}
	}
	return 0
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
