package lineproto_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencecheck/fencecheck/internal/adapters"
	"github.com/fencecheck/fencecheck/internal/testenv"
	"github.com/fencecheck/fencecheck/transport"
	"github.com/fencecheck/fencecheck/transport/lineproto"
	"github.com/fencecheck/fencecheck/transport/pipeline"
	"github.com/fencecheck/fencecheck/transport/pipeline/pipelinetest"
	"github.com/fencecheck/fencecheck/transport/transporttest"
)

// adapterEnv makes this test binary an adapter: the harness side of the tests starts it
// again with the variable set, and it serves the protocol on stdin and stdout.
const (
	adapterEnv    = "FENCECHECK_LINEPROTO_TEST_ADAPTER"
	memberKindEnv = "FENCECHECK_LINEPROTO_TEST_MEMBER"
)

func TestMain(m *testing.M) {
	switch os.Getenv(adapterEnv) {
	case "":
		os.Exit(m.Run())
	case "real":
		serve(lineproto.StartReal)
	case "pipeline":
		// fencecheck's own pipeline member of the kind memberKindEnv names.
		log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		if err := lineproto.Serve(context.Background(), os.Stdin, os.Stdout, log, lineproto.Adapter{Name: "test pipeline adapter",
			Start: lineproto.StartReal, Pipeline: func(ctx context.Context, cfg pipeline.Config) (pipeline.Member, error) {
				return pipeline.New(ctx, os.Getenv(memberKindEnv), cfg)
			}}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	case "slow-boot":
		time.Sleep(3 * time.Second) // a runtime that takes long to start, as a JVM under load does
		serve(lineproto.StartReal)
	case "gateway-token":
		// A client that exposes neither the minted pair nor DescribeTransactions.
		serveWith(lineproto.StartReal, lineproto.CapGatewayToken, lineproto.CapNoDescribe)
	case "gated":
		// As gateway-token, and each acquire waits, after its InitProducerId was answered,
		// until the test writes a byte to the FIFO named by gateEnv: a competitor can mint
		// in between.
		serveWith(func(ctx context.Context, cfg transport.Config) (lineproto.Subject, error) {
			t, err := transport.Start(ctx, cfg)
			if err != nil {
				return nil, err
			}
			return gatedAcquires{t}, nil
		}, lineproto.CapGatewayToken)
	case "late-poll":
		// A pipeline adapter whose poll answers one record a while after the wait it was
		// given ran out, as a client that was busy fetching does.
		sc := bufio.NewScanner(os.Stdin)
		enc := json.NewEncoder(os.Stdout)
		for sc.Scan() {
			var req lineproto.Request
			_ = json.Unmarshal(sc.Bytes(), &req)
			resp := lineproto.Response{ID: req.ID, Outcome: lineproto.OutcomeOK}
			switch req.Op {
			case lineproto.OpHello:
				resp.Version, resp.Workloads = lineproto.Version, []string{lineproto.WorkloadPipelines}
			case lineproto.OpPoll:
				time.Sleep(time.Duration(req.WaitMS)*time.Millisecond + 300*time.Millisecond)
				gen := int32(1)
				resp.Records, resp.MemberID, resp.Generation = []lineproto.Read{{Partition: 0, Offset: 7}}, "m", &gen
			case lineproto.OpClose:
				_ = enc.Encode(resp)
				return
			}
			_ = enc.Encode(resp)
		}
		return
	case "unknown-capability":
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			var req lineproto.Request
			_ = json.Unmarshal(sc.Bytes(), &req)
			_ = json.NewEncoder(os.Stdout).Encode(lineproto.Response{ID: req.ID, Outcome: lineproto.OutcomeOK,
				Version: lineproto.Version, Capabilities: []string{"telepathy"}})
		}
	case "hang-write":
		serve(func(ctx context.Context, cfg transport.Config) (lineproto.Subject, error) {
			t, err := transport.Start(ctx, cfg)
			if err != nil {
				return nil, err
			}
			return hangingWrites{t}, nil
		})
	}
	os.Exit(0)
}

