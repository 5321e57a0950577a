// Package reports owns a run's directory (the one place that knows its file names) and
// renders what a run produced: report.html for a person, junit.xml for CI.
package reports

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fencecheck/fencecheck/internal/atomicfile"
)

// File and folder names inside a run directory (docs/run-directory.md).
const (
	runFile      = "run.json"
	scenarioFile = "scenario.yaml"
	historyFile  = "history.jsonl"
	resultsFile  = "results.json"
	reportFile   = "report.html"
	junitFile    = "junit.xml"
	linearDir    = "linear"
	logsDir      = "logs"
	harnessLog   = "harness.log" // in logsDir, next to the brokers' logs
	latestLink   = "latest"
)

// DefaultRoot is the folder of run directories when none is given.
const DefaultRoot = "runs"

// Dir is one run's directory: runs/<scenario>/<UTC time>-<seed>/.
type Dir string

// Paths of the files and folders of a run directory.
func (d Dir) RunJSON() string { return filepath.Join(string(d), runFile) }

// Scenario is the path of the scenario as the run ran it, every default filled in: a file to
// edit and run again (`fencecheck run DIR/scenario.yaml`).
func (d Dir) Scenario() string { return filepath.Join(string(d), scenarioFile) }

func (d Dir) History() string { return filepath.Join(string(d), historyFile) }
func (d Dir) Results() string { return filepath.Join(string(d), resultsFile) }
func (d Dir) Report() string  { return filepath.Join(string(d), reportFile) }
func (d Dir) JUnit() string   { return filepath.Join(string(d), junitFile) }
func (d Dir) Linear() string  { return filepath.Join(string(d), linearDir) }
func (d Dir) Logs() string    { return filepath.Join(string(d), logsDir) }

// HarnessLog is the path of the harness's own log (phases, faults, the workload's warnings),
// inside Logs.
func (d Dir) HarnessLog() string { return filepath.Join(string(d), logsDir, harnessLog) }

// LinearName is the path, relative to the run directory, of the porcupine visualization of
// role: linear/<name>.html, the name the role's file gets from Visualize. Distinct roles get
// distinct names (a/b, a_b and a:b included), on case-insensitive file systems too, and a
// role always gets the same name.
func LinearName(role string) string { return linearDir + "/" + linearFile(role) }

// maxLinearName bounds the encoded part of a visualization's file name, well below the 255
// bytes file systems allow.
const maxLinearName = 160

// linearFile encodes role as a file name: lowercase ASCII letters, digits and '-' stay, so
// do dots after the first byte, and every other byte becomes _xx (its value in hex). The
// encoding is one-to-one because '_' itself is encoded. A name longer than maxLinearName is
// cut and completed with a hash of the whole role.
func linearFile(role string) string {
	var b strings.Builder
	for i := 0; i < len(role); i++ {
		c := role[i]
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || (c == '.' && i > 0) {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "_%02x", c)
		}
	}
	name := b.String()
	switch {
	case name == "":
		name = "_" // no encoded role is a lone '_'
	case len(name) > maxLinearName:
		cut := maxLinearName
		if i := strings.LastIndexByte(name[:cut], '_'); i >= cut-2 {
			cut = i // do not split an _xx
		}
		sum := sha256.Sum256([]byte(role))
		name = name[:cut] + "~" + hex.EncodeToString(sum[:12]) // '~' never appears otherwise
	}
	return name + ".html"
}

// Visualize creates the file of role's porcupine visualization, LinearName(role), for
// checker.Options.Visualize.
func (d Dir) Visualize(role string) (io.WriteCloser, error) {
	if err := os.MkdirAll(d.Linear(), 0o755); err != nil {
		return nil, fmt.Errorf("visualize %q: %w", role, err)
	}
	f, err := os.Create(filepath.Join(string(d), filepath.FromSlash(LinearName(role))))
	if err != nil {
		return nil, fmt.Errorf("visualize %q: %w", role, err)
	}
	return f, nil
}

