package explore

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/fencecheck/fencecheck/nemesis"
)

// A schedule is what explore searches over: a scripted fault timeline, the nemesis's own
// representation (nemesis.Step, one line each in a scenario file). Explore builds its steps
// from the parts below, so that a mutation can change one part (the target, the time, the
// request type) and leave the rest; a step's text is always checked by nemesis.ParseStep.

// category is how a fault's one-line form is built.
type category int

const (
	catKafka  category = iota // ACTION API of PROCESSES [role ROLE] [until API] [first N] [with ...] for D
	catLink                   // FAULT PROCESSES from BROKERS [with ...] for D
	catBroker                 // FAULT BROKERS [with ...] [for D]
	catFreeze                 // freeze holder of ROLE for D
	catMove                   // move-coordinator of ROLE (an event)
)

// kinds are the faults explore draws, with how each is written. A fault that needs more
// than the cluster has (isolate: peer links) is left out by menu.
var kinds = []struct {
	name  string
	cat   category
	event bool
}{
	{"drop", catKafka, false}, {"drop-response", catKafka, false}, {"delay", catKafka, false},
	{"hold", catKafka, false}, {"duplicate", catKafka, false}, {"error-response", catKafka, false},
	{"partition", catLink, false}, {"latency", catLink, false}, {"reset-peer", catLink, false},
	{"limit-data", catLink, false}, {"flapping", catLink, false}, {"bandwidth", catLink, false},
	{"slicer", catLink, false},
	{"kill", catBroker, false}, {"pause", catBroker, false}, {"restart", catBroker, true},
	{"isolate", catBroker, false},
	{"freeze", catFreeze, false}, {"move-coordinator", catMove, true},
}

func kindOf(name string) (cat category, event bool) {
	for _, k := range kinds {
		if k.name == name {
			return k.cat, k.event
		}
	}
	return catKafka, false
}

// step is one fault of a schedule, in parts.
type step struct {
	At   time.Duration
	For  time.Duration // 0 for an event
	Kind string
	// API is a Kafka-aware fault's request type; Until hold's (and duplicate's, optional)
	// delivering request; Count its "first N" (0: every matching request); Param the one
	// parameter the fault takes, as name=value ("delay=3s", "error=NOT_COORDINATOR",
	// "latency=500ms"), or "".
	API, Until string
	Count      int
	Param      string
	// Processes is the processes' selector ("all", "p3", "holder of r1", "random 2");
	// Role narrows a Kafka-aware fault to a role's transactional id; Brokers is the brokers'
	// selector ("all", "coordinator of r1", "leader of r2", "random").
	Processes, Role, Brokers string
}

// String is the step's one-line form, as nemesis.ParseStep reads it.
func (s step) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "at %s %s", units(s.At), s.Kind)
	cat, event := kindOf(s.Kind)
	switch cat {
	case catKafka:
		b.WriteString(" " + s.API)
		b.WriteString(" of " + s.Processes)
		if s.Role != "" {
			b.WriteString(" role " + s.Role)
		}
		if s.Until != "" {
			b.WriteString(" until " + s.Until)
		}
		if s.Count > 0 {
			fmt.Fprintf(&b, " first %d", s.Count)
		}
	case catLink:
		b.WriteString(" " + s.Processes + " from " + s.Brokers)
	case catBroker:
		b.WriteString(" " + s.Brokers)
	case catFreeze:
		b.WriteString(" holder of " + s.Role)
	case catMove:
		b.WriteString(" of " + s.Role)
	}
	if s.Param != "" {
		b.WriteString(" with " + s.Param)
	}
	if !event {
		b.WriteString(" for " + units(s.For))
	}
	return b.String()
}

// units writes d as a scenario file does: whole seconds as "3s", else milliseconds.
func units(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return fmt.Sprintf("%dms", d/time.Millisecond)
}

// schedule is a timeline, its steps in time order.
type schedule []step

// Lines are the schedule's steps in their one-line form.
func (sc schedule) Lines() []string {
	out := make([]string, len(sc))
	for i, s := range sc {
		out[i] = s.String()
	}
	return out
}

func (sc schedule) String() string {
	if len(sc) == 0 {
		return "no faults"
	}
	return strings.Join(sc.Lines(), "; ")
}

func (sc schedule) sorted() schedule {
	out := slices.Clone(sc)
	slices.SortStableFunc(out, func(a, b step) int { return int(a.At - b.At) })
	return out
}

