package workload_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/internal/units"
	"github.com/fencecheck/fencecheck/workload"
)

// TestAcceptance is the fault-free acceptance run: 20 processes × 10 roles × 3 members on the
// medium preset against the embedded cluster, checked valid with handoffs and fences. It
// lasts 8 s; FENCECHECK_ACCEPTANCE_DURATION=30s runs the full one. While it runs, the history
// file must stay current (flushed at least every 100 ms) and readable as it stands.
func TestAcceptance(t *testing.T) {
	d := envDuration(t, "FENCECHECK_ACCEPTANCE_DURATION", 8*time.Second)
	cfg := preset(t, workload.PresetMedium)
	var flushLag, newest []time.Duration
	during := func(ctx context.Context, wl *workload.Workload, path string) {
		for _, at := range []time.Duration{d / 3, 2 * d / 3} {
			time.Sleep(at - time.Since(wl.Start()))
			lag, last, err := currentLag(path, wl.Start())
			if err != nil {
				t.Errorf("history at %v: %v", at, err)
				continue
			}
			flushLag, newest = append(flushLag, lag), append(newest, last)
		}
	}
	res := runWorkload(t, cfg, 42, d, during)
	st := res.stats
	t.Logf("%v: %d ops (%.0f/s), handoffs %d, fences %d, held %.3f (min %.3f), kinds %v",
		d, st.Ops, st.OpsPerSecond, st.Handoffs, st.Fences, st.HeldFraction, st.MinHeldFraction, st.Kinds)
	// The history is flushed while the run goes (every 100 ms), not only at its end: a
	// killed run leaves what it did. How far the file lags is the machine's business (logged);
	// that it grew between the two looks, past the first look's time, is not.
	t.Logf("history file lag behind the run at %v and %v: %v", d/3, 2*d/3, flushLag)
	if len(newest) != 2 || newest[0] <= 0 || newest[1] < d/3 {
		t.Errorf("the history file's newest events at %v and %v: %v; want the second past %v (flushed while the run goes)", d/3, 2*d/3, newest, d/3)
	}
	r := check(t, res.h, checker.CoverHandoff, checker.CoverFence)
	t.Logf("checked in %v: %d ops, %d records", time.Duration(r.Timings.Total).Round(time.Millisecond), r.History.Ops, r.History.Records)
	// Contention: with 3 members each contending every ~8 s, a role changes hands every ~3 s
	// on an idle machine (BenchmarkNoLivelock measures the rates); the promises above ask
	// for a handoff and a fence, which a loaded machine reaches too.
	for _, op := range res.h.All() {
		if op.Pending {
			t.Fatalf("op %d (%s) never completed", op.ID, op.Kind)
		}
	}
	// Settled reads: after the final reads, every process read every log, all of it.
	logOf := func(op history.Op) string {
		if op.Args.Log.Work {
			return op.Args.Log.String()
		}
		return history.RoleLog(op.Role).String()
	}
	finalEnd, finalLen := map[string]int64{}, map[string]int{}
	for i := range res.h.Len() {
		if op := res.h.Op(i); op.Kind == history.KindFinalRead && op.Type == history.TypeOK {
			finalEnd[logOf(op)], finalLen[logOf(op)] = op.Return, len(op.Result.Records)
		}
	}
	settled := map[string]bool{}
	for i := range res.h.Len() {
		op := res.h.Op(i)
		end, ok := finalEnd[logOf(op)]
		if op.Kind != history.KindRead || !ok || op.Invoke < end {
			continue
		}
		settled[op.Process+" "+logOf(op)] = true
		if op.Type != history.TypeOK || len(op.Result.Records) != finalLen[logOf(op)] {
			t.Errorf("settled read op %d of %s by %s: %s with %d records, want ok with %d", op.ID, logOf(op), op.Process, op.Type, len(op.Result.Records), finalLen[logOf(op)])
		}
	}
	if want := cfg.Processes * len(finalEnd); len(settled) != want {
		t.Errorf("%d process-log pairs read after the final reads, want %d (%d processes × %d logs)", len(settled), want, cfg.Processes, len(finalEnd))
	}
}

