//go:build unix

package workload

import "syscall"

// fileLimit returns the soft RLIMIT_NOFILE in effect (Go raises it to the hard limit at
// start on Linux).
func fileLimit() (uint64, bool) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0, false
	}
	return uint64(r.Cur), true
}
