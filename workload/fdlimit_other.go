//go:build !unix

package workload

// fileLimit reports no limit where RLIMIT_NOFILE does not exist.
func fileLimit() (uint64, bool) { return 0, false }
