//go:build !kafka

package pipeline

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/transport/pipeline"
)

// TestGateStallsConnections: while the gate is stalled a connection's writes do not reach the
// peer and its reads deliver nothing, until the release; a deadline ends the wait as a timeout
// (as a silent peer would), and Close ends it at once. Open, bytes pass.
func TestGateStallsConnections(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	peers := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			peers <- c
		}
	}()
	g := &gate{}
	var d net.Dialer
	dial := g.dial(func(ctx context.Context, network, addr string) (net.Conn, error) {
		return d.DialContext(ctx, network, addr)
	})
	c, err := dial(context.Background(), "tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	peer := <-peers
	defer peer.Close()

	// Open: a byte each way.
	if _, err := c.Write([]byte("a")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1)
	if _, err := peer.Read(buf); err != nil || buf[0] != 'a' {
		t.Fatalf("peer read %q, %v", buf, err)
	}

	g.stall()
	wrote := make(chan error, 1)
	go func() { _, err := c.Write([]byte("b")); wrote <- err }()
	// The peer sees nothing while stalled: its read times out.
	peer.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := peer.Read(buf); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("peer read %d bytes (%v) while the gate was stalled", n, err)
	}
	// A read with a deadline ends at the deadline, as a timeout.
	c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("stalled read: %v, want a deadline error", err)
	}
	c.SetReadDeadline(time.Time{})
	g.release()
	if err := <-wrote; err != nil {
		t.Fatalf("the held write: %v", err)
	}
	peer.SetReadDeadline(time.Time{})
	if _, err := peer.Read(buf); err != nil || buf[0] != 'b' {
		t.Fatalf("after the release the peer read %q, %v", buf, err)
	}

	// Close ends a stalled wait at once.
	g.stall()
	read := make(chan error, 1)
	go func() { _, err := c.Read(buf); read <- err }()
	c.Close()
	select {
	case err := <-read:
		if err == nil {
			t.Fatal("a read on a closed connection succeeded")
		}
	case <-time.After(30 * time.Second): // a guard: Close ends it at once
		t.Fatal("Close did not end a stalled read")
	}
	g.release()
}

// TestFreezeArmsAndThaws: a freeze armed for a member the run does not have is refused; Thaw
// disarms one not reached; Owner skips a frozen member.
func TestFreezeArmsAndThaws(t *testing.T) {
	wl := &Workload{cfg: Config{Partitions: 2}, start: time.Now()}
	m1 := &member{wl: wl, name: "m1", processN: 1, gate: &gate{}, held: map[int32]int64{0: 5}}
	m2 := &member{wl: wl, name: "m2", processN: 2, gate: &gate{}, held: map[int32]int64{0: 3}}
	wl.members = []*member{m1, m2}
	if err := wl.Freeze("m9", "", time.Second); !errors.Is(err, ErrNoMember) {
		t.Errorf("freeze of m9: %v", err)
	}
	if err := wl.Freeze("m1", "before-lease-commit", time.Second); !errors.Is(err, ErrConfig) {
		t.Errorf("freeze at an unknown point: %v", err)
	}
	wl.cfg.Member = pipeline.KindSession
	if err := wl.Freeze("m1", PointBeforeCommit, time.Second); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), PointAfterProduce) {
		t.Errorf("freeze of a session member before its commit: %v, want an error naming the points it has", err)
	}
	wl.cfg.Member = pipeline.KindPlain
	if o, ok := wl.Owner("in0"); !ok || o.Member != "m1" || o.Process != 1 {
		t.Errorf("owner of in0: %+v %v, want m1 (polled it last)", o, ok)
	}
	if err := wl.Freeze("m1", PointAfterPoll, time.Minute); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	m1.pausePoint(context.Background(), PointAfterProduce) // not the point armed: passes
	go func() { m1.pausePoint(context.Background(), PointAfterPoll); close(done) }()
	for !wl.Frozen("m1") {
		time.Sleep(time.Millisecond)
	}
	if o, _ := wl.Owner("in0"); o.Member != "m2" {
		t.Errorf("owner of in0 while m1 is frozen: %+v, want m2", o)
	}
	wl.Thaw("m1")
	<-done
	froze, resumed, ok := wl.LastFreeze("m1")
	if !ok || resumed < froze || wl.Frozen("m1") {
		t.Errorf("last freeze %v–%v %v, frozen %v", froze, resumed, ok, wl.Frozen("m1"))
	}
	// Disarmed before it is reached: the pause point passes.
	if err := wl.Freeze("m2", "", time.Minute); err != nil {
		t.Fatal(err)
	}
	wl.Thaw("m2")
	wl.Thaw("m2") // twice is not an error
	m2.pausePoint(context.Background(), PointAfterPoll)
	if _, _, ok := wl.LastFreeze("m2"); ok {
		t.Error("a disarmed freeze took hold")
	}
	if _, ok := wl.Owner("in7"); ok {
		t.Error("an owner of a partition the run does not have")
	}
}

// TestOwnerIsTheMemberAssignedLast: a member the group just gave a partition is its holder
// before it polls any of its records, so a freeze of the holder does not wait on the member
// that polled it last and has lost it (and, polling nothing else, would never reach a pause
// point). A rewind's fetch is of what the member thought it held, and changes nothing.
func TestOwnerIsTheMemberAssignedLast(t *testing.T) {
	wl := &Workload{cfg: Config{Partitions: 2}, start: time.Now().Add(-time.Second),
		w: history.NewWriter(io.Discard, history.WriterOptions{})}
	m1 := &member{wl: wl, name: "m1", processN: 1, gate: &gate{}, held: map[int32]int64{0: 5}}
	m2 := &member{wl: wl, name: "m2", processN: 2, gate: &gate{}, held: map[int32]int64{}}
	m3 := &member{wl: wl, name: "m3", processN: 2, gate: &gate{}, held: map[int32]int64{}}
	wl.members = []*member{m1, m2, m3}
	m2.fetched(pipeline.Fetch{Starts: map[int32]int64{0: 40, 1: 7}, MemberID: "b", Generation: 3})
	if o, ok := wl.Owner("in0"); !ok || o.Member != "m2" {
		t.Errorf("owner of in0 after m2's assignment: %+v %v, want m2", o, ok)
	}
	m3.fetched(pipeline.Fetch{Starts: map[int32]int64{0: 40}, MemberID: "c", Generation: 3, Rewind: true})
	if o, _ := wl.Owner("in0"); o.Member != "m2" {
		t.Errorf("owner of in0 after m3's rewind: %+v, want m2 still", o)
	}
	if err := wl.failed(); err != nil {
		t.Fatal(err)
	}
}
