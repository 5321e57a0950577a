package nemesis

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/fencecheck/fencecheck/internal/units"
)

// Schedule says when which faults happen: either Random or Script.
type Schedule struct {
	Random *RandomSchedule `json:"random,omitempty" yaml:"random,omitempty"`
	Script []Step          `json:"script,omitempty" yaml:"script,omitempty"`
}

// RandomSchedule injects faults picked with the run's seeded RNG. A fault starts at most
// every Interval (the first one Interval after Run starts, so the workload warms up), lasts
// its For, and targets nothing another active fault holds. Once no fault is active, nothing is
// injected for at least Stable.
type RandomSchedule struct {
	// Interval is the time between fault starts. Default 10s.
	Interval units.Duration `json:"interval,omitempty" yaml:"interval,omitempty"`
	// Stable is the quiet period after the last active fault ends. Default Interval/2.
	Stable units.Duration `json:"stable,omitempty" yaml:"stable,omitempty"`
	// For is how long a fault lasts when its spec says nothing (freeze: twice the lease).
	// Default Interval/2.
	For units.Duration `json:"for,omitempty" yaml:"for,omitempty"`
	// MaxActive is how many faults may be active at once. Default 1.
	MaxActive int `json:"max_active,omitempty" yaml:"max_active,omitempty"`
	// Faults is the menu, picked from uniformly. Default: every registered fault with its
	// default target and parameters. Faults the cluster or the run cannot do (an
	// unsupported broker fault, freeze without a freezer) leave the menu on first try.
	Faults []Spec `json:"faults,omitempty" yaml:"faults,omitempty"`
}

func (r RandomSchedule) withDefaults() RandomSchedule {
	if r.Interval == 0 {
		r.Interval = units.Duration(10 * time.Second)
	}
	if r.Stable == 0 {
		r.Stable = r.Interval / 2
	}
	if r.For == 0 {
		r.For = r.Interval / 2
	}
	if r.MaxActive == 0 {
		r.MaxActive = 1
	}
	if len(r.Faults) == 0 {
		for _, name := range DefaultMenu() {
			r.Faults = append(r.Faults, Spec{Fault: name})
		}
	}
	return r
}

// Step is one line of a scripted timeline: the spec is injected At after Run starts and
// recovered For later.
type Step struct {
	At   units.Duration `json:"at" yaml:"at"`
	Spec `yaml:",inline"`
}

// String formats the step in its one-line form (see ParseStep).
func (s Step) String() string { return "at " + s.At.String() + " " + s.Spec.String() }

// Validate checks the schedule; errors are *SpecError naming the field ("script[2].for").
func (s Schedule) Validate() error {
	switch {
	case s.Random == nil && len(s.Script) == 0:
		return &SpecError{Field: "schedule", Reason: "want random or script"}
	case s.Random != nil && len(s.Script) > 0:
		return &SpecError{Field: "schedule", Reason: "random and script exclude each other"}
	}
	if r := s.Random; r != nil {
		for _, f := range []struct {
			name string
			v    units.Duration
		}{{"interval", r.Interval}, {"stable", r.Stable}, {"for", r.For}} {
			if f.v < 0 {
				return &SpecError{Field: "random." + f.name, Value: f.v, Reason: "must not be negative"}
			}
		}
		if r.MaxActive < 0 {
			return &SpecError{Field: "random.max_active", Value: r.MaxActive, Reason: "must not be negative"}
		}
		for i, f := range r.Faults {
			if err := f.Validate(); err != nil {
				return prefixed(fmt.Sprintf("random.faults[%d].", i), err)
			}
		}
	}
	for i, st := range s.Script {
		at := fmt.Sprintf("script[%d].", i)
		if st.At < 0 {
			return &SpecError{Field: at + "at", Value: st.At, Reason: "must not be negative"}
		}
		if err := st.Validate(); err != nil {
			return prefixed(at, err)
		}
		if d, _ := lookup(st.Fault); d.sustained && st.For == 0 {
			return &SpecError{Field: at + "for", Reason: "required: how long " + st.Fault + " lasts"}
		}
	}
	return nil
}

