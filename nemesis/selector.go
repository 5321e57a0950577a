package nemesis

import (
	"fmt"
	"strconv"
	"strings"
)

// SelectKind says how a Selector picks.
type SelectKind string

// Selector kinds.
const (
	// SelectDefault is the zero Selector: the fault's default (see its description).
	SelectDefault SelectKind = ""
	// SelectAll picks every process or broker.
	SelectAll SelectKind = "all"
	// SelectRandom picks N (default 1) at random with the run's RNG, among those no other
	// injection holds.
	SelectRandom SelectKind = "random"
	// SelectSubset picks a random non-empty subset.
	SelectSubset SelectKind = "subset"
	// SelectIDs picks the listed processes (p1 = 1) or brokers (b0 = 0, Kafka node ids).
	SelectIDs SelectKind = "ids"
	// SelectCoordinator picks the transaction coordinator of Role (brokers only).
	SelectCoordinator SelectKind = "coordinator"
	// SelectLeader picks the leader of Role's coordination partition (brokers only).
	SelectLeader SelectKind = "leader"
	// SelectGroupCoordinator picks the group coordinator of Role's consumer group (brokers
	// only; a pipeline run's roles have one).
	SelectGroupCoordinator SelectKind = "group-coordinator"
	// SelectHolder picks the process of the member that holds Role now, by the workload's
	// view (processes only; needs Env.Freezer).
	SelectHolder SelectKind = "holder"
)

// Selector picks processes or brokers. Its text form, used in scenario files, is one of
//
//	all | random | random 2 | subset | p1,p3 (or 1,3) | b0 (or 0)
//	coordinator of role-3 | leader of role-3 | coordinator | leader   (brokers only)
//	group-coordinator of in0 | group-coordinator                     (brokers only)
//	holder of role-3 | holder                                        (processes only)
//
// A coordinator, leader, group-coordinator or holder selector without a role picks one of
// the run's roles at random.
type Selector struct {
	Kind SelectKind
	N    int    // SelectRandom: how many; 0 means 1
	IDs  []int  // SelectIDs
	Role string // SelectCoordinator, SelectLeader, SelectGroupCoordinator, SelectHolder
}

// byRole reports whether k picks a broker by a role (a coordinator or a leader).
func (k SelectKind) byRole() bool {
	return k == SelectCoordinator || k == SelectLeader || k == SelectGroupCoordinator
}

// All selects every process or broker.
func All() Selector { return Selector{Kind: SelectAll} }

// Random selects n at random.
func Random(n int) Selector { return Selector{Kind: SelectRandom, N: n} }

// Subset selects a random non-empty subset.
func Subset() Selector { return Selector{Kind: SelectSubset} }

// IDs selects the given processes or broker ids.
func IDs(ids ...int) Selector { return Selector{Kind: SelectIDs, IDs: ids} }

// CoordinatorOf selects the transaction coordinator of role ("" = a random role).
func CoordinatorOf(role string) Selector { return Selector{Kind: SelectCoordinator, Role: role} }

// LeaderOf selects the leader of role's coordination partition ("" = a random role).
func LeaderOf(role string) Selector { return Selector{Kind: SelectLeader, Role: role} }

// GroupCoordinatorOf selects the group coordinator of role's consumer group ("" = a random
// role).
func GroupCoordinatorOf(role string) Selector {
	return Selector{Kind: SelectGroupCoordinator, Role: role}
}

// HolderOf selects the process of role's holder ("" = a random role).
func HolderOf(role string) Selector { return Selector{Kind: SelectHolder, Role: role} }

// IsZero reports whether s is the default selector (for omitempty/omitzero).
func (s Selector) IsZero() bool { return s.Kind == SelectDefault }

// count is how many a random selector picks.
func (s Selector) count() int { return max(s.N, 1) }

// String formats s in its text form, ids without a letter.
func (s Selector) String() string { return s.format("") }

// format formats s with letter ("p", "b" or "") before each id.
func (s Selector) format(letter string) string {
	switch s.Kind {
	case SelectRandom:
		if s.N > 1 {
			return "random " + strconv.Itoa(s.N)
		}
		return "random"
	case SelectIDs:
		parts := make([]string, len(s.IDs))
		for i, id := range s.IDs {
			parts[i] = letter + strconv.Itoa(id)
		}
		return strings.Join(parts, ",")
	case SelectCoordinator, SelectLeader, SelectGroupCoordinator, SelectHolder:
		if s.Role != "" {
			return string(s.Kind) + " of " + s.Role
		}
	}
	return string(s.Kind)
}

// MarshalText implements encoding.TextMarshaler.
func (s Selector) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (s *Selector) UnmarshalText(b []byte) error {
	v, err := ParseSelector(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// ParseSelector parses the text form of a Selector.
func ParseSelector(text string) (Selector, error) {
	f := strings.Fields(text)
	if len(f) == 0 {
		return Selector{}, nil
	}
	bad := func(why string) (Selector, error) {
		return Selector{}, fmt.Errorf("selector %q: %s", text, why)
	}
	switch SelectKind(f[0]) {
	case SelectAll, SelectSubset:
		if len(f) > 1 {
			return bad("unexpected " + strings.Join(f[1:], " "))
		}
		return Selector{Kind: SelectKind(f[0])}, nil
	case SelectRandom:
		switch len(f) {
		case 1:
			return Random(1), nil
		case 2:
			n, err := strconv.Atoi(f[1])
			if err != nil || n < 1 {
				return bad("want random or random N with N ≥ 1")
			}
			return Random(n), nil
		}
		return bad("want random or random N")
	case SelectCoordinator, SelectLeader, SelectGroupCoordinator, SelectHolder:
		switch {
		case len(f) == 1:
			return Selector{Kind: SelectKind(f[0])}, nil
		case len(f) == 3 && f[1] == "of":
			return Selector{Kind: SelectKind(f[0]), Role: f[2]}, nil
		}
		return bad("want " + f[0] + " of ROLE")
	}
	if len(f) > 1 {
		return bad("want all, random [N], subset, coordinator of ROLE, leader of ROLE, group-coordinator of ROLE or a list like p1,p2")
	}
	var ids []int
	for _, item := range strings.Split(f[0], ",") {
		// One optional letter: p1 (a process) or b0 (a broker).
		if len(item) > 1 && (item[0] == 'p' || item[0] == 'b') {
			item = item[1:]
		}
		n, err := strconv.Atoi(item)
		if err != nil || n < 0 {
			return bad("want all, random [N], subset, coordinator of ROLE, leader of ROLE or a list like p1,p2")
		}
		ids = append(ids, n)
	}
	return IDs(ids...), nil
}
