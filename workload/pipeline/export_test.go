//go:build !kafka

package pipeline

import "time"

// SetLookBound bounds wl's final look at open transactions: a test that leaves one open need
// not wait the transaction timeout and 15 s.
func SetLookBound(wl *Workload, d time.Duration) { wl.lookFor = d }
