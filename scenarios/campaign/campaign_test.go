package campaign

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestLock: the lock waits while another holder has it, is granted when it is released, and
// gives up at once when the context ends (Ctrl-C), releasing the lock it was still waiting for
// as soon as that is granted.
func TestLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "heavy.lock")
	hold := func() *os.File {
		fh, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o666)
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Flock(int(fh.Fd()), syscall.LOCK_EX); err != nil {
			t.Fatal(err)
		}
		return fh
	}
	other := hold()
	granted, waited := make(chan func(), 1), make(chan struct{})
	go func() {
		unlock, err := Lock(context.Background(), path, func() { close(waited) })
		if err != nil {
			t.Error(err)
		}
		granted <- unlock
	}()
	select {
	case <-granted:
		t.Fatal("Lock returned while another process held the lock")
	case <-time.After(300 * time.Millisecond): // a wait that must not end: nothing to await
	}
	<-waited // it said it was waiting
	other.Close()
	unlock := <-granted
	// Held by Lock now: a non-blocking attempt by another file must fail.
	probe, _ := os.OpenFile(path, os.O_RDWR, 0)
	defer probe.Close()
	if err := syscall.Flock(int(probe.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
		t.Fatal("the lock was not held after Lock returned")
	}
	unlock()

	other = hold()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := Lock(ctx, path, nil)
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock after cancel: %v, want context.Canceled", err)
	}
	other.Close()
	// The abandoned wait is granted the lock and must let it go again.
	last := hold()
	last.Close()
}

// TestEach: every index runs once, never more than width at a time; after an error no new
// call starts and the error is returned.
func TestEach(t *testing.T) {
	var running, most, calls atomic.Int32
	seen := make([]atomic.Int32, 20)
	err := Each(context.Background(), 3, 20, func(i int) error {
		n := running.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		seen[i].Add(1)
		calls.Add(1)
		time.Sleep(time.Millisecond) // let calls overlap; the assertion does not wait on it
		running.Add(-1)
		return nil
	})
	if err != nil || calls.Load() != 20 || most.Load() > 3 {
		t.Fatalf("err %v, %d calls, at most %d at a time; want nil, 20, ≤3", err, calls.Load(), most.Load())
	}
	for i := range seen {
		if seen[i].Load() != 1 {
			t.Errorf("index %d ran %d times", i, seen[i].Load())
		}
	}
	boom := errors.New("boom")
	calls.Store(0)
	err = Each(context.Background(), 1, 10, func(i int) error {
		calls.Add(1)
		if i == 2 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || calls.Load() != 3 {
		t.Errorf("err %v after %d calls, want boom after 3", err, calls.Load())
	}
	if FreshSeed() == 0 {
		t.Error("FreshSeed gave 0")
	}
}
