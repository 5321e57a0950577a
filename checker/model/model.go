// Package model is the porcupine model of one role's fencing coordinator, as docs/checker.md
// defines it: the last minted token, the highest token a describe reported, whether the holder
// of the last mint was deposed without a new mint, and credits for operations whose outcome
// is unknown.
//
// The model is deterministic. An operation with an unknown outcome never stays pending: the
// checker turns it into a Credit point at its invocation (an acquire that may have minted, a
// write whose open transaction may have been aborted by timeout), and a fence that nothing
// else explains spends a credit. Spending it is the same as linearizing the unknown operation
// just before the fence; never spending it is the branch where it had no effect. Unknown
// writes are resolved from the final committed log before the search, so they arrive here as
// WriteOK or as a Credit.
//
// On a transaction-version-1 cluster an acquire may mint two epochs: when the previous holder
// has an open transaction, the coordinator first bumps the epoch to abort it (fencing that
// holder; a describe may report this epoch, which no client is given) and the client's retry
// gets the next one. The checker gives such an acquire an AbortBump step besides its Acquire,
// and an acquire of unknown outcome a second Credit (docs/checker.md, "TV1 abort bumps").
package model

import (
	"fmt"
	"html"
	"math"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/fencecheck/fencecheck/checker/history"
)

// Kind is the kind of a model operation.
type Kind uint8

// Model operation kinds.
const (
	// Acquire is an acquire that returned Token.
	Acquire Kind = iota + 1
	// Credit is a point at the invocation of an operation whose outcome is unknown: an acquire
	// (info, or fenced), or a write that did not commit (its transaction may time out).
	Credit
	// WriteOK is an acknowledged write under the minted Token.
	WriteOK
	// WriteFenced is a write under Token that the epoch check rejected.
	WriteFenced
	// DescribeNone is a describe that found no holder.
	DescribeNone
	// DescribeHeld is a describe that reported Token.
	DescribeHeld
	// AbortBump is, on a transaction-version-1 cluster, the epoch bump by which the
	// coordinator may have aborted the current holder's open transaction while serving an
	// acquire that returned Token, before minting Token for it. It spans the acquire's
	// interval.
	AbortBump
)

// Op is the input of one model step. The checker builds one per history operation that the
// model needs; porcupine receives *Op as the input and nil as the output.
type Op struct {
	Kind  Kind
	Token history.Token
	// Long is set on a WriteFenced that stayed open at least the lease duration: the
	// coordinator may have aborted its transaction on timeout, which bumps the epoch.
	Long bool
	// Hist is the history operation this one stands for, for descriptions and anomalies;
	// nil when the operation is not described (the checker sets it only on the roles it
	// explains).
	Hist *history.Op
}

// State is the model state. The zero State is not the initial state: use Init.
type State struct {
	Mint    history.Token // the last minted token; NoToken before any
	Floor   history.Token // the highest token a describe reported; NoToken before any
	Deposed bool          // the holder of Mint was fenced without a new mint
	Credits int32         // unknown effects not yet spent
}

// Init returns the initial state: nothing minted, nothing reported, no credits.
func Init() State { return State{Mint: history.NoToken, Floor: history.NoToken} }

// Step applies op to s and reports whether it is legal. A fence of the current holder with
// no reason (not older than the mint, holder not deposed, not open for the lease duration,
// no credit) is illegal, unless lenient is set: then it deposes the holder as any fence does.
// The lenient model accepts exactly the histories whose only fault is such a spurious fence
// (a liveness bug, reported as spurious-fence rather than as a safety violation).
//
// An AbortBump mints the epoch after the mint for nobody (the holder of the mint is deposed),
// when that epoch is still below the acquire's Token: the coordinator bumped the epoch once to
// abort, and its next bump gave Token. Otherwise (nothing minted yet, or Token is the next
// epoch) it changes nothing. The abort epoch is the lowest the bump can have reached; a higher
// one would only forbid more. AbortBump only ever raises the mint and deposes, so it makes no
// acquire, acknowledged write or describe legal that was not; what it adds is that the holder
// of the mint may be fenced, and a describe may report the abort epoch, before Token is minted.
func Step(s State, op *Op, lenient bool) (bool, State) {
	switch op.Kind {
	case Acquire:
		if op.Token.Compare(s.Mint) <= 0 || op.Token.Compare(s.Floor) <= 0 {
			return false, s
		}
		s.Mint, s.Deposed = op.Token, false
		return true, s
	case Credit:
		s.Credits++
		return true, s
	case WriteOK:
		return op.Token == s.Mint && !s.Deposed, s
	case WriteFenced:
		c := op.Token.Compare(s.Mint)
		switch {
		case c > 0:
			return false, s // a token never minted
		case c < 0 || s.Deposed:
			return true, s
		case op.Long:
			s.Deposed = true
			return true, s
		case s.Credits > 0:
			s.Credits--
			s.Deposed = true
			return true, s
		case lenient:
			s.Deposed = true
			return true, s
		}
		return false, s
	case DescribeNone:
		return !s.Mint.Valid() && !s.Floor.Valid(), s
	case DescribeHeld:
		if op.Token.Compare(s.Mint) < 0 {
			return false, s
		}
		if op.Token.Compare(s.Floor) > 0 {
			s.Floor = op.Token
		}
		return true, s
	case AbortBump:
		if s.Mint.Valid() && s.Mint.Epoch < math.MaxInt16 {
			if next := (history.Token{ProducerID: s.Mint.ProducerID, Epoch: s.Mint.Epoch + 1}); next.Less(op.Token) {
				s.Mint, s.Deposed = next, true
			}
		}
		return true, s
	}
	return false, s
}

