package nemesis

import (
	"encoding/json"
	"fmt"
	"time"
)

// Duration is a time.Duration written as a string in scenario files ("5s", "250ms"). A bare
// number is refused: it would be read as nanoseconds, which nobody means.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String formats d like time.Duration.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler (YAML scalars, JSON strings).
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