// currentLag reads the history file as a killed run would leave it and returns how far its
// newest event lags behind now, and that event's time since the run's start.
func currentLag(path string, start time.Time) (lag, newestAt time.Duration, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, err
	}
	now := time.Since(start)
	if _, err := history.Read(bytes.NewReader(b)); err != nil {
		return 0, 0, err
	}
	var newest int64
	for _, line := range strings.Split(string(b), "\n") {
		var e struct{ Time int64 }
		if json.Unmarshal([]byte(line), &e) == nil {
			newest = max(newest, e.Time)
		}
	}
	return now - time.Duration(newest), time.Duration(newest), nil
}

// TestPausePoints freezes holders at each pause point past their lease: a successor
// acquires meanwhile, and the zombie's first write after it resumes is fenced. r1: a holder
// frozen before a work write; r2: a holder frozen before its lease write's commit (the
// transaction stays open); r3: a holder frozen before a work write, and then its successor
// frozen right after its acquire, so a third member takes over. Then: a pause that cannot
// take hold gives up with its context or ThawAll, and Thaw ends a pause early.
func TestPausePoints(t *testing.T) {
	cfg := preset(t, workload.PresetLow)
	cfg.Processes, cfg.Roles, cfg.MembersPerRole, cfg.Readers = 3, 3, 3, 1
	cfg.Load.Look = units.Duration(250 * time.Millisecond)
	cfg.Load.WorkRate = 4
	lease := cfg.Lease.D()
	const pause = 2 * time.Second
	var (
		mu     sync.Mutex
		pauses []*workload.Pause
		thawed int64 // fault id of the pause thawed early
	)
	during := func(ctx context.Context, wl *workload.Workload, _ string) {
		if !waitSettled(ctx, wl, lease, "r1", "r2", "r3") {
			t.Error("roles not all held by one member within a minute")
			return
		}
		freeze := func(target workload.Target, point workload.Point, d time.Duration) *workload.Pause {
			p, err := wl.Freeze(ctx, target, point, d)
			if err != nil {
				t.Errorf("freeze %s at %s: %v", target, point, err)
				return nil
			}
			mu.Lock()
			pauses = append(pauses, p)
			mu.Unlock()
			return p
		}
		var wg sync.WaitGroup
		wg.Go(func() { freeze(workload.HolderOf("r1"), workload.BeforeWork, lease+pause) })
		wg.Go(func() { freeze(workload.HolderOf("r2"), workload.BeforeLeaseCommit, lease+pause/2) })
		wg.Go(func() {
			if freeze(workload.HolderOf("r3"), workload.BeforeWork, lease+pause) != nil {
				freeze(workload.HolderOf("r3"), workload.AfterAcquire, lease+pause)
			}
		})
		wg.Wait()
		for _, p := range pauses {
			<-p.Done()
		}
		if !waitSettled(ctx, wl, lease, "r1", "r2", "r3") {
			t.Error("roles not held by one member again within a minute")
			return
		}
		// A pause that cannot take hold (no acquire while the roles are held) gives up with
		// its context, or when ThawAll disarms it, and leaves no window.
		short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		if p, err := wl.Freeze(short, workload.HolderOf("r1"), workload.AfterAcquire, time.Second); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("freeze that cannot take hold: %v, %v; want a deadline error", p, err)
		}
		go func() { time.Sleep(100 * time.Millisecond); wl.ThawAll() }()
		if p, err := wl.Freeze(ctx, workload.HolderOf("r2"), workload.AfterAcquire, time.Second); !errors.Is(err, workload.ErrNotRunning) {
			t.Errorf("freeze disarmed by ThawAll: %v, %v; want ErrNotRunning", p, err)
		}
		// Thaw ends a pause early.
		p, err := wl.Freeze(ctx, workload.HolderOf("r1"), workload.BeforeWork, time.Minute)
		if err != nil {
			t.Errorf("freeze to thaw: %v", err)
			return
		}
		p.Thaw()
		select {
		case <-p.Done():
			thawed = p.Fault
		case <-time.After(30 * time.Second):
			t.Error("a thawed pause did not end within 30 s (frozen for a minute)")
		}
	}
	// The run lasts until the freezes and their settles are done, however long they take.
	res := runWorkloadUntil(t, cfg, 7, 3*time.Minute, during)
	if len(pauses) != 4 || thawed == 0 {
		t.Fatalf("%d long pauses took hold (want 4), thawed pause %d", len(pauses), thawed)
	}
	h := res.h
	if len(h.Faults) != 5 {
		t.Fatalf("%d fault windows in the history, want 5", len(h.Faults))
	}
	for _, f := range h.Faults {
		if f.ID == thawed {
			if d := time.Duration(f.End - f.Start); d >= 30*time.Second || !f.TookHold {
				t.Errorf("thawed pause: window of %v (took hold %v), want it ended by the thaw, well before its minute", d, f.TookHold)
			}
			continue
		}
		if f.Kind != history.KindMemberPause || !f.TookHold || f.End == history.Never || f.Process == "" {
			t.Errorf("window %+v: want a closed member-pause that took hold, naming its member", f)
			continue
		}
		succ := successor(h, f)
		if succ == nil {
			t.Errorf("%s/%s frozen %v–%v: no other member acquired %s meanwhile", f.Process, f.Member, time.Duration(f.Start), time.Duration(f.End), f.Role)
			continue
		}
		z := zombieWrite(h, f)
		if z == nil {
			t.Errorf("%s/%s: no write after it resumed", f.Process, f.Member)
			continue
		}
		if z.Type == history.TypeOK || z.Error != history.ErrorFenced {
			t.Errorf("%s/%s (%s): its write %d after resuming is %s %q, want fenced", f.Process, f.Member, f.Desc, z.ID, z.Type, z.Error)
		}
		t.Logf("%s: %s/%s acquired %v (op %d); zombie %s %d %s %s", f.Desc, succ.Process, succ.Member,
			time.Duration(succ.Return-f.Start).Round(time.Millisecond), succ.ID, z.Kind, z.ID, z.Type, z.Error)
	}
	check(t, h, checker.CoverZombieFenced, checker.CoverFaultTookHold, checker.CoverHandoff, checker.CoverFence)
}

