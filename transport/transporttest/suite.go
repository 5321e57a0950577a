// Package transporttest is the conformance suite every fencecheck transport must pass: the
// seed's contract, call by call, against a real cluster (kfake in-process, or Apache Kafka).
package transporttest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/transport"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Transport is what the suite needs of a transport under test.
type Transport interface {
	transport.CoordinationTransport
	HeldToken(role transport.Role) (transport.FencingToken, bool)
	Close(ctx context.Context) error
}

// Env describes the cluster under test and how to build a transport on it.
type Env struct {
	// Bootstrap is the cluster's bootstrap address list.
	Bootstrap string
	// Dial, when set, makes every broker connection (the cluster's proxy links).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Security is the transports' TLS and SASL (nil: plaintext). With Dial set, a Dial that
	// speaks TLS itself (the links of a secured cluster) goes with a Security without TLS.
	Security *transport.ClientSecurity
	// TransactionVersion is what transports on this cluster run: 1 or 2. The suite passes it
	// in Config and checks the epoch behaviour it implies.
	TransactionVersion int
	// PinTransactionVersion makes the suite set Config.TransactionVersion (otherwise 0:
	// negotiate).
	PinTransactionVersion bool
	// Replication is the topic replication factor to use. Default 3.
	Replication int16
	// RequestTimeout for the transports. Default 5s.
	RequestTimeout time.Duration
	// New builds a transport, typically transport.Start.
	New func(ctx context.Context, cfg transport.Config) (Transport, error)
}

// Start adapts transport.Start to Env.New.
func Start(ctx context.Context, cfg transport.Config) (Transport, error) {
	t, err := transport.Start(ctx, cfg)
	if err != nil {
		return nil, err // not a typed nil inside the interface
	}
	return t, nil
}

var topicSeq atomic.Int64

// suite carries the environment through the tests.
type suite struct {
	env     Env
	configs sync.Map // Transport → the transport.Config it was opened with
}

// Run runs every conformance test against env. Each test uses its own topic, so the suite
// can share one cluster with other tests.
func Run(t *testing.T, env Env) {
	if env.Replication == 0 {
		env.Replication = 3
	}
	if env.RequestTimeout == 0 {
		env.RequestTimeout = 5 * time.Second
	}
	s := &suite{env: env}
	tests := []struct {
		name string
		fn   func(*testing.T)
	}{
		{"start - invalid config - ErrInvalidConfig naming the field", s.testConfigErrors},
		{"start - no broker answers - ErrAdmin", s.testStartUnreachable},
		{"acquire - mints a token the process holds and describe reports", s.testAcquireDescribe},
		{"acquire - newer holder fences the older one's writes", s.testFencing},
		{"acquire - again in one process - replaces the old holding", s.testReacquire},
		{"acquire - concurrently on many roles of one process - each token is its role's", s.testConcurrentRoles},
		{"write - token not held - ErrNotHeld without I/O", s.testNotHeld},
		{"write - several records - committed together and in order, or none when fenced", s.testSeveralRecords},
		{"register - join sequences are the offsets, in order", s.testRegister},
		{"read - aborted and open transactions are invisible and do not block", s.testReadCommittedOnly},
		{"read - an aborted batch at a fetch's byte limit is invisible", s.testReadAtFetchLimit},
		{"read - foreign and undecodable keys are dropped", s.testForeignKeys},
		{"read - undecodable value of the role - ErrRecord", s.testBadValue},
		{"describe - epoch after commits follows the transaction version", s.testEpochAfterCommits},
		{"write - links cut - bounded, not ok, holding released, recovers", s.testCutLinks},
		{"close - every call afterwards - ErrClosed", s.testClose},
	}
	for _, tc := range tests {
		t.Run(tc.name, tc.fn)
	}
}

