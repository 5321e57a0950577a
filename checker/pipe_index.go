package checker

import (
	"cmp"
	"iter"
	"maps"
	"slices"

	"github.com/fencecheck/fencecheck/checker/history"
)

// inputIndex maps input records (partition, offset) to indexes, for the pipeline checks. A
// partition's input offsets count up from 0 with few gaps, so the index is a slice per
// partition indexed by offset; a map holds what does not fit one (a negative partition or
// offset, a partition past maxDensePartition, an offset far beyond its partition's records so
// far, as a hand-written history may have), so that no history can make the slices much larger
// than the records they hold. At a million operations, maps keyed by input record were most of
// the pipeline checker's time: a hash and a cache miss a record, and their growth.
type inputIndex struct {
	dense  []denseInputs // by partition
	sparse map[history.PipeOffset]int
	n      int
}

// denseInputs are one partition's records in an inputIndex.
type denseInputs struct {
	at []int32 // by offset: 1 + the index, 0 for none
	n  int     // the records in at
}

// maxDensePartition bounds the partitions indexed by slice (see inputIndex): a pipeline's
// input has a few partitions.
const maxDensePartition = 1024

// get returns the index of in, and whether in is there.
func (x *inputIndex) get(in history.PipeOffset) (int, bool) {
	if p, o := in.Partition, in.Offset; p >= 0 && int(p) < len(x.dense) && o >= 0 && o < int64(len(x.dense[p].at)) {
		if v := x.dense[p].at[o]; v != 0 {
			return int(v - 1), true
		}
	}
	i, ok := x.sparse[in]
	return i, ok
}

// put indexes in as i. in must not be there already.
func (x *inputIndex) put(in history.PipeOffset, i int) {
	x.n++
	p, o := in.Partition, in.Offset
	if p >= 0 && p < maxDensePartition && int(p) >= len(x.dense) {
		x.dense = append(x.dense, make([]denseInputs, int(p)+1-len(x.dense))...)
	}
	// Offsets up to twice the partition's records so far (and some) go to its slice, as the
	// Builder's dense operation ids do.
	if p >= 0 && p < maxDensePartition && o >= 0 && o < 2*int64(x.dense[p].n)+1024 && i < 1<<31-1 {
		d := &x.dense[p]
		if o >= int64(len(d.at)) {
			d.at = slices.Grow(d.at, int(max(o+1, 2*int64(len(d.at))))-len(d.at))
			d.at = d.at[:cap(d.at)]
		}
		d.at[o] = int32(i + 1)
		d.n++
		return
	}
	if x.sparse == nil {
		x.sparse = map[history.PipeOffset]int{}
	}
	x.sparse[in] = i
}

// len returns the number of records indexed.
func (x *inputIndex) len() int { return x.n }

// all yields every record indexed and its index, in the order of partitions and offsets.
func (x *inputIndex) all() iter.Seq2[history.PipeOffset, int] {
	return func(yield func(history.PipeOffset, int) bool) {
		// The map's records (few) merged into the slices' (in order already).
		sparse := slices.SortedFunc(maps.Keys(x.sparse), comparePipeOffsets)
		for p, d := range x.dense {
			for o, v := range d.at {
				if v == 0 {
					continue
				}
				in := history.PipeOffset{Partition: int32(p), Offset: int64(o)}
				for len(sparse) > 0 && comparePipeOffsets(sparse[0], in) < 0 {
					if !yield(sparse[0], x.sparse[sparse[0]]) {
						return
					}
					sparse = sparse[1:]
				}
				if !yield(in, int(v-1)) {
					return
				}
			}
		}
		for _, in := range sparse {
			if !yield(in, x.sparse[in]) {
				return
			}
		}
	}
}

// sortedOutputs returns the indexes of outputs in the order cmp gives their outputs, equal
// ones in the order of outputs. The final read gives the outputs of each input partition in
// order, so the sort is usually a pass that finds them sorted already.
func sortedOutputs(outputs []history.PipeOutput, cmp func(a, b *history.PipeOutput) int) []int32 {
	idx := make([]int32, len(outputs))
	sorted := true
	for i := range idx {
		idx[i] = int32(i)
		if i > 0 && sorted && cmp(&outputs[i-1], &outputs[i]) > 0 {
			sorted = false
		}
	}
	if !sorted {
		slices.SortStableFunc(idx, func(a, b int32) int { return cmp(&outputs[a], &outputs[b]) })
	}
	return idx
}

// byInputOrder orders outputs by their input record.
func byInputOrder(a, b *history.PipeOutput) int { return comparePipeOffsets(a.In, b.In) }

// byTxnOrder orders outputs by their transaction, then by their input record.
func byTxnOrder(a, b *history.PipeOutput) int {
	return cmp.Or(cmp.Compare(a.Txn, b.Txn), comparePipeOffsets(a.In, b.In))
}

// runs yields the runs of idx (indexes of outputs, sorted by cmp) whose outputs cmp finds
// equal.
func runs(outputs []history.PipeOutput, idx []int32, cmp func(a, b *history.PipeOutput) int) iter.Seq[[]int32] {
	return func(yield func([]int32) bool) {
		for len(idx) > 0 {
			n := 1
			for n < len(idx) && cmp(&outputs[idx[0]], &outputs[idx[n]]) == 0 {
				n++
			}
			if !yield(idx[:n]) {
				return
			}
			idx = idx[n:]
		}
	}
}
