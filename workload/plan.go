package workload

import (
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"time"
)

// Plan is the run's generator: every choice the workload makes (when a member looks, whether
// it reads or describes, when it contends, how long it backs off, when it writes work, what a
// reader does) is drawn from it. It is pure: the same seed and Config give the same choices.
//
// Each kind of choice of each actor has its own stream, derived from the root seed and a
// stable name ("member/r3/m2/contend"). The k-th contention moment of a member is therefore
// the same in every run with that seed, whatever the cluster answered before it; only which
// of those choices get used depends on the run (a holder does not look).
type Plan struct {
	seed  uint64
	cfg   Config
	roles []string
}

// NewPlan returns the generator of cfg under seed.
func NewPlan(cfg Config, seed uint64) *Plan {
	p := &Plan{seed: seed, cfg: cfg}
	for i := range cfg.Roles {
		p.roles = append(p.roles, RoleName(i))
	}
	return p
}

// stream returns the source named name: PCG seeded with the root seed and a hash of the name.
func (p *Plan) stream(name string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(name))
	return rand.New(rand.NewPCG(p.seed, h.Sum64()))
}

// jittered spreads mean uniformly by ±jitter of it.
func jittered(r *rand.Rand, mean time.Duration, jitter float64) time.Duration {
	return time.Duration(float64(mean) * (1 + jitter*(2*r.Float64()-1)))
}

// MemberPlan is the choices of one member, one stream per kind of choice.
type MemberPlan struct {
	load    Load
	lease   time.Duration
	look    *rand.Rand
	contend *rand.Rand
	backoff *rand.Rand
	renew   *rand.Rand
	work    *rand.Rand
	records *rand.Rand
}

// Member returns the plan of member j (0-based) of role r (0-based).
func (p *Plan) Member(r, j int) *MemberPlan {
	name := "member/" + RoleName(r) + "/" + MemberName(j) + "/"
	return &MemberPlan{
		load:    p.cfg.Load,
		lease:   p.cfg.Lease.D(),
		look:    p.stream(name + "look"),
		contend: p.stream(name + "contend"),
		backoff: p.stream(name + "backoff"),
		renew:   p.stream(name + "renew"),
		work:    p.stream(name + "work"),
		records: p.stream(name + "records"),
	}
}

// Look is a candidate's next look: wait, then read the role's records, or describe it.
type Look struct {
	Wait     time.Duration
	Describe bool
}

// FirstLook is the delay of the member's first look, uniform in [0, Look), so members do not
// start in step.
func (m *MemberPlan) FirstLook() time.Duration {
	return time.Duration(m.look.Float64() * float64(m.load.Look))
}

// NextLook returns the next look.
func (m *MemberPlan) NextLook() Look {
	return Look{
		Wait:     jittered(m.look, m.load.Look.D(), m.load.Jitter),
		Describe: m.look.Float64() < m.load.DescribeShare,
	}
}

// NextContend returns the gap to the member's next contention moment, or 0 when the load has
// no contention schedule. Gaps are exponential (a Poisson schedule), so members contend
// independently of one another.
func (m *MemberPlan) NextContend() time.Duration {
	if m.load.Contend <= 0 {
		return 0
	}
	return time.Duration(m.contend.ExpFloat64() * float64(m.load.Contend))
}

// Backoff returns the wait after the n-th (1-based) consecutive lost holding or failed
// acquire: uniform in [BackoffMin, min(BackoffMax, BackoffMin*2^n)].
func (m *MemberPlan) Backoff(n int) time.Duration {
	lo, hi := m.load.BackoffMin.D(), m.load.BackoffMin.D()
	for range min(max(n, 1), 30) {
		hi *= 2
		if hi >= m.load.BackoffMax.D() {
			hi = m.load.BackoffMax.D()
			break
		}
	}
	return lo + time.Duration(m.backoff.Float64()*float64(hi-lo))
}

// NextRenew returns the wait until the holder's next lease write: Lease/3, shortened (never
// lengthened) by up to Jitter of it, so a renewal is never late by design.
func (m *MemberPlan) NextRenew() time.Duration {
	d := m.lease / 3
	return d - time.Duration(m.renew.Float64()*m.load.Jitter*float64(d))
}

// NextWork returns the wait until the holder's next work write, or 0 when the load has none.
func (m *MemberPlan) NextWork() time.Duration {
	if m.load.WorkRate <= 0 {
		return 0
	}
	return jittered(m.work, time.Duration(float64(time.Second)/m.load.WorkRate), m.load.Jitter)
}

// WorkRecords returns how many records the holder's next work write carries: the load's
// count, or a draw from its range (uniform, from a stream of its own, so the other choices
// stay where they were).
func (m *MemberPlan) WorkRecords() int {
	lo, hi := m.load.WorkRecords.Bounds()
	if lo == hi {
		return lo
	}
	return lo + m.records.IntN(hi-lo+1)
}

// ReadKind is what a reader does.
type ReadKind uint8

// Reader operations.
const (
	ReadRole     ReadKind = iota + 1 // read a role's records
	DescribeRole                     // describe a role
	ReadWork                         // read a work partition
)

func (k ReadKind) String() string {
	switch k {
	case ReadRole:
		return "read"
	case DescribeRole:
		return "describe"
	case ReadWork:
		return "read-work"
	}
	return "ReadKind(" + strconv.Itoa(int(k)) + ")"
}

// ReadChoice is a reader's next operation: wait, then do Kind on Role (0-based) or on work
// partition Partition.
type ReadChoice struct {
	Wait      time.Duration
	Kind      ReadKind
	Role      int
	Partition int32
}

// ReaderPlan is the choices of one reader.
type ReaderPlan struct {
	load       Load
	roles      int
	partitions int32
	r          *rand.Rand
}

// Reader returns the plan of reader i (0-based).
func (p *Plan) Reader(i int) *ReaderPlan {
	return &ReaderPlan{
		load:       p.cfg.Load,
		roles:      p.cfg.Roles,
		partitions: p.cfg.workPartitions(),
		r:          p.stream("reader/" + strconv.Itoa(i)),
	}
}

// Next returns the reader's next operation.
func (rp *ReaderPlan) Next() ReadChoice {
	mix := rp.load.ReadMix
	c := ReadChoice{Wait: jittered(rp.r, rp.load.ReadEvery.D(), rp.load.Jitter)}
	switch n := rp.r.IntN(mix.Read + mix.Describe + mix.ReadWork); {
	case n < mix.Read:
		c.Kind = ReadRole
	case n < mix.Read+mix.Describe:
		c.Kind = DescribeRole
	default:
		c.Kind = ReadWork
	}
	if c.Kind == ReadWork {
		c.Partition = rp.r.Int32N(rp.partitions)
	} else {
		c.Role = rp.r.IntN(rp.roles)
	}
	return c
}
