package nemesis

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/fencecheck/fencecheck/internal/units"
)

// Spec describes one fault as data: what scenario files hold and the random schedule picks
// from. The zero values of Target, Params and For mean the fault's defaults.
type Spec struct {
	// Fault is a registered fault name (see Faults).
	Fault string `json:"fault" yaml:"fault"`
	// Target picks the processes, brokers or role the fault acts on.
	Target Target `json:"target,omitzero" yaml:"target,omitempty"`
	// Params tune the fault; each fault takes only the parameters its description lists.
	Params Params `json:"params,omitzero" yaml:"params,omitempty"`
	// For is how long the fault stays injected. Zero: the schedule's default (the random
	// schedule's fault duration; a scripted step must set it, except for events such as
	// restart and move-coordinator, which take none).
	For units.Duration `json:"for,omitempty" yaml:"for,omitempty"`
}

// Target picks what a fault acts on. Which fields a fault uses is in its description; setting
// one it does not use is an error.
type Target struct {
	// Processes are the processes whose links a link fault acts on. Default: one at random.
	Processes Selector `json:"processes,omitzero" yaml:"processes,omitempty"`
	// Brokers are the brokers: those a link fault cuts the processes from (default all), or
	// those a broker fault acts on (default one at random).
	Brokers Selector `json:"brokers,omitzero" yaml:"brokers,omitempty"`
	// Role is the role of freeze (freeze its holder) and move-coordinator (move its
	// coordinator). Default: one of the run's roles at random.
	Role string `json:"role,omitempty" yaml:"role,omitempty"`
}

// IsZero reports whether t selects every default.
func (t Target) IsZero() bool { return t.Processes.IsZero() && t.Brokers.IsZero() && t.Role == "" }

// targetText is a Target with its selectors in text form, ids with their letter.
type targetText struct {
	Processes string `json:"processes,omitempty" yaml:"processes,omitempty"`
	Brokers   string `json:"brokers,omitempty" yaml:"brokers,omitempty"`
	Role      string `json:"role,omitempty" yaml:"role,omitempty"`
}

func (t Target) text() targetText {
	return targetText{Processes: t.Processes.format("p"), Brokers: t.Brokers.format("b"), Role: t.Role}
}

// MarshalJSON writes the selectors' ids as they read in scenario files: p1, b2.
func (t Target) MarshalJSON() ([]byte, error) { return json.Marshal(t.text()) }

// MarshalYAML is MarshalJSON for YAML encoders.
func (t Target) MarshalYAML() (any, error) { return t.text(), nil }

// Link fault modes (Params.Mode).
const (
	// ModeRefused takes the link down: connecting is refused and open connections close.
	ModeRefused = "refused"
	// ModeBlackhole keeps connections open and drops every byte (toxiproxy "timeout" with 0).
	ModeBlackhole = "blackhole"
)

// Toxic directions (Params.Direction).
const (
	DirUpstream   = "upstream"   // requests, process → broker
	DirDownstream = "downstream" // responses, broker → process
	DirBoth       = "both"
)