// menu is what a search may draw from: the fault kinds, the request types the runs send,
// the processes, roles and the run's length.
type menu struct {
	kinds     []string // fault names
	apis      []string // request types of the Kafka-aware faults
	processes int
	roles     []string
	duration  time.Duration
	maxFaults int
	brokers   int // the cluster's, for how long a restart of all holds them
	// points are the pause points a pipeline's freeze may name besides the member's default
	// (pipeline.Points of its member kind); none for a lease workload.
	points []string
	// session is a pipeline's group session timeout (0 for a lease workload): a freeze
	// shorter than it makes no zombie, so a pipeline's freezes are drawn past it
	// (freezeDurations), and a freeze counts as tried once it made one (noteTookHold).
	session time.Duration
	// tookHold are the faults some run saw take hold, named as the feedback names them
	// (faultWhat: "drop-response endtxn", "partition"); nil in a menu that ignores it.
	tookHold map[string]bool
	// zombies counts, per freeze as faultWhat names it, the runs in which it made a zombie
	// (a pipeline's): it is tried after zombieRuns of them (search.noteTookHold).
	zombies map[string]int
}

// faultKey names the fault a step would be in the feedback: its kind, and a Kafka-aware
// fault's request type.
func (s step) faultKey() string {
	if cat, _ := kindOf(s.Kind); cat == catKafka {
		return s.Kind + " " + s.API
	}
	if p, ok := strings.CutPrefix(s.Param, "point="); ok && s.Kind == "freeze" {
		return "freeze " + p
	}
	return s.Kind
}

// untried lists the faults of the menu no run has seen take hold yet, in the menu's order: a
// Kafka-aware kind with each request type it can act on (error-response only on a request
// with retriable errors to answer, hold only on one a later request delivers), every other
// kind on its own.
func (m *menu) untried() []step {
	var out []step
	for _, k := range m.kinds {
		cat, _ := kindOf(k)
		if cat != catKafka {
			if !m.tookHold[k] {
				out = append(out, step{Kind: k})
			}
			if k == "freeze" {
				for _, p := range m.points {
					if !m.tookHold["freeze "+p] {
						out = append(out, step{Kind: k, Param: "point=" + p})
					}
				}
			}
			continue
		}
		for _, api := range m.apis {
			switch {
			case k == "error-response" && len(nemesis.MixErrors(api)) == 0, k == "hold" && nemesis.MixUntil(api) == "":
			case !m.tookHold[k+" "+api]:
				out = append(out, step{Kind: k, API: api})
			}
		}
	}
	return out
}

// The values parameters are drawn from: a blip to past a client's request timeout.
var (
	durations = []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 5 * time.Second, 8 * time.Second}
	delays    = []string{"250ms", "1s", "3s", "8s"}
	counts    = []int{1, 1, 2, 3, 0}
	latencies = []string{"100ms", "500ms", "2s"}
)

func pick[T any](rng *rand.Rand, xs []T) T { return xs[rng.IntN(len(xs))] }

// freezeFactors are a pipeline freeze's durations in session timeouts: a member frozen past
// its session timeout loses its partitions to another member while its transaction is open
// (a zombie), and the new owner must wait for it. Half a session timeout over leaves the
// group time to move the partition while the member is still frozen (pipeline-zombie-commit
// freezes for 4.5 s against 3 s); the longer ones outlast a slow rebalance, and a freeze
// drawn later in the run than the member reaches its pause point is shorter than asked.
var freezeFactors = []float64{1.5, 2, 2.5}

// durationsOf are the durations a fault of kind is drawn with: durations, but past the
// session timeout for a pipeline's freeze (freezeFactors), rounded to 500 ms.
func (m *menu) durationsOf(kind string) []time.Duration {
	if kind != "freeze" || m.session <= 0 {
		return durations
	}
	out := make([]time.Duration, len(freezeFactors))
	for i, f := range freezeFactors {
		out[i] = time.Duration(f * float64(m.session)).Round(500 * time.Millisecond)
	}
	return out
}

// covering says whether the search is still covering its menu: some fault of it has never
// taken hold in a run (tookHold). A menu that ignores tookHold is never covering.
func (m *menu) covering() bool { return m.tookHold != nil && len(m.untried()) > 0 }

