// Package pipelinetest is the conformance suite every pipeline member must pass against a real
// cluster: a copy from an input topic to an output topic that stays exactly-once while members
// join, leave and become zombies. It is to pipeline.Member what transporttest is to the lease
// transport.
package pipelinetest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencecheck/fencecheck/transport"
	"github.com/fencecheck/fencecheck/transport/pipeline"
)

// Env describes the cluster under test and the member to build on it.
type Env struct {
	// Bootstrap is the cluster's bootstrap address list.
	Bootstrap string
	// Kind is the member under test (pipeline.KindSession, pipeline.KindPlain).
	Kind string
	// Protocol is the group protocol (default classic).
	Protocol string
	// SessionTimeout of the members: the zombie test waits past it. The cluster must allow
	// it (group.min.session.timeout.ms). Default 2s. Under the consumer protocol the session
	// timeout is the cluster's (group.consumer.session.timeout.ms): keep it as short, or the
	// zombie test waits for it.
	SessionTimeout time.Duration
	// Replication of the topics. Default 1.
	Replication int16
	// GroupIDOnly says that the member adds its offsets to a transaction with the group id
	// alone (no member id, generation -1: sendOffsetsToTransaction(offsets, groupId), Sarama's
	// AddOffsetsToTxn), so the group coordinator cannot fence a zombie by its generation
	// (KIP-447). Set it only for a member documented so (internal/adapters' GroupIDOnlyArgs):
	// the zombie test then requires the limitation to show, the zombie's transaction
	// committing, its batch copied a second time and the group's offset taken back to the
	// batch's end, and fails if the zombie is fenced after all (the client changed: update
	// its documentation). Every other test is unchanged.
	GroupIDOnly bool
	// SelfDriven says that the member runs its own consume-transform-produce loop
	// (pipeline.Observer: Kafka Streams): the tests that hand a member its batches are
	// skipped, saying so, and the self-driven tests run instead (selfdriven.go).
	SelfDriven bool
	// New starts a member of Kind with a config; default pipeline.New. A member served
	// elsewhere (an exec adapter's, through lineproto.StartMember) runs the suite through it.
	New func(ctx context.Context, kind string, cfg pipeline.Config) (pipeline.Member, error)
}

// inputCompression is the compression of every input record the suite writes: none. The
// suite tests a member's exactly-once copy, not its decompressors, and franz-go's default
// (snappy, as one raw block) is not read by every client: krabka-compression 0.7.0 reads only
// xerial-framed snappy (docs/findings.md; TestKrabkaRawSnappyQuirk in transport/lineproto
// shows it). A new option for each client: kgo writes into the option's codec list when it
// builds a client, so one option shared by clients built at once is a data race (findings.md,
// TestDefaultCompressorWritesItsArgument).
func inputCompression() kgo.Opt { return kgo.ProducerBatchCompression(kgo.NoCompression()) }

// KfakeBrokerConfigs are the broker settings a kfake cluster needs for this suite: session
// timeouts short enough for the zombie test, the classic protocol's minimum below the
// members' 2 s and the consumer protocol's own (the group's, not the member's) 2 s.
func KfakeBrokerConfigs() map[string]string {
	return map[string]string{
		"group.min.session.timeout.ms":         "500",
		"group.consumer.session.timeout.ms":    "2000",
		"group.consumer.heartbeat.interval.ms": "500",
	}
}

var seq atomic.Int64

