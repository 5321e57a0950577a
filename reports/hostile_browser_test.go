package reports_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencecheck/fencecheck/checker"
	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/reports"
)

// hostile are texts that run script wherever they land unescaped: in HTML text, in an
// attribute (either quote), inside a script, in XML. Each one that runs writes PWNED to the
// console and makes it the page's title, so the test sees it.
var hostile = []string{
	`<img src=x onerror="document.title='PWNED';console.log('PWNED')">`,
	`</script><script>document.title='PWNED';console.log('PWNED')</script>`,
	`"'><svg onload="document.title='PWNED';console.log('PWNED')">`,
	`]]><script xmlns="http://www.w3.org/1999/xhtml">document.title='PWNED';console.log('PWNED')</script>`,
	`'-console.log('PWNED')-'`,
}

// hostileText returns hostile text i (cycling), tagged with what it names so that every field
// differs.
func hostileText(i int, what string) string {
	return what + "-" + hostile[i%len(hostile)]
}

// writeHostileHistory writes a history in which every text field a history carries (role,
// member, process, error class, write id, fault kind, targets and description, the header's
// scenario, labels and script steps) is hostile, and in which every role breaks
// token-monotonic, so each gets a porcupine visualization with its operations' metadata and
// the fault windows. The script's last step is never injected, so fault-took-hold names it
// (with its text) in report.html and junit.xml.
func writeHostileHistory(t *testing.T, path string) {
	t.Helper()
	meta := history.Meta{Scenario: hostileText(0, "scenario"), LeaseDuration: 100, Run: hostileText(1, "run"),
		Cluster: hostileText(2, "cluster"), Labels: map[string]string{hostileText(3, "label"): hostileText(4, "value")},
		Schedule: history.ScheduleScript}
	for i := range len(hostile) + 1 {
		meta.Script = append(meta.Script, hostileText(i, fmt.Sprintf("step%d", i+1)))
	}
	w, err := history.Create(path, meta, history.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	add := func(e history.Event) {
		t.Helper()
		if err := w.Append(e); err != nil {
			t.Fatal(err)
		}
	}
	id := int64(0)
	for r := range len(hostile) {
		role := hostileText(r, fmt.Sprintf("role%d", r))
		base := int64(1000 * (r + 1))
		member := func(m int) string { return hostileText(r+m, fmt.Sprintf("member%d", m)) }
		process := func(m int) string { return hostileText(r+m+1, fmt.Sprintf("process%d", m)) }
		op := func(at int64, m int, kind history.Kind, args history.Args, done history.Event) {
			id++
			add(history.Event{Type: history.TypeInvoke, ID: id, Time: at, Client: int(id), Process: process(m),
				Member: member(m), Role: role, Kind: kind, Args: args})
			done.ID, done.Time = id, at+5
			add(done)
		}
		tok := func(e int16) *history.Token { return &history.Token{ProducerID: 1000, Epoch: e} }
		op(base, 0, history.KindRegister, history.Args{}, history.Event{Type: history.TypeOK, Result: history.Result{Offset: new(int64)}})
		op(base+10, 0, history.KindAcquire, history.Args{}, history.Event{Type: history.TypeOK, Result: history.Result{Token: tok(2)}})
		op(base+20, 1, history.KindAcquire, history.Args{}, history.Event{Type: history.TypeOK, Result: history.Result{Token: tok(1)}}) // older: invalid
		op(base+30, 2, history.KindAcquire, history.Args{}, history.Event{Type: history.TypeInfo, Error: hostileText(r, "error")})
		op(base+40, 0, history.KindWriteLease, history.Args{Token: *tok(2), WriteID: hostileText(r, "write")},
			history.Event{Type: history.TypeInfo, Error: hostileText(r+1, "error")})
		op(base+50, 1, history.KindDescribe, history.Args{}, history.Event{Type: history.TypeOK, Result: history.Result{Held: true, Token: tok(2)}})
		op(base+60, 1, history.KindWork, history.Args{Token: *tok(1), WriteID: hostileText(r+2, "work"), Log: history.WorkLog(int32(r))},
			history.Event{Type: history.TypeFail, Error: hostileText(r+2, "error")})
		fault := int64(r + 1)
		add(history.Event{Type: history.TypeFaultStart, Fault: fault, Step: r + 1, Time: base + 15, Kind: history.Kind(hostileText(r, "kind")),
			Targets: []string{hostileText(r, "target"), hostileText(r+1, "target")}, Desc: hostileText(r+2, "desc")})
		add(history.Event{Type: history.TypeFaultEnd, Fault: fault, Time: base + 45, TookHold: true})
		add(history.Event{Type: history.TypeFaultStart, Fault: 100 + fault, Time: base + 25, Kind: history.KindMemberPause,
			Process: process(1), Role: role, Member: member(1), Targets: []string{process(1) + "/" + role + "/" + member(1)}})
		add(history.Event{Type: history.TypeFaultEnd, Fault: 100 + fault, Time: base + 55})
		op(90_000, 0, history.KindFinalRead, history.Args{}, history.Event{Type: history.TypeOK, Result: history.Result{Records: []history.Record{
			{Offset: 0, Kind: history.RecordRegistration, Member: member(0), Token: history.NoToken},
			{Offset: 1, Kind: history.RecordLease, Member: member(0), Token: *tok(2), WriteID: hostileText(r, "write")},
			{Offset: 2, Kind: history.RecordLease, Member: member(3), Token: *tok(2), WriteID: hostileText(r, "orphan")},
		}}})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestHostileTextRunsNoScript writes every page a run writes (report.html, linear/*.html,
// junit.xml), through the code path of `fencecheck check`, from a history whose every text
// field is hostile, and loads each page in headless Chromium: hovering, clicking and
// selecting everything that reacts, as a person would. No script may run and the console
// must stay silent. (Porcupine's tooltip sets innerHTML from an operation's metadata: a
// process named <img onerror=...> ran script on hover.)
func TestHostileTextRunsNoScript(t *testing.T) {
	chromium := needChromium(t)
	root := t.TempDir()
	dir, err := reports.NewDir(root, "unit", time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC), 7)
	if err != nil {
		t.Fatal(err)
	}
	info := &reports.RunInfo{Scenario: hostileText(0, "scenario"), Description: hostileText(1, "description"), Seed: 7,
		Cluster: hostileText(2, "cluster"), Command: hostileText(3, "command"), Transport: hostileText(4, "transport"),
		Revision: hostileText(0, "revision"), Kafka: hostileText(1, "kafka"), Started: time.Now()}
	if err := dir.WriteRunInfo(info); err != nil {
		t.Fatal(err)
	}
	writeHostileHistory(t, dir.History())
	res := checkDir(t, dir)
	if len(res.Visualized) != len(hostile) {
		t.Fatalf("visualized %d roles, want %d (every role breaks token-monotonic): %+v", len(res.Visualized), len(hostile), res.Check(checker.TokenMonotonic))
	}
	// A control: the harness must see a payload that does run (on hover, like porcupine's
	// tooltip), or a pass below would prove nothing.
	control := filepath.Join(t.TempDir(), "control.html")
	page := fmt.Sprintf(`<!doctype html><html><head><title>control</title></head><body>
<div id="x">hover me</div><div id="tip"></div>
<script>document.getElementById('x').addEventListener('mouseover', function () {
  document.getElementById('tip').innerHTML = %q;
});</script></body></html>`, hostile[0])
	if err := os.WriteFile(control, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	if result, console := exercise(t, chromium, control); !strings.HasSuffix(result, "script ran: yes") || len(console) == 0 {
		t.Fatalf("the harness does not see script run on hover: %q, console %q", result, console)
	}

	// The missed step's text must reach the pages, or their passing would not cover it.
	missed := fmt.Sprintf("step %d", len(hostile)+1)
	if r := res.Coverage; !slices.ContainsFunc(r, func(c checker.Result) bool {
		return c.Name == checker.CoverFaultTookHold && c.Verdict == checker.VerdictInconclusive
	}) {
		t.Fatalf("fault-took-hold is not inconclusive: %+v", r)
	}
	for _, page := range []string{dir.Report(), dir.JUnit()} {
		if text := read(t, page); !strings.Contains(text, missed) || !strings.Contains(text, "never injected") {
			t.Fatalf("%s does not name the missed %s", filepath.Base(page), missed)
		}
	}

	pages := []string{dir.Report(), dir.JUnit()}
	for _, role := range res.Visualized {
		pages = append(pages, filepath.Join(string(dir), filepath.FromSlash(reports.LinearName(role))))
	}
	for i, page := range pages {
		name := filepath.Base(page)
		if i >= 2 {
			name = fmt.Sprintf("linear-%d", i-2)
		}
		t.Run(name, func(t *testing.T) {
			result, console := exercise(t, chromium, page)
			if !strings.HasPrefix(result, "done: ") {
				t.Fatalf("the harness did not finish: %q", result)
			}
			if !strings.HasSuffix(result, "script ran: no") {
				t.Errorf("script ran in %s: %s", page, result)
			}
			for _, line := range console {
				t.Errorf("console message in %s: %s", page, line)
			}
			t.Logf("%s: %s", name, result)
		})
	}
}

func needChromium(t *testing.T) string {
	t.Helper()
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("FENCECHECK_REQUIRE_BROWSER") == "1" {
			t.Fatalf("FENCECHECK_REQUIRE_BROWSER=1 and no chromium on PATH: %v", err)
		}
		t.Skip("no chromium on PATH (apt-get install chromium); set FENCECHECK_REQUIRE_BROWSER=1 to fail instead")
	}
	return chromium
}

// harness loads the page under test in a frame and then acts on it as a person would: every
// element gets mouseover, mousemove and click (porcupine's tooltips and selections), every
// select walks through its options (the report's role selector). It then writes what it saw
// into #result, which --dump-dom prints.
const harness = `<!doctype html><html><head><meta charset="utf-8"><title>harness</title></head><body>
<pre id="result">pending</pre>
<iframe id="page" width="1600" height="1200"></iframe>
<script>
var frame = document.getElementById('page'), result = document.getElementById('result');
var loaded = false;
frame.addEventListener('load', function () {
  if (loaded) { result.textContent = 'the page navigated away'; return; }
  loaded = true;
  var d = frame.contentDocument;
  if (!d) { result.textContent = 'no access to the page'; return; }
  // Links stay put: the page under test is this one (linked pages are tested on their own).
  d.addEventListener('click', function (e) { if (e.target.closest && e.target.closest('a')) e.preventDefault(); }, true);
  // One action at a time, each given time to take effect (an injected <img onerror> fires
  // only once its load has failed, and the next hover replaces the tooltip).
  var actions = [], acted = 0;
  var els = d.querySelectorAll('*');
  els.forEach(function (el) {
    ['mouseover', 'mousemove', 'click', 'mousemove', 'click', 'mouseout'].forEach(function (type) {
      actions.push(function () {
        el.dispatchEvent(new MouseEvent(type, {bubbles: true, cancelable: true, view: frame.contentWindow, clientX: 20, clientY: 20}));
      });
    });
    acted++;
  });
  d.querySelectorAll('select').forEach(function (sel) {
    for (var o = 0; o < sel.options.length; o++) {
      (function (o) {
        actions.push(function () { sel.selectedIndex = o; sel.dispatchEvent(new Event('change', {bubbles: true})); });
      })(o);
    }
  });
  var next = 0;
  (function step() {
    if (next < actions.length) {
      actions[next++]();
      setTimeout(step, 10);
      return;
    }
    setTimeout(function () {
      var ran = d.title === 'PWNED' || document.title === 'PWNED';
      result.textContent = 'done: acted on ' + acted + ' elements; script ran: ' + (ran ? 'yes' : 'no');
    }, 500);
  })();
});
frame.src = %q;
</script></body></html>`

// exercise runs the harness on page and returns its result and the console messages.
func exercise(t *testing.T, chromium, page string) (result string, console []string) {
	t.Helper()
	abs, err := filepath.Abs(page)
	if err != nil {
		t.Fatal(err)
	}
	// The harness lives next to the page, so both are file: URLs of one folder.
	h := filepath.Join(filepath.Dir(abs), ".harness-"+filepath.Base(abs)+".html")
	if err := os.WriteFile(h, fmt.Appendf(nil, harness, "file://"+abs), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(h)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args := append(append([]string{}, chromiumArgs...), "--user-data-dir="+t.TempDir(),
		"--allow-file-access-from-files", "--virtual-time-budget=120000", "--dump-dom", "file://"+h)
	cmd := exec.CommandContext(ctx, chromium, args...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, errb.String())
	}
	for _, line := range strings.Split(errb.String(), "\n") {
		if strings.Contains(line, ":CONSOLE") {
			console = append(console, line)
		}
	}
	dom := out.String()
	_, rest, ok := strings.Cut(dom, `<pre id="result">`)
	if !ok {
		t.Fatalf("no result in the harness's DOM:\n%s", dom)
	}
	result, _, _ = strings.Cut(rest, "</pre>")
	return result, console
}
