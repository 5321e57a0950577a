package preflight_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/fencecheck/fencecheck/cluster/preflight"
)

// broker starts a kfake cluster of n brokers offering versions (nil: everything kfake has).
func broker(t *testing.T, n int, versions *kversion.Versions) []string {
	t.Helper()
	opts := []kfake.Opt{kfake.NumBrokers(n)}
	if versions != nil {
		opts = append(opts, kfake.MaxVersions(versions))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

func run(t *testing.T, seeds []string) preflight.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := preflight.Run(ctx, preflight.Options{Client: []kgo.Opt{kgo.SeedBrokers(seeds...)}, Bootstrap: seeds,
		StepTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + rep.Table())
	return rep
}

func status(rep preflight.Report) map[string]preflight.Status {
	m := make(map[string]preflight.Status)
	for _, c := range rep.Checks {
		m[c.Name] = c.Status
	}
	return m
}

// TestPreflightPassesOnKfake: kfake does everything the transport needs, and every step of the
// smoke test ran.
func TestPreflightPassesOnKfake(t *testing.T) {
	rep := run(t, broker(t, 3, nil))
	if !rep.OK() || rep.Brokers != 3 {
		t.Fatalf("preflight of kfake: ok %v, %d brokers, missing %v", rep.OK(), rep.Brokers, rep.Missing())
	}
	for _, name := range []string{"EndTxn v0+", "DescribeTransactions v0+", "commit", "aborted record hidden", "stale epoch fenced", "describe"} {
		if status(rep)[name] != preflight.StatusOK {
			t.Errorf("%s: %q, want ok", name, status(rep)[name])
		}
	}
	// kfake answers ListTransactions from the cluster's shared state on every node, so each of
	// its brokers lists the transaction (KAFKA-21481's symptom on Kafka): the advisory check
	// fails, says so, and refuses nothing.
	if got := rep.Advisories(); !slices.Equal(got, []string{"listed by its coordinator only"}) {
		t.Errorf("advisories %q, want the ListTransactions check", got)
	}
	for _, c := range rep.Checks {
		if c.Name == "listed by its coordinator only" && (!c.Advisory || !strings.Contains(c.Detail, "listed by b0, b1, b2")) {
			t.Errorf("the ListTransactions check: %+v, want advisory, every broker listing the transaction", c)
		}
	}
	if !strings.Contains(rep.Table(), "advisory checks that did not pass: listed by its coordinator only") {
		t.Errorf("the table does not name the failed advisory check:\n%s", rep.Table())
	}
}

// TestPreflightNamesWhatABrokerLacks: a broker that routes InitProducerId but not EndTxn or
// DescribeTransactions (as some Kafka-compatible brokers do) fails exactly those, and the smoke
// steps that need them are not tried, each naming what it needed; the steps that can run, run.
func TestPreflightNamesWhatABrokerLacks(t *testing.T) {
	v := kversion.Stable()
	v.SetMaxKeyVersion(kmsg.EndTxn.Int16(), -1)
	v.SetMaxKeyVersion(kmsg.DescribeTransactions.Int16(), -1)
	rep := run(t, broker(t, 1, v))
	if rep.OK() {
		t.Fatal("preflight passed a broker without EndTxn and DescribeTransactions")
	}
	if got, want := rep.Missing(), []string{"EndTxn v0+", "DescribeTransactions v0+"}; !slices.Equal(got, want) {
		t.Fatalf("missing %v, want %v", got, want)
	}
	want := []string{"commit", "abort", "commit after abort", "read_committed", "committed record visible",
		"aborted record hidden", "stale epoch fenced", "describe"}
	if got := rep.NotTried(); !slices.Equal(got, want) {
		t.Fatalf("not tried %v, want %v", got, want)
	}
	st := status(rep)
	for _, name := range []string{"InitProducerID v0+", "create a topic", "acquire"} {
		if st[name] != preflight.StatusOK {
			t.Errorf("%s: %q, want ok", name, st[name])
		}
	}
	for _, c := range rep.Checks {
		switch c.Name {
		case "commit":
			if c.Status != preflight.StatusNotTried || c.Detail != "needs EndTxn" {
				t.Errorf("commit: %s (%s), want not tried: needs EndTxn", c.Status, c.Detail)
			}
		case "describe":
			if c.Status != preflight.StatusNotTried || c.Detail != "needs DescribeTransactions" {
				t.Errorf("describe: %s (%s)", c.Status, c.Detail)
			}
		case "EndTxn v0+":
			if c.Detail != "b0 does not offer it" {
				t.Errorf("EndTxn: %q, want the broker named", c.Detail)
			}
		}
	}
}

// TestPreflightNamesABrokerThatDropsKIP1242: a broker that closes a connection whose
// ApiVersions v5 names the cluster and the node (KIP-1242; franz-go sends them on every
// connection but the first to a seed) fails that check alone, and the preflight goes on at
// ApiVersions v4 to check the rest: here everything else passes.
func TestPreflightNamesABrokerThatDropsKIP1242(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	var dropped atomic.Int32 // the control function runs on kfake's goroutine
	c.ControlKey(kmsg.ApiVersions.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if r := req.(*kmsg.ApiVersionsRequest); r.Version >= 5 && r.ClusterID != nil {
			dropped.Add(1)
			return nil, errors.New("closing: KIP-1242 fields"), true
		}
		return nil, nil, false
	})
	rep := run(t, c.ListenAddrs())
	if got, want := rep.Missing(), []string{"ApiVersions v5 naming the cluster (KIP-1242)"}; !slices.Equal(got, want) || len(rep.NotTried()) > 0 {
		t.Fatalf("missing %v, not tried %v; want only %v", got, rep.NotTried(), want)
	}
	if dropped.Load() == 0 {
		t.Fatal("no ApiVersions named the cluster: the test did not test the case")
	}
}
