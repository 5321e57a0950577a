package history_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/iotest"

	"github.com/fencecheck/fencecheck/checker/checkertest"
	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/internal/testenv"
)

func generated(t testing.TB, seed uint64) *history.History {
	t.Helper()
	cfg := checkertest.DefaultConfig()
	cfg.Indeterminate = 0.2 // plenty of info completions
	if seed%2 == 1 {
		cfg.WorkRecords = 3 // work writes of several records
	}
	return checkertest.Generate(cfg, rand.New(rand.NewPCG(seed, 3)))
}

func encode(t testing.TB, h *history.History) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := history.Encode(&buf, h); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func byID(h *history.History) map[int64]history.Op {
	m := map[int64]history.Op{}
	for _, op := range h.All() {
		if op.Result.Records != nil && len(op.Result.Records) == 0 {
			op.Result.Records = nil // an empty read is written without records
		}
		m[op.ID] = op
	}
	return m
}

func TestEncodeThenReadGivesBackTheHistory(t *testing.T) {
	for seed := range uint64(5) {
		h := generated(t, seed)
		// What the transports said, and what they reported at start.
		for i := range h.Len() {
			if op := h.Op(i); op.Type != history.TypeOK && !op.Pending {
				op.Message = fmt.Sprintf("adapter: write \"r1\": fenced: PRODUCER_FENCED (op %d, é)", op.ID)
				h.SetOp(i, op)
			}
		}
		h.Meta.ProcessTransactionVersions = map[string]int{"p2": 2}
		h.Meta.ClusterTransactionVersion, h.Meta.Client, h.Meta.NoDescribe = 2, "a client 1.0", []string{"p1", "p3"}
		got, err := history.Read(bytes.NewReader(encode(t, h)))
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if got.Truncated || got.Format != history.FormatOf(&h.Meta) || !reflect.DeepEqual(got.Meta, h.Meta) {
			t.Fatalf("seed %d: header %+v, truncated %t", seed, got.Meta, got.Truncated)
		}
		want := byID(h)
		if got.Len() != len(want) {
			t.Fatalf("seed %d: %d ops, want %d", seed, got.Len(), len(want))
		}
		for id, op := range byID(got) {
			if !reflect.DeepEqual(op, want[id]) {
				t.Fatalf("seed %d: op %d\n got %+v\nwant %+v", seed, id, op, want[id])
			}
		}
		if !reflect.DeepEqual(got.Faults, h.Faults) {
			t.Fatalf("seed %d: faults\n got %+v\nwant %+v", seed, got.Faults, h.Faults)
		}
	}
}

// wire mirrors the line schema for encoding/json, the reference the hand-written codec must
// agree with.
type wire struct {
	Type    string `json:"type"`
	Time    int64  `json:"time"`
	ID      int64  `json:"id"`
	Client  int    `json:"client"`
	Process string `json:"process"`
	Member  string `json:"member"`
	Role    string `json:"role"`
	Kind    string `json:"kind"`
	Args    *struct {
		Token         *history.Token `json:"token"`
		WriteID       string         `json:"write_id"`
		WorkPartition *int32         `json:"work_partition"`
		Records       int            `json:"records"`
	} `json:"args"`
	Result *struct {
		Held    bool           `json:"held"`
		Token   *history.Token `json:"token"`
		Offset  *int64         `json:"offset"`
		Records []struct {
			Offset  int64              `json:"offset"`
			Kind    history.RecordKind `json:"kind"`
			Member  string             `json:"member"`
			Role    string             `json:"role"`
			Token   *history.Token     `json:"token"`
			WriteID string             `json:"write_id"`
			Index   uint16             `json:"index"`
			Count   uint16             `json:"count"`
		} `json:"records"`
	} `json:"result"`
	Error    string        `json:"error"`
	Fault    int64         `json:"fault"`
	Step     int           `json:"step"`
	Spec     string        `json:"spec"`
	Targets  []string      `json:"targets"`
	Desc     string        `json:"desc"`
	TookHold bool          `json:"took_hold"`
	Format   int           `json:"format"`
	Meta     *history.Meta `json:"meta"`
}

