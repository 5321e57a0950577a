package pipelinetest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/transport"
	"github.com/fencecheck/fencecheck/transport/pipeline"
)

// A self-driven member (pipeline.Observer, Env.SelfDriven: Kafka Streams) runs its own loop:
// the suite cannot hand it a batch or choose its outputs, so the tests that do (rebalance by
// transaction counts, abort, stable fetch, fetch reported) are skipped for it, saying so, and
// these run instead. Each lets the member copy on its own and judges the same outcome:
// exactly once in the committed output and the group's offsets, and the member's reports of
// its committed transactions agreeing with the output.

const selfDrivenSkip = "the member is self-driven (Env.SelfDriven): the suite cannot hand it a batch; the self-driven tests cover it"

// observer runs a self-driven member's observe loop until stopped.
type observer struct {
	name   string
	obs    pipeline.Observer
	quit   chan struct{}
	done   chan struct{}
	once   sync.Once
	polled atomic.Bool // a poll returned records

	mu   sync.Mutex
	outs map[transport.Outcome]int
	// committed are, per input partition, the input offsets of the transactions the member
	// reported committed, in order.
	committed map[int32][]int64
	errs      []string
}

// observe starts a self-driven member named name with cfg and its observe loop.
func (s *suite) observe(t *testing.T, cfg pipeline.Config, name string) *observer {
	t.Helper()
	m, err := s.env.New(context.Background(), s.env.Kind, cfg)
	if err != nil {
		t.Fatalf("member %s: %v", name, err)
	}
	obs, ok := m.(pipeline.Observer)
	if !ok || !obs.SelfDriven() {
		m.Close()
		t.Fatalf("member %s: Env.SelfDriven, but the member is not a self-driven pipeline.Observer", name)
	}
	o := &observer{name: name, obs: obs, quit: make(chan struct{}), done: make(chan struct{}),
		outs: map[transport.Outcome]int{}, committed: map[int32][]int64{}}
	t.Cleanup(func() { o.stop(t) })
	go func() {
		defer close(o.done)
		for {
			select {
			case <-o.quit:
				o.record(o.obs.Stop())
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			got := o.obs.Observe(ctx)
			cancel()
			o.record(got)
			if got.Restart {
				o.obs.Stop()
				nm, err := s.env.New(context.Background(), s.env.Kind, cfg)
				if err != nil {
					o.mu.Lock()
					o.errs = append(o.errs, fmt.Sprintf("restart: %v", err))
					o.mu.Unlock()
					return
				}
				o.obs = nm.(pipeline.Observer)
			}
		}
	}()
	return o
}

func (o *observer) record(got pipeline.Observation) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if got.Err != nil && len(o.errs) < 3 {
		o.errs = append(o.errs, got.Err.Error())
	}
	for _, e := range got.Events {
		if e.Poll != nil && len(e.Poll.Records) > 0 {
			o.polled.Store(true)
		}
		if e.Txn == nil {
			continue
		}
		o.outs[e.Txn.Result.Outcome]++
		if e.Txn.Result.Outcome == transport.OK {
			for _, r := range e.Txn.Inputs {
				o.committed[r.Partition] = append(o.committed[r.Partition], r.Offset)
			}
		}
	}
}

// stop stops the loop and the member (which commits what it processed); again, nothing.
func (o *observer) stop(t *testing.T) {
	t.Helper()
	stopped := false
	o.once.Do(func() { close(o.quit); stopped = true })
	<-o.done
	if stopped {
		o.mu.Lock()
		defer o.mu.Unlock()
		t.Logf("member %s: %d committed, %d failed, %d unknown; errors %q", o.name,
			o.outs[transport.OK], o.outs[transport.Fail], o.outs[transport.Unknown], o.errs)
	}
}

// reportsMatch fails t unless the committed transactions the members reported hold every
// committed input record once, the committed output's: what the member said is what it did.
func (p *pipe) reportsMatch(t *testing.T, members ...*observer) {
	t.Helper()
	for part := range p.partitions {
		var reported []int64
		for _, o := range members {
			o.mu.Lock()
			reported = append(reported, o.committed[part]...)
			o.mu.Unlock()
		}
		slices.Sort(reported)
		if want := p.inputs[part]; !slices.Equal(reported, want) {
			t.Errorf("input partition %d: the members reported committed transactions of offsets %v, want each of %v once", part, reported, want)
		}
	}
}

func (s *suite) testSelfDrivenCopy(t *testing.T) {
	if !s.env.SelfDriven {
		t.Skip("the member is driven: the copy test covers it")
	}
	p := s.newPipe(t, 2)
	p.seed(t, 0, 30)
	a := s.observe(t, s.config(p, "a"), "a")
	p.seed(t, 30, 30)
	await(t, "member a committed every input record", p.committedAll)
	a.stop(t)
	p.exactlyOnce(t)
	p.reportsMatch(t, a)
}

func (s *suite) testSelfDrivenAbortedInput(t *testing.T) {
	if !s.env.SelfDriven {
		t.Skip("the member is driven: the read committed test covers it")
	}
	p := s.newPipe(t, 2)
	p.seed(t, 0, 10)
	p.seedAborted(t, 10)
	p.seed(t, 10, 10)
	a := s.observe(t, s.config(p, "a"), "a")
	if !awaitMinute(p.committedAll) {
		a.stop(t)
		p.exactlyOnce(t) // says what the group committed and what the output holds
		p.reportsMatch(t, a)
		t.Fatal("after a minute: member a did not commit every committed input record")
	}
	a.stop(t)
	p.exactlyOnce(t)
	p.reportsMatch(t, a)
}

// awaitMinute polls cond until it holds (true) or a minute has passed (false).
func awaitMinute(cond func() bool) bool {
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// testSelfDrivenZombie cuts member a off from every broker once it polled records, past its
// session timeout, while member b takes its partitions and copies everything; then a heals,
// more input comes, and both copy until it is all committed. Whatever a's Streams did with
// what it held (a transaction it had open must not commit), the output is exactly once.
func (s *suite) testSelfDrivenZombie(t *testing.T) {
	if !s.env.SelfDriven {
		t.Skip("the member is driven: the zombie test covers it")
	}
	p := s.newPipe(t, 2)
	p.seed(t, 0, 20)
	var links cutter
	cfg := s.config(p, "a")
	cfg.Conn.Dial = links.dial
	a := s.observe(t, cfg, "a")
	await(t, "member a polled records", a.polled.Load)
	links.cut()
	b := s.observe(t, s.config(p, "b"), "b")
	await(t, "member b committed every input record", p.committedAll)
	links.heal()
	p.seed(t, 20, 20)
	await(t, "the members committed every input record after a healed", p.committedAll)
	a.stop(t)
	b.stop(t)
	p.exactlyOnce(t)
	p.reportsMatch(t, a, b)
}

// selfDrivenOutput parses a self-driven member's output (history.PipeOutput's JSON) for
// copied: its input's partition and offset.
func selfDrivenOutput(v string) (in int32, off int64, ok bool) {
	if !strings.HasPrefix(v, "{") {
		return 0, 0, false
	}
	var o struct {
		In struct {
			Partition int32 `json:"partition"`
			Offset    int64 `json:"offset"`
		} `json:"in"`
	}
	if json.Unmarshal([]byte(v), &o) != nil {
		return 0, 0, false
	}
	return o.In.Partition, o.In.Offset, true
}