// Run runs every conformance test against env. Each test has its own topics and group.
func Run(t *testing.T, env Env) {
	if env.SessionTimeout == 0 {
		env.SessionTimeout = 2 * time.Second
	}
	if env.Replication == 0 {
		env.Replication = 1
	}
	if env.New == nil {
		env.New = pipeline.New
	}
	s := &suite{env: env}
	tests := []struct {
		name string
		fn   func(*testing.T)
	}{
		{"new - invalid config - names the field", s.testConfigErrors},
		{"copy - one member - every record's output committed once, in order", s.testCopy},
		{"rebalance - members join and leave - still exactly once", s.testRebalance},
		{"zombie - cut off past its session timeout - its batch does not commit", s.testZombie},
		{"read committed - aborted input is never copied", s.testAbortedInput},
		{"abort - a transaction that does not commit - its records are polled again", s.testAbortRewinds},
		{"stable fetch - a zombie's open transaction holds offsets - the new owner starts past them", s.testStableFetch},
		{"fetch reported - where a member starts after each fetch of its offsets - reported before it polls there", s.testFetchReported},
		{"self-driven copy - the member copies on its own - exactly once, as it reports", s.testSelfDrivenCopy},
		{"self-driven read committed - aborted input is never copied", s.testSelfDrivenAbortedInput},
		{"self-driven zombie - cut off past its session timeout while another copies - exactly once", s.testSelfDrivenZombie},
	}
	// The tests that hand a member its batches, which a self-driven member cannot take.
	driven := []string{"copy", "rebalance", "zombie", "read committed", "abort", "stable fetch", "fetch reported"}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if s.env.SelfDriven && slices.Contains(driven, strings.SplitN(tc.name, " - ", 2)[0]) {
				t.Skip(selfDrivenSkip)
			}
			tc.fn(t)
		})
	}
}

type suite struct{ env Env }

// pipe is one test's topics and group.
type pipe struct {
	bootstrap            string
	input, output, group string
	partitions           int32
	adm                  *kadm.Client
	cl                   *kgo.Client
	// inputs are the offsets of the committed input records, per partition, in order.
	inputs map[int32][]int64
}

func (s *suite) newPipe(t *testing.T, partitions int32) *pipe {
	t.Helper()
	n := seq.Add(1)
	p := &pipe{
		bootstrap:  s.env.Bootstrap,
		input:      fmt.Sprintf("pipeline-in-%d-%d", time.Now().UnixNano()%1e6, n),
		output:     fmt.Sprintf("pipeline-out-%d-%d", time.Now().UnixNano()%1e6, n),
		group:      fmt.Sprintf("pipeline-group-%d-%d", time.Now().UnixNano()%1e6, n),
		partitions: partitions,
		inputs:     map[int32][]int64{},
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(s.env.Bootstrap, ",")...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DisableClientMetrics(), inputCompression())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	p.cl, p.adm = cl, kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, topic := range []string{p.input, p.output} {
		if _, err := p.adm.CreateTopic(ctx, partitions, s.env.Replication, nil, topic); err != nil {
			t.Fatalf("create %s: %v", topic, err)
		}
	}
	return p
}

// seed writes n records to the input, record i to partition i mod partitions with value "i",
// and remembers their offsets.
func (p *pipe) seed(t *testing.T, from, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var rs []*kgo.Record
	for i := from; i < from+n; i++ {
		rs = append(rs, &kgo.Record{Topic: p.input, Partition: int32(i) % p.partitions, Value: []byte(strconv.Itoa(i))})
	}
	res := p.cl.ProduceSync(ctx, rs...)
	if err := res.FirstErr(); err != nil {
		t.Fatalf("seed the input: %v", err)
	}
	for _, r := range res {
		p.inputs[r.Record.Partition] = append(p.inputs[r.Record.Partition], r.Record.Offset)
	}
}

// seedAborted writes n records to the input in a transaction that it aborts: no member may
// ever copy them.
func (p *pipe) seedAborted(t *testing.T, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(p.bootstrap, ",")...), kgo.TransactionalID(p.group+"/aborted-input"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DisableClientMetrics(), inputCompression())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	var rs []*kgo.Record
	for i := range n {
		rs = append(rs, &kgo.Record{Topic: p.input, Partition: int32(i) % p.partitions, Value: []byte("aborted")})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("the aborted input: %v", err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatalf("abort the input: %v", err)
	}
}

func (s *suite) config(p *pipe, id string) pipeline.Config {
	conn := transport.NewConfig(s.env.Bootstrap, 10*time.Second)
	conn.RequestTimeout = 5 * time.Second
	return pipeline.Config{Conn: conn, Group: p.group, Input: p.input, Output: p.output,
		TransactionalID: p.group + "/" + id, SessionTimeout: s.env.SessionTimeout, Protocol: s.env.Protocol, MaxPoll: 5}
}