func (w *wire) event(t testing.TB) history.Event {
	var e history.Event
	if err := e.Type.UnmarshalText([]byte(w.Type)); err != nil {
		t.Fatal(err)
	}
	e.Time, e.ID, e.Client, e.Process, e.Member, e.Role, e.Kind = w.Time, w.ID, w.Client, w.Process, w.Member, w.Role, history.Kind(w.Kind)
	e.Error, e.Fault, e.Targets, e.Desc, e.TookHold, e.Format, e.Meta = w.Error, w.Fault, w.Targets, w.Desc, w.TookHold, w.Format, w.Meta
	e.Step, e.Spec = w.Step, w.Spec
	if a := w.Args; a != nil {
		if a.Token != nil {
			e.Args.Token = *a.Token
		}
		e.Args.WriteID, e.Args.Records = a.WriteID, a.Records
		if a.WorkPartition != nil {
			e.Args.Log = history.WorkLog(*a.WorkPartition)
		}
	}
	if r := w.Result; r != nil {
		e.Result.Held, e.Result.Token, e.Result.Offset = r.Held, r.Token, r.Offset
		if r.Records != nil {
			e.Result.Records = []history.Record{}
		}
		for _, rec := range r.Records {
			hr := history.Record{Offset: rec.Offset, Kind: rec.Kind, Member: rec.Member, Role: rec.Role, WriteID: rec.WriteID, Token: history.NoToken,
				Index: rec.Index, Count: rec.Count}
			if rec.Token != nil {
				hr.Token = *rec.Token
			}
			e.Result.Records = append(e.Result.Records, hr)
		}
	}
	return e
}

func TestEveryLineIsJSONThatEncodingJSONReadsTheSame(t *testing.T) {
	data := encode(t, generated(t, 1))
	if !bytes.Contains(data, []byte(`"records":3}`)) || !bytes.Contains(data, []byte(`"index":2,"count":3}`)) {
		t.Fatal("the history has no write of several records")
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<24)
	lines := 0
	for sc.Scan() {
		lines++
		line := sc.Bytes()
		if !json.Valid(line) {
			t.Fatalf("line %d is not JSON: %s", lines, line)
		}
		var w wire
		if err := json.Unmarshal(line, &w); err != nil {
			t.Fatalf("line %d: %v", lines, err)
		}
		var got history.Event
		if err := json.Unmarshal(line, &got); err != nil { // Event.UnmarshalJSON: the hand decoder
			t.Fatalf("line %d: %v", lines, err)
		}
		if want := w.event(t); !reflect.DeepEqual(got, want) {
			t.Fatalf("line %d: %s\nhand decoder %+v\nencoding/json %+v", lines, line, got, want)
		}
		again, err := got.MarshalJSON() // the hand encoder
		if err != nil || !bytes.Equal(again, line) {
			t.Fatalf("line %d re-encodes as %s (%v)", lines, again, err)
		}
	}
	if lines < 100 {
		t.Fatalf("only %d lines", lines)
	}
}

func TestScheduleAndStepsSurviveTheFile(t *testing.T) {
	meta := history.Meta{Scenario: "s", Schedule: history.ScheduleScript,
		Script: []string{"at 4s freeze holder of r1 for 4s", "at 9s kill leader of r2 for 3s"}}
	events := []history.Event{
		{Type: history.TypeHeader, Meta: &meta},
		{Type: history.TypeFaultStart, Fault: 1, Time: 5, Kind: "kill", Targets: []string{"b1"}, Step: 2,
			Spec: "kill b1 for 3s"},
		{Type: history.TypeFaultEnd, Fault: 1, Time: 9, TookHold: true},
		{Type: history.TypeFaultStart, Fault: 2, Time: 6, Kind: "latency"},
	}
	var buf bytes.Buffer
	for _, e := range events {
		line, err := e.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(append(line, '\n'))
	}
	if !strings.Contains(buf.String(), `"step":2`) || strings.Count(buf.String(), `"step"`) != 1 {
		t.Fatalf("step written wrong:\n%s", buf.String())
	}
	h, err := history.Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(h.Meta, meta) {
		t.Fatalf("meta %+v, want %+v", h.Meta, meta)
	}
	if len(h.Faults) != 2 || h.Faults[0].Step != 2 || h.Faults[1].Step != 0 || h.Faults[0].Spec != "kill b1 for 3s" || h.Faults[1].Spec != "" {
		t.Fatalf("faults %+v: want steps 2 and 0, the first's spec", h.Faults)
	}
	var again bytes.Buffer
	if err := history.Encode(&again, h); err != nil {
		t.Fatal(err)
	}
	if h2, err := history.Read(&again); err != nil || !reflect.DeepEqual(h2.Faults, h.Faults) {
		t.Fatalf("encode from a History lost the steps: %+v (%v)", h2, err)
	}
}

