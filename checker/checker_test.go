package checker_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/checker/checkertest"
	"github.com/fencecheck/fencecheck/checker/history"
)

func golden(t *testing.T, name string) *history.History {
	t.Helper()
	h, err := history.ReadFile(filepath.Join("testdata", name+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func check(t *testing.T, h *history.History, opts checker.Options) *checker.Results {
	t.Helper()
	res, err := checker.Check(context.Background(), h, opts)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestVerdictsOrderAndExitCodes(t *testing.T) {
	tests := []struct {
		verdicts []checker.Verdict
		worst    checker.Verdict
		exit     int
	}{
		{nil, checker.VerdictValid, 0},
		{[]checker.Verdict{checker.VerdictValid, checker.VerdictInconclusive}, checker.VerdictInconclusive, 2},
		{[]checker.Verdict{checker.VerdictInconclusive, checker.VerdictUnknown}, checker.VerdictUnknown, 2},
		{[]checker.Verdict{checker.VerdictUnknown, checker.VerdictError}, checker.VerdictError, 255},
		{[]checker.Verdict{checker.VerdictError, checker.VerdictInvalid, checker.VerdictValid}, checker.VerdictInvalid, 1},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.verdicts), func(t *testing.T) {
			w := checker.Worst(tt.verdicts...)
			if w != tt.worst || checker.ExitCode(w) != tt.exit {
				t.Fatalf("Worst = %s (exit %d), want %s (exit %d)", w, checker.ExitCode(w), tt.worst, tt.exit)
			}
		})
	}
}

func TestOptionsAreValidated(t *testing.T) {
	h := golden(t, "token-monotonic--valid--handoff-tv1")
	tests := []struct {
		name string
		opts checker.Options
	}{
		{"unknown promise", checker.Options{Promises: []string{"handof"}}},
		{"unknown advisory check", checker.Options{Advisory: []string{"no-such-check"}}},
		{"well-formed cannot be advisory", checker.Options{Advisory: []string{checker.WellFormed}}},
		{"negative timeout", checker.Options{Timeout: -time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := checker.Check(context.Background(), h, tt.opts); !errors.Is(err, checker.ErrOptions) {
				t.Fatalf("got %v, want ErrOptions", err)
			}
		})
	}
}

func TestPolicyMakesReadMonotonicAdvisory(t *testing.T) {
	h := golden(t, "read-monotonic--invalid--read-shrinks")
	if res := check(t, h, checker.Options{}); res.Verdict != checker.VerdictInvalid || !errors.Is(res.Err(), checker.ErrReadMonotonic) {
		t.Fatalf("by default: %s, %v", res.Verdict, res.Err())
	}
	res := check(t, h, checker.Options{Advisory: []string{checker.ReadMonotonic}})
	if r := res.Check(checker.ReadMonotonic); res.Verdict != checker.VerdictValid || r.Verdict != checker.VerdictInvalid || !r.Advisory {
		t.Fatalf("advisory: run %s, read-monotonic %+v", res.Verdict, r)
	}
	strict := check(t, golden(t, "spurious-fence--invalid--holder-fenced-without-cause"), checker.Options{Advisory: []string{}})
	if strict.Verdict != checker.VerdictInvalid || !errors.Is(strict.Err(), checker.ErrSpuriousFence) {
		t.Fatalf("spurious-fence made strict: %s", strict.Verdict)
	}
}

func TestPromisesFromOptionsAreJudged(t *testing.T) {
	h := golden(t, "handoff--inconclusive--promised-but-one-holder")
	h.Meta.Promises = nil
	if res := check(t, h, checker.Options{}); res.Verdict != checker.VerdictValid {
		t.Fatalf("without the promise: %s", res.Verdict)
	}
	res := check(t, h, checker.Options{Promises: []string{checker.CoverHandoff, checker.CoverFence}})
	if res.Verdict != checker.VerdictInconclusive || res.ExitCode != 2 {
		t.Fatalf("with the promise: %s", res.Verdict)
	}
	for _, name := range []string{checker.CoverFinalRead, checker.CoverOpsSucceeded, checker.CoverHandoff, checker.CoverFence} {
		if res.Check(name) == nil {
			t.Errorf("no coverage result %s", name)
		}
	}
}

// slowHistory makes porcupine search exponentially: 24 concurrent acquires can be ordered in
// 2^24 ways, and a describe "none" after them all fails every order.
func slowHistory() *history.History {
	b := history.NewBuilder(0)
	add := func(e history.Event) {
		if err := b.Add(&e); err != nil {
			panic(err)
		}
	}
	add(history.Event{Type: history.TypeHeader, Meta: &history.Meta{LeaseDuration: 1000}})
	const n = 24
	for i := range int64(n) {
		add(history.Event{Type: history.TypeInvoke, ID: i, Time: i, Client: int(i), Member: fmt.Sprint("m", i), Role: "r", Kind: history.KindAcquire})
	}
	for i := range int64(n) {
		tok := history.Token{ProducerID: 1, Epoch: int16(i)}
		add(history.Event{Type: history.TypeOK, ID: i, Time: 100 + i, Result: history.Result{Token: &tok}})
	}
	add(history.Event{Type: history.TypeInvoke, ID: n, Time: 200, Client: n, Role: "r", Kind: history.KindDescribe})
	add(history.Event{Type: history.TypeOK, ID: n, Time: 201})
	add(history.Event{Type: history.TypeInvoke, ID: n + 1, Time: 300, Client: n + 1, Role: "r", Kind: history.KindFinalRead})
	add(history.Event{Type: history.TypeOK, ID: n + 1, Time: 301, Result: history.Result{Records: []history.Record{}}})
	return b.History()
}

func TestPorcupineTimeoutIsUnknownNeverValid(t *testing.T) {
	// A bound no machine can search 2^24 states within: the timeout fires however fast the
	// machine (50 ms could have been enough on a very fast one).
	res := check(t, slowHistory(), checker.Options{Timeout: time.Nanosecond})
	for _, name := range []string{checker.TokenMonotonic, checker.FencedStaleWrite, checker.DescribeConsistent} {
		if r := res.Check(name); r.Verdict != checker.VerdictUnknown || !strings.Contains(fmt.Sprint(r.Details["unknown"]), "timed out") {
			t.Errorf("%s: %+v", name, r)
		}
	}
	if res.Verdict != checker.VerdictUnknown || res.ExitCode != 2 {
		t.Fatalf("run is %s", res.Verdict)
	}
}

func TestCancelledCheckIsUnknown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := checker.Check(ctx, golden(t, "token-monotonic--valid--handoff-tv1"), checker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Check(checker.FencedStaleWrite); r.Verdict != checker.VerdictUnknown || res.Verdict != checker.VerdictUnknown {
		t.Fatalf("run %s, fenced-stale-write %+v", res.Verdict, r)
	}
}

func TestCheckerPanicBecomesUnknownForThatCheck(t *testing.T) {
	h := golden(t, "registration-order--valid--members-join-in-order")
	h.Edit(0, func(op *history.Op) { op.Result.Offset = nil }) // an ok register without its offset: a bug the Builder would refuse
	res := check(t, h, checker.Options{})
	r := res.Check(checker.RegistrationOrder)
	if r.Verdict != checker.VerdictUnknown || r.Details["panic"] == nil {
		t.Fatalf("registration-order: %+v", r)
	}
	if other := res.Check(checker.NoLostWrite); other.Verdict != checker.VerdictValid {
		t.Fatalf("the other checks stopped: %+v", other)
	}
	if res.Verdict != checker.VerdictUnknown {
		t.Fatalf("run is %s", res.Verdict)
	}
}

func TestResultsSurviveResultsJSON(t *testing.T) {
	res := check(t, golden(t, "fenced-stale-write--invalid--write-acknowledged-after-newer-acquire"), checker.Options{})
	path := filepath.Join(t.TempDir(), "results.json")
	if err := res.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	back, err := checker.ReadResultsFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got, want := back.Check(checker.FencedStaleWrite), res.Check(checker.FencedStaleWrite)
	if back.Verdict != res.Verdict || back.ExitCode != 1 || got.Verdict != want.Verdict ||
		len(got.Anomalies) != 1 || got.Anomalies[0].Explanation != want.Anomalies[0].Explanation {
		t.Fatalf("read back %+v", back)
	}
	if !errors.Is(res.Err(), checker.ErrFencedStaleWrite) || errors.Is(res.Err(), checker.ErrTokenMonotonic) {
		t.Fatalf("Err() = %v", res.Err())
	}
}

func TestHarnessErrorDoesNotHideAViolation(t *testing.T) {
	valid := check(t, golden(t, "token-monotonic--valid--handoff-tv1"), checker.Options{})
	valid.SetHarnessError(errors.New("cluster never became healthy"))
	if valid.Verdict != checker.VerdictError || valid.ExitCode != checker.ExitHarness {
		t.Fatalf("valid run with a harness error: %s", valid.Verdict)
	}
	invalid := check(t, golden(t, "token-monotonic--invalid--acquire-returns-older-token"), checker.Options{})
	invalid.SetHarnessError(errors.New("heal failed"))
	if invalid.Verdict != checker.VerdictInvalid || invalid.Error == "" {
		t.Fatalf("invalid run with a harness error: %s", invalid.Verdict)
	}
}

type buffer struct {
	strings.Builder
	closed bool
}

func (b *buffer) Close() error { b.closed = true; return nil }

func TestVisualizationOfAFailedRoleDrawsFaultWindows(t *testing.T) {
	h := golden(t, "fenced-stale-write--invalid--write-acknowledged-after-newer-acquire")
	h.Faults = append(h.Faults, history.Fault{ID: 9, Kind: "partition", Targets: []string{"p1->b2"}, Desc: "cut p1 from b2", Start: 15, End: 45, TookHold: true})
	pages := map[string]*buffer{}
	res := check(t, h, checker.Options{Visualize: func(role string) (io.WriteCloser, error) {
		pages[role] = &buffer{}
		return pages[role], nil
	}})
	page := pages["leader"]
	if page == nil || !page.closed || len(res.Visualized) != 1 {
		t.Fatalf("visualized %v", res.Visualized)
	}
	for _, want := range []string{"cut p1 from b2", "write-lease (1000,0)", "mint (1000,1)"} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("visualization lacks %q", want)
		}
	}
	if valid := check(t, golden(t, "token-monotonic--valid--handoff-tv1"), checker.Options{Visualize: func(string) (io.WriteCloser, error) {
		t.Fatal("visualized a valid role")
		return nil, nil
	}}); valid.Verdict != checker.VerdictValid {
		t.Fatal(valid.Verdict)
	}
}