// config returns a valid config for a fresh topic.
func (s *suite) config(t *testing.T) transport.Config {
	cfg := transport.NewConfig(s.env.Bootstrap, 10*time.Second)
	cfg.Topic = fmt.Sprintf("conformance-%d-%d", time.Now().UnixNano()%1e6, topicSeq.Add(1))
	cfg.TopicPartitions = 3
	cfg.TopicReplication = s.env.Replication
	cfg.RequestTimeout = s.env.RequestTimeout
	cfg.Dial = s.env.Dial
	cfg.Security = s.env.Security
	if s.env.PinTransactionVersion {
		cfg.TransactionVersion = s.env.TransactionVersion
	}
	return cfg
}

// open starts a transport for cfg and closes it when the test ends.
func (s *suite) open(t *testing.T, cfg transport.Config) Transport {
	t.Helper()
	tr, err := s.env.New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start transport: %v", err)
	}
	s.configs.Store(tr, cfg)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := tr.Close(ctx); err != nil {
			t.Errorf("close transport: %v", err)
		}
	})
	return tr
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func lease(m transport.MemberID, seq uint64) transport.Lease {
	return transport.Lease{Holder: m, Seq: seq, Duration: 10 * time.Second, WrittenAt: time.Unix(0, int64(seq)*1e9)}
}

func mustAcquire(t *testing.T, tr Transport, role transport.Role) transport.FencingToken {
	t.Helper()
	tok, err := tr.AcquireEpoch(ctxT(t), role)
	if err != nil {
		t.Fatalf("acquire %q: %v", role, err)
	}
	if tok.ProducerID < 0 || tok.Epoch < 0 { // (0, 0) is a real token on a fresh Kafka cluster
		t.Fatalf("acquire %q: token %v is Kafka's \"no producer id\"", role, tok)
	}
	return tok
}

func mustWrite(t *testing.T, tr Transport, role transport.Role, tok transport.FencingToken, l transport.Lease) {
	t.Helper()
	if err := tr.WriteLease(ctxT(t), role, tok, l); err != nil {
		t.Fatalf("write lease %d under %v: %v", l.Seq, tok, err)
	}
}

func mustRead(t *testing.T, tr Transport, role transport.Role) transport.RoleRecords {
	t.Helper()
	rr, err := tr.ReadRoleRecords(ctxT(t), role)
	if err != nil {
		t.Fatalf("read %q: %v", role, err)
	}
	return rr
}

// readUntil reads role until done accepts what it read, or a deadline passes. A commit is
// acknowledged once the coordinator has decided it; its markers reach the partition a little
// later, and only then does the last stable offset pass the records. So a read right after a
// commit may legitimately miss it: the suite waits for the condition instead of assuming it.
func readUntil(t *testing.T, tr Transport, role transport.Role, what string, done func(transport.RoleRecords) bool) transport.RoleRecords {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rr := mustRead(t, tr, role)
		if done(rr) {
			return rr
		}
		if time.Now().After(deadline) {
			t.Fatalf("read %q: %s never became visible; last read: %+v", role, what, rr)
		}
		time.Sleep(20 * time.Millisecond) // polling the cluster: the condition is remote
	}
}

// leaseSeqs lists the seqs of rr's leases, in offset order.
func leaseSeqs(rr transport.RoleRecords) string {
	var seqs []uint64
	for _, l := range rr.Leases {
		seqs = append(seqs, l.Lease.Seq)
	}
	return fmt.Sprint(seqs)
}

func wantErr(t *testing.T, what string, err, kind error, outcome transport.Outcome) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("%s: got error %v, want %v", what, err, kind)
	}
	if got := transport.Classify(err); got != outcome {
		t.Fatalf("%s: Classify(%v) = %v, want %v", what, err, got, outcome)
	}
}