func TestStringsSurviveEscaping(t *testing.T) {
	names := []string{`quo"te`, `back\slash`, "new\nline", "tab\t", "ctl\x01", "ünïcødé ✓", "emoji 🦀", "<html>&", "bad\xffutf8"}
	for _, name := range names {
		t.Run(fmt.Sprintf("%q", name), func(t *testing.T) {
			b, err := json.Marshal(history.Event{Type: history.TypeInvoke, ID: 1, Role: name, Kind: history.KindAcquire})
			if err != nil {
				t.Fatal(err)
			}
			var std struct{ Role string }
			if err := json.Unmarshal(b, &std); err != nil {
				t.Fatal(err)
			}
			var e history.Event
			if err := e.UnmarshalJSON(b); err != nil {
				t.Fatal(err)
			}
			want := strings.ToValidUTF8(name, "\uFFFD")
			if e.Role != want || std.Role != want {
				t.Fatalf("hand decoder %q, encoding/json %q, want %q", e.Role, std.Role, want)
			}
		})
	}
}

const header = `{"type":"header","time":0,"format":1,"meta":{"scenario":"t","lease_ns":1000}}`

func TestReadSkipsUnknownFieldsAndBlankLines(t *testing.T) {
	in := header + "\n\n" +
		`{"type":"invoke","id":1,"time":5,"client":0,"role":"r","kind":"acquire","future":{"a":[1,2.5e3,{"b":null}],"c":true},"more":"x"}` + "\n" +
		`  {"type":"ok","id":1,"time":6,"result":{"token":{"producer_id":3,"epoch":1,"extra":7},"later":[]}}  ` + "\n"
	h, err := history.Read(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if h.Len() != 1 || *h.Op(0).Result.Token != (history.Token{ProducerID: 3, Epoch: 1}) || h.Meta.LeaseDuration != 1000 {
		t.Fatalf("got %+v", h)
	}
}

func TestReadReportsATruncatedLastLine(t *testing.T) {
	data := encode(t, generated(t, 2))
	full, err := history.Read(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Count(data, []byte{'\n'})
	last := bytes.LastIndexByte(data[:len(data)-1], '\n') + 1 // start of the last line
	for _, cut := range []int{1, 10, (len(data) - last) / 2, len(data) - last - 2} {
		t.Run(fmt.Sprintf("cut at %d", cut), func(t *testing.T) {
			h, err := history.Read(bytes.NewReader(data[:last+cut]))
			if err != nil {
				t.Fatal(err)
			}
			if !h.Truncated || h.TruncatedLine != lines {
				t.Fatalf("truncated %t at line %d, want line %d", h.Truncated, h.TruncatedLine, lines)
			}
			if h.Len() != full.Len() && h.Len() != full.Len()-1 {
				t.Fatalf("%d ops, full history has %d", h.Len(), full.Len())
			}
		})
	}
	t.Run("a complete last line without its newline is not truncated", func(t *testing.T) {
		h, err := history.Read(bytes.NewReader(data[:len(data)-1]))
		if err != nil || h.Truncated || h.Len() != full.Len() {
			t.Fatalf("truncated %t, %d ops, err %v", h.Truncated, h.Len(), err)
		}
	})
	t.Run("the op whose completion was cut is pending", func(t *testing.T) {
		in := header + "\n" + `{"type":"invoke","id":7,"time":5,"role":"r","kind":"acquire"}` + "\n" + `{"type":"ok","id":7,"ti`
		h, err := history.Read(strings.NewReader(in))
		if err != nil {
			t.Fatal(err)
		}
		op := h.Op(0)
		if !h.Truncated || h.TruncatedLine != 3 || !op.Pending || op.Type != history.TypeInfo || op.Return != history.Never {
			t.Fatalf("history %+v op %+v", h, op)
		}
	})
}

func TestReadRejectsMalformedInputWithItsLineNumber(t *testing.T) {
	inv := func(id int, kind string) string {
		return fmt.Sprintf(`{"type":"invoke","id":%d,"time":1,"role":"r","kind":"%s"}`, id, kind)
	}
	tests := []struct {
		name  string
		lines []string
		line  int
		is    error
	}{
		{"invalid JSON", []string{header, inv(1, "acquire"), `{"type":"ok","id":1,,}`}, 3, history.ErrMalformed},
		{"completion of an op never invoked", []string{header, `{"type":"ok","id":9,"time":1}`}, 2, history.ErrMalformed},
		{"second completion", []string{header, inv(1, "describe"), `{"type":"ok","id":1,"time":2}`, `{"type":"fail","id":1,"time":3}`}, 4, history.ErrMalformed},
		{"op invoked twice", []string{header, inv(1, "describe"), inv(1, "describe")}, 3, history.ErrMalformed},
		{"unknown event type", []string{header, `{"type":"oops","time":1}`}, 2, history.ErrMalformed},
		{"unknown op kind", []string{header, inv(1, "steal")}, 2, history.ErrMalformed},
		{"event before the header", []string{inv(1, "acquire"), header}, 1, history.ErrMalformed},
		{"second header", []string{header, header}, 2, history.ErrMalformed},
		{"newer format", []string{`{"type":"header","time":0,"format":99}`}, 1, history.ErrFormat},
		{"ok acquire without a token", []string{header, inv(1, "acquire"), `{"type":"ok","id":1,"time":2}`}, 3, history.ErrMalformed},
		{"held describe without a token", []string{header, inv(1, "describe"), `{"type":"ok","id":1,"time":2,"result":{"held":true}}`}, 3, history.ErrMalformed},
		{"ok register without an offset", []string{header, inv(1, "register"), `{"type":"ok","id":1,"time":2}`}, 3, history.ErrMalformed},
		{"work without a partition", []string{header, `{"type":"invoke","id":1,"time":1,"role":"r","kind":"work","args":{"token":{"producer_id":1,"epoch":0},"write_id":"w"}}`}, 2, history.ErrMalformed},
		{"write without a write id", []string{header, `{"type":"invoke","id":1,"time":1,"role":"r","kind":"write-lease","args":{"token":{"producer_id":1,"epoch":0}}}`}, 2, history.ErrMalformed},
		{"client id out of range", []string{header, `{"type":"invoke","id":1,"time":1,"client":4294967296,"role":"r","kind":"acquire"}`}, 2, history.ErrMalformed},
		{"epoch out of range", []string{header, `{"type":"invoke","id":1,"time":1,"role":"r","kind":"write-lease","args":{"token":{"producer_id":1,"epoch":40000},"write_id":"w"}}`}, 2, history.ErrMalformed},
		{"fault ended twice", []string{header, `{"type":"fault-start","fault":1,"time":1,"kind":"k"}`, `{"type":"fault-end","fault":1,"time":2}`, `{"type":"fault-end","fault":1,"time":3}`}, 4, history.ErrMalformed},
		{"malformed line that is not the last", []string{header, `{"type":"ok","id":`, inv(1, "acquire")}, 2, history.ErrMalformed},
		{"a wrong line before one that is not JSON", []string{header, inv(1, "acquire"), inv(1, "acquire"), `{"type":"ok","id":`, inv(2, "acquire")}, 3, history.ErrMalformed},
		{"time equal to Never", []string{header, inv(1, "read"), `{"type":"ok","id":1,"time":9223372036854775807,"result":{"records":[]}}`}, 3, history.ErrMalformed},
		{"time beyond MaxTime", []string{header, `{"type":"invoke","id":1,"time":4611686018427387905,"role":"r","kind":"acquire"}`}, 2, history.ErrMalformed},
		{"negative time", []string{header, `{"type":"fault-start","fault":1,"time":-1,"kind":"k"}`}, 2, history.ErrMalformed},
		{"too many records", []string{header, `{"type":"invoke","id":1,"time":1,"role":"r","kind":"work","args":{"token":{"producer_id":1,"epoch":0},"write_id":"w","work_partition":0,"records":65536}}`}, 2, history.ErrMalformed},
		{"negative records", []string{header, `{"type":"invoke","id":1,"time":1,"role":"r","kind":"work","args":{"token":{"producer_id":1,"epoch":0},"write_id":"w","work_partition":0,"records":-2}}`}, 2, history.ErrMalformed},
		{"record index out of range", []string{header, inv(1, "final-read"), `{"type":"ok","id":1,"time":2,"result":{"records":[{"offset":0,"kind":"work","token":{"producer_id":1,"epoch":0},"write_id":"w","index":70000,"count":2}]}}`}, 3, history.ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := history.Read(strings.NewReader(strings.Join(tt.lines, "\n") + "\n"))
			var le *history.LineError
			if !errors.As(err, &le) || le.Line != tt.line || !errors.Is(err, tt.is) {
				t.Fatalf("got %v, want a line %d error wrapping %v", err, tt.line, tt.is)
			}
		})
	}
	t.Run("no header at all", func(t *testing.T) {
		if _, err := history.Read(strings.NewReader("")); !errors.Is(err, history.ErrMalformed) {
			t.Fatalf("got %v", err)
		}
	})
}

// TestReadNamesWhatIsWrong pins the messages of errors that are not about JSON syntax: they
// name the line and what is wrong with it, never "invalid JSON".
func TestReadNamesWhatIsWrong(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{"unknown event type", header + "\n" + `{"type":"oops","time":1}` + "\n", []string{"line 2", `unknown event type "oops"`, "fault-start"}},
		{"unknown event type on a last line without its newline", header + "\n" + `{"type":"oops","time":1}`, []string{"line 2", `unknown event type "oops"`}},
		{"unknown record kind", header + "\n" + `{"type":"invoke","id":1,"time":1,"role":"r","kind":"final-read"}` + "\n" +
			`{"type":"ok","id":1,"time":2,"result":{"records":[{"offset":0,"kind":"gossip"}]}}` + "\n", []string{"line 3", `unknown record kind "gossip"`}},
		{"time out of range", header + "\n" + `{"type":"invoke","id":1,"time":9223372036854775807,"role":"r","kind":"acquire"}` + "\n",
			[]string{"line 2", "time 9223372036854775807 is out of range"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := history.Read(strings.NewReader(tt.in))
			if err == nil {
				t.Fatal("read succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "invalid JSON") {
				t.Errorf("error %q calls valid JSON invalid", err)
			}
		})
	}
}

func TestBuilderRejectsTimesOutOfRange(t *testing.T) {
	for _, tm := range []int64{-1, history.MaxTime + 1, history.Never} {
		b := history.NewBuilder(0)
		if err := b.Add(&history.Event{Type: history.TypeHeader}); err != nil {
			t.Fatal(err)
		}
		err := b.Add(&history.Event{Type: history.TypeInvoke, ID: 1, Time: tm, Role: "r", Kind: history.KindAcquire})
		if !errors.Is(err, history.ErrMalformed) {
			t.Errorf("time %d: got %v, want ErrMalformed", tm, err)
		}
	}
}

func TestReadHandlesLinesLongerThanAChunk(t *testing.T) {
	recs := make([]history.Record, 40_000) // ~3 MB on one line
	for i := range recs {
		recs[i] = history.Record{Offset: int64(i), Kind: history.RecordRegistration, Member: fmt.Sprintf("m%d", i), Token: history.NoToken}
	}
	var buf bytes.Buffer
	w := history.NewWriter(&buf, history.WriterOptions{})
	mustAppend(t, w, history.Event{Type: history.TypeHeader})
	// Two long lines with short ones around them: a chunk then starts in the middle of a long
	// line, carried over from the one before.
	for id := int64(1); id <= 2; id++ {
		mustAppend(t, w, history.Event{Type: history.TypeInvoke, ID: id, Time: id, Role: "r", Kind: history.KindFinalRead})
		mustAppend(t, w, history.Event{Type: history.TypeOK, ID: id, Time: id, Result: history.Result{Records: recs[:len(recs)/int(id)]}})
	}
	mustAppend(t, w, history.Event{Type: history.TypeInvoke, ID: 3, Time: 3, Role: "r", Kind: history.KindDescribe})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// Readers that return less than asked: the reader must find the lines' ends in whatever
	// pieces arrive.
	readers := map[string]func([]byte) io.Reader{
		"whole": func(b []byte) io.Reader { return bytes.NewReader(b) },
		"half":  func(b []byte) io.Reader { return iotest.HalfReader(bytes.NewReader(b)) },
		"bytes": func(b []byte) io.Reader { return iotest.OneByteReader(bytes.NewReader(b)) },
	}
	for name, reader := range readers {
		t.Run(name, func(t *testing.T) {
			h, err := history.Read(reader(buf.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			if h.Len() != 3 || h.Op(2).Kind != history.KindDescribe {
				t.Fatalf("got %d operations", h.Len())
			}
			for i, want := range [][]history.Record{recs, recs[:len(recs)/2]} {
				if got := h.Op(i).Result.Records; !reflect.DeepEqual(got, want) {
					t.Fatalf("read %d: got %d records, want %d", i+1, len(got), len(want))
				}
			}
		})
	}
}

func mustAppend(t testing.TB, w *history.Writer, e history.Event) {
	t.Helper()
	if err := w.Append(e); err != nil {
		t.Fatal(err)
	}
}

func TestWriterIsSafeForConcurrentRecorders(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl")
	w, err := history.Create(path, history.Meta{Scenario: "concurrent"}, history.WriterOptions{BufferSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	const goroutines, ops = 8, 500
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range ops {
				id := int64(g*ops + i)
				tok := history.Token{ProducerID: int64(g), Epoch: int16(i)}
				mustAppend(t, w, history.Event{Type: history.TypeInvoke, ID: id, Time: id, Client: g, Process: fmt.Sprint("p", g), Member: "m", Role: "r", Kind: history.KindAcquire})
				mustAppend(t, w, history.Event{Type: history.TypeOK, ID: id, Time: id + 1, Result: history.Result{Token: &tok}})
				if i%100 == 0 {
					if err := w.Flush(); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Append(history.Event{Type: history.TypeInvoke, Kind: history.KindAcquire}); !errors.Is(err, history.ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
	h, err := history.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if h.Len() != goroutines*ops || h.Meta.Scenario != "concurrent" {
		t.Fatalf("%d ops, meta %+v", h.Len(), h.Meta)
	}
	for _, op := range h.All() {
		if op.Pending || op.Result.Token.Epoch != int16(op.ID%ops) {
			t.Fatalf("op %+v", op)
		}
	}
}

func TestCreateRefusesToOverwriteAHistory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl")
	if err := os.WriteFile(path, []byte("old run\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := history.Create(path, history.Meta{}, history.WriterOptions{}); !errors.Is(err, os.ErrExist) {
		t.Fatalf("got %v", err)
	}
}

func TestWriterRejectsEventsItCannotEncode(t *testing.T) {
	w := history.NewWriter(&bytes.Buffer{}, history.WriterOptions{})
	for _, e := range []history.Event{{}, {Type: history.TypeInvoke, Kind: "steal"}} {
		if err := w.Append(e); !errors.Is(err, history.ErrMalformed) {
			t.Fatalf("append %+v: %v", e, err)
		}
	}
}

func TestTokensOrderLexicographically(t *testing.T) {
	tests := []struct {
		a, b history.Token
		want int
	}{
		{history.Token{ProducerID: 1, Epoch: 5}, history.Token{ProducerID: 2, Epoch: 0}, -1},
		{history.Token{ProducerID: 2, Epoch: 1}, history.Token{ProducerID: 2, Epoch: 0}, 1},
		{history.Token{ProducerID: 0, Epoch: 0}, history.Token{ProducerID: 0, Epoch: 0}, 0},
		{history.NoToken, history.Token{ProducerID: 0, Epoch: 0}, -1},
	}
	for _, tt := range tests {
		if got := tt.a.Compare(tt.b); got != tt.want {
			t.Errorf("%v.Compare(%v) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
	if history.NoToken.Valid() || !(history.Token{}).Valid() || history.NoToken.String() != "none" {
		t.Error("NoToken is not 'none', or (0,0) is not a real token")
	}
}

func FuzzDecodeLine(f *testing.F) {
	for _, s := range []string{header, `{"type":"ok","id":1,"time":2,"result":{"records":[{"offset":1,"kind":"lease","token":{"producer_id":1,"epoch":2},"write_id":"\u00e9\n"}]}}`, `{"type":"fault-start","fault":1,"targets":["a","b"]}`, `{`, `"`, `{"type":"invoke","kind":"\ud83d\ude00"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var e history.Event
		if err := e.UnmarshalJSON(line); err != nil {
			if !errors.Is(err, history.ErrMalformed) && !strings.Contains(err.Error(), "meta") {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if _, err := json.Marshal(e); err != nil && !errors.Is(err, history.ErrMalformed) {
			t.Fatalf("re-encoding: %v", err)
		}
	})
}

func TestReadsOfALogShareTheirRecords(t *testing.T) {
	rec := func(off int64, w string) string {
		return fmt.Sprintf(`{"offset":%d,"kind":"lease","member":"m1","token":{"producer_id":1,"epoch":0},"write_id":"%s"}`, off, w)
	}
	read := func(id int, kind string, recs ...string) string {
		return fmt.Sprintf(`{"type":"invoke","id":%d,"time":%d,"role":"r","kind":"%s"}`, id, id*10, kind) + "\n" +
			fmt.Sprintf(`{"type":"ok","id":%d,"time":%d,"result":{"records":[%s]}}`, id, id*10+1, strings.Join(recs, ","))
	}
	in := strings.Join([]string{header,
		read(1, "read", rec(0, "w1")),
		read(2, "read", rec(0, "w1"), rec(2, "w2")),
		read(3, "read", rec(0, "wX")), // disagrees: keeps its own records
		read(4, "read"),
		read(5, "final-read", rec(0, "w1"), rec(2, "w2"), rec(4, "w3")),
	}, "\n") + "\n"
	h, err := history.Read(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	r1, r2, r3, r4, final := h.Op(0).Result.Records, h.Op(1).Result.Records, h.Op(2).Result.Records, h.Op(3).Result.Records, h.Op(4).Result.Records
	if len(r1) != 1 || len(r2) != 2 || len(final) != 3 || &r1[0] != &final[0] || &r2[0] != &final[0] {
		t.Fatalf("the prefixes do not share the final read's array: %v %v %v", r1, r2, final)
	}
	if len(r3) != 1 || r3[0].WriteID != "wX" || &r3[0] == &final[0] || r4 == nil || len(r4) != 0 {
		t.Fatalf("a read that disagrees lost its records: %v, empty read %#v", r3, r4)
	}
	if cap(r1) != 1 || final[2].WriteID != "w3" {
		t.Fatalf("a shared slice has spare capacity (%d) or the final read is wrong: %v", cap(r1), final)
	}
}

// The recorder appends two events per operation while the operation's latency is measured,
// so appending must not allocate once the writer is warm (the type's name was copied into a
// new []byte per event).
func TestAppendAllocatesNothing(t *testing.T) {
	if testenv.Race {
		// The race detector's sync.Pool drops a random share of what is put back (to find
		// code that relies on getting it again), so the writer's buffer is sometimes
		// allocated anew: the test failed about half its runs under -race.
		t.Skip("allocations are not measurable under the race detector")
	}
	w := history.NewWriter(io.Discard, history.WriterOptions{})
	tok := history.Token{ProducerID: 12345, Epoch: 7}
	invoke := history.Event{Type: history.TypeInvoke, ID: 41, Time: 1_000_000, Client: 3, Process: "p1",
		Member: "m1", Role: "r1", Kind: history.KindWriteLease, Args: history.Args{Token: tok, WriteID: "w41"}}
	ok := history.Event{Type: history.TypeOK, ID: 41, Time: 2_000_000}
	allocs := testing.AllocsPerRun(100, func() {
		if err := w.Append(invoke); err != nil {
			t.Fatal(err)
		}
		if err := w.Append(ok); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Append of an invoke and its completion: %v allocations, want 0", allocs)
	}
}