func TestExposureNamesTheOverlappingHolders(t *testing.T) {
	res := check(t, golden(t, "zombie-fenced--valid--paused-member-fenced-when-it-resumes"), checker.Options{})
	e := res.Exposure
	if e.TotalNS != 18 || e.LongestNS != 18 || e.LongestRole != "leader" || len(e.Roles) != 1 {
		t.Fatalf("exposure %+v", e)
	}
	o := e.Roles[0].Overlaps[0]
	if o.StartNS != 102 || o.EndNS != 120 || len(o.Holders) != 2 || o.Holders[0].Member != "m1" || o.Holders[1].Member != "m2" {
		t.Fatalf("overlap %+v", o)
	}
}

func TestAReadOfNoLogIsAHarnessError(t *testing.T) {
	h := golden(t, "read-monotonic--valid--reads-grow")
	for i := range h.Len() {
		if h.Op(i).Kind == history.KindRead {
			h.Edit(i, func(op *history.Op) { op.Role, op.Args.Log = "", history.LogID{} })
			break
		}
	}
	res := check(t, h, checker.Options{})
	if r := res.Check(checker.WellFormed); r.Verdict != checker.VerdictError || res.Verdict != checker.VerdictError || res.ExitCode != 255 {
		t.Fatalf("run %s, well-formed %+v", res.Verdict, r)
	}
}

