package history_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/fencecheck/fencecheck/checker/checkertest"
	"github.com/fencecheck/fencecheck/checker/history"
)

var benchFiles sync.Map // ops → []byte

// benchFile encodes the checker benchmarks' synthetic history of ops operations (see
// checker.benchConfig).
func benchFile(b *testing.B, ops int) []byte {
	if data, ok := benchFiles.Load(ops); ok {
		return data.([]byte)
	}
	cfg := checkertest.Config{
		Roles: ops / 1000, MembersPerRole: 5, Processes: 10, OpsPerRole: 1000, WorkPartitions: 16,
		TV: 2, Lease: 5_000_000, Indeterminate: 0.02, Slow: 0.005, ReadRate: 0.01, AcquireRate: 0.05, CandidatePause: 10_000_000,
		Faults: 10, Pauses: 10,
	}
	var buf bytes.Buffer
	if err := history.Encode(&buf, checkertest.Generate(cfg, rand.New(rand.NewPCG(uint64(ops), 7)))); err != nil {
		b.Fatal(err)
	}
	benchFiles.Store(ops, buf.Bytes())
	return buf.Bytes()
}

var benchSizes = []int{10_000, 100_000, 1_000_000}

func BenchmarkRead(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("ops=%d", n), func(b *testing.B) {
			data := benchFile(b, n)
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := history.Read(bytes.NewReader(data)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReadEncodingJSON is the baseline the hand-written decoder replaced: every line
// through encoding/json into a struct mirroring the schema, then the same Builder.
func BenchmarkReadEncodingJSON(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("ops=%d", n), func(b *testing.B) {
			data := benchFile(b, n)
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if err := readWithEncodingJSON(b, bytes.NewReader(data)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func readWithEncodingJSON(b *testing.B, r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	bl := history.NewBuilder(0)
	for sc.Scan() {
		var w wire
		if err := json.Unmarshal(sc.Bytes(), &w); err != nil {
			return err
		}
		e := w.event(b)
		if err := bl.Add(&e); err != nil {
			return err
		}
	}
	_ = bl.History()
	return sc.Err()
}

// BenchmarkWriterAppend measures the recorder's cost per event with every CPU appending.
func BenchmarkWriterAppend(b *testing.B) {
	w := history.NewWriter(io.Discard, history.WriterOptions{})
	tok := history.Token{ProducerID: 1000, Epoch: 3}
	e := history.Event{Type: history.TypeInvoke, ID: 1, Time: 123456789, Client: 7, Process: "p1", Member: "m1",
		Role: "leader-17", Kind: history.KindWriteLease, Args: history.Args{Token: tok, WriteID: "p1-leader-17-m1-000123"}}
	line, _ := e.MarshalJSON()
	b.SetBytes(int64(len(line) + 1))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := w.Append(e); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkOps reads every operation of a 100,000-operation history: as an Op, and into one
// reused with Load (what the checker's passes do). The figure is per operation.
func BenchmarkOps(b *testing.B) {
	h, err := history.Read(bytes.NewReader(benchFile(b, 100_000)))
	if err != nil {
		b.Fatal(err)
	}
	perOp := func(b *testing.B) {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(h.Len()), "ns/operation")
	}
	b.Run("Op", func(b *testing.B) {
		var n int64
		for b.Loop() {
			for _, op := range h.All() {
				n += op.Invoke
			}
		}
		perOp(b)
	})
	b.Run("Load", func(b *testing.B) {
		var op history.Op
		var n int64
		for b.Loop() {
			for i := range h.Len() {
				h.Load(i, &op)
				n += op.Invoke
			}
		}
		perOp(b)
	})
}
