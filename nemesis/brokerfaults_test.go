package nemesis_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/cluster/links"
	"github.com/fencecheck/fencecheck/nemesis"
)

// The broker faults' bodies: TestBrokerFaults runs them on kfake, TestBrokerFaultsLocalKafka on
// Apache Kafka JVMs, each passing the checks only its brokers can answer as during.

// killCoordinator kills the coordinator of role: metadata from that broker alone fails fast;
// healing restarts it, and it answers again and p1 can acquire role.
func killCoordinator(t *testing.T, f *fixture, role string, during func(t *testing.T, inj *nemesis.Injection, coord cluster.Broker)) {
	coord := f.coordinator(role)
	inj := f.inject(nemesis.Spec{Fault: "kill", Target: nemesis.Target{Brokers: nemesis.CoordinatorOf(role)}})
	if got := inj.Window().Targets; !slices.Equal(got, []string{coord.Name()}) {
		t.Fatalf("targets %v, want %s", got, coord.Name())
	}
	f.failsFast(t, "metadata from "+coord.Name()+" alone", f.listBrokers(coord.Addr))
	if during != nil {
		during(t, inj, coord)
	}
	f.heal(inj)
	f.recovers(t, "metadata from "+coord.Name()+" alone", f.listBrokers(coord.Addr))
	f.recovers(t, "p1 acquire", f.acquire(1, role))
}

// restartBrokers restarts the brokers sel picks (want of them; more than one: rolling, with
// params.Interval between): a connection opened to each before is cut, one to any other
// broker stays open, and p1 can acquire role-1 before and after.
func restartBrokers(t *testing.T, f *fixture, sel nemesis.Selector, want int, params nemesis.Params) {
	f.recovers(t, "p1 acquire before", f.acquire(1, "role-1"))
	bs, _ := f.c.Brokers(context.Background(), cluster.RoleQuery{})
	var conns []net.Conn
	for _, b := range bs {
		c, err := net.Dial("tcp", b.Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	inj := f.inject(nemesis.Spec{Fault: "restart", Target: nemesis.Target{Brokers: sel}, Params: params})
	w := inj.Window()
	if len(w.Targets) != want || want > 1 && !strings.Contains(w.Desc, "rolling") {
		t.Fatalf("window %+v, want a restart of %d brokers (rolling if more than one)", w, want)
	}
	for i, c := range conns {
		c.SetReadDeadline(time.Now().Add(time.Second))
		_, err := c.Read(make([]byte, 1))
		open := err == nil || errors.Is(err, os.ErrDeadlineExceeded)
		switch restarted := slices.Contains(w.Targets, bs[i].Name()); {
		case restarted && open:
			t.Errorf("a connection to %s from before the restart is still open (%v)", bs[i].Name(), err)
		case !restarted && !open:
			t.Errorf("a connection to %s, which was not restarted, was cut: %v", bs[i].Name(), err)
		}
	}
	f.heal(inj)
	f.recovers(t, "p1 acquire", f.acquire(1, "role-1"))
}

// pauseLeader pauses the leader of role's partition: p1's register (a produce to that
// leader) fails fast; after resuming it works.
func pauseLeader(t *testing.T, f *fixture, role string, during func(t *testing.T, inj *nemesis.Injection)) {
	f.recovers(t, "p1 register before", f.register(1, role, 8))
	inj := f.inject(nemesis.Spec{Fault: "pause", Target: nemesis.Target{Brokers: nemesis.LeaderOf(role)}})
	f.failsFast(t, "p1 register (produce to the paused leader)", f.register(1, role, 8))
	if during != nil {
		during(t, inj)
	}
	f.heal(inj)
	f.recovers(t, "p1 register", f.register(1, role, 8))
}

// moveCoordinator moves the coordinator of role: once the fault holds another broker
// coordinates it, and p2 can acquire role there.
func moveCoordinator(t *testing.T, f *fixture, role string) {
	f.recovers(t, "p1 acquire before", f.acquire(1, role))
	from := f.coordinator(role)
	inj := f.inject(nemesis.Spec{Fault: "move-coordinator", Target: nemesis.Target{Role: role}})
	if to := f.coordinator(role); to.ID == from.ID {
		t.Fatalf("coordinator is still %s", from.Name())
	} else {
		t.Logf("coordinator moved %s → %s: %s", from.Name(), to.Name(), inj.Window().Desc)
	}
	f.recovers(t, "p2 acquire on the new coordinator", f.acquire(2, role))
	f.heal(inj)
}

// isolateBroker isolates broker x (which sel picks) from its peers: every peer link from or
// to x refuses connections, every other one carries; after healing all carry.
func isolateBroker(t *testing.T, f *fixture, x int32, sel nemesis.Selector, during func(t *testing.T, inj *nemesis.Injection)) {
	peer := f.peerLinks()
	inj := f.inject(nemesis.Spec{Fault: "isolate", Target: nemesis.Target{Brokers: sel}})
	for k, l := range peer {
		err := dialProxies(l)
		if involved := k[0] == x || k[1] == x; involved && err == nil {
			t.Errorf("peer link %s carries while %s is isolated", l, links.BrokerName(x))
		} else if !involved && err != nil {
			t.Errorf("peer link %s is cut, but %s is isolated, not %v: %v", l, links.BrokerName(x), k, err)
		}
	}
	if during != nil {
		during(t, inj)
	}
	f.heal(inj)
	for _, l := range peer {
		if err := dialProxies(l); err != nil {
			t.Errorf("peer link %s after healing: %v", l, err)
		}
	}
}

// listBrokers is a metadata request from a client that knows only addr.
func listBrokers(addr string) func(context.Context) error { return listBrokersWithin(addr, reqTimeout) }

// listBrokers is listBrokers with the fixture's request timeout.
func (f *fixture) listBrokers(addr string) func(context.Context) error {
	return listBrokersWithin(addr, f.tm.request)
}

// listBrokersWithin is a metadata request from a client that knows only addr, within timeout.
func listBrokersWithin(addr string, timeout time.Duration) func(context.Context) error {
	return func(ctx context.Context) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RetryTimeout(timeout), kgo.DialTimeout(timeout),
			kgo.RequestTimeoutOverhead(timeout))
		if err != nil {
			return err
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		_, err = kadm.NewClient(cl).ListBrokers(ctx)
		return err
	}
}

// dialLink connects over l, through its proxies or, for a link inside the process's
// connections, through the process's dial function, and reports the first failure.
func dialLink(f *fixture, l *links.Link) error {
	if l.Mode() != links.LinkModeConn {
		return dialProxies(l)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	dial, err := f.c.Links(ctx, l.Process())
	if err != nil {
		return err
	}
	bs, err := f.c.Brokers(ctx, cluster.RoleQuery{})
	if err != nil {
		return err
	}
	b, ok := cluster.Find(bs, l.Broker())
	if !ok {
		return fmt.Errorf("no broker %d", l.Broker())
	}
	c, err := dial(ctx, "tcp", b.Addr)
	if err != nil {
		return err
	}
	return c.Close()
}

// dialProxies connects to each proxy of l and reports the first failure.
func dialProxies(l *links.Link) error {
	for _, p := range l.Proxies() {
		c, err := net.DialTimeout("tcp", p.Listen, time.Second)
		if err != nil {
			return err
		}
		c.Close()
	}
	return nil
}