// output is what a member makes of an input record: "partition/offset/value/member".
func output(r pipeline.Record, member string) pipeline.Output {
	return pipeline.Output{Partition: r.Partition, Value: fmt.Appendf(nil, "%d/%d/%s/%s", r.Partition, r.Offset, r.Value, member)}
}

// member runs one member's loop until stopped: poll, transact what it polled. It counts the
// transactions by outcome.
type member struct {
	name  string
	once  sync.Once
	quit  chan struct{}
	done  chan struct{}
	outs  map[transport.Outcome]int // the loop's until done is closed
	fails []string                  // the first transactions that did not commit, and why
	err   error
	// committed counts the transactions the member committed, for the test while it runs.
	committed atomic.Int64
	// reached is, per input partition, the offset past the last record of a transaction
	// the member committed, as the member reports it.
	mu      sync.Mutex
	reached map[int32]int64
}

// reachedAll reports whether the member reported committed transactions up to next, for
// every partition of next.
func (mb *member) reachedAll(next map[int32]int64) bool {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	for part, n := range next {
		if mb.reached[part] < n {
			return false
		}
	}
	return true
}

// start starts a member named name and its loop. The loop stops between transactions, so
// that stopping it leaves no transaction open.
func (s *suite) start(t *testing.T, p *pipe, name string) *member {
	t.Helper()
	return s.startWith(t, s.config(p, name), name)
}

// startWith is start with the member's configuration given.
func (s *suite) startWith(t *testing.T, cfg pipeline.Config, name string) *member {
	t.Helper()
	m, err := s.env.New(context.Background(), s.env.Kind, cfg)
	if err != nil {
		t.Fatalf("member %s: %v", name, err)
	}
	mb := &member{name: name, outs: map[transport.Outcome]int{}, quit: make(chan struct{}), done: make(chan struct{}), reached: map[int32]int64{}}
	t.Cleanup(func() { mb.stop(t) }) // a test that fails early stops it too
	go func() {
		defer close(mb.done)
		defer func() {
			if m != nil {
				m.Close()
			}
		}()
		for {
			select {
			case <-mb.quit:
				return
			default:
			}
			pctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			b, _ := m.Poll(pctx)
			cancel()
			if len(b.Records) == 0 {
				continue
			}
			var outs []pipeline.Output
			for _, r := range b.Records {
				outs = append(outs, output(r, name))
			}
			tctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			res := m.Transact(tctx, b, outs)
			cancel()
			mb.outs[res.Outcome]++
			if res.Outcome == transport.OK {
				mb.committed.Add(1)
				mb.mu.Lock()
				for part, n := range b.Offsets() {
					mb.reached[part] = max(mb.reached[part], n)
				}
				mb.mu.Unlock()
			}
			if res.Outcome != transport.OK && len(mb.fails) < 3 {
				mb.fails = append(mb.fails, fmt.Sprintf("%v: %v", res.Outcome, res.Err))
			}
			if res.Restart { // the contract: start another
				m.Close()
				if m, err = s.env.New(context.Background(), s.env.Kind, cfg); err != nil {
					mb.err = err
					return
				}
			}
		}
	}()
	return mb
}

// stop ends the member's loop (between transactions) and closes it; again, it does nothing.
func (mb *member) stop(t *testing.T) {
	t.Helper()
	stopped := false
	mb.once.Do(func() { close(mb.quit); stopped = true })
	<-mb.done
	if !stopped {
		return
	}
	if mb.err != nil {
		t.Errorf("member %s: %v", mb.name, mb.err)
	}
	t.Logf("member %s: %v committed, %v failed, %v unknown; first not committed: %q", mb.name,
		mb.outs[transport.OK], mb.outs[transport.Fail], mb.outs[transport.Unknown], mb.fails)
}

