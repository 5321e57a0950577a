package mutant

import (
	"slices"
	"testing"
)

// TestRegressionMutantsOutsideSelftest: a mutant made for a regression can be started by name
// but is not in List, which selftest runs (it shows a dependency's race at the dependency's
// rate, not a promise the checker must catch every time).
func TestRegressionMutantsOutsideSelftest(t *testing.T) {
	for _, m := range regressionMutants {
		if !Known(m.name) || !slices.Contains(Names(), m.name) {
			t.Errorf("regression mutant %s is not known", m.name)
		}
		if slices.ContainsFunc(List(), func(d Description) bool { return d.Name == m.name }) {
			t.Errorf("regression mutant %s is in List, so selftest would run it", m.name)
		}
	}
	if Known("no-such") {
		t.Error("Known(no-such) = true")
	}
}