func (s *suite) testConfigErrors(t *testing.T) {
	tests := []struct {
		field string
		edit  func(*transport.Config)
	}{
		{"Bootstrap", func(c *transport.Config) { c.Bootstrap = " , " }},
		{"Bootstrap", func(c *transport.Config) { c.Bootstrap = "no-port" }},
		{"Bootstrap", func(c *transport.Config) { c.Bootstrap = "host.invalid:9092"; c.Dial = nil }},
		{"LeaseDuration", func(c *transport.Config) { c.LeaseDuration = 0 }},
		{"RequestTimeout", func(c *transport.Config) { c.RequestTimeout = -time.Second }},
		{"TopicPartitions", func(c *transport.Config) { c.TopicPartitions = 0 }},
		{"TopicReplication", func(c *transport.Config) { c.TopicReplication = -1 }},
		{"TransactionVersion", func(c *transport.Config) { c.TransactionVersion = 3 }},
		{"Security.SASLMechanism", func(c *transport.Config) {
			c.Security = &transport.ClientSecurity{SASLMechanism: "GSSAPI", Username: "u"}
		}},
	}
	for _, tc := range tests {
		cfg := s.config(t)
		tc.edit(&cfg)
		tr, err := s.env.New(context.Background(), cfg)
		if err == nil {
			tr.Close(context.Background())
			t.Fatalf("%s: Start accepted an invalid config", tc.field)
		}
		wantErr(t, tc.field, err, transport.ErrInvalidConfig, transport.Fail)
		if !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: error %q does not name the field", tc.field, err)
		}
	}
}

func (s *suite) testStartUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	cfg := s.config(t)
	cfg.Bootstrap = addr
	cfg.Dial = nil
	cfg.RequestTimeout = 2 * time.Second
	began := time.Now()
	tr, err := s.env.New(context.Background(), cfg)
	if err == nil {
		tr.Close(context.Background())
		t.Fatal("Start succeeded against a closed port")
	}
	wantErr(t, "start", err, transport.ErrAdmin, transport.Fail)
	// Bounded by the request timeout: three times it leaves a loaded machine slack and still
	// fails a Start that retries or waits out a default timeout of its own.
	if d := time.Since(began); d > 3*cfg.RequestTimeout {
		t.Errorf("Start took %v, more than three times its request timeout %v", d, cfg.RequestTimeout)
	}
}

func (s *suite) testAcquireDescribe(t *testing.T) {
	tr := s.open(t, s.config(t))
	role := transport.Role("describe")
	if tok, held, err := s.describe(t, tr, role); err != nil || held {
		t.Fatalf("describe before any acquire = %v, %v, %v; want not held", tok, held, err)
	}
	if _, ok := tr.HeldToken(role); ok {
		t.Fatal("HeldToken reports a holding before any acquire")
	}
	tok := mustAcquire(t, tr, role)
	if got, ok := tr.HeldToken(role); !ok || got != tok {
		t.Fatalf("HeldToken = %v, %v; want %v", got, ok, tok)
	}
	d, held, err := s.describe(t, tr, role)
	if err != nil || !held {
		t.Fatalf("describe after acquire = %v, %v, %v; want held", d, held, err)
	}
	if d.ProducerID != tok.ProducerID || d.Compare(tok) < 0 {
		t.Fatalf("describe = %v, want the minted %v or a later epoch of it", d, tok)
	}
}

func (s *suite) testFencing(t *testing.T) {
	cfg := s.config(t)
	a, b := s.open(t, cfg), s.open(t, cfg)
	role := transport.Role("fencing")
	ta := mustAcquire(t, a, role)
	mustWrite(t, a, role, ta, lease("a", 1))

	tb := mustAcquire(t, b, role)
	if tb.Compare(ta) <= 0 {
		t.Fatalf("newer token %v does not sort after %v", tb, ta)
	}
	err := a.WriteLease(ctxT(t), role, ta, lease("a", 2))
	wantErr(t, "deposed holder's write", err, transport.ErrFenced, transport.Fail)
	if tok, ok := a.HeldToken(role); ok {
		t.Fatalf("deposed holder still holds %v", tok)
	}
	err = a.WriteLease(ctxT(t), role, ta, lease("a", 3))
	wantErr(t, "write after the fence", err, transport.ErrNotHeld, transport.Fail)
	mustWrite(t, b, role, tb, lease("b", 4))

	rr := readUntil(t, a, role, "b's lease", func(rr transport.RoleRecords) bool { return len(rr.Leases) >= 2 })
	var got []string
	for _, l := range rr.Leases {
		got = append(got, fmt.Sprintf("%s#%d@%v", l.Lease.Holder, l.Lease.Seq, l.Token))
	}
	want := []string{fmt.Sprintf("a#1@%v", ta), fmt.Sprintf("b#4@%v", tb)}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("committed leases = %v, want %v", got, want)
	}
	if rr.Leases[0].Offset >= rr.Leases[1].Offset {
		t.Fatalf("leases out of offset order: %+v", rr.Leases)
	}
}