// waitSettled waits until each role has exactly one member that believes it holds it, and
// that member has renewed its lease and held the role for half a lease: the start-up rush,
// in which every member finds the role free and deposes the others, is over.
func waitSettled(ctx context.Context, wl *workload.Workload, lease time.Duration, roles ...string) bool {
	deadline := time.Now().Add(time.Minute) // a guard: a loaded machine settles later
	for time.Now().Before(deadline) && ctx.Err() == nil {
		now := time.Since(wl.Start())
		holders := map[string]int{}
		settled := 0
		for _, h := range wl.Holders() {
			holders[h.Role]++
			if h.LeaseUntil > 0 && now-h.Since >= lease/2 {
				settled++
			}
		}
		if settled == len(roles) && len(holders) == len(roles) {
			for _, n := range holders {
				if n != 1 {
					settled = 0
				}
			}
			if settled > 0 {
				return true
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// successor returns an ok acquire of f's role by another member that returned during f.
func successor(h *history.History, f history.Fault) *history.Op {
	for i := range h.Len() {
		op := h.Op(i)
		if op.Kind == history.KindAcquire && op.Type == history.TypeOK && op.Role == f.Role &&
			op.Process != f.Process && op.Return > f.Start && op.Return < f.End {
			return &op
		}
	}
	return nil
}

// zombieWrite returns the frozen member's first write that completed after it resumed.
func zombieWrite(h *history.History, f history.Fault) *history.Op {
	for i := range h.Len() {
		op := h.Op(i)
		if op.Kind.IsWrite() && op.Process == f.Process && op.Role == f.Role && op.Return >= f.End {
			return &op
		}
	}
	return nil
}

// livelockConfig is 5 members per role on the high-contention preset.
func livelockConfig(t testing.TB) workload.Config {
	cfg := preset(t, workload.PresetHigh)
	cfg.Processes, cfg.Roles, cfg.MembersPerRole = 10, 4, 5
	return cfg
}

// TestNoLivelock runs 5 members per role on the high-contention preset: in every role a
// holding must outlive a renewal (a holder renews twice under one token), the run must be contended (a handoff and a fence: the
// promises), and a member that lost its holding or failed to acquire must back off at least
// BackoffMin, with jitter, before its next acquire. How much of the time the roles stay held
// depends on the machine's speed as much as on the backoff (a renewal that a loaded machine
// makes late counts as not held): BenchmarkNoLivelock measures it.
func TestNoLivelock(t *testing.T) {
	cfg := livelockConfig(t)
	d := envDuration(t, "FENCECHECK_LIVELOCK_DURATION", 8*time.Second)
	res := runWorkload(t, cfg, 3, d, nil)
	st := res.stats
	t.Logf("%v, 5 members per role, high contention: held %.3f (min role %.3f), %d handoffs, %d fences, %d acquires",
		d, st.HeldFraction, st.MinHeldFraction, st.Handoffs, st.Fences, st.Kinds[history.KindAcquire].Total())
	// Progress, however slow the machine: in every role some holder renewed its lease under
	// one token at least twice, so a holding outlived a renewal. A livelock (holders deposed as
	// fast as they acquire) has no such holder.
	renewals := map[string]map[history.Token]int{}
	for _, op := range res.h.All() {
		if op.Kind == history.KindWriteLease && op.Type == history.TypeOK {
			if renewals[op.Role] == nil {
				renewals[op.Role] = map[history.Token]int{}
			}
			renewals[op.Role][op.Args.Token]++
		}
	}
	for r := range cfg.Roles {
		role := workload.RoleName(r)
		most := 0
		for _, n := range renewals[role] {
			most = max(most, n)
		}
		if most < 2 {
			t.Errorf("role %s: no holder renewed its lease twice under one token in %v (at most %d): no holding outlived a renewal", role, d, most)
		}
	}
	min := cfg.Load.BackoffMin.D()
	lost := map[string]int64{} // member → completion of its last failed write or acquire
	backoffs := map[time.Duration]bool{}
	for _, op := range res.h.All() { // in invoke order
		who := op.Process + "/" + op.Role + "/" + op.Member
		if op.Kind == history.KindAcquire {
			if at, ok := lost[who]; ok {
				wait := time.Duration(op.Invoke - at)
				if wait < min {
					t.Errorf("%s acquired (op %d) %v after losing, want ≥ %v", who, op.ID, wait, min)
				}
				backoffs[wait.Round(time.Millisecond)] = true
				delete(lost, who)
			}
		}
		if (op.Kind.IsWrite() || op.Kind == history.KindAcquire) && op.Type != history.TypeOK {
			lost[who] = op.Return
		}
	}
	if len(backoffs) < 5 {
		t.Errorf("backoffs took %d distinct values, want jitter", len(backoffs))
	}
	check(t, res.h, checker.CoverHandoff, checker.CoverFence)
}

// BenchmarkNoLivelock measures what TestNoLivelock leaves unasserted: under its contention,
// for FENCECHECK_LIVELOCK_DURATION (8 s), the fraction of the time the roles are held (a lease
// renewed within its duration; held-fraction the mean over the roles, min-held the lowest
// role's), and the fences per second. Run with -benchtime 1x: each iteration is a whole run.
func BenchmarkNoLivelock(b *testing.B) {
	cfg := livelockConfig(b)
	d := envDuration(b, "FENCECHECK_LIVELOCK_DURATION", 8*time.Second)
	for range b.N {
		st := runWorkload(b, cfg, 3, d, nil).stats
		b.ReportMetric(st.HeldFraction, "held-fraction")
		b.ReportMetric(st.MinHeldFraction, "min-held")
		b.ReportMetric(float64(st.Fences)/d.Seconds(), "fences/s")
	}
}

func TestNewRefusesFileLimit(t *testing.T) {
	c := startCluster(t)
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skip(err)
	}
	cfg := preset(t, workload.PresetLow)
	cfg.Processes = int(lim.Cur/10) + 1 // each process costs more than 10 descriptors
	hw := history.NewWriter(&bytes.Buffer{}, history.WriterOptions{})
	_, err := workload.New(context.Background(), cfg, c, hw, testLogger(t), 1)
	if !errors.Is(err, workload.ErrFileLimit) {
		t.Fatalf("New with %d processes under RLIMIT_NOFILE %d = %v, want ErrFileLimit", cfg.Processes, lim.Cur, err)
	}
	for _, want := range []string{fmt.Sprintf("%d processes", cfg.Processes), fmt.Sprint(lim.Cur), "RLIMIT_NOFILE", "per process", "at most"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	t.Log(err)
}

func TestFreezeRefusals(t *testing.T) {
	c := startCluster(t)
	cfg := preset(t, workload.PresetLow)
	cfg.Processes, cfg.Roles, cfg.MembersPerRole, cfg.Readers = 1, 1, 1, 0
	cfg.Load.WorkRate = 0
	hw := history.NewWriter(&bytes.Buffer{}, history.WriterOptions{})
	ctx := context.Background()
	wl, err := workload.New(ctx, cfg, c, hw, testLogger(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer wl.Close(ctx)
	for _, tc := range []struct {
		name   string
		target workload.Target
		point  workload.Point
		d      time.Duration
		want   error
	}{
		{"unknown role - ErrTarget", workload.HolderOf("r9"), workload.AfterAcquire, time.Second, workload.ErrTarget},
		{"unknown member - ErrTarget", workload.Target{Role: "r1", Member: "m7"}, workload.AfterAcquire, time.Second, workload.ErrTarget},
		{"before-work without work writes - ErrTarget", workload.HolderOf("r1"), workload.BeforeWork, time.Second, workload.ErrTarget},
		{"unknown point - ErrTarget", workload.HolderOf("r1"), "before-lunch", time.Second, workload.ErrTarget},
		{"commit pause past the request timeout - ErrTarget", workload.HolderOf("r1"), workload.BeforeLeaseCommit, cfg.RequestTimeout.D(), workload.ErrTarget},
		{"before Run - ErrNotRunning", workload.HolderOf("r1"), workload.AfterAcquire, time.Second, workload.ErrNotRunning},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := wl.Freeze(ctx, tc.target, tc.point, tc.d); !errors.Is(err, tc.want) {
				t.Fatalf("Freeze = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestRetention(t *testing.T) {
	c := startCluster(t)
	cfg := preset(t, workload.PresetLow)
	cfg.Processes, cfg.Roles, cfg.MembersPerRole, cfg.Readers = 1, 1, 1, 0
	cfg.Retention = units.Duration(90 * time.Second)
	ctx := context.Background()
	wl, err := workload.New(ctx, cfg, c, history.NewWriter(&bytes.Buffer{}, history.WriterOptions{}), testLogger(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer wl.Close(ctx)
	admin, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	for _, topic := range []string{workload.DefaultTopic, workload.DefaultWorkTopic} {
		rcs, err := kadm.NewClient(admin).DescribeTopicConfigs(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := rcs.On(topic, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		for _, c := range rc.Configs {
			if c.Key == "retention.ms" && c.Value != nil {
				got = *c.Value
			}
		}
		if got != "90000" {
			t.Errorf("%s: retention.ms = %q, want 90000", topic, got)
		}
	}
}
