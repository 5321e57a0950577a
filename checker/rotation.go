package checker

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/fencecheck/fencecheck/checker/history"
)

// exhaustionEpoch is the producer epoch at which a transaction coordinator gives a
// transactional id a new producer id with epoch 0 instead of bumping the epoch further
// (Short.MaxValue - 1, on Apache Kafka and on kfake alike).
const exhaustionEpoch = math.MaxInt16 - 1

// rotation is the order of one role's producer ids on a cluster that hashes them
// (docs/checker.md, "Producer-id rotation"): pids[i] is the role's producer id after its
// i-th rotation. The checks compare the role's tokens as keys (rotation index, epoch) and
// print the real tokens. A nil *rotation stands for a role whose tokens compare as they are:
// every cluster with ordered producer ids, and a role with one producer id.
type rotation struct {
	pids []int64
}

// key returns the token the checks compare in place of t, and whether t's producer id is one
// of the rotation's. NoToken stays NoToken.
func (r *rotation) key(t history.Token) (history.Token, bool) {
	if r == nil || !t.Valid() {
		return t, true
	}
	i := slices.Index(r.pids, t.ProducerID)
	if i < 0 {
		return t, false
	}
	return history.Token{ProducerID: int64(i), Epoch: t.Epoch}, true
}

// token returns the real token that key k stands for (the inverse of key).
func (r *rotation) token(k history.Token) history.Token {
	if r == nil || !k.Valid() || k.ProducerID >= int64(len(r.pids)) {
		return k
	}
	return history.Token{ProducerID: r.pids[k.ProducerID], Epoch: k.Epoch}
}

// orderPIDs orders a role's producer ids on a cluster that hashes them. It returns nil and
// "" when the role has one producer id (nothing to order). Several producer ids are a chain
// of rotations, in the order of the earliest return of an acquire or describe that reported
// each, when
//
//   - every producer id but the last was carried by some operation at exhaustionEpoch: the
//     coordinator could not bump it further, so a rotation explains the change (kfake changes
//     a transactional id's producer id only then, or after the id expired, which takes days);
//   - an acquire or describe that reported each producer id returned before one that reported
//     the next was invoked: the older one was the coordinator's first;
//   - no acquire or describe that reported a later producer id returned before one that
//     reported an earlier one was invoked.
//
// Acquires and describes report the coordinator's current producer id, so these orderings
// are real-time facts, never guesses. Otherwise orderPIDs returns why the order is not
// established, and the role's tokens stay not comparable across producer ids.
func (x *index) orderPIDs(rd *roleData) (*rotation, string) {
	type pidSeen struct {
		pid    int64
		top    int16 // the highest epoch an operation carried with pid
		topOp  int32 // that operation
		first  int32 // the first operation that carried pid
		minRet int64 // the earliest return of an acquire or describe that reported pid
		maxInv int64 // the latest invocation of one
		minOp  int32 // the operation that returned at minRet
		maxOp  int32 // the operation invoked at maxInv
	}
	var seen []pidSeen
	for i := range rd.ops {
		ro := &rd.ops[i]
		if ro.pid < 0 {
			continue
		}
		j := slices.IndexFunc(seen, func(s pidSeen) bool { return s.pid == ro.pid })
		if j < 0 {
			j = len(seen)
			seen = append(seen, pidSeen{pid: ro.pid, top: -1, first: ro.op, minRet: math.MaxInt64, maxInv: math.MinInt64, minOp: -1, maxOp: -1})
		}
		s := &seen[j]
		if ro.epoch > s.top {
			s.top, s.topOp = ro.epoch, ro.op
		}
		reported := ro.typ == history.TypeOK && (ro.kind == opAcquire || ro.kind == opDescribe && ro.held())
		if reported && ro.ret < s.minRet {
			s.minRet, s.minOp = ro.ret, ro.op
		}
		if reported && ro.invoke > s.maxInv {
			s.maxInv, s.maxOp = ro.invoke, ro.op
		}
	}
	if len(seen) < 2 {
		return nil, ""
	}
	id := func(op int32) int64 { return x.op(op).ID }
	pids := make([]string, len(seen))
	for i, s := range seen {
		pids[i] = strconv.FormatInt(s.pid, 10)
	}
	all := strings.Join(pids, ", ")
	for _, s := range seen {
		if s.minOp < 0 {
			return nil, fmt.Sprintf("producer id changed among %s and this cluster hashes producer ids; no acquire or describe reported %d (first carried by op %d), so its place in the role's rotations is not known and the tokens are not comparable",
				all, s.pid, id(s.first))
		}
	}
	slices.SortStableFunc(seen, func(a, b pidSeen) int { return cmp.Compare(a.minRet, b.minRet) })
	for i := 1; i < len(seen); i++ {
		prev, s := seen[i-1], seen[i]
		if prev.top < exhaustionEpoch {
			return nil, fmt.Sprintf("producer id changed from %d to %d (op %d) and this cluster hashes producer ids; no operation saw %d reach epoch %d, where the coordinator rotates it (the highest seen is %d, op %d), so the change is not a rotation the checker can order and the tokens are not comparable",
				prev.pid, s.pid, id(s.minOp), prev.pid, exhaustionEpoch, prev.top, id(prev.topOp))
		}
		if prev.minRet >= s.maxInv {
			return nil, fmt.Sprintf("producer id %d reached epoch %d and %d followed it, but no acquire or describe that reported %d returned before one that reported %d was invoked, so the order of the rotation is not established and the tokens are not comparable",
				prev.pid, exhaustionEpoch, s.pid, prev.pid, s.pid)
		}
	}
	for i := range seen {
		for _, later := range seen[i+1:] {
			if later.minRet < seen[i].maxInv {
				return nil, fmt.Sprintf("producer ids %d and %d were reported in both orders (op %d reported %d and returned before op %d, which reported %d, was invoked), so the order of the rotation is not established and the tokens are not comparable",
					seen[i].pid, later.pid, id(later.minOp), later.pid, id(seen[i].maxOp), seen[i].pid)
			}
		}
	}
	r := &rotation{pids: make([]int64, len(seen))}
	for i, s := range seen {
		r.pids[i] = s.pid
	}
	return r, ""
}

// compareTokens compares two tokens of role as the checks order them: as they are when they
// share a producer id or the cluster orders producer ids, else by the role's rotation. ok is
// false when the role's rotation does not place both.
func (x *index) compareTokens(role string, a, b history.Token) (c int, ok bool) {
	if !x.cfg.hashedPIDs || a.ProducerID == b.ProducerID {
		return a.Compare(b), true
	}
	rd := x.byRole[role]
	if rd == nil || rd.rot == nil {
		return 0, false
	}
	ka, oka := rd.rot.key(a)
	kb, okb := rd.rot.key(b)
	if !oka || !okb {
		return 0, false
	}
	return ka.Compare(kb), true
}
