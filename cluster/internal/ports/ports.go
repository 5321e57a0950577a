// Package ports picks TCP ports for proxy listeners and broker listeners.
//
// Ports that a fault takes down and brings back (a disabled toxiproxy link, a
// killed broker) must be re-bindable later. A port from the kernel's ephemeral
// range can meanwhile become the local port of some outgoing connection, and
// then the re-bind fails; so we pick below that range, at random, and check.
package ports

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
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

// Free returns a port of r that is free on every one of hosts at the time of
// the call (it binds them all, then lets go). The caller binds it for real
// soon after; a race with another process is possible and shows up as a bind
// error there.
func Free(r Range, hosts ...string) (int, error) {
	if len(hosts) == 0 {
		hosts = []string{"127.0.0.1"}
	}
	var lastErr error
	for range 200 {
		p := Random(r)
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
	}
	if lastErr == nil {
		lastErr = errors.New("no attempt")
	}
	return 0, fmt.Errorf("no free port in [%d,%d) on %v: %w", r.Low, r.High, hosts, lastErr)
}
