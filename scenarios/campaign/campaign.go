// Package campaign holds what the campaigns share, the commands that run many scenarios
// (suite, soak, selftest, shrink): a lock a run holds against other heavy jobs, fresh seeds,
// and a bounded set of runs side by side. It knows nothing of what a run is.
package campaign

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"fmt"
	"os"
	"sync"
	"syscall"
)

// Lock takes an exclusive flock on path, waiting for it, or returns ctx's error when ctx ends
// first. The flock blocks in the kernel, so a campaign queues with other jobs that block on
// the same lock (polling would lose every race to them); a wait abandoned on Ctrl-C releases
// the lock as soon as it is granted. The file is opened close-on-exec, so the brokers a run
// starts never inherit, and never keep, the lock. waiting (if not nil) is called when the lock
// is not free at once. Errors name the flag, --lock.
func Lock(ctx context.Context, path string, waiting func()) (unlock func(), err error) {
	fh, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return nil, fmt.Errorf("--lock: %w", err)
	}
	fd := int(fh.Fd())
	if syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB) == nil {
		return func() { fh.Close() }, nil
	}
	if waiting != nil {
		waiting()
	}
	got := make(chan error, 1)
	go func() { got <- syscall.Flock(fd, syscall.LOCK_EX) }()
	select {
	case err := <-got:
		if err != nil {
			fh.Close()
			return nil, fmt.Errorf("--lock %s: %w", path, err)
		}
		return func() { fh.Close() }, nil // closing the file releases the lock
	case <-ctx.Done():
		go func() {
			<-got
			fh.Close()
		}()
		return nil, ctx.Err()
	}
}

// FreshSeed is a random root seed (never 0, which means "pick one"), chosen by the campaign so
// that it can say the seed before the run starts.
func FreshSeed() uint64 {
	var b [8]byte
	_, _ = crand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:])>>1 + 1
}

// Each calls run(i) for every i in [0, n), at most width at a time, in order of i. After the
// first error, or once ctx ends, no new call starts; Each returns that error once the started
// calls have returned (nil when ctx ended without one: the caller knows it was interrupted).
func Each(ctx context.Context, width, n int, run func(i int) error) error {
	var (
		mu    sync.Mutex
		next  int
		first error
		wg    sync.WaitGroup
	)
	for range min(max(width, 1), n) {
		wg.Go(func() {
			for {
				mu.Lock()
				if next == n || first != nil || ctx.Err() != nil {
					mu.Unlock()
					return
				}
				i := next
				next++
				mu.Unlock()
				if err := run(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return first
}
