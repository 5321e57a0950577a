package pipeline

import (
	"slices"
	"strings"
)

// MutantPrefix marks a kind that New builds as a deliberately broken member: "mutant:NAME".
const MutantPrefix = "mutant:"

// Mutant is a deliberately broken member: a plain member with one safeguard removed. The
// conformance suite must fail each (TestMutantsFailTheSuite), as the pipeline workload's
// checker will have to.
type Mutant struct {
	Name, Summary string
	// Fails names the conformance test that catches it.
	Fails string
}

// The mutants' names.
const (
	mutantGroupIDOnly       = "group-id-only"
	mutantOffsetsOutsideTxn = "offsets-outside-txn"
	mutantReadUncommitted   = "read-uncommitted"
	mutantUnstableFetch     = "unstable-fetch"
	mutantNoRewind          = "no-rewind"
	mutantOffByOne          = "off-by-one"
	// mutantStampAfterPoll is the plain member before the fix of findings.md's rejoin lead:
	// it stamps a batch with kgo's GroupMetadata read after PollRecords returned. Not in
	// Mutants (the conformance suite has no test of the rejoin); its regression,
	// TestRejoinedMemberStampsPolledGeneration, builds it directly and requires it to commit
	// the records another member committed.
	mutantStampAfterPoll = "stamp-after-poll"
)

// Mutants lists the mutant members, each a kind "mutant:NAME" of New.
var Mutants = []Mutant{
	{Name: mutantGroupIDOnly, Fails: "zombie",
		Summary: "sends its transaction's offsets with the group id alone (generation -1, no member id), as sendOffsetsToTransaction(offsets, groupId) does: nothing fences a zombie's commit"},
	{Name: mutantOffsetsOutsideTxn, Fails: "zombie",
		Summary: "commits its outputs in the transaction but its offsets after it, with a plain OffsetCommit: a zombie's outputs commit before the group refuses its offsets"},
	{Name: mutantReadUncommitted, Fails: "read committed",
		Summary: "polls its input at read_uncommitted: records of aborted input transactions are copied"},
	{Name: mutantUnstableFetch, Fails: "stable fetch",
		Summary: "starts on newly assigned partitions at offsets it fetched without require_stable: a new owner starts below the offsets a zombie's open transaction is about to commit, and copies those records again"},
	{Name: mutantNoRewind, Fails: "abort",
		Summary: "does not rewind to the committed offsets after a transaction that did not commit: the batch's records are skipped, and the next commit moves the offsets past them"},
	{Name: mutantOffByOne, Fails: "copy",
		Summary: "commits the offset of the last record it copied instead of the next one to read (record.offset, not record.offset+1): whoever starts from the committed offsets copies that record again"},
}

// mutant returns the flaw a mutant kind names, or "" when kind is no mutant's.
func mutant(kind string) (string, bool) {
	name, ok := strings.CutPrefix(kind, MutantPrefix)
	if !ok || !slices.ContainsFunc(Mutants, func(m Mutant) bool { return m.Name == name }) {
		return "", false
	}
	return name, true
}