// pickFault draws a fault kind, and for a Kafka-aware one the request type it acts on ("" to
// draw it with the rest). While covering, seven draws in eight are a fault that has never
// taken hold (untried): a bug that one fault on one request type shows (a lost EndTxn
// answer, a late Produce) is reached once the search has tried that pair, and trying each
// pair once takes a few dozen steps where a uniform draw over about fifty pairs leaves some
// untried after a hundred. The eighth draw keeps the rest of the menu in play.
func (m *menu) pickFault(rng *rand.Rand) (kind, api string) {
	if m.covering() && rng.IntN(8) != 0 {
		t := pick(rng, m.untried())
		return t.Kind, t.API
	}
	return pick(rng, m.kinds), ""
}

// fresh draws a new step.
func (m *menu) fresh(rng *rand.Rand) step {
	kind, api := m.pickFault(rng)
	return m.freshOf(rng, kind, api)
}

// freshSchedule draws a schedule of n fresh steps. While covering, each untried fault is
// drawn once at most, so that the last few untried ones (a rolling restart, which holds the
// brokers for long) are not drawn several times into one schedule that valid then refuses.
//
// A pipeline's schedule drawn while covering starts with one untried freeze, if any is left
// (pipelineFreezeFirst): a zombie is the state a pipeline's fencing is about, and a freeze
// at one of three points is otherwise three faults among some seventy, which a search of
// twenty runs may reach only late or not at all.
func (m *menu) freshSchedule(rng *rand.Rand, n int) schedule {
	var sc schedule
	var avail []step
	if m.covering() {
		avail = m.untried()
		rng.Shuffle(len(avail), func(i, j int) { avail[i], avail[j] = avail[j], avail[i] })
		if m.session > 0 {
			avail = pipelineFreezeFirst(avail)
		}
	}
	for len(sc) < n {
		if len(avail) > 0 && rng.IntN(8) != 0 {
			st := m.freshOf(rng, avail[0].Kind, avail[0].API)
			if avail[0].Kind == "freeze" {
				st.Param = avail[0].Param // the point (or none) not tried yet
			}
			sc = append(sc, st)
			avail = avail[1:]
			continue
		}
		sc = append(sc, m.freshOf(rng, pick(rng, m.kinds), ""))
	}
	return sc.sorted()
}

// pipelineFreezeFirst moves the first freeze of avail to its front and leaves out the other
// freezes: one freeze a schedule, since two on members of one process, or on one member, get
// in each other's way (the second finds its member frozen already and never takes hold).
func pipelineFreezeFirst(avail []step) []step {
	out := make([]step, 0, len(avail))
	for _, st := range avail {
		if st.Kind == "freeze" && (len(out) == 0 || out[0].Kind != "freeze") {
			out = append([]step{st}, out...)
		} else if st.Kind != "freeze" {
			out = append(out, st)
		}
	}
	return out
}

// freshOf draws a new step of kind, on api if it is not "".
func (m *menu) freshOf(rng *rand.Rand, kind, api string) step {
	s := step{Kind: kind}
	m.retime(rng, &s)
	m.refill(rng, &s)
	if api != "" {
		m.reparam(rng, &s, api)
	}
	return s
}

// retime draws the step's time and duration: it starts after the workload warmed up (1 s)
// and, when it can, ends a second before the run does.
func (m *menu) retime(rng *rand.Rand, s *step) {
	s.For = pick(rng, m.durationsOf(s.Kind))
	if _, event := kindOf(s.Kind); event {
		s.For = 0
	}
	last := m.duration - s.For - time.Second
	if last < time.Second {
		last = time.Second
	}
	s.At = time.Second + time.Duration(rng.Int64N(int64(last-time.Second)/int64(500*time.Millisecond)+1))*500*time.Millisecond
}

// refill draws everything of the step but its kind and times: its targets and parameters.
func (m *menu) refill(rng *rand.Rand, s *step) {
	*s = step{At: s.At, For: s.For, Kind: s.Kind}
	cat, event := kindOf(s.Kind)
	if !event && (s.For == 0 || s.Kind == "freeze" && s.For <= m.session) {
		// A fault turned into a pipeline's freeze (the kind mutation) keeps its time, not a
		// duration too short to make a zombie.
		s.For = pick(rng, m.durationsOf(s.Kind))
	}
	if event {
		s.For = 0
	}
	switch cat {
	case catKafka:
		m.retarget(rng, s)
		m.reparam(rng, s, pick(rng, m.apis))
	case catLink:
		m.retarget(rng, s)
		switch s.Kind {
		case "latency":
			s.Param = "latency=" + pick(rng, latencies)
		case "partition":
			if rng.IntN(2) == 0 {
				s.Param = "mode=blackhole"
			}
		}
	case catBroker:
		m.retarget(rng, s)
		if s.Kind == "restart" {
			s.Param = "interval=" + pick(rng, []string{"2s", "4s"})
		}
	case catFreeze, catMove:
		s.Role = pick(rng, m.roles)
		if s.Kind == "freeze" && len(m.points) > 0 {
			// A pipeline member frozen at its default point holds a polled batch (a zombie
			// that commits late); at before-commit it holds its offsets pending at the group
			// coordinator, which a new owner that fetches unstable offsets starts below.
			if i := rng.IntN(len(m.points) + 1); i > 0 {
				s.Param = "point=" + m.points[i-1]
			}
		}
	}
}

