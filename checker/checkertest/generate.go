// Package checkertest generates histories for the checker's tests and benchmarks: correct
// histories from a simulated linearizable coordinator, and the same with one planted
// violation.
package checkertest

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/fencecheck/fencecheck/checker/history"
)

// Config describes a simulated run. Zero fields take the defaults of DefaultConfig.
type Config struct {
	Roles          int
	MembersPerRole int
	Processes      int   // members are spread over processes round-robin
	OpsPerRole     int   // client operations per role, final reads not counted
	WorkPartitions int   // partitions of the work topic; roles share them round-robin
	TV             int   // transaction protocol version: 1 or 2 (every commit bumps the epoch)
	Lease          int64 // lease duration (= transaction timeout), ns

	// Indeterminate is the probability that an operation's outcome is recorded as info
	// (whether it took effect is decided by a coin). Inside a fault window it is tripled.
	Indeterminate float64
	// Slow is the probability that a write stays open past the lease, so the coordinator
	// aborts it on timeout (bumping the epoch) and the writer sees a fence.
	Slow float64
	// ReadRate is the probability that an operation is a read of the role's lease log.
	ReadRate float64
	// AcquireRate is the probability that a member holding nothing tries to acquire (instead
	// of describing the role) while another member holds it: high values make members fight
	// over roles. When no member holds the role, a candidate acquires one time in two.
	AcquireRate float64
	// CandidatePause is the mean extra time (ns) a member holding nothing waits before its next
	// operation, as the workload's candidates look at their role only now and then while the
	// holder renews and writes. Zero: candidates are as busy as holders.
	CandidatePause int64
	// Faults is the number of fault windows; Pauses the number of member pauses (zombies
	// frozen for twice the lease).
	Faults int
	Pauses int
	// HashedPIDs gives producer ids as kfake does: a random one per role, and a random new
	// one when the epoch is exhausted, which sorts before the old one about half the time
	// (the header says producer_ids: hashed). Otherwise a rotation gives a greater one, as on
	// Apache Kafka.
	HashedPIDs bool
	// FirstEpoch is the epoch of a role's first mint, as if earlier runs had bumped it: near
	// 32,766 the roles rotate their producer ids during the run.
	FirstEpoch int16
	// WorkRecords, when above 1, makes each work write carry 1 to WorkRecords records (drawn
	// uniformly), all in its one transaction, so the history exercises no-torn-txn. 0 or 1:
	// one record a write, and the rng draws nothing for it, so the histories of every other
	// configuration stay as they were.
	WorkRecords int
	// AbortBumps (TV1 only) makes an acquire that finds the holder's write in flight bump the
	// epoch twice, as a TV1 coordinator's InitProducerId does: once to abort the holder's
	// transaction (fencing the write; a describe may report that epoch), and once more for the
	// client's retry a little later, which returns the token. The retry does not abort again.
	AbortBumps bool
}

// DefaultConfig is a small run: 3 roles of 3 members, 60 operations each, TV2.
func DefaultConfig() Config {
	return Config{
		Roles: 3, MembersPerRole: 3, Processes: 3, OpsPerRole: 60, WorkPartitions: 2, TV: 2,
		Lease: 5_000_000, Indeterminate: 0.05, Slow: 0.02, ReadRate: 0.05, AcquireRate: 0.35,
		Faults: 2, Pauses: 1,
	}
}

// Generate simulates a run and returns its history. The coordinator is linearizable: every
// operation takes effect at one instant between its invoke and its completion, in a single
// global order, and unknown outcomes are decided by a coin, so the history is correct by
// construction. The same cfg and rng state give the same history.
func Generate(cfg Config, rng *rand.Rand) *history.History {
	def := DefaultConfig()
	if cfg.Roles == 0 {
		cfg.Roles = def.Roles
	}
	if cfg.MembersPerRole == 0 {
		cfg.MembersPerRole = def.MembersPerRole
	}
	if cfg.Processes == 0 {
		cfg.Processes = def.Processes
	}
	if cfg.OpsPerRole == 0 {
		cfg.OpsPerRole = def.OpsPerRole
	}
	if cfg.TV == 0 {
		cfg.TV = def.TV
	}
	if cfg.Lease == 0 {
		cfg.Lease = def.Lease
	}
	if cfg.AcquireRate == 0 {
		cfg.AcquireRate = def.AcquireRate
	}
	s := newSim(cfg, rng)
	s.run()
	return s.b.History()
}

const ms = int64(1_000_000)

type simRole struct {
	name    string
	pid     int64
	epoch   int16 // the coordinator's current epoch; -1 before the first mint
	log     []history.Record
	next    int64 // next offset (a commit marker takes one too)
	ops     int
	members []int
}

