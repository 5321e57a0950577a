package lineproto

import (
	"fmt"
	"testing"
)

func TestSplitCommand(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"fencecheck adapter", "[fencecheck adapter]"},
		{"  java -jar 'my adapter.jar'  --x=1 ", "[java -jar my adapter.jar --x=1]"},
		{`sh -c "echo \"hi\" \\ there"`, `[sh -c echo "hi" \ there]`},
		{`a\ b c''d ""`, "[a b cd ]"},
	} {
		got, err := SplitCommand(tc.in)
		if err != nil || fmt.Sprint(got) != tc.want {
			t.Errorf("SplitCommand(%q) = %q, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "   ", "a 'b", `a "b`, `a\`} {
		if got, err := SplitCommand(bad); err == nil {
			t.Errorf("SplitCommand(%q) = %q, want an error", bad, got)
		}
	}
}