// reparam sets a Kafka-aware step's request type to api and draws its parameters for it.
func (m *menu) reparam(rng *rand.Rand, s *step, api string) {
	s.API, s.Param, s.Until = api, "", ""
	switch s.Kind {
	case "delay":
		s.Param = "delay=" + pick(rng, delays)
	case "error-response":
		// Retriable errors of that request only, as the random mix draws them: the broker
		// handles the request, so a definitive refusal would be a lie to the client.
		if errs := nemesis.MixErrors(s.API); len(errs) > 0 {
			s.Param = "error=" + pick(rng, errs)
		} else {
			s.Kind = "drop-response"
		}
	case "hold":
		s.Until = nemesis.MixUntil(s.API)
		if s.Until == "" {
			s.Kind = "drop-response" // hold needs a request that delivers it
		}
	}
	s.Count = pick(rng, counts)
}

// retarget draws the step's targets anew.
func (m *menu) retarget(rng *rand.Rand, s *step) {
	role := pick(rng, m.roles)
	cat, _ := kindOf(s.Kind)
	switch cat {
	case catKafka:
		s.Role = ""
		switch rng.IntN(3) {
		case 0:
			s.Processes = "holder of " + role
		case 1:
			s.Processes = fmt.Sprintf("p%d", 1+rng.IntN(m.processes))
		default:
			s.Processes = "all"
			if rng.IntN(2) == 0 {
				s.Role = role
			}
		}
	case catLink:
		s.Processes = pick(rng, []string{"holder of " + role, fmt.Sprintf("p%d", 1+rng.IntN(m.processes)), "random 2"})
		s.Brokers = pick(rng, []string{"all", "coordinator of " + role, "leader of " + role})
	case catBroker:
		s.Brokers = pick(rng, []string{"coordinator of " + role, "leader of " + role, "random"})
		if s.Kind == "restart" {
			s.Brokers = "all"
		}
	case catFreeze, catMove:
		s.Role = role
	}
}

// mutations are the ways a schedule changes, each returning false when it cannot apply.
var mutations = []struct {
	name string
	fn   func(m *menu, rng *rand.Rand, sc schedule, corpus []schedule) (schedule, bool)
}{
	{"time", func(m *menu, rng *rand.Rand, sc schedule, _ []schedule) (schedule, bool) {
		if len(sc) == 0 {
			return sc, false
		}
		i := rng.IntN(len(sc))
		shift := time.Duration(rng.IntN(9)-4) * 500 * time.Millisecond
		if shift == 0 || sc[i].At+shift < time.Second || sc[i].At+shift > m.duration-time.Second {
			f := sc[i].For
			m.retime(rng, &sc[i])
			if f != 0 && sc[i].For != 0 {
				sc[i].For = f
			}
		} else {
			sc[i].At += shift
		}
		return sc, true
	}},
	{"duration", func(m *menu, rng *rand.Rand, sc schedule, _ []schedule) (schedule, bool) {
		i := slices.IndexFunc(sc, func(s step) bool { return s.For > 0 })
		if i < 0 {
			return sc, false
		}
		i = pickSustained(rng, sc)
		sc[i].For = pick(rng, m.durationsOf(sc[i].Kind))
		return sc, true
	}},
	{"target", func(m *menu, rng *rand.Rand, sc schedule, _ []schedule) (schedule, bool) {
		if len(sc) == 0 {
			return sc, false
		}
		i := rng.IntN(len(sc))
		m.retarget(rng, &sc[i])
		return sc, true
	}},
	{"params", func(m *menu, rng *rand.Rand, sc schedule, _ []schedule) (schedule, bool) {
		if len(sc) == 0 {
			return sc, false
		}
		i := rng.IntN(len(sc))
		procs, role, brokers := sc[i].Processes, sc[i].Role, sc[i].Brokers
		m.refill(rng, &sc[i])
		if cat, _ := kindOf(sc[i].Kind); cat == catKafka || cat == catLink || cat == catBroker {
			sc[i].Processes, sc[i].Role, sc[i].Brokers = procs, role, brokers
			if cat == catBroker && brokers == "" || cat != catBroker && procs == "" {
				m.retarget(rng, &sc[i])
			}
		}
		return sc, true
	}},
	{"kind", func(m *menu, rng *rand.Rand, sc schedule, _ []schedule) (schedule, bool) {
		if len(sc) == 0 {
			return sc, false
		}
		i := rng.IntN(len(sc))
		at, f := sc[i].At, sc[i].For
		kind, api := m.pickFault(rng)
		sc[i] = step{At: at, For: f, Kind: kind}
		m.refill(rng, &sc[i])
		if api != "" {
			m.reparam(rng, &sc[i], api)
		}
		return sc, true
	}},
	{"add", func(m *menu, rng *rand.Rand, sc schedule, _ []schedule) (schedule, bool) {
		if len(sc) >= m.maxFaults {
			return sc, false
		}
		return append(sc, m.fresh(rng)), true
	}},
	{"remove", func(m *menu, rng *rand.Rand, sc schedule, _ []schedule) (schedule, bool) {
		if len(sc) < 2 {
			return sc, false
		}
		i := rng.IntN(len(sc))
		return slices.Delete(sc, i, i+1), true
	}},
	{"splice", func(m *menu, rng *rand.Rand, sc schedule, corpus []schedule) (schedule, bool) {
		if len(sc) >= m.maxFaults {
			return sc, false
		}
		other := corpus[rng.IntN(len(corpus))]
		if len(other) == 0 {
			return sc, false
		}
		return append(sc, other[rng.IntN(len(other))]), true
	}},
}

