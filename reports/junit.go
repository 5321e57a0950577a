package reports

import (
	"encoding/xml"
	"fmt"
	"strings"

	"github.com/fencecheck/fencecheck/checker"
)

// JUnitSuites is a JUnit XML document: a run's junit.xml (one testsuite), or a suite's (one
// testsuite per cell, built from its runs' files).
type JUnitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []JUnitSuite `xml:"testsuite"`
}

// JUnitSuite is one testsuite: its counts, properties and test cases.
type JUnitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Time     string      `xml:"time,attr"`
	Props    []JUnitProp `xml:"properties>property"`
	Cases    []JUnitCase `xml:"testcase"`
}

// JUnitProp is a testsuite property.
type JUnitProp struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

// JUnitCase is one test case; at most one of Failure, Error and Skipped is set.
type JUnitCase struct {
	Name      string        `xml:"name,attr"`
	ClassName string        `xml:"classname,attr"`
	Failure   *JUnitProblem `xml:"failure,omitempty"`
	Error     *JUnitProblem `xml:"error,omitempty"`
	Skipped   *JUnitProblem `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

// JUnitProblem is a test case's failure, error or skip: a type, a short message, the details.
type JUnitProblem struct {
	Type    string `xml:"type,attr,omitempty"`
	Message string `xml:"message,attr"`
	Body    string `xml:",chardata"`
}

// JUnit renders results as JUnit XML: one suite for the run, one test case per guarantee and
// per coverage requirement. An invalid guarantee is a failure (with its anomalies), an unknown
// or errored one an error, an inconclusive one skipped, so CI shows which guarantee broke and
// which could not be judged.
func JUnit(info *RunInfo, res *checker.Results) ([]byte, error) {
	name := "fencecheck"
	if info != nil && info.Scenario != "" {
		name += "." + info.Scenario
	}
	s := JUnitSuite{Name: name, Time: fmt.Sprintf("%.3f", float64(res.Timings.Total)/1e9)}
	s.Props = append(s.Props, JUnitProp{"verdict", string(res.Verdict)}, JUnitProp{"exit_code", fmt.Sprint(res.ExitCode)})
	if info != nil {
		s.Props = append(s.Props, JUnitProp{"seed", fmt.Sprint(info.Seed)}, JUnitProp{"cluster", info.Cluster},
			JUnitProp{"command", info.Command})
	}
	add := func(class string, r checker.Result) {
		c := JUnitCase{Name: r.Name, ClassName: name + "." + class}
		msg := fmt.Sprintf("%s: %s", r.Name, r.Verdict)
		switch {
		case r.Verdict == checker.VerdictInvalid && r.Advisory:
			c.SystemOut = "advisory: " + anomalyText(r)
		case r.Verdict == checker.VerdictInvalid:
			c.Failure = &JUnitProblem{Type: "invalid", Message: fmt.Sprintf("%s: %d anomalies", r.Name, len(r.Anomalies)), Body: anomalyText(r)}
			s.Failures++
		case r.Verdict == checker.VerdictUnknown || r.Verdict == checker.VerdictError:
			c.Error = &JUnitProblem{Type: string(r.Verdict), Message: msg, Body: detailText(r)}
			s.Errors++
		case r.Verdict == checker.VerdictInconclusive, r.Verdict == checker.VerdictNotCovered:
			c.Skipped = &JUnitProblem{Message: msg + ": " + detailText(r)}
			s.Skipped++
		}
		s.Cases = append(s.Cases, c)
		s.Tests++
	}
	for _, r := range res.Checks {
		add("guarantee", r)
	}
	for _, r := range res.Coverage {
		add("coverage", r)
	}
	if res.Error != "" {
		s.Cases = append(s.Cases, JUnitCase{Name: "harness", ClassName: name + ".harness",
			Error: &JUnitProblem{Type: "error", Message: res.Error}})
		s.Tests++
		s.Errors++
	}
	b, err := xml.MarshalIndent(JUnitSuites{Suites: []JUnitSuite{s}}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode junit: %w", err)
	}
	return append([]byte(xml.Header), append(b, '\n')...), nil
}

func anomalyText(r checker.Result) string {
	var b strings.Builder
	for _, a := range r.Anomalies {
		fmt.Fprintf(&b, "- %s", a.Explanation)
		if len(a.Ops) > 0 {
			fmt.Fprintf(&b, " (ops %v)", a.Ops)
		}
		if len(a.Offsets) > 0 {
			fmt.Fprintf(&b, " (%s offsets %v)", a.Log, a.Offsets)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func detailText(r checker.Result) string {
	if len(r.Details) == 0 {
		return ""
	}
	return fmt.Sprint(r.Details)
}