type simMember struct {
	role     int
	process  string
	name     string
	client   int
	holds    bool
	token    history.Token // minted
	pe       int16         // the producer's epoch (under TV2 it follows the commits)
	regs     int
	pausedAt int64
	writing  int64 // the invocation of the member's write in flight; -1 if none
}

type task struct {
	at     int64 // when it takes effect (the linearization point, or an abort)
	member int   // -1 for an abort
	op     pendingOp
	abort  abort
}

type pendingOp struct {
	kind   history.Kind
	invoke int64
	info   bool // the outcome will be recorded as info
	slow   bool
	work   int32
	retry  bool // an acquire whose first attempt aborted the holder's transaction
}

type abort struct {
	role  int
	pid   int64
	epoch int16
}

type queue []task

func (q queue) Len() int           { return len(q) }
func (q queue) Less(i, j int) bool { return q[i].at < q[j].at }
func (q queue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)        { *q = append(*q, x.(task)) }
func (q *queue) Pop() any {
	old := *q
	t := old[len(old)-1]
	*q = old[:len(old)-1]
	return t
}

type window struct{ start, end int64 }

type sim struct {
	cfg     Config
	rng     *rand.Rand
	b       *history.Builder
	roles   []simRole
	members []simMember
	work    [][]history.Record
	workOff []int64
	q       queue
	opID    int64
	client  int
	faults  []window
	pauses  map[int]int64 // member → pause length to apply at its next scheduling
	end     int64
}

func newSim(cfg Config, rng *rand.Rand) *sim {
	s := &sim{cfg: cfg, rng: rng, b: history.NewBuilder(cfg.Roles * (cfg.OpsPerRole + 1)), pauses: map[int]int64{}}
	tvName := fmt.Sprintf("tv%d", cfg.TV)
	meta := &history.Meta{Scenario: "simulated-" + tvName, Cluster: "simulation", TransactionVersion: cfg.TV, LeaseDuration: cfg.Lease}
	if cfg.HashedPIDs {
		meta.ProducerIDs = history.ProducerIDsHashed
	}
	s.add(&history.Event{Type: history.TypeHeader, Format: history.FormatOf(meta), Meta: meta})
	s.work = make([][]history.Record, cfg.WorkPartitions)
	s.workOff = make([]int64, cfg.WorkPartitions)
	for r := range cfg.Roles {
		role := simRole{name: fmt.Sprintf("role-%d", r), pid: int64(1000 + r), epoch: -1}
		if cfg.HashedPIDs {
			role.pid = s.rng.Int64()
		}
		for m := range cfg.MembersPerRole {
			id := len(s.members)
			role.members = append(role.members, id)
			s.members = append(s.members, simMember{
				role: r, process: fmt.Sprintf("p%d", id%cfg.Processes), name: fmt.Sprintf("m%d", m),
				client: s.newClient(), token: history.NoToken, writing: -1,
			})
		}
		s.roles = append(s.roles, role)
	}
	// The run lasts about as long as a member needs for its share of the operations.
	span := int64(cfg.OpsPerRole/max(1, cfg.MembersPerRole)+1) * 2 * ms
	for range cfg.Faults {
		start := s.rng.Int64N(span)
		s.faults = append(s.faults, window{start, start + 1*ms + s.rng.Int64N(5*ms)})
	}
	for range cfg.Pauses {
		s.pauses[s.rng.IntN(len(s.members))] = 2*cfg.Lease + s.rng.Int64N(cfg.Lease)
	}
	return s
}

func (s *sim) add(e *history.Event) {
	if err := s.b.Add(e); err != nil {
		panic(fmt.Sprintf("checkertest: the simulation recorded an invalid event: %v", err))
	}
	s.end = max(s.end, e.Time)
}

func (s *sim) newClient() int {
	s.client++
	return s.client - 1
}

func (s *sim) inFault(t int64) bool {
	for _, f := range s.faults {
		if t >= f.start && t <= f.end {
			return true
		}
	}
	return false
}

func (s *sim) between(lo, hi int64) int64 { return lo + s.rng.Int64N(hi-lo) }

func (s *sim) run() {
	for id := range s.members {
		s.schedule(id, s.between(0, ms))
	}
	for s.q.Len() > 0 {
		t := heap.Pop(&s.q).(task)
		if t.member < 0 {
			s.applyAbort(t.abort)
			continue
		}
		s.execute(t)
	}
	s.finalReads()
	for i, f := range s.faults {
		s.add(&history.Event{Type: history.TypeFaultStart, Time: f.start, Fault: int64(i + 1), Kind: "partition",
			Targets: []string{fmt.Sprintf("p%d->b1", i%max(1, s.cfg.Processes))}, Desc: "simulated partition"})
		s.add(&history.Event{Type: history.TypeFaultEnd, Time: f.end, Fault: int64(i + 1), TookHold: true})
	}
}