// Params tune a fault. The field names in scenario files are the json names. Zero means the
// fault's default (see Faults for which fault takes which parameter and its default).
type Params struct {
	// Mode is ModeRefused or ModeBlackhole (partition, isolate).
	Mode string `json:"mode,omitempty" yaml:"mode,omitempty"`
	// Direction is the toxic stream: DirUpstream, DirDownstream or DirBoth.
	Direction string `json:"direction,omitempty" yaml:"direction,omitempty"`
	// Latency is the delay a latency toxic adds, Jitter its random ± spread.
	Latency units.Duration `json:"latency,omitempty" yaml:"latency,omitempty"`
	Jitter  units.Duration `json:"jitter,omitempty" yaml:"jitter,omitempty"`
	// Rate is the bandwidth limit in KB/s.
	Rate int64 `json:"rate,omitempty" yaml:"rate,omitempty"`
	// Bytes is how many bytes limit-data lets through per connection before closing it.
	Bytes int64 `json:"bytes,omitempty" yaml:"bytes,omitempty"`
	// SliceSize, SliceVariation and SliceDelay shape slicer: average slice size and its
	// variation in bytes, and the delay between slices.
	SliceSize      int            `json:"slice_size,omitempty" yaml:"slice_size,omitempty"`
	SliceVariation int            `json:"slice_variation,omitempty" yaml:"slice_variation,omitempty"`
	SliceDelay     units.Duration `json:"slice_delay,omitempty" yaml:"slice_delay,omitempty"`
	// ResetAfter is how long reset-peer lets a connection carry data before resetting it.
	ResetAfter units.Duration `json:"reset_after,omitempty" yaml:"reset_after,omitempty"`
	// Interval is flapping's mean time between toggles, and restart's pause between brokers.
	Interval units.Duration `json:"interval,omitempty" yaml:"interval,omitempty"`
	// Point is the pause point freeze stops the member at ("" = the workload's default).
	Point string `json:"point,omitempty" yaml:"point,omitempty"`
	// Toxicity is the share of connections a toxic applies to, in (0, 1]. Default 1.
	Toxicity float64 `json:"toxicity,omitempty" yaml:"toxicity,omitempty"`
	// API is the Kafka request type a Kafka-aware fault matches ("produce", "endtxn").
	API string `json:"api,omitempty" yaml:"api,omitempty"`
	// Until is the request type after whose response hold (and duplicate) deliver.
	Until string `json:"until,omitempty" yaml:"until,omitempty"`
	// Count limits a Kafka-aware fault to the first Count matching requests. 0: all.
	Count int `json:"count,omitempty" yaml:"count,omitempty"`
	// Partition narrows a Kafka-aware fault to requests naming "TOPIC/N", or partition N.
	Partition string `json:"partition,omitempty" yaml:"partition,omitempty"`
	// Delay is how late the delay fault lets a request reach the broker.
	Delay units.Duration `json:"delay,omitempty" yaml:"delay,omitempty"`
	// Error is the Kafka error (NOT_COORDINATOR, or its code) error-response answers with.
	Error string `json:"error,omitempty" yaml:"error,omitempty"`
}

// IsZero reports whether every parameter is at its default.
func (p Params) IsZero() bool { return reflect.ValueOf(p).IsZero() }

// paramNames are the json names of Params' fields, in field order.
var paramNames = func() []string {
	t := reflect.TypeFor[Params]()
	out := make([]string, t.NumField())
	for i := range out {
		out[i], _, _ = strings.Cut(t.Field(i).Tag.Get("json"), ",")
	}
	return out
}()

// set returns the names of the parameters that are not zero.
func (p Params) set() []string {
	v := reflect.ValueOf(p)
	var out []string
	for i, name := range paramNames {
		if !v.Field(i).IsZero() {
			out = append(out, name)
		}
	}
	return out
}

// get formats parameter name.
func (p Params) get(name string) string {
	v := reflect.ValueOf(p).Field(slices.Index(paramNames, name))
	if d, ok := v.Interface().(units.Duration); ok {
		return d.String()
	}
	return fmt.Sprint(v.Interface())
}

// setText sets parameter name from its text form.
func (p *Params) setText(name, text string) error {
	i := slices.Index(paramNames, name)
	if i < 0 {
		return &SpecError{Field: "params." + name, Reason: "no such parameter; parameters are " + strings.Join(paramNames, ", ")}
	}
	f := reflect.ValueOf(p).Elem().Field(i)
	var err error
	switch ptr := f.Addr().Interface().(type) {
	case *units.Duration:
		err = ptr.UnmarshalText([]byte(text))
	case *string:
		*ptr = text
	case *int:
		*ptr, err = strconv.Atoi(text)
	case *int64:
		*ptr, err = strconv.ParseInt(text, 10, 64)
	case *float64:
		*ptr, err = strconv.ParseFloat(text, 64)
	}
	if err != nil {
		return &SpecError{Field: "params." + name, Value: text, Reason: err.Error()}
	}
	return nil
}

