package workload

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// RecordCount is how many records each work write carries, all in its one transaction: a
// fixed number (Min = Max) or a range drawn per write with the run's seed. Scenario files
// write it as a number ("4") or a range ("2-6"). The zero value is one record, as every work
// write carried before, so configurations without it run and record exactly as they did.
type RecordCount struct {
	Min, Max int
}

// IsZero reports whether c is the zero value (one record): the field is then left out of a
// scenario file and of run.json.
func (c RecordCount) IsZero() bool { return c == RecordCount{} }

// Bounds returns the smallest and largest count in effect (1 and 1 for the zero value).
func (c RecordCount) Bounds() (lo, hi int) {
	if c.IsZero() {
		return 1, 1
	}
	return c.Min, c.Max
}

// String formats c as a scenario file writes it: "4" or "2-6".
func (c RecordCount) String() string {
	lo, hi := c.Bounds()
	if lo == hi {
		return strconv.Itoa(lo)
	}
	return strconv.Itoa(lo) + "-" + strconv.Itoa(hi)
}

// MarshalText implements encoding.TextMarshaler.
func (c RecordCount) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText reads "N" or "MIN-MAX". The bounds themselves are Validate's to judge.
func (c *RecordCount) UnmarshalText(b []byte) error {
	s := strings.TrimSpace(string(b))
	first, last, isRange := strings.Cut(s, "-")
	lo, err := strconv.Atoi(strings.TrimSpace(first))
	hi := lo
	if err == nil && isRange {
		hi, err = strconv.Atoi(strings.TrimSpace(last))
	}
	if err != nil {
		return fmt.Errorf("record count %q: want a number like 4 or a range like 2-6", b)
	}
	*c = RecordCount{Min: lo, Max: hi}
	return nil
}

// MarshalJSON writes a fixed count as a number and a range as a string.
func (c RecordCount) MarshalJSON() ([]byte, error) {
	if lo, hi := c.Bounds(); lo == hi {
		return []byte(strconv.Itoa(lo)), nil
	}
	return json.Marshal(c.String())
}

// UnmarshalJSON reads a number or a string.
func (c *RecordCount) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		s = string(b)
	}
	return c.UnmarshalText([]byte(s))
}

// MarshalYAML writes a fixed count as a number and a range as a string.
func (c RecordCount) MarshalYAML() (any, error) {
	if lo, hi := c.Bounds(); lo == hi {
		return lo, nil
	}
	return c.String(), nil
}

// UnmarshalYAML reads a scalar, naming the line of a bad one.
func (c *RecordCount) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: record count: want a number like 4 or a range like 2-6", n.Line)
	}
	if err := c.UnmarshalText([]byte(n.Value)); err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	return nil
}
