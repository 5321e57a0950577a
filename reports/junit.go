package reports

import (
	"encoding/xml"
	"fmt"
	"strings"

	"github.com/fencecheck/fencecheck/checker"
)

type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Time     string      `xml:"time,attr"`
	Props    []junitProp `xml:"properties>property"`
	Cases    []junitCase `xml:"testcase"`
}

type junitProp struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	ClassName string        `xml:"classname,attr"`
	Failure   *junitProblem `xml:"failure,omitempty"`
	Error     *junitProblem `xml:"error,omitempty"`
	Skipped   *junitProblem `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitProblem struct {
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
	s := junitSuite{Name: name, Time: fmt.Sprintf("%.3f", float64(res.Timings.Total)/1e9)}
	s.Props = append(s.Props, junitProp{"verdict", string(res.Verdict)}, junitProp{"exit_code", fmt.Sprint(res.ExitCode)})
	if info != nil {
		s.Props = append(s.Props, junitProp{"seed", fmt.Sprint(info.Seed)}, junitProp{"cluster", info.Cluster},
			junitProp{"command", info.Command})
	}
	add := func(class string, r checker.Result) {
		c := junitCase{Name: r.Name, ClassName: name + "." + class}
		msg := fmt.Sprintf("%s: %s", r.Name, r.Verdict)
		switch {
		case r.Verdict == checker.VerdictInvalid && r.Advisory:
			c.SystemOut = "advisory: " + anomalyText(r)
		case r.Verdict == checker.VerdictInvalid:
			c.Failure = &junitProblem{Type: "invalid", Message: fmt.Sprintf("%s: %d anomalies", r.Name, len(r.Anomalies)), Body: anomalyText(r)}
			s.Failures++
		case r.Verdict == checker.VerdictUnknown || r.Verdict == checker.VerdictError:
			c.Error = &junitProblem{Type: string(r.Verdict), Message: msg, Body: detailText(r)}
			s.Errors++
		case r.Verdict == checker.VerdictInconclusive:
			c.Skipped = &junitProblem{Message: msg + ": " + detailText(r)}
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
		s.Cases = append(s.Cases, junitCase{Name: "harness", ClassName: name + ".harness",
			Error: &junitProblem{Type: "error", Message: res.Error}})
		s.Tests++
		s.Errors++
	}
	b, err := xml.MarshalIndent(junitSuites{Suites: []junitSuite{s}}, "", "  ")
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