func serve(start lineproto.SubjectStart) { serveWith(start) }

func serveWith(start lineproto.SubjectStart, capabilities ...string) {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := lineproto.Serve(context.Background(), os.Stdin, os.Stdout, log,
		lineproto.Adapter{Name: "test adapter", Start: start, Capabilities: capabilities}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// hangingWrites never answers a lease write: an adapter stuck in a call.
type hangingWrites struct{ *transport.BrokerTransport }

func (hangingWrites) WriteLease(ctx context.Context, _ transport.Role, _ transport.FencingToken, _ transport.Lease) error {
	select {} // until the harness kills the process
}

// gateEnv names the FIFO a gated adapter's acquires wait on.
const gateEnv = "FENCECHECK_LINEPROTO_TEST_GATE"

// gatedAcquires holds every acquire's answer back until the FIFO named by gateEnv yields a
// byte.
type gatedAcquires struct{ *transport.BrokerTransport }

func (g gatedAcquires) AcquireEpoch(ctx context.Context, role transport.Role) (transport.FencingToken, error) {
	tok, err := g.BrokerTransport.AcquireEpoch(ctx, role)
	if f, ferr := os.Open(os.Getenv(gateEnv)); ferr == nil { // blocks until the test opens it to write
		_, _ = f.Read(make([]byte, 1))
		f.Close()
	}
	return tok, err
}

// start returns an Env.New that runs this binary as the adapter in mode.
func start(t testing.TB, mode string) func(ctx context.Context, cfg transport.Config) (transporttest.Transport, error) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return func(ctx context.Context, cfg transport.Config) (transporttest.Transport, error) {
		tr, err := lineproto.Start(ctx, []string{"env", adapterEnv + "=" + mode, self}, cfg)
		if err != nil {
			return nil, err
		}
		return tr, nil
	}
}

func newKfake(t testing.TB, opts ...kfake.Opt) string {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(3)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return strings.Join(c.ListenAddrs(), ",")
}

// countingDial counts the connections made through the process's links: the adapter must make
// every one of its connections through them.
type countingDial struct{ n atomic.Int64 }

func (c *countingDial) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c.n.Add(1)
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// TestConformanceThroughTheProtocol runs the conformance suite on fencecheck's own transport
// behind the protocol, in another process, on kfake.
func TestConformanceThroughTheProtocol(t *testing.T) {
	t.Run("TV2 negotiated", func(t *testing.T) {
		t.Parallel()
		// The suite's "links cut" test cuts the connections its dialer made: an adapter that
		// reached a broker around the gateway would write through the cut.
		var links countingDial
		transporttest.Run(t, transporttest.Env{Bootstrap: newKfake(t), Dial: links.dial, TransactionVersion: 2, New: start(t, "real")})
		if links.n.Load() == 0 {
			t.Fatal("no connection went through the links")
		}
	})
	t.Run("TV1 pinned by the client", func(t *testing.T) {
		t.Parallel()
		transporttest.Run(t, transporttest.Env{Bootstrap: newKfake(t), TransactionVersion: 1,
			PinTransactionVersion: true, New: start(t, "real")})
	})
	// An adapter that answers no token and cannot describe: the harness takes each token from
	// the InitProducerId answer its gateway relayed, keeps the holding, and the suite asks
	// the coordinator itself what the adapter's acquires minted.
	t.Run("gateway-token and no-describe", func(t *testing.T) {
		t.Parallel()
		transporttest.Run(t, transporttest.Env{Bootstrap: newKfake(t), TransactionVersion: 2, New: start(t, "gateway-token")})
	})
}

// TestGatewayTokenIsThePairThatProducerGot: with the gateway-token capability, the token of an
// acquire is what InitProducerId returned to that adapter, even when a competitor mints the
// role again before the adapter answers; the coordinator then reports the competitor's.
func TestGatewayTokenIsThePairThatProducerGot(t *testing.T) {
	cfg := transport.NewConfig(newKfake(t), 10*time.Second)
	cfg.TopicPartitions = 1
	ctx := context.Background()
	gate := filepath.Join(t.TempDir(), "gate")
	if err := syscall.Mkfifo(gate, 0o600); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tr, err := lineproto.Start(ctx, []string{"env", adapterEnv + "=gated", gateEnv + "=" + gate, self}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close(ctx)
	ref, err := transport.Start(ctx, cfg) // the same topic: the default
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close(ctx)

	const role = "r"
	type result struct {
		tok transport.FencingToken
		err error
	}
	acquired := make(chan result, 1)
	go func() {
		tok, err := tr.AcquireEpoch(ctx, role)
		acquired <- result{tok, err}
	}()
	// The adapter's InitProducerId has been answered once the coordinator knows the role.
	var minted transport.FencingToken
	deadline := time.Now().Add(30 * time.Second)
	for {
		tok, held, err := ref.Describe(ctx, role)
		if err == nil && held {
			minted = tok
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the adapter's acquire never reached the coordinator (describe: %v, %v)", held, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	competitor, err := ref.AcquireEpoch(ctx, role)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(gate, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.Write([]byte{1})
	f.Close()
	r := <-acquired
	if r.err != nil {
		t.Fatalf("acquire: %v", r.err)
	}
	if r.tok != minted {
		t.Fatalf("acquire returned %v; its InitProducerId minted %v", r.tok, minted)
	}
	if competitor.Compare(r.tok) <= 0 {
		t.Fatalf("the competitor's %v does not sort after the adapter's %v", competitor, r.tok)
	}
	if now, _, err := ref.Describe(ctx, role); err != nil || now != competitor {
		t.Fatalf("describe after both = %v, %v; want the competitor's %v (what a describe-based token would have taken)", now, err, competitor)
	}
	if got, held := tr.HeldToken(role); !held || got != r.tok {
		t.Fatalf("HeldToken = %v, %v; want %v", got, held, r.tok)
	}
	err = tr.WriteLease(ctx, role, r.tok, transport.Lease{Holder: "m", Seq: 1, Duration: time.Second, WrittenAt: time.Now()})
	if !errors.Is(err, transport.ErrFenced) {
		t.Fatalf("the deposed adapter's write = %v, want ErrFenced", err)
	}
}

// TestUnknownCapabilityIsRefused: an adapter announcing a capability this harness does not
// know does not start, and the error names it (a misspelt capability would otherwise be
// silently ignored).
func TestUnknownCapabilityIsRefused(t *testing.T) {
	cfg := transport.NewConfig(newKfake(t), 10*time.Second)
	_, err := lineprotoStart(t, "unknown-capability", cfg)
	if !errors.Is(err, lineproto.ErrProtocol) || !strings.Contains(err.Error(), `"telepathy"`) {
		t.Fatalf("start = %v; want a protocol error naming the capability", err)
	}
}

// TestHungCallIsUnknownAndTheAdapterReplaced: a lease write the adapter never answers ends at
// the harness's bound as unknown; the adapter is killed and the next call runs on a new one,
// which holds nothing.
func TestHungCallIsUnknownAndTheAdapterReplaced(t *testing.T) {
	cfg := transport.NewConfig(newKfake(t), 10*time.Second)
	cfg.RequestTimeout = time.Second
	cfg.TopicPartitions = 1
	ctx := context.Background()
	tr, err := lineprotoStart(t, "hang-write", cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close(ctx)
	pid := tr.Pid()
	tok, err := tr.AcquireEpoch(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	err = tr.WriteLease(ctx, "r", tok, transport.Lease{Holder: "m", Seq: 1, Duration: time.Second, WrittenAt: time.Now()})
	took := time.Since(began)
	if err == nil || transport.Classify(err) != transport.Unknown {
		t.Fatalf("hung write = %v (Classify %v), want an unknown outcome", err, transport.Classify(err))
	}
	// The bound is the request timeout; five times it is slack for a loaded machine that
	// still fails a write left hanging, which would never be answered.
	if took > 5*cfg.RequestTimeout {
		t.Errorf("hung write took %v; the bound is the request timeout %v (five times it allowed)", took, cfg.RequestTimeout)
	}
	if tr.Restarts() != 1 {
		t.Fatalf("restarts = %d, want 1", tr.Restarts())
	}
	if _, held := tr.HeldToken("r"); held {
		t.Fatal("the replacement adapter reports a holding")
	}
	if tr.Pid() == pid || tr.Pid() == 0 {
		t.Fatalf("adapter pid %d after the restart, was %d", tr.Pid(), pid)
	}
	tok2, err := tr.AcquireEpoch(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	if tok2.Compare(tok) <= 0 {
		t.Fatalf("token after the restart %v does not sort after %v", tok2, tok)
	}
}

// TestSlowBootIsNotAHang: an adapter that takes longer than a call's bound to boot still
// starts: hello and start have the startup bound, not a call's.
func TestSlowBootIsNotAHang(t *testing.T) {
	cfg := transport.NewConfig(newKfake(t), 10*time.Second)
	cfg.RequestTimeout = time.Second // a call's bound: 1 s plus a 1 s margin, under the 3 s boot
	tr, err := lineprotoStart(t, "slow-boot", cfg)
	if err != nil {
		t.Fatalf("an adapter that boots in 3 s did not start: %v", err)
	}
	defer tr.Close(context.Background())
	if _, err := tr.AcquireEpoch(context.Background(), "r"); err != nil {
		t.Fatal(err)
	}
}

func lineprotoStart(t *testing.T, mode string, cfg transport.Config) (*lineproto.Transport, error) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return lineproto.Start(context.Background(), []string{"env", adapterEnv + "=" + mode, self}, cfg)
}

// BenchmarkLeaseWrite measures the protocol's overhead on the lease-write rate: one holder
// renewing its lease as fast as it can, in-process and through the reference adapter, on kfake.
func BenchmarkLeaseWrite(b *testing.B) {
	bootstrap := newKfake(b)
	for _, via := range []string{"in-process", "exec"} {
		b.Run(via, func(b *testing.B) {
			cfg := transport.NewConfig(bootstrap, 10*time.Second)
			cfg.Topic = "bench-" + via
			cfg.TopicPartitions = 1
			ctx := context.Background()
			var tr transporttest.Transport
			var err error
			if via == "exec" {
				tr, err = start(b, "real")(ctx, cfg)
			} else {
				tr, err = transporttest.Start(ctx, cfg)
			}
			if err != nil {
				b.Fatal(err)
			}
			defer tr.Close(ctx)
			tok, err := tr.AcquireEpoch(ctx, "r")
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := range b.N {
				if err := tr.WriteLease(ctx, "r", tok, transport.Lease{Holder: "m", Seq: uint64(i), Duration: time.Second, WrittenAt: time.Now()}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
		})
	}
}

// TestAdapterConformance runs the conformance suite on each adapter of adapters/ (third-party
// clients behind the protocol) on kfake, through one process's links. A client that speaks
// TV1 whatever the cluster finalized is held to TV1's epochs. cluster/local's test of the same
// name runs them on Apache Kafka.
//
// Under the race detector (make test's light lane runs ./transport/... again with -race) only
// Sarama's adapter runs it: the detector sees only this test process, whose side of the
// protocol (lineproto's client, the gateway, the links) is the same code whichever adapter
// answers, and TestConformanceThroughTheProtocol runs the suite through it under -race too;
// the adapters themselves are other processes, not instrumented. The plain run, in the same
// lane, runs every adapter. (Under -race the package took 125 s, most of it these suites.)
func TestAdapterConformance(t *testing.T) {
	for _, client := range adapters.Clients {
		t.Run(client.Name, func(t *testing.T) {
			if client.PipelinesOnly {
				t.Skipf("the %s adapter serves pipelines only: TestAdapterPipelineConformance runs it", client.Name)
			}
			if testenv.Race && client.Name != "sarama" {
				t.Skip("under -race only Sarama's adapter: the plain run covers this one, TestConformanceThroughTheProtocol the protocol's race-checked side")
			}
			if client.Name == "java" {
				// A long test: 49 s of make test's light lane, a JVM per transport. The same
				// suite runs through the Java adapter on Apache Kafka 4.1.2 in make test
				// (cluster/local's TestAdapterConformance), the client's real target; kfake
				// through an exec adapter stays covered by the other three adapters here.
				testenv.Long(t)
			}
			// One adapter at a time: a JVM per transport and the suite's timing bounds do not
			// share two cores with make test's Kafka lane well.
			adapterSuite(t, client, newKfake(t), 2)
		})
	}
}

// TestAdapterConformanceTV1Cluster runs the conformance suite on each adapter of adapters/ on a
// kfake whose transaction.version is finalized at 1, as the embedded backend's TV1 clusters
// are (the matrix's kfake-tv1 column): a client that follows the cluster (kafka-clients,
// krabka) then speaks TV1, and the TV1 clients meet the cluster they were written for. A long
// test: make test runs every adapter on a TV2 kfake (TestAdapterConformance), whose wire is
// the same for the clients that speak TV1 anyway.
func TestAdapterConformanceTV1Cluster(t *testing.T) {
	testenv.Long(t)
	for _, client := range adapters.Clients {
		t.Run(client.Name, func(t *testing.T) {
			if testenv.Race {
				t.Skip("under -race: TestAdapterConformance covers the protocol's race-checked side")
			}
			adapterSuite(t, client, newKfakeTV1(t), 1)
		})
	}
}

// adapterSuite runs the conformance suite on client's adapter against the cluster at bootstrap,
// whose finalized transaction.version is clusterTV, through one process's links: the client is
// held to the version it speaks there, and every connection must cross the links.
func adapterSuite(t *testing.T, client adapters.Client, bootstrap string, clusterTV int) {
	t.Helper()
	argv := testenv.Adapter(t, client.Name)
	tv, pin := client.Speaks(clusterTV)
	var links countingDial
	transporttest.Run(t, transporttest.Env{Bootstrap: bootstrap, Dial: links.dial, TransactionVersion: tv,
		PinTransactionVersion: pin,
		New: func(ctx context.Context, cfg transport.Config) (transporttest.Transport, error) {
			tr, err := lineproto.Start(ctx, argv, cfg)
			if err != nil {
				return nil, err
			}
			return tr, nil
		}})
	if links.n.Load() == 0 {
		t.Fatal("no connection went through the links")
	}
}

// newKfakeTV1 starts a 3-broker kfake whose transaction.version is finalized at 1
// (UpdateFeatures, as cluster/embedded does for TxnVersion 1) and returns its bootstrap list.
func newKfakeTV1(t testing.TB) string {
	t.Helper()
	bootstrap := newKfake(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := kadm.NewClient(cl).UpdateFeatures(ctx, false, kadm.FeatureUpdate{Feature: "transaction.version", MaxVersionLevel: 1, UpgradeType: 2})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("finalize transaction.version 1 on kfake: %v", err)
	}
	return bootstrap
}

// TestPipelineConformanceThroughTheProtocol runs the pipeline conformance suite on
// fencecheck's own members behind the protocol, one adapter process per member, on kfake: the
// gateway pauses them on the wire and reports their offset fetches from it.
func TestPipelineConformanceThroughTheProtocol(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.BrokerConfigs(pipelinetest.KfakeBrokerConfigs()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := func(ctx context.Context, kind string, cfg pipeline.Config) (pipeline.Member, error) {
		if name := os.Getenv(failStartEnv); name != "" && strings.HasSuffix(cfg.TransactionalID, "/"+name) {
			return nil, errors.New("this start fails on purpose")
		}
		m, err := lineproto.StartMember(ctx, []string{"env", adapterEnv + "=pipeline", memberKindEnv + "=" + kind, self}, cfg)
		if err != nil {
			return nil, err
		}
		return m, nil
	}
	for _, kind := range pipeline.Kinds {
		for _, protocol := range []string{pipeline.ProtocolClassic, pipeline.ProtocolConsumer} {
			t.Run(kind+"/"+protocol, func(t *testing.T) {
				if kind != pipeline.KindPlain || protocol != pipeline.ProtocolClassic {
					// The protocol's plumbing is the same for every member: make test runs one
					// (TestConformanceKfake runs each member in-process).
					testenv.Long(t)
				}
				pipelinetest.Run(t, pipelinetest.Env{Bootstrap: c.ListenAddrs()[0], Kind: kind, Protocol: protocol, New: start})
			})
		}
	}
}

// failStartEnv names a member whose start TestPipelineConformanceThroughTheProtocol fails, in
// TestSuiteFailsWithoutHanging's child test process.
const failStartEnv = "FENCECHECK_PIPELINE_FAIL_START"

// TestSuiteFailsWithoutHanging fails a member's start in the middle of the stable-fetch test,
// while another member (an adapter process) is held paused at its commit with its links cut,
// in a child test process: the test must fail at once, naming the member, and not wait for go
// test's timeout with the paused member never let go.
func TestSuiteFailsWithoutHanging(t *testing.T) {
	if os.Getenv(failStartEnv) != "" || os.Getenv(adapterEnv) != "" {
		t.Skip("the child runs the suite only")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	test := "TestPipelineConformanceThroughTheProtocol/" + pipeline.KindPlain + "/" + pipeline.ProtocolClassic + "/stable_fetch"
	cmd := exec.Command(self, "-test.run", "^TestPipelineConformanceThroughTheProtocol$/^"+pipeline.KindPlain+"/"+pipeline.ProtocolClassic+"$/^stable_fetch_-_",
		"-test.v", "-test.count=1", "-test.timeout=3m")
	cmd.Env = append(os.Environ(), failStartEnv+"=b")
	out, err := cmd.CombinedOutput()
	switch {
	case err == nil:
		t.Fatalf("%s passed with member b's start failing:\n%s", test, out)
	case bytes.Contains(out, []byte("test timed out")):
		t.Fatalf("%s hung once member b's start failed:\n%s", test, out)
	case !bytes.Contains(out, []byte("member b: this start fails on purpose")) || !bytes.Contains(out, []byte("--- FAIL: "+test)):
		t.Fatalf("%s did not fail on member b's start:\n%s", test, out)
	}
}

// TestAdapterPipelineConformance runs the pipeline conformance suite on each adapter of
// adapters/ that serves pipelines (internal/adapters), one adapter process per member, on
// kfake. An adapter serves one member of its own, as fencecheck's plain member does (pause
// points before its offsets and its commit, seen on the wire): the suite runs it as that
// kind, and any other kind is refused. make test runs the classic protocol, and an adapter's
// member that adds its offsets by group id alone (GroupIDOnlyArgs: Sarama's) with
// pipelinetest.Env.GroupIDOnly; the consumer protocol is a long test, and a protocol the
// adapter's member does not speak is skipped. cluster/local's test of the same name runs them
// on Apache Kafka. Under the race detector only Sarama's member runs (10 s, a JVM's 35 s), as
// in TestAdapterConformance: the race-checked side is the test process's, the same for every
// adapter.
func TestAdapterPipelineConformance(t *testing.T) {
	for _, client := range adapters.Clients {
		if !client.Pipelines {
			continue
		}
		t.Run(client.Name, func(t *testing.T) {
			if testenv.Race && client.Name != "sarama" {
				t.Skip("under -race only Sarama's adapter: the plain run covers this one, TestPipelineConformanceThroughTheProtocol the protocol's race-checked side")
			}
			if client.Name != "java" {
				// As in TestAdapterConformance: the Java adapter's JVMs first, alone; the
				// others' processes start in a fraction of a second, and their suites, each
				// on a kfake of its own, mostly wait on session timeouts side by side.
				t.Parallel()
			}
			argv := testenv.Adapter(t, client.Name)
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.BrokerConfigs(map[string]string{
				"group.min.session.timeout.ms":         "500",
				"group.consumer.session.timeout.ms":    "2000",
				"group.consumer.heartbeat.interval.ms": "500",
			}))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			for _, protocol := range []string{pipeline.ProtocolClassic, pipeline.ProtocolConsumer} {
				t.Run(protocol, func(t *testing.T) {
					if !client.ServesProtocol(protocol) {
						t.Skipf("the %s adapter's member speaks %v only", client.Name, client.GroupProtocols)
					}
					if protocol != pipeline.ProtocolClassic {
						testenv.Long(t)
					}
					pipelinetest.Run(t, pipelinetest.Env{Bootstrap: c.ListenAddrs()[0], Kind: pipeline.KindPlain, Protocol: protocol,
						GroupIDOnly: client.GroupIDOnly, SelfDriven: client.SelfDriven,
						New: AdapterMember(argv)})
				})
			}
			if client.GroupIDOnlyArgs != nil {
				// The same member adding its offsets by group id alone: its zombie commits.
				t.Run("group-id-only/classic", func(t *testing.T) {
					if testenv.Race {
						t.Skip("under -race: the plain run covers it")
					}
					pipelinetest.Run(t, pipelinetest.Env{Bootstrap: c.ListenAddrs()[0], Kind: pipeline.KindPlain,
						Protocol: pipeline.ProtocolClassic, GroupIDOnly: true, New: AdapterMember(append(slices.Clone(argv), client.GroupIDOnlyArgs...))})
				})
			}
		})
	}
}

// AdapterMember starts a member of an adapter that serves one kind of its own, for the
// pipeline conformance suite: the suite's kind (pipeline.KindPlain, whose pause points it has)
// and no other.
func AdapterMember(argv []string) func(ctx context.Context, kind string, cfg pipeline.Config) (pipeline.Member, error) {
	return func(ctx context.Context, kind string, cfg pipeline.Config) (pipeline.Member, error) {
		if kind != pipeline.KindPlain {
			return nil, fmt.Errorf("%w: kind %q: the adapter serves one member, run as %s", transport.ErrInvalidConfig, kind, pipeline.KindPlain)
		}
		m, err := lineproto.StartMember(ctx, argv, cfg)
		if err != nil {
			return nil, err
		}
		return m, nil
	}
}

// An adapter that serves leases only is refused as a pipeline member, naming the workload.
func TestLeaseOnlyAdapterServesNoPipeline(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := pipeline.Config{Conn: transport.NewConfig(newKfake(t), 10*time.Second), Group: "g", Input: "in", Output: "out", TransactionalID: "g/1"}
	_, err = lineproto.StartMember(context.Background(), []string{"env", adapterEnv + "=real", self}, cfg)
	if !errors.Is(err, transport.ErrInvalidConfig) || !strings.Contains(err.Error(), "pipelines") {
		t.Fatalf("StartMember on a lease adapter: %v, want ErrInvalidConfig naming the pipelines workload", err)
	}
}

// A poll answered after the caller's deadline still returns its records: the adapter's
// consumer has moved past them, so a dropped answer would skip them (a harness bug the
// conformance suite's rebalance and stable-fetch tests showed as lost outputs).
func TestLatePollKeepsItsRecords(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := pipeline.Config{Conn: transport.NewConfig(newKfake(t), 10*time.Second), Group: "g", Input: "in", Output: "out", TransactionalID: "g/1"}
	m, err := lineproto.StartMember(context.Background(), []string{"env", adapterEnv + "=late-poll", self}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	b, err := m.Poll(ctx)
	if len(b.Records) != 1 || b.Records[0].Offset != 7 || b.Generation != 1 {
		t.Fatalf("Poll = %+v, %v; want the record at offset 7 the adapter answered after the deadline", b, err)
	}
}