// errorLog records the checker's log records at ERROR (a recovered panic logs its stack
// there).
type errorLog struct {
	mu      sync.Mutex
	records []string
}

func (l *errorLog) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.records = append(l.records, string(p))
		return len(p), nil
	}), &slog.HandlerOptions{Level: slog.LevelError}))
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestAnIllFormedRoleGetsNoModelVerdict: an acquire that completes before it is invoked
// once came out invalid on token-monotonic without a visualizer (invalid outranks error: a
// false alarm), and made porcupine panic with one. Either way the run must be a harness
// error with one message, no model verdict and nothing logged at ERROR.
func TestAnIllFormedRoleGetsNoModelVerdict(t *testing.T) {
	for _, visualize := range []bool{false, true} {
		t.Run(fmt.Sprintf("visualize=%t", visualize), func(t *testing.T) {
			h := golden(t, "well-formed--error--acquire-completes-before-it-is-invoked")
			var log errorLog
			opts := checker.Options{Logger: log.logger()}
			if visualize {
				opts.Visualize = (&visualizations{}).open
			}
			res := check(t, h, opts)
			if res.Verdict != checker.VerdictError {
				t.Errorf("run is %s, want error", res.Verdict)
			}
			wf := res.Check(checker.WellFormed)
			if len(wf.Anomalies) != 1 || !strings.Contains(wf.Anomalies[0].Explanation, "before it was invoked") {
				t.Errorf("well-formed anomalies %+v, want one naming the op that completed before it was invoked", wf.Anomalies)
			}
			for _, name := range []string{checker.TokenMonotonic, checker.FencedStaleWrite, checker.DescribeConsistent, checker.SpuriousFence} {
				r := res.Check(name)
				if r.Verdict != checker.VerdictError || len(r.Anomalies) > 0 {
					t.Errorf("%s is %s with %d anomalies, want error and none", name, r.Verdict, len(r.Anomalies))
				}
			}
			if len(res.Visualized) > 0 {
				t.Errorf("visualized %v", res.Visualized)
			}
			if len(log.records) > 0 {
				t.Errorf("logged at ERROR: %v", log.records)
			}
		})
	}
}

