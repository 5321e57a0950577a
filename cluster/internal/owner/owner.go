// Package owner records which fencecheck process started a cluster, so a
// later process can tell that the owner is gone (killed before it could
// clean up) and remove what it left: the containers backend keeps the
// record in container labels, the local backend in a file in its folder.
//
// A pid alone is not enough: pids are reused. An owner is "<pid>/<start
// time>" (the start time in clock ticks since boot, from /proc/<pid>/stat),
// and it only means something in the boot and pid namespace it was taken
// in (Host).
package owner

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Label is "<pid>/<start time>" of process pid, with an empty start time
// when pid does not exist.
func Label(pid int) string {
	return fmt.Sprintf("%d/%s", pid, stat(pid, 19))
}

// Self is the Label of this process.
func Self() string { return Label(os.Getpid()) }

// Host names this boot and pid namespace ("<boot id>/<pid ns>"), the scope
// in which a Label's pid can be checked.
func Host() string {
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	ns, _ := os.Readlink("/proc/self/ns/pid")
	return strings.TrimSpace(string(boot)) + "/" + ns
}

// Gone reports whether the owner a label names has exited. It is false for a
// label taken on another host, boot or pid namespace (its pid says nothing
// here) and for one that does not parse: only an owner known to be gone is.
func Gone(label, host string) bool {
	if host != Host() {
		return false
	}
	pid, _, ok := strings.Cut(label, "/")
	n, err := strconv.Atoi(pid)
	if !ok || err != nil || n <= 0 {
		return false
	}
	return Label(n) != label
}

// Exited reports whether process pid has exited: it does not exist, or it
// is a zombie (dead, waiting for its parent to collect it).
func Exited(pid int) bool {
	st := stat(pid, 0)
	return st == "" || st == "Z" || st == "X"
}

// InGroup reports whether process pid is running (not exited, see Exited) in
// one of the process groups pgids.
func InGroup(pid int, pgids []int) bool {
	if Exited(pid) {
		return false
	}
	pgrp, err := strconv.Atoi(stat(pid, 2)) // after the state: ppid, pgrp
	return err == nil && slices.Contains(pgids, pgrp)
}

// stat returns field i of /proc/<pid>/stat counted from the one after the
// command (0 is the state, 19 the start time), or "" when the process or
// the field is not there. The command may hold spaces and parentheses, so
// fields are counted from its last closing parenthesis.
func stat(pid int, i int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(data)
	if j := strings.LastIndexByte(s, ')'); j >= 0 {
		if f := strings.Fields(s[j+1:]); len(f) > i {
			return f[i]
		}
	}
	return ""
}
