package reports_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/checker/checkertest"
)

// chromiumArgs run Chromium headless as root without reaching for the network (the machine
// has none; without these flags it keeps trying).
var chromiumArgs = []string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
	"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-quic",
	"--enable-logging=stderr", "--v=0"}

// TestReportInBrowser renders a run's report in headless Chromium: the page must load without
// a console message, show the verdict, the guarantees and a drawn timeline, and leave a
// screenshot (in $FENCECHECK_ARTIFACTS when set) for a person to look at.
func TestReportInBrowser(t *testing.T) {
	chromium := needChromium(t)
	cfg := checkertest.DefaultConfig()
	cfg.Faults, cfg.Pauses = 3, 1
	rng := rand.New(rand.NewPCG(7, 8))
	h := checkertest.Generate(cfg, rng)
	checkertest.Plant(h, checkertest.StaleWrite, rng) // an invalid run shows every section
	dir, _ := writeRun(t, t.TempDir(), h)
	page, err := filepath.Abs(dir.Report())
	if err != nil {
		t.Fatal(err)
	}

	run := func(extra ...string) (stdout, stderr string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		args := append(append(append([]string{}, chromiumArgs...), "--user-data-dir="+t.TempDir()), extra...)
		cmd := exec.CommandContext(ctx, chromium, append(args, "file://"+page)...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("chromium %v: %v\n%s", extra, err, errb.String())
		}
		return out.String(), errb.String()
	}

	dom, logs := run("--dump-dom")
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, ":CONSOLE") {
			t.Errorf("console message while loading the report: %s", line)
		}
	}
	for _, want := range []string{`id="verdict"`, `<div class="v">invalid</div>`, `id="guarantees"`, `id="coverage"`,
		`aria-label="timeline of role`, `class="anomaly"`, `id="role-select"`} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered page lacks %s", want)
		}
	}
	if n := strings.Count(dom, `class="timeline"`); n != 1 {
		t.Errorf("%d timelines visible at load, want exactly one (the others behind the role selector)", n)
	}

	shots := os.Getenv("FENCECHECK_ARTIFACTS")
	if shots == "" {
		shots = t.TempDir()
	}
	shot := filepath.Join(shots, "report.png")
	run("--window-size=1100,2600", "--screenshot="+shot)
	b, err := os.ReadFile(shot)
	if err != nil || len(b) < 10_000 || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Fatalf("screenshot %s: %d bytes, %v", shot, len(b), err)
	}
	t.Logf("screenshot: %s", shot)
}
