package nemesis

import (
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/cluster"
	"github.com/fencecheck/fencecheck/internal/units"
)

// FaultInfo is a registered fault as the CLI lists it ("fencecheck faults list").
type FaultInfo struct {
	Name        string
	Description string // one line
}

// Faults returns every registered fault with its one-line description, sorted by name.
func Faults() []FaultInfo {
	out := make([]FaultInfo, 0, len(registry))
	for _, d := range registry {
		out = append(out, FaultInfo{Name: d.name, Description: d.summary})
	}
	slices.SortFunc(out, func(a, b FaultInfo) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// definition is a registered fault.
type definition struct {
	name    string
	summary string
	kind    history.Kind // the window's kind in the history; default name
	uses    uses
	params  []string // the parameters it takes (json names)
	// event faults happen at once (restart): they take no For.
	event bool
	// sustained faults need a For in a script; defaultFor, when set, supplies one instead.
	sustained  bool
	defaultFor func(env *Env) units.Duration
	defaults   Spec // target and parameter defaults
	// check validates what Validate cannot check field by field; s has its defaults.
	check func(s Spec) error
	// build makes the fault for an effective spec (defaults filled in).
	build func(n *Nemesis, s Spec) Fault
	// kafka marks the Kafka-aware faults (kafka.go): their one-line form is their own, and a
	// random schedule draws their request type and parameters (kafkamix.go).
	kafka bool
	// needs are the broker operations the fault and its recovery call (BrokerOps).
	needs []cluster.BrokerOp
}

// uses says which Target fields a fault reads.
type uses struct {
	processes  bool
	brokers    bool
	role       bool
	rolePhrase string // how the one-line form names Role: "holder of", "of"
}

var (
	linkUses   = uses{processes: true, brokers: true}
	brokerUses = uses{brokers: true}
	toxicSpec  = Spec{Target: Target{Processes: Random(1), Brokers: All()}}
)

func withParams(s Spec, p Params) Spec { s.Params = p; return s }

// registry holds every fault. Names are what scenario files and the CLI use.
var registry = []*definition{
	{
		name:      "partition",
		summary:   "cut processes from brokers: link down (mode=refused) or black hole (mode=blackhole: connected, every byte dropped)",
		uses:      linkUses,
		sustained: true,
		params:    []string{"mode", "direction"},
		defaults:  withParams(toxicSpec, Params{Mode: ModeRefused, Direction: DirBoth}),
		check: func(s Spec) error {
			if s.Params.Mode == ModeRefused && s.Params.Direction != DirBoth {
				return &SpecError{Field: "params.direction", Value: s.Params.Direction, Reason: "a refused link is down both ways; direction applies to mode=blackhole"}
			}
			return nil
		},
		build: newPartition,
	},
	{
		name:      "latency",
		summary:   "delay process links by latency ± jitter (default 500ms, downstream)",
		uses:      linkUses,
		sustained: true,
		params:    []string{"latency", "jitter", "direction", "toxicity"},
		defaults:  withParams(toxicSpec, Params{Latency: units.Duration(500 * time.Millisecond), Direction: DirDownstream, Toxicity: 1}),
		build:     newToxicFault("latency"),
	},
	{
		name:      "bandwidth",
		summary:   "limit process links to rate KB/s (default 1, downstream)",
		uses:      linkUses,
		sustained: true,
		params:    []string{"rate", "direction", "toxicity"},
		defaults:  withParams(toxicSpec, Params{Rate: 1, Direction: DirDownstream, Toxicity: 1}),
		build:     newToxicFault("bandwidth"),
	},
	{
		name:      "reset-peer",
		summary:   "reset connections on process links (TCP RST) once they carry data, after reset_after (default at once)",
		uses:      linkUses,
		sustained: true,
		params:    []string{"reset_after", "direction", "toxicity"},
		defaults:  withParams(toxicSpec, Params{Direction: DirDownstream, Toxicity: 1}),
		build:     newToxicFault("reset_peer"),
	},
	{
		name:      "slicer",
		summary:   "cut data on process links into slice_size ± slice_variation byte pieces slice_delay apart (default 8 ± 4 bytes, 10ms)",
		uses:      linkUses,
		sustained: true,
		params:    []string{"slice_size", "slice_variation", "slice_delay", "direction", "toxicity"},
		defaults:  withParams(toxicSpec, Params{SliceSize: 8, SliceVariation: 4, SliceDelay: units.Duration(10 * time.Millisecond), Direction: DirDownstream, Toxicity: 1}),
		check: func(s Spec) error {
			if s.Params.SliceVariation >= s.Params.SliceSize {
				return &SpecError{Field: "params.slice_variation", Value: s.Params.SliceVariation, Reason: "must be below slice_size"}
			}
			return nil
		},
		build: newToxicFault("slicer"),
	},
	{
		name:      "limit-data",
		summary:   "close each connection on process links after it carried bytes bytes (default 64, downstream)",
		uses:      linkUses,
		sustained: true,
		params:    []string{"bytes", "direction", "toxicity"},
		defaults:  withParams(toxicSpec, Params{Bytes: 64, Direction: DirDownstream, Toxicity: 1}),
		build:     newToxicFault("limit_data"),
	},
	{
		name:      "flapping",
		summary:   "take process links down and up again at random, about every interval (default 1s)",
		uses:      linkUses,
		sustained: true,
		params:    []string{"interval"},
		defaults:  withParams(toxicSpec, Params{Interval: units.Duration(time.Second)}),
		build:     newFlapping,
	},
	{
		name:      "kill",
		needs:     []cluster.BrokerOp{cluster.OpKill, cluster.OpRestart},
		summary:   "SIGKILL brokers (coordinator of a role, leader of its partition, random, ...) and start them again on recovery",
		uses:      brokerUses,
		sustained: true,
		defaults:  Spec{Target: Target{Brokers: Random(1)}},
		build:     newKill,
	},
	{
		name:     "restart",
		needs:    []cluster.BrokerOp{cluster.OpRestart},
		summary:  "SIGKILL brokers and start them again at once, one after another interval apart (several: a rolling restart)",
		uses:     brokerUses,
		params:   []string{"interval"},
		event:    true,
		defaults: Spec{Target: Target{Brokers: Random(1)}},
		build:    newRestart,
	},
	{
		name:      "pause",
		needs:     []cluster.BrokerOp{cluster.OpPause, cluster.OpResume},
		summary:   "SIGSTOP brokers, nothing answers; SIGCONT (resume) on recovery",
		uses:      brokerUses,
		sustained: true,
		defaults:  Spec{Target: Target{Brokers: Random(1)}},
		build:     newPause,
	},
	{
		name:      "isolate",
		needs:     []cluster.BrokerOp{cluster.OpIsolate, cluster.OpUnisolate},
		summary:   "cut brokers' inter-broker and controller links, refused or black hole (local, containers; external: its isolate command)",
		uses:      brokerUses,
		sustained: true,
		params:    []string{"mode"},
		defaults:  Spec{Target: Target{Brokers: Random(1)}, Params: Params{Mode: ModeRefused}},
		build:     newIsolate,
	},
	{
		name:       "freeze",
		summary:    "freeze the holder of a role at a pause point (point) for longer than its lease (default twice the lease)",
		kind:       history.KindMemberPause,
		defaultFor: freezeFor,
		uses:       uses{role: true, rolePhrase: "holder of"},
		params:     []string{"point"},
		build:      newFreeze,
	},
	{
		name:    "move-coordinator",
		needs:   []cluster.BrokerOp{cluster.OpKill, cluster.OpRestart},
		summary: "move the transaction coordinator of a role (kfake: rehash; other clusters: kill its broker until recovery)",
		uses:    uses{role: true, rolePhrase: "of"},
		build:   newMoveCoordinator,
	},
}

// BrokerOps returns the broker operations the fault named name calls, its recovery's
// included (kill: kill, then restart), or nil for a fault that acts on no broker (link,
// Kafka-request and freeze faults) or an unknown name. A fault with broker operations changes
// the cluster under every later run, so such a run gets a cluster of its own; an external
// cluster must have a command for each. isolate calls its operations only on a cluster
// without peer links (external), and move-coordinator only off kfake, where it rehashes
// coordinators instead; both still change the cluster for the runs after them.
func BrokerOps(name string) []cluster.BrokerOp {
	if d, ok := lookup(name); ok {
		return slices.Clone(d.needs)
	}
	return nil
}

func lookup(name string) (*definition, bool) {
	for _, d := range registry {
		if d.name == name {
			return d, true
		}
	}
	return nil, false
}

func names() []string {
	out := make([]string, len(registry))
	for i, d := range registry {
		out[i] = d.name
	}
	return out
}

// historyKind is the kind of the windows of the fault named name.
func historyKind(name string) history.Kind {
	if d, ok := lookup(name); ok && d.kind != "" {
		return d.kind
	}
	return history.Kind(name)
}

// withDefaults returns s with every zero target field and parameter the fault uses set to
// its default.
func (d *definition) withDefaults(s Spec) Spec {
	if s.Target.Processes.IsZero() {
		s.Target.Processes = d.defaults.Target.Processes
	}
	if s.Target.Brokers.IsZero() {
		s.Target.Brokers = d.defaults.Target.Brokers
	}
	p, def := reflect.ValueOf(&s.Params).Elem(), reflect.ValueOf(d.defaults.Params)
	for i := range p.NumField() {
		if p.Field(i).IsZero() {
			p.Field(i).Set(def.Field(i))
		}
	}
	return s
}

// checkTarget validates the target fields against what the fault uses.
func (d *definition) checkTarget(t Target) error {
	if !d.uses.processes && !t.Processes.IsZero() {
		return &SpecError{Field: "processes", Value: t.Processes, Reason: "not used by " + d.name}
	}
	if !d.uses.brokers && !t.Brokers.IsZero() {
		return &SpecError{Field: "brokers", Value: t.Brokers, Reason: "not used by " + d.name}
	}
	if !d.uses.role && t.Role != "" {
		return &SpecError{Field: "role", Value: t.Role, Reason: "not used by " + d.name + "; name the role in a coordinator or leader selector"}
	}
	if err := checkSelector("processes", t.Processes, 1); err != nil {
		return err
	}
	if t.Processes.Kind.byRole() {
		return &SpecError{Field: "processes", Value: t.Processes, Reason: "coordinator, leader and group-coordinator pick brokers, not processes"}
	}
	if t.Brokers.Kind == SelectHolder {
		return &SpecError{Field: "brokers", Value: t.Brokers, Reason: "holder picks a process, not brokers"}
	}
	return checkSelector("brokers", t.Brokers, 0)
}

func checkSelector(field string, s Selector, minID int) error {
	switch s.Kind {
	case SelectDefault, SelectAll, SelectSubset, SelectCoordinator, SelectLeader, SelectGroupCoordinator, SelectHolder:
	case SelectRandom:
		if s.N < 0 {
			return &SpecError{Field: field, Value: s, Reason: "random N needs N ≥ 1"}
		}
	case SelectIDs:
		if len(s.IDs) == 0 {
			return &SpecError{Field: field, Value: s, Reason: "no ids"}
		}
		for _, id := range s.IDs {
			if id < minID {
				return &SpecError{Field: field, Value: s, Reason: "ids start at " + strconv.Itoa(minID)}
			}
		}
	default:
		return &SpecError{Field: field, Value: s.Kind, Reason: "unknown selector kind"}
	}
	return nil
}
