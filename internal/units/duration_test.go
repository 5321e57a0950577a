package units_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/internal/units"
	yaml "go.yaml.in/yaml/v3"
)

func TestDurationParsing(t *testing.T) {
	type doc struct {
		D units.Duration `json:"d" yaml:"d"`
	}
	tests := []struct {
		name, yaml, json string
		want             time.Duration
		err              string
	}{
		{name: "with a unit - parsed", yaml: "d: 1m30s", json: `{"d":"1m30s"}`, want: 90 * time.Second},
		{name: "zero - zero", yaml: "d: 0", json: `{"d":"0"}`},
		{name: "bare number - refused, naming the unit", yaml: "d: 5", json: `{"d":5}`, err: "with a unit"},
		{name: "unknown unit - refused", yaml: "d: 5 weeks", json: `{"d":"5 weeks"}`, err: "with a unit"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var y, j doc
			for format, err := range map[string]error{
				"yaml": yaml.Unmarshal([]byte(tc.yaml), &y),
				"json": json.Unmarshal([]byte(tc.json), &j),
			} {
				switch {
				case tc.err == "" && err != nil:
					t.Errorf("%s: %v", format, err)
				case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
					t.Errorf("%s: error %v, want one saying %q", format, err, tc.err)
				}
			}
			if tc.err == "" && (y.D.D() != tc.want || j.D.D() != tc.want) {
				t.Errorf("yaml %v, json %v, want %v", y.D, j.D, tc.want)
			}
		})
	}
}

func TestDurationRoundTrip(t *testing.T) {
	b, err := json.Marshal(units.Duration(1500 * time.Millisecond))
	if err != nil || string(b) != `"1.5s"` {
		t.Fatalf("marshal: %s %v", b, err)
	}
	var d units.Duration
	if err := json.Unmarshal(b, &d); err != nil || d.D() != 1500*time.Millisecond {
		t.Fatalf("unmarshal: %v %v", d, err)
	}
}
