package workload

import (
	"context"
	"errors"
	"testing"

	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/cluster/links"
)

// TestFDModel pins the descriptor model to the figures TestScale measured on the embedded
// cluster with in-process links: the estimate must cover them without being far above.
func TestFDModel(t *testing.T) {
	m := fdModel{brokers: 3, perConn: 4, listeners: 3} // embedded, in-process toxiproxy
	for _, tc := range []struct {
		name                      string
		processes, roles, readers int
		measured                  int // peak open descriptors of the run's processes
	}{
		{"300 processes × 1 role (300 members), 30 readers", 300, 1, 30, 10665 - 10},
		{"100 processes × 5 roles (100 members each), 10 readers", 100, 5, 10, 5281 - 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _ := Preset(PresetLow)
			cfg.Processes, cfg.Roles, cfg.MembersPerRole, cfg.Readers = tc.processes, tc.roles, tc.processes, tc.readers
			procs, producers := m.run(cfg)
			est := procs + producers
			if est < tc.measured || float64(est) > 1.15*float64(tc.measured) {
				t.Fatalf("estimate %d (%d + %d producers), measured %d", est, procs, producers, tc.measured)
			}
		})
	}
	t.Run("conn links - none a connection on embedded (in-memory pipes), one on Kafka", func(t *testing.T) {
		ctx := context.Background()
		net, err := links.NewNetwork(ctx, links.NetworkOptions{ProcessLinks: links.LinkModeConn})
		if err != nil {
			t.Fatal(err)
		}
		defer net.Close(ctx)
		if got := newFDModel(cluster.Info{Kind: "embedded", Brokers: 3}, net); got.perConn != 0 || got.listeners != 0 {
			t.Fatalf("embedded model %+v", got)
		}
		if got := newFDModel(cluster.Info{Kind: "local", Brokers: 3}, net); got.perConn != 1 || got.listeners != 0 {
			t.Fatalf("local model %+v", got)
		}
	})
	t.Run("external links and brokers - one descriptor a connection", func(t *testing.T) {
		if got := newFDModel(cluster.Info{Kind: "external", Brokers: 3}, nil); got.perConn != 1 || got.listeners != 0 {
			t.Fatalf("model %+v", got)
		}
	})
}

// TestFileLimit: under the 20,000-descriptor limit of the CI machines, 500 processes each
// playing one role fit and 600 (where a prototype collapsed) are refused.
func TestFileLimit(t *testing.T) {
	info := cluster.Info{Kind: "embedded", Brokers: 3}
	m := fdModel{brokers: 3, perConn: 4, listeners: 3}
	cfg, _ := Preset(PresetLow)
	cfg.Roles, cfg.Readers = 1, 10
	for _, tc := range []struct {
		processes int
		refused   bool
	}{{500, false}, {600, true}} {
		cfg.Processes, cfg.MembersPerRole = tc.processes, tc.processes
		err := m.check(cfg, info, 20000, 20)
		if refused := errors.Is(err, ErrFileLimit); refused != tc.refused {
			t.Errorf("%d processes: %v, want refused %v", tc.processes, err, tc.refused)
		}
	}
}

// TestFileLimitConnLinks: with conn links, the fleet of 2,000 one-role processes in 400 roles
// of 5 fits under 20,000 descriptors on the embedded cluster (in-memory pipes) and is refused,
// naming the numbers, on local Kafka (a socket a connection); the dense fleet of 500 processes
// fits on both.
func TestFileLimitConnLinks(t *testing.T) {
	cfg, _ := Preset(PresetLow)
	cfg.Roles, cfg.MembersPerRole = 400, 5
	for _, tc := range []struct {
		kind      string
		perConn   int
		processes int
		refused   bool
	}{{"embedded", 0, 2000, false}, {"embedded", 0, 500, false}, {"local", 1, 2000, true}, {"local", 1, 500, false}} {
		cfg.Processes, cfg.Readers = tc.processes, tc.processes/10
		m := fdModel{brokers: 3, perConn: tc.perConn}
		err := m.check(cfg, cluster.Info{Kind: tc.kind, Brokers: 3}, 20000, 20)
		if refused := errors.Is(err, ErrFileLimit); refused != tc.refused {
			t.Errorf("%d processes on %s: %v, want refused %v", tc.processes, tc.kind, err, tc.refused)
		}
		if err != nil {
			t.Log(err)
		}
	}
}