// schedule picks member id's next operation, invoked at now.
func (s *sim) schedule(id int, now int64) {
	m := &s.members[id]
	role := &s.roles[m.role]
	if role.ops >= s.cfg.OpsPerRole {
		return
	}
	if d, ok := s.pauses[id]; ok && m.holds {
		delete(s.pauses, id)
		fault := int64(len(s.faults) + 1000 + id)
		s.add(&history.Event{Type: history.TypeFaultStart, Time: now, Fault: fault, Kind: history.KindMemberPause,
			Process: m.process, Role: role.name, Member: m.name,
			Targets: []string{m.process + "/" + role.name + "/" + m.name}, Desc: "simulated zombie"})
		now += d
		s.add(&history.Event{Type: history.TypeFaultEnd, Time: now, Fault: fault, TookHold: true})
	}
	if !m.holds && m.regs > 0 && s.cfg.CandidatePause > 0 {
		now += s.rng.Int64N(2 * s.cfg.CandidatePause)
	}
	role.ops++
	op := pendingOp{invoke: now}
	x := s.rng.Float64()
	switch {
	case m.regs == 0:
		op.kind = history.KindRegister
	case x < s.cfg.ReadRate:
		op.kind = history.KindRead
	case m.holds:
		switch y := s.rng.Float64(); {
		case y < 0.08:
			op.kind = history.KindDescribe
		case y < 0.6 || s.cfg.WorkPartitions == 0:
			op.kind = history.KindWriteLease
		default:
			op.kind = history.KindWork
			op.work = int32(m.role % s.cfg.WorkPartitions)
		}
	default:
		switch y := s.rng.Float64(); {
		case y < s.cfg.AcquireRate, y < 0.5 && s.looksFree(role):
			op.kind = history.KindAcquire
		default:
			op.kind = history.KindDescribe
		}
	}
	rate := s.cfg.Indeterminate
	if s.inFault(now) {
		rate *= 3
	}
	op.info = s.rng.Float64() < rate
	lp := now + s.between(ms/20, ms)
	if op.kind.IsWrite() && s.rng.Float64() < s.cfg.Slow {
		op.slow, op.info = true, false
		lp = now + s.cfg.Lease + s.between(ms/20, ms/2)
	}
	if op.kind.IsWrite() {
		m.writing = now
	}
	heap.Push(&s.q, task{at: lp, member: id, op: op})
}

// looksFree reports whether no member holds the role: a candidate that looks then
// acquires, as the workload's candidates do when no lease was renewed.
func (s *sim) looksFree(r *simRole) bool {
	for _, id := range r.members {
		if s.members[id].holds {
			return false
		}
	}
	return true
}

func (s *sim) applyAbort(a abort) {
	r := &s.roles[a.role]
	if r.pid == a.pid && r.epoch == a.epoch {
		s.bump(r)
	}
}

// bump advances the role's epoch; at exhaustion the producer id rotates to a larger one, as
// on Kafka, or to a random one, as on kfake.
func (s *sim) bump(r *simRole) {
	if r.epoch == math.MaxInt16-1 {
		if s.cfg.HashedPIDs {
			for old := r.pid; r.pid == old; {
				r.pid = s.rng.Int64() // any id but the old one
			}
		} else {
			r.pid += 1 << 20
		}
		r.epoch = 0
		return
	}
	r.epoch++
}

// holderWriting reports whether a member of r holds the current epoch and has a write in
// flight (its transaction is open) at time at.
func (s *sim) holderWriting(r *simRole, at int64) bool {
	for _, id := range r.members {
		h := &s.members[id]
		if h.holds && h.writing >= 0 && h.writing < at && h.token.ProducerID == r.pid && h.pe == r.epoch {
			return true
		}
	}
	return false
}