// ParseStep parses one line of a timeline:
//
//	at 5s partition p1 from coordinator of role-3 for 12s
//	at 20s latency p2,p3 from all with latency=200ms jitter=50ms for 10s
//	at 30s partition random 2 from subset blackhole for 10s
//	at 40s kill leader of role-1 for 15s
//	at 60s restart all with interval=5s
//	at 70s freeze holder of role-2 with point=before-write for 8s
//	at 80s move-coordinator of role-3
//
// After "at DURATION" comes the spec's one-line form: the fault; for link faults the
// processes and "from" the brokers, for broker faults the brokers (see Selector for the
// forms); "holder of ROLE" (freeze) or "of ROLE" (move-coordinator); "with" and parameters as
// name=value (or the bare mode: refused, blackhole); "for DURATION". The step is validated.
func ParseStep(line string) (Step, error) {
	f := strings.Fields(line)
	if len(f) < 3 || f[0] != "at" {
		return Step{}, fmt.Errorf("step %q: want at DURATION FAULT ...: %w", line, ErrInvalidSpec)
	}
	var st Step
	if err := st.At.UnmarshalText([]byte(f[1])); err != nil {
		return Step{}, fmt.Errorf("step %q: %w", line, &SpecError{Field: "at", Value: f[1], Reason: err.Error()})
	}
	spec, err := ParseSpec(strings.Join(f[2:], " "))
	if err != nil {
		return Step{}, fmt.Errorf("step %q: %w", line, err)
	}
	st.Spec = spec
	return st, nil
}

// ParseSpec parses a spec's one-line form (what Spec.String writes; see ParseStep) and
// validates it.
func ParseSpec(text string) (Spec, error) {
	p := &specParser{words: strings.Fields(text)}
	s, err := p.parse()
	if err != nil {
		return Spec{}, err
	}
	return s, s.Validate()
}

type specParser struct {
	words []string
	i     int
}

func (p *specParser) next() (string, bool) {
	if p.i >= len(p.words) {
		return "", false
	}
	p.i++
	return p.words[p.i-1], true
}

func (p *specParser) peek() string {
	if p.i >= len(p.words) {
		return ""
	}
	return p.words[p.i]
}

// unexpected is an error about the spec's words at large; the step that holds them is quoted
// by ParseStep's caller.
func (p *specParser) unexpected(what string) error {
	return &SpecError{Reason: what}
}

// The selectors a position takes, as an error offers them.
var (
	processSelectors = "all, random [N], subset, holder of ROLE or a list like p1,p2"
	brokerSelectors  = "all, random [N], subset, coordinator of ROLE, leader of ROLE, group-coordinator of ROLE or a list like b0,b1"
)

// selectorWords are the keywords a selector of processes (letter p) or brokers (b) starts with.
func selectorWords(letter byte) []string {
	if letter == 'p' {
		return []string{string(SelectAll), string(SelectRandom), string(SelectSubset), string(SelectHolder)}
	}
	return []string{string(SelectAll), string(SelectRandom), string(SelectSubset), string(SelectCoordinator), string(SelectLeader), string(SelectGroupCoordinator)}
}