// NewDir creates runs/<scenario>/<UTC time>-<seed>/ under root, with its logs folder, and
// points root/latest at it. Two runs in the same second with the same seed get a suffix.
func NewDir(root, scenario string, started time.Time, seed uint64) (Dir, error) {
	if scenario == "" || scenario != filepath.Base(scenario) || scenario == "." || scenario == ".." {
		return "", fmt.Errorf("run directory: scenario name %q cannot be a folder name", scenario)
	}
	base := filepath.Join(root, scenario, started.UTC().Format("20060102T150405Z")+"-"+strconv.FormatUint(seed, 10))
	path := base
	for i := 2; ; i++ {
		err := os.MkdirAll(filepath.Dir(path), 0o755)
		if err == nil {
			err = os.Mkdir(path, 0o755)
		}
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrExist) || i > 100 {
			return "", fmt.Errorf("run directory: %w", err)
		}
		path = fmt.Sprintf("%s.%d", base, i)
	}
	d := Dir(path)
	if err := os.MkdirAll(d.Logs(), 0o755); err != nil {
		return "", fmt.Errorf("run directory: %w", err)
	}
	if err := pointLatest(root, path); err != nil {
		return "", err
	}
	return d, nil
}

// latestSeq numbers pointLatest's temporary links.
var latestSeq atomic.Uint64

// pointLatest replaces root/latest with a relative symlink to path, atomically (a rename), so
// a reader never sees it missing.
func pointLatest(root, path string) error {
	rel, err := filepath.Rel(root, path)
	if err != nil {
		return fmt.Errorf("latest link: %w", err)
	}
	// The temporary name is unique within the process too: runs started together by one
	// process (selftest, suite) point the link at the same moment.
	tmp := filepath.Join(root, fmt.Sprintf(".latest-%d-%d", os.Getpid(), latestSeq.Add(1)))
	os.Remove(tmp)
	if err := os.Symlink(rel, tmp); err != nil {
		return fmt.Errorf("latest link: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(root, latestLink)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("latest link: %w", err)
	}
	return nil
}

// RunInfo is run.json: what identifies a run and how to repeat it. It is written first, before
// the cluster starts, so even a run that dies early says what it was.
type RunInfo struct {
	Scenario    string    `json:"scenario"`
	Description string    `json:"description,omitempty"`
	Seed        uint64    `json:"seed"`
	Started     time.Time `json:"started"`
	Command     string    `json:"command"` // the command line that repeats this run: fencecheck run DIR --seed N
	Revision    string    `json:"revision,omitempty"`
	Cluster     string    `json:"cluster"`
	Kafka       string    `json:"kafka_version,omitempty"`
	TxnVersion  int       `json:"transaction_version,omitempty"`
	// Workload is the workload kind: "" or "lease", or "pipeline", whose Members are the
	// group's members (Roles is 0).
	Workload    string            `json:"workload,omitempty"`
	Processes   int               `json:"processes"`
	Roles       int               `json:"roles"`
	Members     int               `json:"members"`
	Duration    time.Duration     `json:"duration_ns"`
	Transport   string            `json:"transport,omitempty"` // "real", "mutant:NAME" or "exec:COMMAND"
	Versions    map[string]string `json:"versions,omitempty"`
	Interrupted bool              `json:"interrupted,omitempty"`
	// Expanded is the scenario with every default filled in, as the runner used it.
	Expanded json.RawMessage `json:"expanded_scenario,omitempty"`
	// Resources is what the fencecheck process used for the run, once it has ended (checked
	// included); nil before.
	Resources *Resources `json:"resources,omitempty"`
}

// Resources is what a run cost the fencecheck process (the harness, the transports and, on
// the embedded cluster, kfake): CPU time and wall time from the run's start to the end of its
// check, and the process's peak resident memory. Runs side by side in one process (selftest)
// share the CPU time and the peak; on a local or containers cluster the brokers' JVMs are not
// counted.
type Resources struct {
	WallSeconds  float64 `json:"wall_seconds"`
	CPUSeconds   float64 `json:"cpu_seconds"` // user and system
	PeakRSSBytes int64   `json:"peak_rss_bytes"`
}

// WriteRunInfo writes run.json.
func (d Dir) WriteRunInfo(info *RunInfo) error {
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return fmt.Errorf("encode run.json: %w", err)
	}
	if err := writeFileAtomic(d.RunJSON(), append(b, '\n')); err != nil {
		return fmt.Errorf("write run.json: %w", err)
	}
	return nil
}

// ReadRunInfo reads run.json.
func (d Dir) ReadRunInfo() (*RunInfo, error) {
	b, err := os.ReadFile(d.RunJSON())
	if err != nil {
		return nil, fmt.Errorf("read run.json: %w", err)
	}
	var info RunInfo
	if err := json.Unmarshal(b, &info); err != nil {
		return nil, fmt.Errorf("decode %s: %w", d.RunJSON(), err)
	}
	return &info, nil
}

// writeFileAtomic writes b to path through a temporary file and a rename, so a crash leaves
// the old file or the new one, never half of one.
func writeFileAtomic(path string, b []byte) error { return atomicfile.Write(path, b) }