// copied reads the output at read_committed and returns, per input partition, the input
// offsets whose outputs it holds, in output order. To know where the output ends it first
// writes a sentinel to each output partition, outside any transaction, and reads until it
// has every sentinel: what it read before them is everything committed before the read.
func (p *pipe) copied(t *testing.T) map[int32][]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var ends []*kgo.Record
	for part := range p.partitions {
		ends = append(ends, &kgo.Record{Topic: p.output, Partition: part, Value: []byte("end")})
	}
	if err := p.cl.ProduceSync(ctx, ends...).FirstErr(); err != nil {
		t.Fatalf("the output's sentinels: %v", err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(p.bootstrap, ",")...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{p.output: partitionsAt(p.partitions, kgo.NewOffset().AtStart())}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.DisableClientMetrics())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	out := map[int32][]int64{}
	left := int(p.partitions)
	for left > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading the output: %v (%d sentinels not read)", ctx.Err(), left)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) == "end" {
				left--
				return
			}
			var in, off int64
			if pin, poff, ok := selfDrivenOutput(string(r.Value)); ok {
				in, off = int64(pin), poff
			} else {
				f := strings.Split(string(r.Value), "/")
				in, _ = strconv.ParseInt(f[0], 10, 32)
				off, _ = strconv.ParseInt(f[1], 10, 64)
			}
			if int32(in) != r.Partition {
				t.Errorf("output %q at %s[%d]@%d: made from input partition %d", r.Value, r.Topic, r.Partition, r.Offset, in)
			}
			out[int32(in)] = append(out[int32(in)], off)
		})
	}
	return out
}

func partitionsAt(n int32, o kgo.Offset) map[int32]kgo.Offset {
	out := map[int32]kgo.Offset{}
	for p := range n {
		out[p] = o
	}
	return out
}

