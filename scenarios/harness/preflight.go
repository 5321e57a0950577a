package harness

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/cluster/preflight"
	"github.com/fencecheck/fencecheck/scenarios"
)

// ErrBrokerCannot marks a run the preflight refused: the cluster lacks an API or a transaction
// behaviour that the transport and the checks rest on, so no verdict about fencing could be
// given on it.
var ErrBrokerCannot = errors.New("the broker cannot do what fencecheck needs")

// PreflightReport is what the preflight found (see Preflight).
type PreflightReport = preflight.Report

// Preflight asks the cluster at bootstrap, with security sec (nil: plaintext), whether it can do
// what fencecheck needs: the API versions the transport uses and one smoke transaction of each
// kind (docs/clusters.md#preflight). It needs no links and no healthy cluster: a broker that
// answers nothing the harness's health checks need still gets its table. An error means no
// broker could be reached.
func Preflight(ctx context.Context, bootstrap []string, sec *cluster.Security) (PreflightReport, error) {
	opts := append([]kgo.Opt{kgo.SeedBrokers(bootstrap...)}, sec.KgoOpts()...)
	return preflight.Run(ctx, preflight.Options{Client: opts, Bootstrap: bootstrap})
}

// PreflightCluster is Preflight on a cluster fencecheck started or connected to.
func PreflightCluster(ctx context.Context, cl cluster.Cluster) (PreflightReport, error) {
	return Preflight(ctx, cl.Bootstrap(), cluster.ClientSecurity(cl))
}

// PreflightSpec is Preflight on the external cluster spec names, before fencecheck connects to
// it; it fails on a spec that is not of an external cluster.
func PreflightSpec(ctx context.Context, spec scenarios.ClusterSpec) (PreflightReport, error) {
	if spec.Kind != scenarios.KindExternal {
		return PreflightReport{}, fmt.Errorf("cluster.kind %s: only an external cluster is probed before it is started", spec.Kind)
	}
	if err := spec.Validate(); err != nil {
		return PreflightReport{}, err
	}
	sec, err := externalSecurity(spec.Security)
	if err != nil {
		return PreflightReport{}, err
	}
	return Preflight(ctx, bootstrapList(spec.Bootstrap), sec)
}

// preflightRun is the preflight before a run on an external cluster, the one kind fencecheck
// did not build and so cannot vouch for: before connecting to it (cl nil), whose health checks
// could wait forever on a broker that lacks what they send, or on the shared cluster of a suite.
// It fails with ErrBrokerCannot, naming what is missing, when the broker cannot give a verdict.
func (r *runner) preflightRun(ctx context.Context, cl cluster.Cluster) error {
	if r.s.Cluster.Kind != scenarios.KindExternal {
		return nil
	}
	var rep PreflightReport
	var err error
	if cl != nil {
		rep, err = PreflightCluster(ctx, cl)
	} else {
		rep, err = PreflightSpec(ctx, r.s.Cluster)
	}
	if err != nil {
		return fmt.Errorf("preflight: %w", err)
	}
	table := strings.TrimRight(rep.Table(), "\n")
	r.log.Info(table)
	if !rep.OK() {
		fmt.Fprintln(r.opts.Console, table)
		return fmt.Errorf("%w: %s", ErrBrokerCannot, rep.Summary())
	}
	return nil
}
