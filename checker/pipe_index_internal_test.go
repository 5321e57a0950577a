package checker

import (
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/fencecheck/fencecheck/checker/history"
)

// TestInputIndexIsAMap: whatever records are put, in whatever order (offsets in and far out of
// the slices' reach, negative ones, partitions beyond the slices'), the index gives back what
// a map would, yields it in order, and keeps its slices near the size of what they hold.
func TestInputIndexIsAMap(t *testing.T) {
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 7))
		var x inputIndex
		want := map[history.PipeOffset]int{}
		for i := range rng.IntN(3000) {
			in := history.PipeOffset{Partition: rng.Int32N(4), Offset: int64(rng.IntN(2000))}
			switch rng.IntN(10) {
			case 0:
				in.Offset = -in.Offset - 1
			case 1:
				in.Offset += 1 << 40
			case 2:
				in.Partition = -in.Partition - 1
			case 3:
				in.Partition += maxDensePartition
			}
			if _, ok := want[in]; ok {
				continue
			}
			want[in] = i
			x.put(in, i)
			if got, ok := x.get(in); !ok || got != i {
				t.Fatalf("seed %d: put %v as %d, got %d %t", seed, in, i, got, ok)
			}
		}
		if x.len() != len(want) {
			t.Fatalf("seed %d: len %d, want %d", seed, x.len(), len(want))
		}
		for in, i := range want {
			if got, ok := x.get(in); !ok || got != i {
				t.Fatalf("seed %d: %v is %d %t, want %d", seed, in, got, ok, i)
			}
			missing := history.PipeOffset{Partition: in.Partition, Offset: in.Offset + 1}
			if _, there := want[missing]; !there {
				if got, ok := x.get(missing); ok {
					t.Fatalf("seed %d: %v, never put, is %d", seed, missing, got)
				}
			}
		}
		// The slices hold at most about twice what doubling leaves of twice their records and
		// some: a record far out does not make them large.
		slots := 0
		for _, d := range x.dense {
			slots += len(d.at)
		}
		if limit := 4*x.len() + 2048*len(x.dense) + 64; slots > limit {
			t.Fatalf("seed %d: %d slots for %d records in %d partitions, want at most %d", seed, slots, x.len(), len(x.dense), limit)
		}
		var order []history.PipeOffset
		for in, i := range x.all() {
			if want[in] != i {
				t.Fatalf("seed %d: all yields %v as %d, want %d", seed, in, i, want[in])
			}
			order = append(order, in)
		}
		if wantOrder := slices.SortedFunc(maps.Keys(want), comparePipeOffsets); !slices.Equal(order, wantOrder) {
			t.Fatalf("seed %d: all yields %d records out of order (want %d)", seed, len(order), len(wantOrder))
		}
	}
}

// TestInputIndexOfFewRecordsFarApart: one record far out in each of many partitions stays
// small.
func TestInputIndexOfFewRecordsFarApart(t *testing.T) {
	var x inputIndex
	for p := range int32(2 * maxDensePartition) {
		x.put(history.PipeOffset{Partition: p, Offset: 1000 + int64(p)*1000}, int(p))
	}
	slots := 0
	for _, d := range x.dense {
		slots += len(d.at)
	}
	if slots > 2048*maxDensePartition {
		t.Fatalf("%d slots for %d records", slots, x.len())
	}
	for p := range int32(2 * maxDensePartition) {
		if i, ok := x.get(history.PipeOffset{Partition: p, Offset: 1000 + int64(p)*1000}); !ok || i != int(p) {
			t.Fatalf("partition %d: %d %t", p, i, ok)
		}
	}
}
