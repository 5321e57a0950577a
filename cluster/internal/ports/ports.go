// Package ports picks TCP ports for proxy listeners and broker listeners.
//
// Ports that a fault takes down and brings back (a disabled toxiproxy link, a
// killed broker) must be re-bindable later. A port from the kernel's ephemeral
// range can meanwhile become the local port of some outgoing connection, and
// then the re-bind fails; so we pick below that range, at random, and check.
//
// Checking that a port is free is not enough when several fencecheck
// processes share the machine (the two test lanes, parallel runs): while a
// link is down its port is unbound, and another process's check would find it
// free and take it. So every port handed out is also claimed machine-wide (see
// Claim) until its owner releases it or exits.
package ports

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Range is a half-open port range [Low, High).
type Range struct{ Low, High int }

var (
	defaultOnce  sync.Once
	defaultRange Range

	rngMu sync.Mutex
	rng   *mrand.Rand
)

// Default is the range below the kernel's ephemeral ports (from
// /proc/sys/net/ipv4/ip_local_port_range), starting at 10000; when that leaves
// fewer than 2000 ports, the range above the ephemeral ports.
func Default() Range {
	defaultOnce.Do(func() {
		lo, hi := 32768, 60999
		if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
			f := strings.Fields(string(b))
			if len(f) == 2 {
				l, err1 := strconv.Atoi(f[0])
				h, err2 := strconv.Atoi(f[1])
				if err1 == nil && err2 == nil && l <= h {
					lo, hi = l, h
				}
			}
		}
		switch {
		case lo-10000 >= 2000:
			defaultRange = Range{10000, lo}
		case 65535-hi >= 2000:
			defaultRange = Range{hi + 1, 65536}
		default:
			defaultRange = Range{1024, 65536} // no gap: take our chances
		}
	})
	return defaultRange
}

// Random returns a random port of r. The source is seeded from crypto/rand:
// port choice is not one of the run's reproducible decisions.
func Random(r Range) int {
	rngMu.Lock()
	defer rngMu.Unlock()
	if rng == nil {
		var seed [16]byte
		_, _ = rand.Read(seed[:])
		rng = mrand.New(mrand.NewPCG(binary.LittleEndian.Uint64(seed[:8]), binary.LittleEndian.Uint64(seed[8:])))
	}
	return r.Low + rng.IntN(r.High-r.Low)
}

// Free returns a port of r that no fencecheck process on the machine has
// claimed and that is free on every one of hosts at the time of the call (it
// binds them all, then lets go). The port is claimed for this process; give
// it back with Release when done with it. The caller binds it for real soon
// after; a race with a process that does not claim ports is possible and
// shows up as a bind error there.
func Free(r Range, hosts ...string) (int, error) {
	if len(hosts) == 0 {
		hosts = []string{"127.0.0.1"}
	}
	var lastErr error
	for range 200 {
		p := Random(r)
		if !Claim(p) {
			lastErr = fmt.Errorf("port %d is claimed by another fencecheck process", p)
			continue
		}
		var lns []net.Listener
		ok := true
		for _, h := range hosts {
			ln, err := net.Listen("tcp", net.JoinHostPort(h, strconv.Itoa(p)))
			if err != nil {
				lastErr = err
				ok = false
				break
			}
			lns = append(lns, ln)
		}
		for _, ln := range lns {
			ln.Close()
		}
		if ok {
			return p, nil
		}
		Release(p)
	}
	if lastErr == nil {
		lastErr = errors.New("no attempt")
	}
	return 0, fmt.Errorf("no free port in [%d,%d) on %v: %w", r.Low, r.High, hosts, lastErr)
}

// ClaimDir is the folder of claims, one file per claimed port holding the
// claiming process's id. It is fixed rather than under TMPDIR so that
// processes with different TMPDIRs (tests set their own) still see each
// other's claims. Tests of this package point it elsewhere.
var ClaimDir = filepath.Join("/tmp", "fencecheck-ports-"+strconv.Itoa(os.Getuid()))

var claimMu sync.Mutex // serializes this process's claims; the flock serializes processes

// Claim claims port p for this process and reports whether it got it: false
// when a live process (this one included) holds it. A claim whose process is
// gone is taken over. Claims cost no file descriptor while held. When the
// claim folder cannot be used, Claim returns true: claiming is a guard
// against other fencecheck processes, and a machine without it only loses
// that guard.
func Claim(p int) bool {
	claimMu.Lock()
	defer claimMu.Unlock()
	unlock, err := lockClaims()
	if err != nil {
		return true
	}
	defer unlock()
	path := filepath.Join(ClaimDir, strconv.Itoa(p))
	if b, err := os.ReadFile(path); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && alive(pid) {
			return false
		}
	}
	// Absent, unreadable or stale: (re)write it with our pid.
	_ = os.WriteFile(path, []byte(strconv.Itoa(os.Getpid())), 0o644)
	return true
}

// Release gives back ports this process claimed. A port claimed by another
// process is left alone.
func Release(ps ...int) {
	if len(ps) == 0 {
		return
	}
	claimMu.Lock()
	defer claimMu.Unlock()
	unlock, err := lockClaims()
	if err != nil {
		return
	}
	defer unlock()
	me := strconv.Itoa(os.Getpid())
	for _, p := range ps {
		path := filepath.Join(ClaimDir, strconv.Itoa(p))
		if b, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(b)) == me {
			_ = os.Remove(path)
		}
	}
}

// lockClaims takes the machine-wide lock on the claim folder, creating it.
// Held for microseconds: one read and one write.
func lockClaims() (unlock func(), err error) {
	if err := os.MkdirAll(ClaimDir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(ClaimDir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil // closing the file drops the lock
}

// alive reports whether a process with this id exists (EPERM: it exists
// but is another user's).
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
