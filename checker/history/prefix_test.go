package history_test

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/fencecheck/fencecheck/checker/checkertest"
	"github.com/fencecheck/fencecheck/checker/history"
)

// sameOps fails t unless got and want hold the same operations, records included.
func sameOps(t *testing.T, got, want *history.History) {
	t.Helper()
	if got.Len() != want.Len() {
		t.Fatalf("%d operations, the lexer read %d", got.Len(), want.Len())
	}
	for i := range want.Len() {
		if g, w := got.Op(i), want.Op(i); !reflect.DeepEqual(g, w) {
			t.Fatalf("operation %d:\nread  %+v\nlexer %+v", i, g, w)
		}
	}
}

// TestReadsThatRepeatAReadAgreeWithTheLexer: a read whose records start with an earlier
// read's is decoded from where the earlier one ends, its first records taken from it; the
// history read so is the one the lexer reads line by line, on histories large enough to
// take several chunks and both decoders.
func TestReadsThatRepeatAReadAgreeWithTheLexer(t *testing.T) {
	inPlace := 0
	for seed := range uint64(6) {
		cfg := checkertest.DefaultConfig()
		cfg.Roles, cfg.OpsPerRole, cfg.ReadRate, cfg.WorkPartitions = 4, 600, 0.2, 3
		if seed%2 == 1 {
			cfg.WorkRecords = 3
		}
		data := encode(t, checkertest.Generate(cfg, rand.New(rand.NewPCG(seed, 11))))
		inPlace += readAgreesWithLexer(t, data).InPlace
	}
	if inPlace == 0 {
		t.Fatal("no read repeated an earlier one: the test tests nothing")
	}
}

// TestReadsThatRepeatAnOddReadAgreeWithTheLexer plants the earlier reads that cannot lend
// their records in place: one that disagrees with its log's other reads, one kept whole, an
// operation whose records the Builder drops (not a read), and a read of another log with the
// same records. Each history is one chunk, so one decoder sees both reads.
func TestReadsThatRepeatAnOddReadAgreeWithTheLexer(t *testing.T) {
	base := func(t *testing.T) (*history.History, []int) {
		cfg := checkertest.DefaultConfig()
		cfg.Roles, cfg.OpsPerRole, cfg.ReadRate = 1, 300, 0.3
		h := checkertest.Generate(cfg, rand.New(rand.NewPCG(5, 11)))
		// The reads of the role's lease log that hold a lease record, in file order.
		var reads []int
		for i, op := range h.All() {
			if op.Kind == history.KindRead && op.Type == history.TypeOK && !op.Args.Log.Work &&
				slices.ContainsFunc(op.Result.Records, func(r history.Record) bool { return r.Kind == history.RecordLease }) {
				reads = append(reads, i)
			}
		}
		slices.SortFunc(reads, func(a, b int) int { return cmp.Compare(h.Op(a).Return, h.Op(b).Return) })
		if len(reads) < 6 {
			t.Fatalf("%d reads", len(reads))
		}
		return h, reads
	}
	// grown returns the index in reads of a read that has at least two records more than
	// every read before it, from the third on.
	grown := func(t *testing.T, h *history.History, reads []int) int {
		most := 0
		for j, i := range reads {
			n := len(h.Op(i).Result.Records)
			if j >= 2 && n >= most+2 {
				return j
			}
			most = max(most, n)
		}
		t.Fatal("no read grew by two records")
		return 0
	}
	cases := []struct {
		name  string
		plant func(t *testing.T, h *history.History, reads []int)
		count func(history.PrefixCounts) int
	}{
		{"a read that disagrees with its log", func(t *testing.T, h *history.History, reads []int) {
			// From the third read on, every read says its first record is another member's.
			for _, i := range reads[2:] {
				op := h.Op(i)
				recs := slices.Clone(op.Result.Records)
				recs[0].Member = "elsewhere"
				op.Result.Records = recs
				h.SetOp(i, op)
			}
		}, func(c history.PrefixCounts) int { return c.Copied }},
		{"a read kept whole", func(t *testing.T, h *history.History, reads []int) {
			op := h.Op(reads[2])
			offset := int64(7) // an offset beside records: the Builder keeps the operation whole
			op.Result.Offset = &offset
			h.SetOp(reads[2], op)
		}, func(c history.PrefixCounts) int { return c.Copied }},
		{"records on an operation that is not a read", func(t *testing.T, h *history.History, reads []int) {
			j := grown(t, h, reads)
			y := h.Op(reads[j])
			for i, op := range h.All() {
				if op.Kind == history.KindDescribe && op.Type == history.TypeOK && op.Return > h.Op(reads[j-1]).Return && op.Return < y.Return {
					op.Result.Records = y.Result.Records[:len(y.Result.Records)-1]
					h.SetOp(i, op)
					return
				}
			}
			t.Fatal("no describe between the reads")
		}, func(c history.PrefixCounts) int { return c.Decoded }},
		{"a read of another log", func(t *testing.T, h *history.History, reads []int) {
			// An earlier read made into the first read of a work partition nobody else
			// reads, returning nearly what the grown read returns: it is that log's shared
			// array, but not the grown read's log.
			j := grown(t, h, reads)
			y := h.Op(reads[j])
			x := h.Op(reads[j-1])
			x.Args.Log = history.WorkLog(99)
			x.Result.Records = y.Result.Records[:len(y.Result.Records)-1]
			h.SetOp(reads[j-1], x)
		}, func(c history.PrefixCounts) int { return c.Copied }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, reads := base(t)
			tc.plant(t, h, reads)
			data := encode(t, h)
			if len(data) >= 256<<10 {
				t.Fatalf("%d bytes: more than one chunk", len(data))
			}
			counts := readAgreesWithLexer(t, data)
			if tc.count(counts) == 0 {
				t.Fatalf("the planted read was not repeated: %+v", counts)
			}
			t.Log(fmt.Sprintf("%+v", counts))
		})
	}
}

// readAgreesWithLexer reads data as Read does and line by line, fails the test unless every
// operation agrees, and returns the counts of the reads that repeated an earlier one.
func readAgreesWithLexer(t *testing.T, data []byte) history.PrefixCounts {
	t.Helper()
	got, counts, err := history.ReadCounting(data)
	if err != nil {
		t.Fatal(err)
	}
	want, err := history.ReadLex(data)
	if err != nil {
		t.Fatal(err)
	}
	sameOps(t, got, want)
	return counts
}