// exactlyOnce fails t unless the committed output holds every committed input record exactly
// once, per partition in input order, and nothing else, and the group committed the offset
// past each partition's last input record.
func (p *pipe) exactlyOnce(t *testing.T) {
	t.Helper()
	got := p.copied(t)
	for part := range p.partitions {
		want := p.inputs[part]
		if !slices.Equal(got[part], want) {
			t.Errorf("input partition %d: the committed output holds the outputs of offsets %v, want those of %v, each once, in order", part, got[part], want)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	offs, err := p.adm.FetchOffsets(kadm.RequireStable(ctx), p.group)
	if err != nil {
		t.Fatal(err)
	}
	ends := p.ends(ctx)
	for part, next := range p.next() {
		if o, _ := offs.Lookup(p.input, part); !committedPast(o.At, next, ends[part]) {
			t.Errorf("input partition %d: the group committed %d, want %d (or past it up to the partition's end, %d, over markers and aborted records only)", part, o.At, next, ends[part])
		}
	}
}

// committedPast reports whether a group's committed offset at is past every committed input
// record (next is one past the last) and no further than the partition's end: a member that
// commits its consumer's position (Kafka Streams) may be past a transaction marker or aborted
// records that follow the last record, which hold no input the test wrote.
func committedPast(at, next, end int64) bool {
	return at == next || at > next && at <= end
}

// ends returns the input partitions' end offsets (markers and aborted records included); nil
// when they cannot be listed, which only an offset of exactly next then passes.
func (p *pipe) ends(ctx context.Context) map[int32]int64 {
	listed, err := p.adm.ListEndOffsets(ctx, p.input)
	if err != nil || listed.Error() != nil {
		return nil
	}
	out := map[int32]int64{}
	listed.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

// next is the offset past each input partition's last committed record.
func (p *pipe) next() map[int32]int64 {
	out := map[int32]int64{}
	for part, offs := range p.inputs {
		if len(offs) > 0 {
			out[part] = offs[len(offs)-1] + 1
		}
	}
	return out
}

// await polls cond until it holds or the minute ends.
func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after a minute: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// committedAll reports whether the group committed past every input record.
func (p *pipe) committedAll() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	offs, err := p.adm.FetchOffsets(ctx, p.group)
	if err != nil {
		return false
	}
	ends := p.ends(ctx)
	for part, next := range p.next() {
		if o, ok := offs.Lookup(p.input, part); !ok || !committedPast(o.At, next, ends[part]) {
			return false
		}
	}
	return true
}

func (s *suite) testConfigErrors(t *testing.T) {
	valid := pipeline.Config{Conn: transport.NewConfig(s.env.Bootstrap, 10*time.Second), Group: "g", Input: "in", Output: "out", TransactionalID: "g/1"}
	cases := []struct {
		field string
		edit  func(*pipeline.Config)
	}{
		{"Group", func(c *pipeline.Config) { c.Group = "" }},
		{"Input", func(c *pipeline.Config) { c.Input = "" }},
		{"Output", func(c *pipeline.Config) { c.Output = c.Input }},
		{"TransactionalID", func(c *pipeline.Config) { c.TransactionalID = "" }},
		{"Protocol", func(c *pipeline.Config) { c.Protocol = "eager" }},
		{"SessionTimeout", func(c *pipeline.Config) { c.SessionTimeout = -time.Second }},
		{"LeaseDuration", func(c *pipeline.Config) { c.Conn.LeaseDuration = 0 }},
	}
	for _, tc := range cases {
		cfg := valid
		tc.edit(&cfg)
		m, err := s.env.New(context.Background(), s.env.Kind, cfg)
		if err == nil {
			m.Close()
			t.Errorf("%s: no error", tc.field)
			continue
		}
		if !errors.Is(err, transport.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: %v, want ErrInvalidConfig naming the field", tc.field, err)
		}
	}
	if _, err := s.env.New(context.Background(), "batch", valid); err == nil || !strings.Contains(err.Error(), "kind") {
		t.Errorf("unknown kind: %v, want an error naming the kind", err)
	}
}

func (s *suite) testCopy(t *testing.T) {
	p := s.newPipe(t, 3)
	p.seed(t, 0, 30)
	a := s.start(t, p, "a")
	p.seed(t, 30, 30) // more input while it runs
	// The member's own word, not the group's offsets: a member that commits wrong offsets
	// must fail on them below (exactlyOnce's stable fetch), not wait here for offsets that
	// never come.
	await(t, "the member committed transactions of every input record", func() bool { return a.reachedAll(p.next()) })
	a.stop(t)
	if a.outs[transport.OK] < 60/5 {
		t.Errorf("%d transactions committed for 60 records of batches of at most 5", a.outs[transport.OK])
	}
	p.exactlyOnce(t)
}

// testRebalance: a and b copy until a has committed, c joins and must commit something of its
// own (more input comes until each has: a partition reaches c only when the group rebalanced),
// then a leaves and b and c copy the rest.
func (s *suite) testRebalance(t *testing.T) {
	p := s.newPipe(t, 4)
	p.seed(t, 0, 40)
	a := s.start(t, p, "a")
	b := s.start(t, p, "b")
	p.seed(t, 40, 40)
	n := 80
	// committedBy waits until m has committed a transaction, feeding the input a little
	// every 200 ms: how soon the group assigns a member partitions depends on the protocol
	// and the machine, not on the test.
	committedBy := func(m *member) {
		tick := 0
		await(t, "member "+m.name+" committed a transaction of its own", func() bool {
			if m.committed.Load() > 0 {
				return true
			}
			if tick++; tick%10 == 0 {
				p.seed(t, n, 4)
				n += 4
			}
			return false
		})
	}
	committedBy(a) // a owns partitions before c joins
	c := s.start(t, p, "c")
	committedBy(c) // and c gets some of them in a rebalance
	a.stop(t)      // and the first leaves
	p.seed(t, n, 40)
	await(t, "the members committed every input record", func() bool { return p.committedAll() })
	b.stop(t)
	c.stop(t)
	p.exactlyOnce(t)
}

func (s *suite) testAbortedInput(t *testing.T) {
	p := s.newPipe(t, 2)
	p.seed(t, 0, 10)
	p.seedAborted(t, 10)
	p.seed(t, 10, 10)
	a := s.start(t, p, "a")
	await(t, "the member committed every input record", func() bool { return p.committedAll() })
	a.stop(t)
	p.exactlyOnce(t)
}

// testZombie: member a polls a batch and is then cut off from the cluster (every connection
// closed, new ones refused) until b, started then, has committed every record, which it can
// only once the group gave it a's partitions (a's session timed out). Then a's links heal and
// it transacts the batch it held: that must be refused (Fail: a zombie can know it was fenced;
// the plain member says ErrFenced), and the output stays exactly-once.
func (s *suite) testZombie(t *testing.T) {
	p := s.newPipe(t, 2)
	p.seed(t, 0, 20)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var links cutter
	cfg := s.config(p, "a")
	cfg.Conn.Dial = links.dial
	a, err := s.env.New(ctx, s.env.Kind, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	batch := pollSome(t, ctx, a)
	links.cut()
	b := s.start(t, p, "b")
	await(t, "member b committed every input record", func() bool { return p.committedAll() })
	links.heal()
	var outs []pipeline.Output
	for _, r := range batch.Records {
		outs = append(outs, output(r, "a"))
	}
	res := a.Transact(ctx, batch, outs)
	t.Logf("the zombie's transaction: %v %v (token %v, generation %d)", res.Outcome, res.Err, res.Token, batch.Generation)
	if s.env.GroupIDOnly {
		b.stop(t)
		p.zombieCommitted(t, batch, res)
		return
	}
	switch {
	case res.Outcome == transport.OK:
		t.Errorf("the zombie's batch (generation %d) committed after its partitions were given to another member", batch.Generation)
	case res.Outcome != transport.Fail:
		t.Errorf("the zombie's transaction: %v (%v), want fail: the group refused it", res.Outcome, res.Err)
	case s.env.Kind == pipeline.KindPlain && !errors.Is(res.Err, pipeline.ErrFenced):
		t.Errorf("the plain zombie's transaction failed with %v, want ErrFenced", res.Err)
	}
	b.stop(t)
	p.exactlyOnce(t)
}

// zombieCommitted requires what a member that sends its offsets by group id alone does in the
// zombie test (Env.GroupIDOnly): the zombie's transaction commits, so the committed output
// holds its batch's outputs twice (the new owner's, then the zombie's) and everything else
// once, and the group's offset of each of the batch's partitions is back at the batch's end.
func (p *pipe) zombieCommitted(t *testing.T, batch pipeline.Batch, res pipeline.Result) {
	t.Helper()
	if res.Outcome != transport.OK {
		t.Fatalf("the zombie's transaction: %v (%v); a member that sends its offsets by group id alone (Env.GroupIDOnly) "+
			"was expected to commit it: is it fenced by its generation now? Then it sends the group's metadata: update its documentation and drop GroupIDOnly",
			res.Outcome, res.Err)
	}
	inBatch := map[int32]map[int64]bool{}
	for _, r := range batch.Records {
		if inBatch[r.Partition] == nil {
			inBatch[r.Partition] = map[int64]bool{}
		}
		inBatch[r.Partition][r.Offset] = true
	}
	got := p.copied(t)
	for part := range p.partitions {
		want := slices.Clone(p.inputs[part])
		for _, o := range p.inputs[part] {
			if inBatch[part][o] {
				want = append(want, o) // the zombie's copy, committed after every other
			}
		}
		if !slices.Equal(got[part], want) {
			t.Errorf("input partition %d: the committed output holds the outputs of offsets %v, want %v: every record once, then the zombie's batch again", part, got[part], want)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	offs, err := p.adm.FetchOffsets(kadm.RequireStable(ctx), p.group)
	if err != nil {
		t.Fatal(err)
	}
	for part, end := range batch.Offsets() {
		if o, _ := offs.Lookup(p.input, part); o.At != end {
			t.Errorf("input partition %d: the group committed %d, want %d: the zombie's offset, which overwrote the new owner's %d", part, o.At, end, p.next()[part])
		}
	}
	t.Logf("as documented for this member (Env.GroupIDOnly): the zombie committed after the rebalance; the outputs of %d records appear twice and the group's offsets went back to %v",
		len(batch.Records), batch.Offsets())
}

// cutter dials through a switch: cut closes every connection it made and refuses new ones
// until heal.
type cutter struct {
	mu    sync.Mutex
	off   bool
	conns []net.Conn
}

func (c *cutter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.off {
		return nil, errors.New("links cut")
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err == nil {
		c.conns = append(c.conns, conn)
	}
	return conn, err
}

func (c *cutter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.off = true
	for _, conn := range c.conns {
		conn.Close()
	}
	c.conns = nil
}

func (c *cutter) heal() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.off = false
}

// testAbortRewinds: a transaction that cannot produce (its context has ended) does not commit,
// and the member's next poll starts again at the batch's first record.
func (s *suite) testAbortRewinds(t *testing.T) {
	p := s.newPipe(t, 1)
	p.seed(t, 0, 20)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, err := s.env.New(ctx, s.env.Kind, s.config(p, "a"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	batch := pollSome(t, ctx, a)
	ended, end := context.WithCancel(ctx)
	end()
	res := a.Transact(ended, batch, outputs(batch, "a"))
	t.Logf("the transaction whose context had ended: %v (%v)", res.Outcome, res.Err)
	if res.Outcome != transport.Fail {
		t.Fatalf("a transaction whose context had ended: %v (%v), want fail: it never asked to commit", res.Outcome, res.Err)
	}
	if res.Restart {
		t.Fatalf("the member asks to be restarted after an abort (%v): it could not rewind", res.Err)
	}
	again := pollSome(t, ctx, a)
	if first, want := again.Records[0].Offset, batch.Records[0].Offset; first != want {
		t.Fatalf("after a transaction that did not commit, the next poll starts at offset %d, want %d (the aborted batch's first record)", first, want)
	}
	// The rest of the input, once: the committed offsets show a commit only once its markers
	// are written, which a broker does after it answered, so the loop counts records instead.
	for b, copied := again, 0; ; b = pollSome(t, ctx, a) {
		if res := a.Transact(ctx, b, outputs(b, "a")); res.Outcome != transport.OK {
			t.Fatalf("copy: %v (%v)", res.Outcome, res.Err)
		}
		if copied += len(b.Records); copied >= 20 {
			break
		}
	}
	await(t, "the group's offsets show the member's commits", func() bool { return p.committedAll() })
	p.exactlyOnce(t)
}

// testStableFetch: member a sends a batch's offsets in its transaction and stops before the
// commit, cut off from the cluster, so the group gives its partition to b while the offsets
// are pending. b must start past them (it fetches stable, and waits until a's transaction
// ends): a then commits, and nothing is copied twice. b's fetch is seen on its wire, so that
// a commits only after b asked where to start.
func (s *suite) testStableFetch(t *testing.T) {
	if !slices.Contains(pipeline.Points(s.env.Kind), pipeline.PointBeforeCommit) {
		t.Skipf("member %s sends its offsets and commits in one call: nothing holds its offsets pending", s.env.Kind)
	}
	p := s.newPipe(t, 1)
	p.seed(t, 0, 20)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var links cutter
	paused, release := make(chan struct{}), make(chan struct{})
	var released sync.Once
	free := func() { released.Do(func() { close(release) }) }
	cfg := s.config(p, "a")
	cfg.Conn.Dial = links.dial
	cfg.Pause = func(_ context.Context, point string) {
		if point == pipeline.PointBeforeCommit {
			close(paused)
			<-release
		}
	}
	a, err := s.env.New(ctx, s.env.Kind, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	// Run first: a test that fails while a is paused (b does not start, say) lets a's
	// transaction go on over healed links, or a.Close waits for it until go test's timeout.
	defer links.heal()
	defer free()
	batch := pollSome(t, ctx, a)
	done := make(chan pipeline.Result, 1)
	go func() { done <- a.Transact(ctx, batch, outputs(batch, "a")) }()
	select {
	case <-paused:
	case res := <-done:
		t.Fatalf("member a's transaction ended (%v: %v) before its commit point", res.Outcome, res.Err)
	}
	links.cut()
	var fetches fetchCounter
	bcfg := s.config(p, "b")
	bcfg.Conn.Dial = fetches.dial
	b := s.startWith(t, bcfg, "b")
	await(t, "member b asked for its partition's committed offsets (a's session expired)", func() bool { return fetches.n.Load() > 0 })
	links.heal()
	free()
	res := <-done
	t.Logf("member a's transaction, held open with its offsets past b's fetch: %v %v", res.Outcome, res.Err)
	a.Close()        // else, back in the group, it may be given the partition and never poll it
	p.seed(t, 20, 5) // b commits again after a did, whatever a's commit did to the offsets
	await(t, "member b committed every input record", func() bool { return p.committedAll() })
	b.stop(t)
	p.exactlyOnce(t)
}

// pollSome polls m until it returns records, for up to a minute.
func pollSome(t *testing.T, ctx context.Context, m pipeline.Member) pipeline.Batch {
	t.Helper()
	var b pipeline.Batch
	await(t, "the member polled a batch", func() bool {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		b, _ = m.Poll(pctx)
		return len(b.Records) > 0
	})
	return b
}

func outputs(b pipeline.Batch, member string) []pipeline.Output {
	var outs []pipeline.Output
	for _, r := range b.Records {
		outs = append(outs, output(r, member))
	}
	return outs
}

// fetchCounter dials plain connections and counts the OffsetFetch requests written on them:
// the client writes each request whole, its size then its API key first (key 9 is
// OffsetFetch).
type fetchCounter struct{ n atomic.Int64 }

func (f *fetchCounter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, f: f}, nil
}

type countingConn struct {
	net.Conn
	f *fetchCounter
}

func (c *countingConn) Write(b []byte) (int, error) {
	if len(b) >= 6 && int16(b[4])<<8|int16(b[5]) == offsetFetchKey {
		c.f.n.Add(1)
	}
	return c.Conn.Write(b)
}

const offsetFetchKey = 9

// fetches keeps what a member reported through Config.Fetched.
type fetches struct {
	mu  sync.Mutex
	got []pipeline.Fetch
}

func (f *fetches) add(x pipeline.Fetch) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, x)
}

func (f *fetches) all() []pipeline.Fetch {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.got)
}

// testFetchReported: a commits a batch and leaves; b, given the partition, reports its fetch
// (on an assignment, with its group membership) starting at a's committed offset, and polls
// from there. A member that rewinds by fetching (Points has before-commit: the plain member)
// reports that fetch too, after a transaction that did not commit.
func (s *suite) testFetchReported(t *testing.T) {
	p := s.newPipe(t, 1)
	p.seed(t, 0, 20)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var fa fetches
	cfg := s.config(p, "a")
	cfg.Fetched = fa.add
	a, err := s.env.New(ctx, s.env.Kind, cfg)
	if err != nil {
		t.Fatal(err)
	}
	batch := pollSome(t, ctx, a)
	if got := fa.all(); len(got) == 0 || got[0].Rewind || got[0].Starts[0] != 0 || got[0].MemberID == "" || got[0].Generation < 0 {
		t.Fatalf("a's fetches before its first batch: %+v, want one on its assignment starting partition 0 at 0, with its member id and generation", got)
	}
	if res := a.Transact(ctx, batch, outputs(batch, "a")); res.Outcome != transport.OK {
		t.Fatalf("a's transaction: %v (%v)", res.Outcome, res.Err)
	}
	end := batch.Offsets()[0]
	if slices.Contains(pipeline.Points(s.env.Kind), pipeline.PointBeforeCommit) {
		next := pollSome(t, ctx, a)
		ended, stop := context.WithCancel(ctx)
		stop()
		if res := a.Transact(ended, next, outputs(next, "a")); res.Outcome != transport.Fail || res.Restart {
			t.Fatalf("a transaction whose context had ended: %v restart %v (%v), want a failure it rewinds after", res.Outcome, res.Restart, res.Err)
		}
		got := fa.all()
		if last := got[len(got)-1]; !last.Rewind || last.Starts[0] != end || last.Began.IsZero() {
			t.Fatalf("a's last fetch %+v, want a rewind to %d (its committed offset) with the time it began", last, end)
		}
	}
	a.Close()
	var fb fetches
	cfg = s.config(p, "b")
	cfg.Fetched = fb.add
	b, err := s.env.New(ctx, s.env.Kind, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	first := pollSome(t, ctx, b)
	got := fb.all()
	if len(got) == 0 || got[0].Rewind || got[0].Starts[0] != end || got[0].MemberID == "" || got[0].Generation < 0 {
		t.Fatalf("b's fetches before its first batch: %+v, want one on its assignment starting partition 0 at %d (a's commit)", got, end)
	}
	if at := first.Records[0].Offset; at != end {
		t.Errorf("b polled from %d, but reported starting at %d", at, end)
	}
}