// FencedWriter is the part of a transport the suite's test of writes of several records
// needs: every fencecheck transport has it (the workload's work writes go through it). A
// Transport without it skips that test.
type FencedWriter interface {
	WriteFenced(ctx context.Context, role transport.Role, token transport.FencingToken, recs ...*kgo.Record) error
	ReadPartition(ctx context.Context, topic string, partition int32) ([]*kgo.Record, error)
}

// testSeveralRecords: a fenced write of several records is one transaction: once committed,
// a read shows all of them, in the order given; a deposed holder's write of several records
// leaves none of them.
func (s *suite) testSeveralRecords(t *testing.T) {
	cfg := s.config(t)
	a, b := s.open(t, cfg), s.open(t, cfg)
	fa, ok := a.(FencedWriter)
	if !ok {
		t.Skip("the transport has no WriteFenced and ReadPartition")
	}
	role := transport.Role("several")
	ta := mustAcquire(t, a, role)
	mustWrite(t, a, role, ta, lease("a", 1)) // creates the topic
	partition := transport.PartitionFor(role, cfg.TopicPartitions)
	records := func(write uint64, tok transport.FencingToken, n int) []*kgo.Record {
		recs := make([]*kgo.Record, n)
		for i := range recs {
			recs[i] = record(cfg, role, transport.EncodeKey(role), transport.AppendValue(nil, transport.Value{
				Kind: transport.KindWork, Token: tok, Member: "a", WriteID: write, Index: i, Count: n}))
		}
		return recs
	}
	// The work records of the partition, as "write/index".
	work := func() []string {
		recs, err := fa.ReadPartition(ctxT(t), cfg.Topic, partition)
		if err != nil {
			t.Fatalf("read partition %d: %v", partition, err)
		}
		var out []string
		for _, r := range recs {
			if v, err := transport.DecodeValue(r.Value); err == nil && v.Kind == transport.KindWork {
				out = append(out, fmt.Sprintf("%d/%d", v.WriteID, v.Index))
			}
		}
		return out
	}
	until := func(what string, done func([]string) bool) []string {
		deadline := time.Now().Add(30 * time.Second)
		for {
			got := work()
			if done(got) {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never became visible; last read: %v", what, got)
			}
			time.Sleep(20 * time.Millisecond) // polling the cluster: the condition is remote
		}
	}
	if err := fa.WriteFenced(ctxT(t), role, ta, records(7, ta, 3)...); err != nil {
		t.Fatalf("write of three records: %v", err)
	}
	if got := until("the three records", func(w []string) bool { return len(w) > 0 }); fmt.Sprint(got) != "[7/0 7/1 7/2]" {
		t.Fatalf("work records = %v, want all three of write 7 in order, at once", got)
	}

	tb := mustAcquire(t, b, role)
	err := fa.WriteFenced(ctxT(t), role, ta, records(8, ta, 3)...)
	wantErr(t, "deposed holder's write of three records", err, transport.ErrFenced, transport.Fail)
	mustWrite(t, b, role, tb, lease("b", 2))
	readUntil(t, b, role, "b's lease", func(rr transport.RoleRecords) bool { return len(rr.Leases) >= 2 })
	if got := work(); fmt.Sprint(got) != "[7/0 7/1 7/2]" {
		t.Fatalf("work records after the fenced write = %v, want write 7's alone", got)
	}
}