func (p *specParser) parse() (Spec, error) {
	var s Spec
	name, _ := p.next()
	s.Fault = name
	d, ok := lookup(name)
	if !ok {
		return s, s.Validate() // names the unknown fault
	}
	if d.kafka {
		return p.parseKafka(s)
	}
	for p.i < len(p.words) {
		w := p.words[p.i]
		var err error
		switch {
		case w == "from":
			p.i++
			if !d.uses.processes {
				return s, p.unexpected(`"from": ` + name + " takes no processes")
			}
			s.Target.Brokers, err = p.selector('b')
		case d.uses.role && (w == "of" || w == "holder" || w == "coordinator"):
			p.i++
			if w != "of" {
				if o, _ := p.next(); o != "of" {
					return s, p.unexpected(`want "` + w + ` of ROLE"`)
				}
			}
			var ok bool
			if s.Target.Role, ok = p.next(); !ok {
				return s, p.unexpected("want a role after of")
			}
		case w == "with":
			p.i++
			err = p.params(&s.Params)
		case w == ModeRefused || w == ModeBlackhole:
			p.i++
			s.Params.Mode = w
		case w == "for":
			p.i++
			v, _ := p.next()
			if err := s.For.UnmarshalText([]byte(v)); err != nil {
				return s, &SpecError{Field: "for", Value: v, Reason: err.Error()}
			}
		case d.uses.processes && s.Target.Processes.IsZero() && s.Target.Brokers.IsZero():
			s.Target.Processes, err = p.selector('p')
		case !d.uses.processes && d.uses.brokers && s.Target.Brokers.IsZero():
			s.Target.Brokers, err = p.selector('b')
		default:
			return s, p.unexpected(fmt.Sprintf("unexpected %q", w))
		}
		if err != nil {
			return s, err
		}
	}
	return s, nil
}

// selector reads one selector: all, subset, random [N], coordinator|leader|holder [of ROLE], or a
// list of ids, whose letter, if any, must be letter (p for processes, b for brokers).
func (p *specParser) selector(letter byte) (Selector, error) {
	w, _ := p.next()
	text := w
	for _, id := range strings.Split(w, ",") {
		if id != "" && (id[0] == 'p' || id[0] == 'b') && id[0] != letter && strings.Trim(id[1:], "0123456789") == "" {
			return Selector{}, p.unexpected(fmt.Sprintf("%q: want %c<id> here", id, letter))
		}
	}
	switch w {
	case string(SelectRandom):
		if _, err := strconv.Atoi(p.peek()); err == nil {
			n, _ := p.next()
			text += " " + n
		}
	case string(SelectCoordinator), string(SelectLeader), string(SelectGroupCoordinator), string(SelectHolder):
		if p.peek() == "of" {
			p.i++
			role, ok := p.next()
			if !ok {
				return Selector{}, p.unexpected("want a role after " + w + " of")
			}
			text += " of " + role
		}
	}
	what, others := processSelectors, "processes"
	if letter == 'b' {
		what, others = brokerSelectors, "brokers"
	}
	s, err := ParseSelector(text)
	if err != nil {
		hint := ""
		if near := Closest(w, selectorWords(letter)); near != "" {
			hint = "did you mean " + near + "? "
		}
		return s, p.unexpected(fmt.Sprintf("selector %q: %s%s here are %s", text, hint, others, what))
	}
	switch {
	case letter == 'b' && s.Kind == SelectHolder:
		return s, p.unexpected(fmt.Sprintf("selector %q picks a process, not brokers; brokers are %s", text, what))
	case letter == 'p' && s.Kind.byRole():
		return s, p.unexpected(fmt.Sprintf("selector %q picks a broker, not processes; processes are %s", text, what))
	}
	return s, nil
}

// Closest returns the word of words nearest to w when it is near enough to be a typo of it
// (an edit distance of at most a third of its length, and at least 1), or "".
func Closest(w string, words []string) string {
	best, bestD := "", len(w)/3+1
	for _, c := range words {
		if d := editDistance(w, c); d > 0 && d <= bestD && (best == "" || d < editDistance(w, best)) {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// params reads name=value words.
func (p *specParser) params(out *Params) error {
	n := 0
	for strings.Contains(p.peek(), "=") {
		w, _ := p.next()
		name, value, _ := strings.Cut(w, "=")
		if err := out.setText(name, value); err != nil {
			return err
		}
		n++
	}
	if n == 0 {
		return p.unexpected("want name=value after with")
	}
	return nil
}
