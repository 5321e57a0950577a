// Package units holds the value types with a unit that scenario files write and that several
// packages share: Duration. It imports nothing of fencecheck, so the workload, the nemesis and
// the scenarios (which may not import one another freely) all use the one type, with one
// parsing rule.
package units

import (
	"encoding/json"
	"fmt"
	"time"

	yaml "go.yaml.in/yaml/v3"
)

// Duration is a time.Duration written as a string with a unit in scenario files and JSON
// ("5s", "250ms", "1m30s"); "0" is zero. A bare number is refused, in YAML and in JSON: it
// would be read as nanoseconds, which nobody means.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String formats d like time.Duration.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler (YAML scalars, JSON strings): anything
// time.ParseDuration accepts.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("duration %q: want a number with a unit, like 5s or 250ms", b)
	}
	*d = Duration(v)
	return nil
}

// UnmarshalJSON accepts only a string, so a bare number is an error instead of nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration %s: want a string with a unit, like \"5s\"", b)
	}
	return d.UnmarshalText([]byte(s))
}

// UnmarshalYAML decodes a scalar as UnmarshalText does, and names the line of a bad one (a
// TextUnmarshaler's error reaches the reader of a scenario file without it).
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: duration: want a string with a unit, like 5s or 250ms", n.Line)
	}
	if err := d.UnmarshalText([]byte(n.Value)); err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	return nil
}