// TestTimesAtTheEdgesAreHarnessErrors: a time of 2^63-1 collided with Never (a read completing
// then was ignored) and overflowed the pruning's t+1, so violations came out valid. A history
// built in memory can carry any time: the checker must call it ill-formed.
func TestTimesAtTheEdgesAreHarnessErrors(t *testing.T) {
	tests := []struct {
		golden string
		edit   func(op *history.Op)
	}{
		{"no-zombie-commit--invalid--fenced-write-visible-to-reads", func(op *history.Op) {
			if op.Kind.IsRead() {
				op.Return = history.Never
			}
		}},
		{"token-monotonic--invalid--acquire-returns-older-token", func(op *history.Op) {
			if op.Kind == history.KindAcquire {
				op.Invoke, op.Return = op.Invoke+math.MaxInt64-200, op.Return+math.MaxInt64-200
			}
		}},
		{"read-monotonic--invalid--read-shrinks", func(op *history.Op) { op.Invoke, op.Return = -op.Return, -op.Invoke }},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			h := golden(t, tt.golden)
			for i := range h.Len() {
				h.Edit(i, tt.edit)
			}
			var log errorLog
			res := check(t, h, checker.Options{Logger: log.logger(), Visualize: (&visualizations{}).open})
			wf := res.Check(checker.WellFormed)
			if res.Verdict != checker.VerdictError || len(wf.Anomalies) == 0 || !strings.Contains(wf.Anomalies[0].Explanation, "outside the times") {
				t.Errorf("run is %s, well-formed %+v; want error naming the time", res.Verdict, wf.Anomalies)
			}
			if len(log.records) > 0 {
				t.Errorf("logged at ERROR: %v", log.records)
			}
		})
	}
	t.Run("fault window", func(t *testing.T) {
		h := golden(t, "fault-took-hold--valid--operations-before-during-and-after")
		h.Faults[0].Start = -5
		if res := check(t, h, checker.Options{}); res.Verdict != checker.VerdictError {
			t.Errorf("run is %s, want error", res.Verdict)
		}
	})
}