func (s *sim) execute(t task) {
	m := &s.members[t.member]
	r := &s.roles[m.role]
	op := t.op
	if op.kind.IsWrite() {
		m.writing = -1
	}
	if op.kind == history.KindAcquire && s.cfg.AbortBumps && s.cfg.TV == 1 && !op.info && !op.retry && r.epoch >= 0 && s.holderWriting(r, t.at) {
		// The first attempt aborts the holder's transaction; the retry mints.
		s.bump(r)
		op.retry = true
		heap.Push(&s.q, task{at: t.at + s.between(ms, 4*ms), member: t.member, op: op})
		return
	}
	s.opID++
	id := s.opID
	inv := history.Event{Type: history.TypeInvoke, ID: id, Time: op.invoke, Client: m.client,
		Process: m.process, Member: m.name, Role: r.name, Kind: op.kind}
	done := history.Event{Type: history.TypeOK, ID: id, Time: t.at + s.between(ms/20, ms)}
	effect := !op.info || s.rng.IntN(2) == 0 // an unknown outcome took effect or not
	switch op.kind {
	case history.KindRegister:
		m.regs++
		if effect {
			off := r.next
			r.next++
			r.log = append(r.log, history.Record{Offset: off, Kind: history.RecordRegistration, Member: m.name, Token: history.NoToken})
			done.Result.Offset = &off
		}
	case history.KindAcquire:
		m.holds = false
		if effect {
			if r.epoch < 0 {
				r.epoch = s.cfg.FirstEpoch
			} else {
				s.bump(r)
			}
			tok := history.Token{ProducerID: r.pid, Epoch: r.epoch}
			if !op.info && s.rng.Float64() < s.cfg.Indeterminate {
				// A later member took the role while the call ran (as the transport reports it):
				// the mint happened, the caller holds nothing.
				done.Type, done.Error = history.TypeFail, history.ErrorFenced
			} else {
				m.holds, m.token, m.pe = true, tok, tok.Epoch
				done.Result.Token = &tok
			}
		}
	case history.KindWriteLease, history.KindWork:
		inv.Args = history.Args{Token: m.token, WriteID: fmt.Sprintf("w%d", id)}
		records := 1
		if op.kind == history.KindWork {
			inv.Args.Log = history.WorkLog(op.work)
			if s.cfg.WorkRecords > 1 {
				records = 1 + s.rng.IntN(s.cfg.WorkRecords)
			}
			if records > 1 {
				inv.Args.Records = records
			}
		}
		current := r.pid == m.token.ProducerID && r.epoch == m.pe
		switch {
		case op.slow:
			if current {
				s.bump(r) // the coordinator aborts the transaction on timeout
			}
			done.Type, done.Error = history.TypeFail, history.ErrorFenced
			m.holds = false
		case !current:
			done.Type, done.Error = history.TypeFail, history.ErrorFenced
			m.holds = false
			op.info = false
		case effect:
			rec := history.Record{Offset: r.next, Member: m.name, Token: m.token, WriteID: inv.Args.WriteID}
			if op.kind == history.KindWork {
				p := op.work
				rec.Kind, rec.Role = history.RecordWork, r.name
				for i := range records {
					rec.Offset = s.workOff[p]
					if records > 1 {
						rec.Index, rec.Count = uint16(i), uint16(records)
					}
					s.work[p] = append(s.work[p], rec)
					s.workOff[p]++
				}
				s.workOff[p]++ // the commit marker takes an offset
			} else {
				rec.Kind = history.RecordLease
				r.log = append(r.log, rec)
				r.next += 2
			}
			if s.cfg.TV == 2 {
				s.bump(r) // EndTxn bumps the epoch; the producer follows
				m.pe = r.epoch
			}
		default:
			// The transaction stays open: the coordinator aborts it after the lease.
			heap.Push(&s.q, task{at: op.invoke + s.cfg.Lease, member: -1, abort: abort{m.role, r.pid, r.epoch}})
		}
	case history.KindRead:
		done.Result.Records = r.log[:len(r.log):len(r.log)]
	case history.KindDescribe:
		if r.epoch >= 0 {
			tok := history.Token{ProducerID: r.pid, Epoch: r.epoch}
			done.Result.Held, done.Result.Token = true, &tok
		}
	}
	if op.info {
		done = history.Event{Type: history.TypeInfo, ID: id, Time: t.at + s.between(ms, 5*ms), Error: history.ErrorTimeout}
		if op.kind == history.KindAcquire || op.kind.IsWrite() {
			m.holds = false // the transport closes a producer whose state it does not know
		}
	}
	s.add(&inv)
	s.add(&done)
	if done.Type == history.TypeInfo {
		m.client = s.newClient()
	}
	s.schedule(t.member, done.Time+s.between(0, ms/2))
}

func (s *sim) finalReads() {
	at := s.end + ms
	read := func(role string, log history.LogID, recs []history.Record) {
		s.opID++
		s.add(&history.Event{Type: history.TypeInvoke, ID: s.opID, Time: at, Client: s.newClient(),
			Process: "final", Role: role, Kind: history.KindFinalRead, Args: history.Args{Log: log}})
		at += ms / 10
		s.add(&history.Event{Type: history.TypeOK, ID: s.opID, Time: at,
			Result: history.Result{Records: append(make([]history.Record, 0, len(recs)), recs...)}})
	}
	for i := range s.roles {
		read(s.roles[i].name, history.LogID{}, s.roles[i].log)
	}
	for p := range s.work {
		read("", history.WorkLog(int32(p)), s.work[p])
	}
}
