package nemesis

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fencecheck/fencecheck/cluster"
)

// outcome is what a probe saw.
type outcome int

const (
	answered outcome = iota // the broker answered
	refused                 // connecting failed (a link down, a dead listener)
	closed                  // connected, then cut off before the answer (EOF, reset)
	silent                  // connected, no answer in time (a black hole, a paused broker)
)

func (o outcome) String() string {
	return [...]string{"answered", "refused", "closed", "silent"}[o]
}

// probeResult is one probe's outcome.
type probeResult struct {
	outcome outcome
	rtt     time.Duration // answered: request written to answer read
	err     error         // why not answered
}

func (r probeResult) String() string {
	if r.outcome == answered {
		return fmt.Sprintf("answered in %v", r.rtt.Round(time.Millisecond))
	}
	return fmt.Sprintf("%s (%v)", r.outcome, r.err)
}

// apiVersionsV0 is a Kafka ApiVersions v0 request, correlation id 1: every broker answers it
// on every listener, before authentication, so it tells whether a path to a broker carries
// requests and answers.
var apiVersionsV0 = func() []byte {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 0
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("fencecheck-nemesis")).AppendRequest(nil, req, 1)
}()

// probe sends ApiVersions to addr over a connection made by dial and waits up to wait for the
// answer.
func probe(ctx context.Context, dial cluster.DialFunc, addr string, wait time.Duration) probeResult {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	conn, err := dial(ctx, "tcp", addr)
	if err != nil {
		return probeResult{outcome: refused, err: err}
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	start := time.Now()
	if _, err := conn.Write(apiVersionsV0); err != nil {
		return probeResult{outcome: readOutcome(err), err: err}
	}
	var hdr [8]byte // size, correlation id
	if _, err := io.ReadFull(conn, hdr[:]); err != nil {
		return probeResult{outcome: readOutcome(err), err: err}
	}
	size := int64(binary.BigEndian.Uint32(hdr[:4]))
	if corr := int32(binary.BigEndian.Uint32(hdr[4:])); corr != 1 || size < 4 || size > 1<<20 {
		return probeResult{outcome: closed, err: fmt.Errorf("not a Kafka answer (size %d, correlation id %d)", size, corr)}
	}
	if _, err := io.CopyN(io.Discard, conn, size-4); err != nil {
		return probeResult{outcome: readOutcome(err), err: err}
	}
	return probeResult{outcome: answered, rtt: time.Since(start)}
}

func readOutcome(err error) outcome {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return silent
	}
	return closed
}

// direct dials without links: the harness's own path to a broker's advertised address.
func direct(ctx context.Context, network, addr string) (net.Conn, error) {
	return (&net.Dialer{}).DialContext(ctx, network, addr)
}

// path is one way to reach a broker: a process's link, or direct.
type path struct {
	name   string // "p1->b2", or "b2" for direct
	dial   cluster.DialFunc
	broker cluster.Broker
}

// probeAll probes every path at once and returns the results in order.
func probeAll(ctx context.Context, paths []path, wait time.Duration) []probeResult {
	out := make([]probeResult, len(paths))
	var wg sync.WaitGroup
	for i, p := range paths {
		wg.Go(func() { out[i] = probe(ctx, p.dial, p.broker.Addr, wait) })
	}
	wg.Wait()
	return out
}

// expectAll probes paths until every result satisfies ok, or ctx ends; the error names the
// paths that did not, wrapping fail (ErrNotHeld or ErrNotRecovered).
func expectAll(ctx context.Context, paths []path, wait time.Duration, fail error, ok func(probeResult) bool) error {
	return poll(ctx, fail, func() error { return judge(ctx, paths, wait, ok) })
}

// judge probes paths once and names those whose result does not satisfy ok.
func judge(ctx context.Context, paths []path, wait time.Duration, ok func(probeResult) bool) error {
	var errs []error
	for i, r := range probeAll(ctx, paths, wait) {
		if !ok(r) {
			errs = append(errs, fmt.Errorf("%s: %v", paths[i].name, r))
		}
	}
	return errors.Join(errs...)
}

// poll calls check until it returns nil or ctx ends, then returns check's last error wrapped
// in fail.
func poll(ctx context.Context, fail error, check func() error) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		err := check()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", fail, err)
		case <-tick.C:
		}
	}
}

func isAnswered(r probeResult) bool  { return r.outcome == answered }
func notAnswered(r probeResult) bool { return r.outcome != answered }