func (s *suite) testReacquire(t *testing.T) {
	tr := s.open(t, s.config(t))
	role := transport.Role("reacquire")
	t1 := mustAcquire(t, tr, role)
	t2 := mustAcquire(t, tr, role)
	if t2.Compare(t1) <= 0 {
		t.Fatalf("second token %v does not sort after %v", t2, t1)
	}
	err := tr.WriteLease(ctxT(t), role, t1, lease("m", 1))
	wantErr(t, "write under the replaced token", err, transport.ErrNotHeld, transport.Fail)
	mustWrite(t, tr, role, t2, lease("m", 2))
}

func (s *suite) testConcurrentRoles(t *testing.T) {
	cfg := s.config(t)
	if cfg.Dial == nil {
		// A dialer is what gives the shared options spare capacity in practice: cover it.
		var d net.Dialer
		cfg.Dial = d.DialContext
	}
	tr := s.open(t, cfg)
	const roles = 16
	toks := make([]transport.FencingToken, roles)
	errs := make([]error, roles)
	var wg sync.WaitGroup
	for i := range roles {
		wg.Go(func() { toks[i], errs[i] = tr.AcquireEpoch(ctxT(t), transport.Role(fmt.Sprintf("concurrent-%d", i))) })
	}
	wg.Wait()
	for i := range roles {
		role := transport.Role(fmt.Sprintf("concurrent-%d", i))
		if errs[i] != nil {
			t.Fatalf("acquire %q: %v", role, errs[i])
		}
		d, held, err := s.describe(t, tr, role)
		if err != nil || !held || d.ProducerID != toks[i].ProducerID {
			t.Fatalf("%q: acquired %v but its coordinator reports %v (held %v, %v): the producer was built for another role", role, toks[i], d, held, err)
		}
		mustWrite(t, tr, role, toks[i], lease("m", uint64(i)))
	}
}

func (s *suite) testNotHeld(t *testing.T) {
	tr := s.open(t, s.config(t))
	role := transport.Role("not-held")
	err := tr.WriteLease(ctxT(t), role, transport.FencingToken{ProducerID: 7, Epoch: 1}, lease("m", 1))
	wantErr(t, "write with no holding", err, transport.ErrNotHeld, transport.Fail)
	tok := mustAcquire(t, tr, role)
	other := transport.FencingToken{ProducerID: tok.ProducerID, Epoch: tok.Epoch + 1}
	err = tr.WriteLease(ctxT(t), role, other, lease("m", 2))
	wantErr(t, "write under another token", err, transport.ErrNotHeld, transport.Fail)
	// A not-held write must leave the real holding alone.
	mustWrite(t, tr, role, tok, lease("m", 3))
}

func (s *suite) testRegister(t *testing.T) {
	cfg := s.config(t)
	a, b := s.open(t, cfg), s.open(t, cfg)
	role := transport.Role("register")
	j1, err := a.Register(ctxT(t), role, "m1")
	if err != nil {
		t.Fatal(err)
	}
	j2, err := b.Register(ctxT(t), role, "m2")
	if err != nil {
		t.Fatal(err)
	}
	if j2 <= j1 {
		t.Fatalf("join sequences %d then %d do not increase", j1, j2)
	}
	rr := readUntil(t, a, role, "both registrations", func(rr transport.RoleRecords) bool { return len(rr.Registrations) >= 2 })
	want := []transport.Registration{{Member: "m1", JoinSeq: j1}, {Member: "m2", JoinSeq: j2}}
	if fmt.Sprint(rr.Registrations) != fmt.Sprint(want) {
		t.Fatalf("registrations = %v, want %v", rr.Registrations, want)
	}
}

// describer is a transport that may be unable to describe (an exec adapter whose client has
// no DescribeTransactions).
type describer interface{ CanDescribe() bool }

