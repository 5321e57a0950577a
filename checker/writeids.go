package checker

import (
	"hash/maphash"
	"slices"

	"github.com/fencecheck/fencecheck/checker/history"
)

// writeIDs finds a write by its write id: the first write of the history (in history order)
// that has the id. A later write with the same id reuses it, which is malformed (see
// index.fileWrite).
//
// It is the write ids' hashes sorted, not a map. Filing every write in a map[string]int32
// was the largest part of the index (a random probe, a cache miss or two, a write: 3.2 s of
// CPU at 10M operations, docs/measurements.md), while a history holds few reused ids and
// needs few lookups: a final read's records find their writes in their log's order (see
// index.writerIn), so a lookup is left for records out of that order, reads that are not
// prefixes of their final log, and explanations. Hashing the ids in history order and radix
// sorting the hashes reads memory in order; equal ids are then neighbours, found by
// comparing the few ids that share a hash.
type writeIDs struct {
	h    *history.History
	seed maphash.Seed
	// sorted holds a key per write, in order: the top 33 bits of its id's hash above its
	// operation's index (31 bits), so that sorting the keys sorts by hash, then by
	// operation, in 8 bytes a write.
	sorted []uint64
	// reused maps a write that reuses an id to the first write with it; nil when none does.
	reused map[int32]int32
}

const opBits = 31 // an operation index: History holds fewer than 1<<31 operations

func (t *writeIDs) key(id string) uint64 { return t.hash(id) >> opBits << opBits }

// hash returns the hash of a write id that the table's keys take their top bits from.
func (t *writeIDs) hash(id string) uint64 { return maphash.String(t.seed, id) }

func keyOp(k uint64) int32 { return int32(k & (1<<opBits - 1)) }

// newWriteIDs builds the table of the writes ws (operation indexes in h, in history order).
func newWriteIDs(h *history.History, ws []int32) *writeIDs {
	t := &writeIDs{h: h, seed: maphash.MakeSeed()}
	keys := make([]uint64, len(ws))
	for i, w := range ws {
		keys[i] = t.key(h.WriteID(int(w))) | uint64(w)
	}
	t.sorted = radixSort(keys)
	const hashes = ^uint64(1<<opBits - 1)
	for i := 0; i < len(t.sorted); {
		j := i + 1
		for j < len(t.sorted) && t.sorted[j]&hashes == t.sorted[i]&hashes {
			j++
		}
		// Operations i..j-1 share a hash, in history order: each one whose id an earlier one
		// has reuses the first such (ids equal to an earlier equal one are equal to the
		// first, so the first match is it).
		for k := i + 1; k < j; k++ {
			id := h.WriteID(int(keyOp(t.sorted[k])))
			for e := i; e < k; e++ {
				if h.WriteID(int(keyOp(t.sorted[e]))) == id {
					if t.reused == nil {
						t.reused = map[int32]int32{}
					}
					t.reused[keyOp(t.sorted[k])] = keyOp(t.sorted[e])
					break
				}
			}
		}
		i = j
	}
	return t
}

// find returns the first write with id, if any.
func (t *writeIDs) find(id string) (int32, bool) {
	hash := t.key(id)
	k, _ := slices.BinarySearch(t.sorted, hash) // the first key of the hash: operation 0's
	for ; k < len(t.sorted) && t.sorted[k]>>opBits == hash>>opBits; k++ {
		if w := keyOp(t.sorted[k]); t.h.WriteID(int(w)) == id {
			return w, true // the first in history order: the ones that reuse it come later
		}
	}
	return -1, false
}

// reuses returns the first write with the id write w has, when w is not that write.
func (t *writeIDs) reuses(w int32) (first int32, ok bool) {
	first, ok = t.reused[w]
	return first, ok
}

// radixSort sorts s (a stable least significant digit sort, 11 bits a pass, so that its
// counts stay in the first level cache) and returns the sorted slice (s or its twin). A short
// s is sorted by comparisons: six passes over 2,048 counts would be most of the work.
func radixSort(s []uint64) []uint64 {
	if len(s) < 1024 {
		slices.Sort(s)
		return s
	}
	tmp := make([]uint64, len(s))
	var count [1 << 11]int
	for shift := uint(0); shift < 64; shift += 11 {
		clear(count[:])
		for _, v := range s {
			count[(v>>shift)&(1<<11-1)]++
		}
		sum := 0
		for d, c := range count {
			count[d] = sum
			sum += c
		}
		for _, v := range s {
			d := (v >> shift) & (1<<11 - 1)
			tmp[count[d]] = v
			count[d]++
		}
		s, tmp = tmp, s
	}
	return s
}