// Show maps a token the model compares to the token that descriptions print: the checker
// may hand the model keys that order a role's tokens, such as (rotation index, epoch) on a
// cluster that hashes producer ids, and print the tokens the cluster reported. A nil Show
// prints tokens as they are.
type Show func(history.Token) history.Token

// Apply returns the token to print for t: f(t), or t when f is nil.
func (f Show) Apply(t history.Token) history.Token {
	if f == nil {
		return t
	}
	return f(t)
}

// New returns the porcupine model (strict, or lenient as Step describes), whose descriptions
// print tokens through show. It has no partition function: the checker partitions by role
// itself, to bound how many searches run at once.
func New(lenient bool, show Show) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return Init() },
		Step: func(state, input, _ any) (bool, any) {
			s := state.(State)
			ok, next := Step(s, input.(*Op), lenient)
			if !ok {
				return false, state
			}
			if next == s {
				return true, state // no new allocation for steps that change nothing
			}
			return true, next
		},
		Equal: func(a, b any) bool { return a.(State) == b.(State) },
		Hash:  func(state any) uint64 { return Hash(state.(State)) },
		// Porcupine's page shows an operation's description as text, but its state and
		// metadata as HTML (a tooltip's innerHTML): those two are escaped, since metadata
		// carries recorded text (process names, error classes) that may hold markup.
		DescribeOperation: func(input, _ any) string {
			return Describe(input.(*Op), show)
		},
		DescribeState: func(state any) string { return html.EscapeString(DescribeState(state.(State), show)) },
		DescribeOperationMetadata: func(info any) string {
			if s, ok := info.(string); ok {
				return html.EscapeString(s)
			}
			return ""
		},
	}
}

// Hash mixes every field of s (equal states hash equally).
func Hash(s State) uint64 {
	const m = 0x9e3779b97f4a7c15
	h := uint64(s.Mint.ProducerID)*m ^ uint64(uint16(s.Mint.Epoch))
	h = (h^uint64(s.Floor.ProducerID))*m ^ uint64(uint16(s.Floor.Epoch))<<16
	h = (h^uint64(s.Credits))*m ^ uint64(b2u(s.Deposed))
	return h ^ h>>29
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// Describe renders op for porcupine's visualization, e.g. "#17 m2 write-lease (1000,3) → ok",
// its token through show.
func Describe(op *Op, show Show) string {
	var b strings.Builder
	kind := history.Kind("op")
	if h := op.Hist; h != nil {
		fmt.Fprintf(&b, "#%d", h.ID)
		if h.Member != "" {
			b.WriteString(" " + h.Member)
		}
		b.WriteString(" ")
		kind = h.Kind
	}
	tok := show.Apply(op.Token)
	switch op.Kind {
	case Acquire:
		fmt.Fprintf(&b, "acquire → %s", tok)
	case Credit:
		fmt.Fprintf(&b, "%s → unknown (+1 credit)", kind)
	case WriteOK:
		fmt.Fprintf(&b, "%s %s → ok", kind, tok)
	case WriteFenced:
		fmt.Fprintf(&b, "%s %s → fenced", kind, tok)
		if op.Long {
			b.WriteString(" (open ≥ lease)")
		}
	case DescribeNone:
		b.WriteString("describe → none")
	case DescribeHeld:
		fmt.Fprintf(&b, "describe → %s", tok)
	case AbortBump:
		fmt.Fprintf(&b, "acquire → %s: abort bump before it (TV1)", tok)
	}
	return b.String()
}

// DescribeState renders s, e.g. "mint (1000,3), floor (1000,5), deposed, 1 credit", its
// tokens through show.
func DescribeState(s State, show Show) string {
	var b strings.Builder
	fmt.Fprintf(&b, "mint %s, floor %s", show.Apply(s.Mint), show.Apply(s.Floor))
	if s.Deposed {
		b.WriteString(", deposed")
	}
	switch s.Credits {
	case 0:
	case 1:
		b.WriteString(", 1 credit")
	default:
		fmt.Fprintf(&b, ", %d credits", s.Credits)
	}
	return b.String()
}
