package workload

import (
	"errors"
	"fmt"
	"os"

	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/cluster/links"
)

// ErrFileLimit marks a refusal to start: the file-descriptor limit cannot hold the requested
// processes.
var ErrFileLimit = errors.New("file-descriptor limit too low")

// fdMargin is left for everything else: the history file, logs, the toxiproxy API,
// the final reads, a local cluster's pipes.
const fdMargin = 256

// fdModel estimates the file descriptors of a run on a cluster. Every broker connection
// costs the client's socket, two sockets of an in-process proxy and one of an in-process
// (kfake) broker; every link has a listener when toxiproxy runs in this process. Process links
// of the conn mode (links.LinkModeConn) live inside the client's connection: no proxy
// sockets and no listener; on the embedded cluster that connection is an in-memory pipe to
// kfake, so a process costs no descriptor at all (measured: TestScale with conn links; with
// TCP to kfake instead, 14.3 per process at 300 processes × 1 role, model 18).
//
// A process's admin client keeps a seed connection and up to four connections per broker
// (kgo's request, produce, fetch and coordinator kinds): two per broker for requests any
// broker serves, and two more per broker that leads one of the partitions or coordinates one
// of the roles it works on. A reader works on every role. Measured on the embedded cluster
// with in-process links (TestScale): 35.5 descriptors per process at 300 processes × 1 role
// (model: 39), 52.7 at 100 processes × 5 roles (model: 55); see TestFDModel.
type fdModel struct {
	brokers, perConn, listeners int
}

func newFDModel(info cluster.Info, net *links.Network) fdModel {
	m := fdModel{brokers: max(1, info.Brokers), perConn: 1}
	conn := net != nil && net.ProcessLinkMode() == links.LinkModeConn
	if net != nil && !net.External() && !conn {
		m.perConn += 2
		m.listeners = m.brokers
	}
	switch {
	case info.Kind == "embedded" && conn:
		m.perConn = 0 // in-memory pipes to kfake
	case info.Kind == "embedded":
		m.perConn++
	}
	return m
}

// process returns the descriptors of a process that works on `roles` roles.
func (m fdModel) process(roles int) int {
	conns := 1 + 2*m.brokers + 2*min(m.brokers, roles)
	return m.listeners + conns*m.perConn
}

// run returns the descriptors of cfg's processes, and those of the holders' producers: each
// role's holder, and a deposed holder that has not noticed yet, keep a producer connected
// to the role's coordinator and its partition's leader (at most two brokers).
func (m fdModel) run(cfg Config) (processes, producers int) {
	members := make([]int, cfg.Processes)
	for r := range cfg.Roles {
		for j := range cfg.MembersPerRole {
			members[cfg.processOf(r, j)-1]++
		}
	}
	for i, n := range members {
		if i < cfg.Readers {
			n = cfg.Roles
		}
		processes += m.process(n)
	}
	return processes, cfg.Roles * 2 * min(m.brokers, 2) * m.perConn
}

// checkFileLimit refuses a run whose processes would exhaust RLIMIT_NOFILE: a run that runs
// out of descriptors fails in every connection at once (a prototype collapsed at 600
// processes), which the checker cannot tell from a fault.
func checkFileLimit(cfg Config, info cluster.Info, net *links.Network) error {
	limit, ok := fileLimit()
	if !ok {
		return nil
	}
	return newFDModel(info, net).check(cfg, info, limit, openFiles())
}

// check returns ErrFileLimit, with the numbers, when cfg does not fit under limit with open
// descriptors already in use.
func (m fdModel) check(cfg Config, info cluster.Info, limit uint64, open int) error {
	procs, producers := m.run(cfg)
	need := uint64(open + procs + producers + fdMargin)
	if need <= limit {
		return nil
	}
	per := float64(procs) / float64(cfg.Processes)
	fit := 0
	if free := int(limit) - open - producers - fdMargin; free > 0 {
		fit = int(float64(free) / per)
	}
	return fmt.Errorf("%d processes need about %d file descriptors (%d open now + %.1f per process on a %d-broker %s cluster + %d for the holders' producers + %d spare), but RLIMIT_NOFILE is %d: run at most about %d processes, or raise the limit (ulimit -n): %w",
		cfg.Processes, need, open, per, info.Brokers, info.Kind, producers, fdMargin, limit, fit, ErrFileLimit)
}

// openFiles counts this process's open descriptors (0 where /proc is missing).
func openFiles() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	return len(ents)
}