// TestDescribeNotCovered: a run whose transports cannot describe passes describe-consistent
// as not covered, saying which processes could not, and the run stays valid (exit 0); the
// same history with describes is judged as usual.
func TestDescribeNotCovered(t *testing.T) {
	res := check(t, golden(t, "describe-consistent--not-covered--client-cannot-describe"), checker.Options{})
	var got checker.Result
	for _, r := range res.Checks {
		if r.Name == checker.DescribeConsistent {
			got = r
		}
	}
	if got.Verdict != checker.VerdictNotCovered || !strings.Contains(fmt.Sprint(got.Details["not_covered"]), "p1, p2 cannot describe") {
		t.Fatalf("describe-consistent = %s %v; want not-covered naming p1, p2", got.Verdict, got.Details)
	}
	if res.Verdict != checker.VerdictValid || res.ExitCode != 0 {
		t.Fatalf("run = %s (exit %d); a check that was not covered must not change the run's verdict", res.Verdict, res.ExitCode)
	}
	with := check(t, golden(t, "spurious-fence--valid--tv1-abort-bump-fences-the-holder"), checker.Options{})
	for _, r := range with.Checks {
		if r.Name == checker.DescribeConsistent && r.Verdict != checker.VerdictValid {
			t.Fatalf("describe-consistent with a describe = %s, want valid", r.Verdict)
		}
	}
}

// TestAReusedWriteIDIsAHarnessError: a write that reuses another write's id, in the same log
// or in another, is ill-formed, named with the write that had the id first (the first in
// history order keeps it), on histories small and large enough that the ids are checked in
// many buckets.
func TestAReusedWriteIDIsAHarnessError(t *testing.T) {
	for _, roles := range []int{3, 40} {
		t.Run(fmt.Sprintf("roles=%d", roles), func(t *testing.T) {
			cfg := checkertest.DefaultConfig()
			cfg.Roles, cfg.OpsPerRole, cfg.WorkPartitions = roles, 400, 3
			h := checkertest.Generate(cfg, rand.New(rand.NewPCG(uint64(roles), 5)))
			var writes []int // in history order
			for i := range h.Len() {
				if h.Op(i).Kind.IsWrite() {
					writes = append(writes, i)
				}
			}
			first, same, other := h.Op(writes[0]), -1, -1
			for _, i := range writes[1:] {
				op := h.Op(i)
				switch {
				case same < 0 && op.Args.Log == first.Args.Log:
					same = i
				case other < 0 && op.Args.Log != first.Args.Log && op.Role != first.Role:
					other = i
				}
			}
			reuse := func(op *history.Op) { op.Args.WriteID = first.Args.WriteID }
			h.Edit(same, reuse)
			h.Edit(other, reuse)
			res := check(t, h, checker.Options{})
			wf := res.Check(checker.WellFormed)
			var named []int64
			for _, a := range wf.Anomalies {
				if strings.Contains(a.Explanation, fmt.Sprintf("reuses write id %q of op %d", first.Args.WriteID, first.ID)) {
					named = append(named, a.Ops...)
				}
			}
			slices.Sort(named)
			want := []int64{min(h.Op(same).ID, h.Op(other).ID), max(h.Op(same).ID, h.Op(other).ID)}
			if res.Verdict != checker.VerdictError || !slices.Equal(named, want) {
				t.Fatalf("run is %s; the reuses named ops %v, want %v: %+v", res.Verdict, named, want, wf.Anomalies)
			}
		})
	}
}
