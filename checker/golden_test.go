package checker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/checker/history"
)

var update = flag.Bool("update", false, "rewrite the expected results of the golden histories in testdata/")

// expectation is what a golden history's .expected.json pins down.
type expectation struct {
	Verdict checker.Verdict `json:"verdict"`
	// NotValid lists every check and coverage requirement that is not valid.
	NotValid   map[string]checker.Verdict `json:"not_valid,omitempty"`
	Anomalies  []expectedAnomaly          `json:"anomalies,omitempty"`
	Truncated  bool                       `json:"truncated,omitempty"`
	ExposureNS int64                      `json:"exposure_ns,omitempty"`
	Visualized []string                   `json:"visualized,omitempty"`
}

type expectedAnomaly struct {
	Guarantee string  `json:"guarantee"`
	Ops       []int64 `json:"ops,omitempty"`
	Offsets   []int64 `json:"offsets,omitempty"`
}

func summarize(res *checker.Results) expectation {
	e := expectation{
		Verdict: res.Verdict, NotValid: map[string]checker.Verdict{}, Truncated: res.History.Truncated,
		ExposureNS: res.Exposure.TotalNS, Visualized: res.Visualized,
	}
	for _, r := range append(slices.Clone(res.Checks), res.Coverage...) {
		if r.Verdict != checker.VerdictValid {
			e.NotValid[r.Name] = r.Verdict
		}
		for _, a := range r.Anomalies {
			e.Anomalies = append(e.Anomalies, expectedAnomaly{Guarantee: a.Guarantee, Ops: a.Ops, Offsets: a.Offsets})
		}
	}
	return e
}

// TestGoldenHistories checks every hand-written history in testdata/. A file named
// <check>--<verdict>--<what>.jsonl must give <check> that verdict, whatever the expectation
// file says; <name>.expected.json pins the rest (regenerate with -update, then review).
func TestGoldenHistories(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "*.jsonl"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no golden histories: %v", err)
	}
	for _, path := range paths {
		name := strings.TrimSuffix(filepath.Base(path), ".jsonl")
		parts := strings.SplitN(name, "--", 3)
		if len(parts) != 3 {
			t.Fatalf("%s: want <check>--<verdict>--<what>.jsonl", path)
		}
		check, want := parts[0], checker.Verdict(parts[1])
		t.Run(strings.ReplaceAll(name, "--", " - "), func(t *testing.T) {
			h, err := history.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			pages := &visualizations{}
			res, err := checker.Check(context.Background(), h, checker.Options{Visualize: pages.open})
			if err != nil {
				t.Fatal(err)
			}
			r := res.Check(check)
			if r == nil {
				t.Fatalf("no check or coverage named %q", check)
			}
			if r.Verdict != want {
				t.Fatalf("%s is %s, want %s: %+v", check, r.Verdict, want, r)
			}
			switch {
			case want == checker.VerdictValid && res.Verdict != checker.VerdictValid:
				t.Fatalf("run is %s, want valid: %+v", res.Verdict, summarize(res))
			case want == checker.VerdictInvalid && !r.Advisory && res.Verdict != checker.VerdictInvalid:
				t.Fatalf("run is %s, want invalid", res.Verdict)
			case check == checker.WellFormed && res.Verdict != want:
				t.Fatalf("run is %s, want %s: a broken recording yields no other verdict", res.Verdict, want)
			}
			for _, a := range r.Anomalies {
				if a.Guarantee != check || a.Explanation == "" || !strings.HasSuffix(a.Explanation, ".") {
					t.Errorf("anomaly %+v under %s", a, check)
				}
			}
			for _, role := range res.Visualized {
				if n := pages.size(role); n == 0 {
					t.Errorf("visualization of %s is empty or missing", role)
				}
			}
			if _, err := json.Marshal(res); err != nil {
				t.Fatalf("results do not encode: %v", err)
			}

			got := summarize(res)
			expected := strings.TrimSuffix(path, ".jsonl") + ".expected.json"
			if *update {
				b, err := json.MarshalIndent(got, "", "  ")
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(expected, append(b, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			b, err := os.ReadFile(expected)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			var exp expectation
			if err := json.Unmarshal(b, &exp); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(normalize(got), normalize(exp)) {
				gb, _ := json.MarshalIndent(got, "", "  ")
				t.Fatalf("results differ from %s:\n%s", expected, gb)
			}
		})
	}
}

func normalize(e expectation) expectation {
	if len(e.NotValid) == 0 {
		e.NotValid = nil
	}
	return e
}

// visualizations keeps the pages Check visualizes in memory, by role. Check may write several
// at once.
type visualizations struct {
	mu    sync.Mutex
	pages map[string]*bytes.Buffer
}

func (v *visualizations) open(role string) (io.WriteCloser, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.pages == nil {
		v.pages = map[string]*bytes.Buffer{}
	}
	if v.pages[role] != nil {
		return nil, fmt.Errorf("role %q visualized twice", role)
	}
	b := &bytes.Buffer{}
	v.pages[role] = b
	return nopCloser{b}, nil
}

func (v *visualizations) size(role string) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	if b := v.pages[role]; b != nil {
		return b.Len()
	}
	return 0
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