// Validate checks the spec without a cluster: a registered fault, only the target fields and
// parameters that fault uses, and values in range. The error is a *SpecError naming the field.
func (s Spec) Validate() error {
	d, ok := lookup(s.Fault)
	if !ok {
		return &SpecError{Field: "fault", Value: s.Fault, Reason: "unknown fault; known faults are " + strings.Join(names(), ", ")}
	}
	if s.For < 0 {
		return &SpecError{Field: "for", Value: s.For, Reason: "must not be negative"}
	}
	if d.event && s.For != 0 {
		return &SpecError{Field: "for", Value: s.For, Reason: s.Fault + " is an event and takes no duration"}
	}
	if err := d.checkTarget(s.Target); err != nil {
		return prefixed("target.", err)
	}
	for _, name := range s.Params.set() {
		if !slices.Contains(d.params, name) {
			uses := "none"
			if len(d.params) > 0 {
				uses = strings.Join(d.params, ", ")
			}
			return &SpecError{Field: "params." + name, Value: s.Params.get(name),
				Reason: fmt.Sprintf("not a parameter of %s (its parameters: %s)", s.Fault, uses)}
		}
	}
	eff := d.withDefaults(s)
	if err := s.Params.check(eff.Params); err != nil {
		return prefixed("params.", err)
	}
	if d.check != nil {
		return d.check(eff)
	}
	return nil
}

// check validates parameter values; eff is p with the fault's defaults filled in.
func (p Params) check(eff Params) error {
	switch p.Mode {
	case "", ModeRefused, ModeBlackhole:
	default:
		return &SpecError{Field: "mode", Value: p.Mode, Reason: "want refused or blackhole"}
	}
	switch p.Direction {
	case "", DirUpstream, DirDownstream, DirBoth:
	default:
		return &SpecError{Field: "direction", Value: p.Direction, Reason: "want upstream, downstream or both"}
	}
	v := reflect.ValueOf(p)
	for i, name := range paramNames {
		if f := v.Field(i); f.CanInt() && f.Int() < 0 || f.CanFloat() && f.Float() < 0 {
			return &SpecError{Field: name, Value: p.get(name), Reason: "must not be negative"}
		}
	}
	if p.Toxicity > 1 {
		return &SpecError{Field: "toxicity", Value: p.Toxicity, Reason: "want a probability in (0, 1]"}
	}
	if eff.Jitter > eff.Latency {
		return &SpecError{Field: "jitter", Value: eff.Jitter, Reason: fmt.Sprintf("must not exceed the latency (%v)", eff.Latency)}
	}
	return nil
}

// String formats s as the timeline's one-line form (see ParseStep), without "at":
// "partition p1 from coordinator of role-3 with mode=blackhole for 12s".
func (s Spec) String() string {
	d, ok := lookup(s.Fault)
	if ok && d.kafka {
		return s.kafkaString()
	}
	var b strings.Builder
	b.WriteString(s.Fault)
	word := func(w string) {
		if w != "" {
			b.WriteString(" " + w)
		}
	}
	if ok && d.uses.processes {
		word(s.Target.Processes.format("p"))
		if !s.Target.Brokers.IsZero() {
			word("from " + s.Target.Brokers.format("b"))
		}
	} else {
		word(s.Target.Brokers.format("b"))
	}
	if s.Target.Role != "" {
		phrase := "of"
		if ok && d.uses.rolePhrase != "" {
			phrase = d.uses.rolePhrase
		}
		word(phrase + " " + s.Target.Role)
	}
	if set := s.Params.set(); len(set) > 0 {
		b.WriteString(" with")
		for _, name := range set {
			b.WriteString(" " + name + "=" + s.Params.get(name))
		}
	}
	if s.For != 0 {
		word("for " + s.For.String())
	}
	return b.String()
}