// describe asks tr which token role's coordinator reports. A transport that cannot describe is
// not asked: fencecheck's own transport, on the same links, asks the coordinator instead, so
// every test still checks the tokens tr minted against the coordinator's state.
func (s *suite) describe(t *testing.T, tr Transport, role transport.Role) (transport.FencingToken, bool, error) {
	t.Helper()
	if d, ok := tr.(describer); !ok || d.CanDescribe() {
		return tr.Describe(ctxT(t), role)
	}
	cfg, ok := s.configs.Load(tr)
	if !ok {
		t.Fatal("describe: a transport the suite did not open")
	}
	ref, err := transport.Start(ctxT(t), cfg.(transport.Config))
	if err != nil {
		t.Fatalf("start the reference transport to describe %q: %v", role, err)
	}
	defer func() { _ = ref.Close(context.Background()) }()
	return ref.Describe(ctxT(t), role)
}

// raw returns a plain kgo client on the env's cluster for writing records the transport would
// never write.
func (s *suite) raw(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	base := []kgo.Opt{kgo.SeedBrokers(strings.Split(s.env.Bootstrap, ",")...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DisableClientMetrics()}
	dial := s.env.Dial
	if sec := s.env.Security; sec != nil && sec.TLS != nil {
		dial = transport.TLSDialer(dial, sec.TLS)
	}
	if dial != nil {
		base = append(base, kgo.Dialer(dial))
	}
	if sec := s.env.Security; sec != nil {
		switch sec.SASLMechanism {
		case transport.SASLPlain:
			base = append(base, kgo.SASL(plain.Auth{User: sec.Username, Pass: sec.Password}.AsMechanism()))
		case transport.SASLScramSHA256:
			base = append(base, kgo.SASL(scram.Auth{User: sec.Username, Pass: sec.Password}.AsSha256Mechanism()))
		case transport.SASLScramSHA512:
			base = append(base, kgo.SASL(scram.Auth{User: sec.Username, Pass: sec.Password}.AsSha512Mechanism()))
		}
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func record(cfg transport.Config, role transport.Role, key, value []byte) *kgo.Record {
	return &kgo.Record{Topic: cfg.Topic, Partition: transport.PartitionFor(role, cfg.TopicPartitions), Key: key, Value: value}
}

func leaseValue(m transport.MemberID, seq uint64) []byte {
	return transport.AppendValue(nil, transport.Value{Kind: transport.KindLease, Member: m, Lease: lease(m, seq),
		Token: transport.FencingToken{ProducerID: 1, Epoch: 1}})
}

func (s *suite) testReadCommittedOnly(t *testing.T) { s.readCommittedOnly(t, s.config(t)) }

// testReadAtFetchLimit: with a one-byte fetch limit every fetch of a read carries one batch,
// so the aborted batch is the last of a fetch that its byte limit cut: the fetch must still
// say it was aborted. kfake did not when the request's byte limit was what cut it
// (docs/regressions.md#kfake-deviations, read-committed-aborted-at-fetch-limit).
func (s *suite) testReadAtFetchLimit(t *testing.T) {
	cfg := s.config(t)
	cfg.FetchPartitionMax = 1
	s.readCommittedOnly(t, cfg)
}

func (s *suite) readCommittedOnly(t *testing.T, cfg transport.Config) {
	tr := s.open(t, cfg)
	role := transport.Role("committed")
	tok := mustAcquire(t, tr, role) // also creates nothing: the write below creates the topic
	mustWrite(t, tr, role, tok, lease("holder", 1))

	ctx := ctxT(t)
	aborted := s.raw(t, kgo.TransactionalID(cfg.Topic+"/raw-aborted"), kgo.TransactionTimeout(time.Minute))
	if err := aborted.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := aborted.ProduceSync(ctx, record(cfg, role, transport.EncodeKey(role), leaseValue("aborted", 2))).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := aborted.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, tr, role, tok, lease("holder", 3))

	open := s.raw(t, kgo.TransactionalID(cfg.Topic+"/raw-open"), kgo.TransactionTimeout(time.Minute))
	if err := open.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := open.ProduceSync(ctx, record(cfg, role, transport.EncodeKey(role), leaseValue("open", 4))).FirstErr(); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	mustRead(t, tr, role)
	if d := time.Since(began); d > s.env.RequestTimeout {
		t.Errorf("read took %v with an open transaction; it must not wait for it", d)
	}
	// Once 3's markers are written, the committed view is [1 3] and must stay so while the
	// transaction holding 4 is open: the aborted 2 and the open 4 are never visible.
	rr := readUntil(t, tr, role, "lease 3", func(rr transport.RoleRecords) bool { return len(rr.Leases) >= 2 })
	if got := leaseSeqs(rr); got != "[1 3]" {
		t.Fatalf("committed lease seqs = %v, want [1 3] (aborted 2 and open 4 invisible)", got)
	}
	if err := open.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	if got := leaseSeqs(mustRead(t, tr, role)); got != "[1 3]" {
		t.Fatalf("after the abort, lease seqs = %v, want [1 3]", got)
	}
}

func (s *suite) testForeignKeys(t *testing.T) {
	cfg := s.config(t)
	tr := s.open(t, cfg)
	role := transport.Role("foreign")
	if _, err := tr.Register(ctxT(t), role, "m1"); err != nil { // creates the topic
		t.Fatal(err)
	}
	cl := s.raw(t)
	err := cl.ProduceSync(ctxT(t),
		record(cfg, role, []byte("not a fencecheck key"), []byte("junk")),
		record(cfg, role, transport.EncodeKey("another-role"), []byte("junk of another role")),
		record(cfg, role, nil, []byte("no key")),
	).FirstErr()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Register(ctxT(t), role, "m2"); err != nil {
		t.Fatal(err)
	}
	rr := readUntil(t, tr, role, "m2's registration", func(rr transport.RoleRecords) bool { return len(rr.Registrations) >= 2 })
	if len(rr.Registrations) != 2 || len(rr.Leases) != 0 {
		t.Fatalf("read = %+v, want the two registrations only", rr)
	}
}

func (s *suite) testBadValue(t *testing.T) {
	cfg := s.config(t)
	tr := s.open(t, cfg)
	role := transport.Role("bad-value")
	if _, err := tr.Register(ctxT(t), role, "m1"); err != nil {
		t.Fatal(err)
	}
	cl := s.raw(t)
	if err := cl.ProduceSync(ctxT(t), record(cfg, role, transport.EncodeKey(role), []byte{0xFC, 1, 2, 0xff})).FirstErr(); err != nil {
		t.Fatal(err)
	}
	_, err := tr.ReadRoleRecords(ctxT(t), role)
	wantErr(t, "read of an undecodable value", err, transport.ErrRecord, transport.Fail)
}

func (s *suite) testEpochAfterCommits(t *testing.T) {
	tr := s.open(t, s.config(t))
	role := transport.Role("epochs")
	tok := mustAcquire(t, tr, role)
	const commits = 3
	for i := range commits {
		mustWrite(t, tr, role, tok, lease("m", uint64(i+1)))
	}
	d, held, err := s.describe(t, tr, role)
	if err != nil || !held {
		t.Fatalf("describe = %v, %v, %v", d, held, err)
	}
	want := tok
	if s.env.TransactionVersion == 2 {
		// KIP-890 part 2: every EndTxn bumps the epoch; the minted token stays the identity.
		want.Epoch += commits
	}
	if d != want {
		t.Fatalf("TV%d: describe after %d commits = %v, want %v (minted %v)", s.env.TransactionVersion, commits, d, want, tok)
	}
	if got, _ := tr.HeldToken(role); got != tok {
		t.Fatalf("HeldToken moved to %v; it must stay the minted %v", got, tok)
	}
	rr := readUntil(t, tr, role, "every lease", func(rr transport.RoleRecords) bool { return len(rr.Leases) >= commits })
	for _, l := range rr.Leases {
		if l.Token != tok {
			t.Fatalf("lease %d carries %v, want the minted %v", l.Lease.Seq, l.Token, tok)
		}
	}
}

func (s *suite) testCutLinks(t *testing.T) {
	cfg := s.config(t)
	// Short, so the cut write ends soon, but long enough for the writes before the cut: on a
	// loaded Kafka lane an adapter's first write (which creates the role's topic) took more
	// than 2 s (KafkaJS on Kafka 4.1.2, a fresh-clone CI run at 380d254).
	cfg.RequestTimeout = 5 * time.Second
	cut := newCutter(s.env.Dial)
	cfg.Dial = cut.dial
	tr := s.open(t, cfg)
	role := transport.Role("cut")
	tok := mustAcquire(t, tr, role)
	mustWrite(t, tr, role, tok, lease("m", 1))

	cut.set(true)
	began := time.Now()
	err := tr.WriteLease(context.Background(), role, tok, lease("m", 2))
	took := time.Since(began)
	if err == nil {
		t.Fatal("write succeeded with every link cut")
	}
	if transport.Classify(err) == transport.OK {
		t.Fatalf("Classify(%v) = OK", err)
	}
	if took > 3*cfg.RequestTimeout { // the request timeout, with slack for a loaded machine
		t.Errorf("write took %v with links cut; bound is the request timeout %v (three times it allowed)", took, cfg.RequestTimeout)
	}
	if _, ok := tr.HeldToken(role); ok {
		t.Fatal("a failed write left the holding in place")
	}

	cut.set(false)
	tok2 := mustAcquire(t, tr, role)
	if tok2.Compare(tok) <= 0 {
		t.Fatalf("token after recovery %v does not sort after %v", tok2, tok)
	}
	mustWrite(t, tr, role, tok2, lease("m", 3))
	rr := readUntil(t, tr, role, "lease 3", func(rr transport.RoleRecords) bool { return strings.Contains(leaseSeqs(rr), "3") })
	for _, l := range rr.Leases {
		if l.Lease.Seq == 2 {
			t.Fatalf("the write cut off before its commit is visible: %+v", l)
		}
	}
}

func (s *suite) testClose(t *testing.T) {
	cfg := s.config(t)
	tr, err := s.env.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	role := transport.Role("closed")
	tok := mustAcquire(t, tr, role)
	ctx := ctxT(t)
	if err := tr.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	if _, ok := tr.HeldToken(role); ok {
		t.Error("HeldToken reports a holding after close")
	}
	_, err = tr.AcquireEpoch(ctx, role)
	wantErr(t, "acquire after close", err, transport.ErrClosed, transport.Fail)
	wantErr(t, "write after close", tr.WriteLease(ctx, role, tok, lease("m", 1)), transport.ErrClosed, transport.Fail)
	_, err = tr.Register(ctx, role, "m")
	wantErr(t, "register after close", err, transport.ErrClosed, transport.Fail)
	_, err = tr.ReadRoleRecords(ctx, role)
	wantErr(t, "read after close", err, transport.ErrClosed, transport.Fail)
	_, _, err = tr.Describe(ctx, role)
	wantErr(t, "describe after close", err, transport.ErrClosed, transport.Fail)
	if err := tr.Close(ctx); err != nil {
		t.Errorf("second close: %v", err)
	}
}

// cutter is a dialer whose links can be cut: cutting closes every open connection and refuses
// new ones, as a partition does. It wraps the environment's own dialer.
type cutter struct {
	base func(ctx context.Context, network, addr string) (net.Conn, error)

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
}

func newCutter(base func(ctx context.Context, network, addr string) (net.Conn, error)) *cutter {
	if base == nil {
		var d net.Dialer
		base = d.DialContext
	}
	return &cutter{base: base, conns: map[net.Conn]struct{}{}}
}

func (c *cutter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c.mu.Lock()
	cut := c.cut
	c.mu.Unlock()
	if cut {
		return nil, fmt.Errorf("dial %s: link cut", addr)
	}
	conn, err := c.base(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut {
		conn.Close()
		return nil, fmt.Errorf("dial %s: link cut", addr)
	}
	c.conns[conn] = struct{}{}
	return conn, nil
}

func (c *cutter) set(cut bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = cut
	if cut {
		for conn := range c.conns {
			conn.Close()
		}
		clear(c.conns)
	}
}