func pickSustained(rng *rand.Rand, sc schedule) int {
	var idx []int
	for i, s := range sc {
		if s.For > 0 {
			idx = append(idx, i)
		}
	}
	return idx[rng.IntN(len(idx))]
}

// mutate applies one to three mutations to a copy of parent; what names them.
func (m *menu) mutate(rng *rand.Rand, parent schedule, corpus []schedule) (sc schedule, what []string) {
	sc = slices.Clone(parent)
	for n := 1 + rng.IntN(3); len(what) < n; {
		mu := pick(rng, mutations)
		var ok bool
		if sc, ok = mu.fn(m, rng, sc, corpus); ok {
			what = append(what, mu.name)
		} else if len(sc) == 0 {
			sc = append(sc, m.fresh(rng))
			what = append(what, "add")
		}
	}
	return sc.sorted(), what
}

// valid reports whether every step of sc parses as the nemesis reads it, no two broker
// faults overlap, and each broker fault ends before the run does: the nemesis skips a broker
// fault whose brokers another one holds (a restart during a kill finds no free broker), and a
// rolling restart the run's end cuts short never takes hold, so the step would leave the run
// inconclusive for nothing.
func (m *menu) valid(sc schedule) error {
	for _, line := range sc.Lines() {
		if _, err := nemesis.ParseStep(line); err != nil {
			return err
		}
	}
	brokers := m.brokers
	for _, a := range sc {
		if span := a.brokerSpan(brokers); span > 0 && a.At+span > m.duration-time.Second {
			return fmt.Errorf("%q holds brokers until %v, past the run's end", a, a.At+span)
		}
	}
	for i, a := range sc {
		for _, b := range sc[i+1:] {
			if a.brokerSpan(brokers) > 0 && b.brokerSpan(brokers) > 0 &&
				a.At < b.At+b.brokerSpan(brokers) && b.At < a.At+a.brokerSpan(brokers) {
				return fmt.Errorf("%q and %q hold brokers at once", a, b)
			}
		}
	}
	return nil
}

// brokerSpan is how long the step holds brokers: a broker fault's duration (a restart's
// interval for each broker of the cluster, moving the coordinator a moment), or 0 when it
// holds none.
func (s step) brokerSpan(brokers int) time.Duration {
	cat, _ := kindOf(s.Kind)
	switch {
	case s.Kind == "restart":
		interval := 5 * time.Second
		if v, ok := strings.CutPrefix(s.Param, "interval="); ok {
			if d, err := time.ParseDuration(v); err == nil {
				interval = d
			}
		}
		return time.Duration(brokers) * interval
	case s.Kind == "move-coordinator":
		return time.Second
	case cat == catBroker:
		return s.For
	}
	return 0
}
