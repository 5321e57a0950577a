package workload

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencecheck/fencecheck/checker/history"
	"github.com/fencecheck/fencecheck/transport"
)

// recorder turns transport calls into history events. It is the only code that does: every
// call goes through a client's method, which appends the invoke, makes the call, asks
// transport.Classify what the outcome means and appends the completion. It also keeps the
// live counters of Stats.
type recorder struct {
	w     *history.Writer
	start time.Time // the history's time base
	lease time.Duration
	log   *slog.Logger

	lastOp     atomic.Int64
	lastClient atomic.Int64

	errOnce sync.Once
	err     atomic.Pointer[error] // the first history append error
	broken  chan struct{}         // closed at the first history append error

	stats *counters
}

// now is the history time: monotonic nanoseconds since the run's time base.
func (r *recorder) now() int64 { return int64(time.Since(r.start)) }

// append writes e and keeps the first error: a history that cannot be written makes the run
// worthless, and Run reports it.
func (r *recorder) append(e history.Event) {
	if err := r.w.Append(e); err != nil {
		r.appendFailed(err)
	}
}

// appendFailed keeps err if it is the first append error. It is apart from append because
// its closure captures err, which then moved to the heap on every append.
func (r *recorder) appendFailed(err error) {
	r.errOnce.Do(func() {
		err = fmt.Errorf("history: %w", err)
		r.err.Store(&err)
		close(r.broken)
		r.log.Error("history append failed; the run cannot be checked", "err", err)
	})
}

// failed returns the first append error, or nil.
func (r *recorder) failed() error {
	if p := r.err.Load(); p != nil {
		return *p
	}
	return nil
}

// client is the recording handle of one sequential actor (a member, a reader, the final
// reader) on one process. Its id is the porcupine client id of the actor's operations; after
// an operation with an unknown outcome the actor takes a fresh id, because that operation
// may still take effect while later ones run (docs/checker.md, "What a completion means").
type client struct {
	rec     *recorder
	tr      Transport
	process string
	member  string // empty for readers
	id      int
}

func (r *recorder) newClient(tr Transport, process, member string) *client {
	return &client{rec: r, tr: tr, process: process, member: member, id: int(r.lastClient.Add(1))}
}

// call is one operation between its invoke and its completion.
type call struct {
	c      *client
	id     int64
	kind   history.Kind
	role   string
	invoke int64
}

// begin allocates the operation id and appends the invoke. The call is returned by value so
// that it stays on the caller's stack: every operation made one heap allocation for it.
func (c *client) begin(kind history.Kind, role string, args history.Args) call {
	k := call{c: c, id: c.rec.lastOp.Add(1), kind: kind, role: role}
	if kind.IsWrite() {
		args.WriteID = writeID(uint64(k.id))
	}
	k.invoke = c.rec.now()
	c.rec.append(history.Event{
		Type: history.TypeInvoke, ID: k.id, Time: k.invoke, Client: c.id,
		Process: c.process, Member: c.member, Role: role, Kind: kind, Args: args,
	})
	return k
}

// end appends the completion of err (with res when it is nil) and returns the outcome
// transport.Classify gives it.
func (k *call) end(err error, res history.Result) transport.Outcome {
	ret := k.c.rec.now()
	out := transport.Classify(err)
	e := history.Event{ID: k.id, Time: ret}
	switch out {
	case transport.OK:
		e.Type, e.Result = history.TypeOK, res
	case transport.Fail:
		e.Type, e.Error, e.Message = history.TypeFail, errorClass(err), message(err)
	default:
		e.Type, e.Error, e.Message = history.TypeInfo, errorClass(err), message(err)
		k.c.id = int(k.c.rec.lastClient.Add(1))
	}
	k.c.rec.append(e)
	k.c.rec.stats.completed(k, out, err, ret)
	if out != transport.OK {
		k.c.rec.log.Debug("operation did not succeed", "op", k.id, "kind", k.kind, "role", k.role,
			"process", k.c.process, "member", k.c.member, "outcome", out, "err", err)
	}
	return out
}

// writeID is the history's name of the write whose records carry id (Lease.Seq, Value.WriteID).
func writeID(id uint64) string { return "w" + strconv.FormatUint(id, 10) }

// maxMessage bounds the error text a completion keeps: enough for a client's error name and
// its explanation, not a stack of wrapped retries.
const maxMessage = 500

// message is err's text for the completion's message, cut at maxMessage bytes (on a rune
// boundary).
func message(err error) string {
	s := err.Error()
	if len(s) <= maxMessage {
		return s
	}
	cut := maxMessage
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// errorClass names the class of a failed call's error for the completion's error field. The
// checker interprets only history.ErrorFenced; the rest is for reports.
func errorClass(err error) string {
	switch {
	case errors.Is(err, transport.ErrFenced):
		return history.ErrorFenced
	case errors.Is(err, transport.ErrNotHeld):
		return history.ErrorNotHeld
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return history.ErrorTimeout
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, transport.ErrClient):
		return "client"
	case errors.Is(err, transport.ErrProducer):
		return "producer"
	case errors.Is(err, transport.ErrAdmin):
		return "admin"
	case errors.Is(err, transport.ErrRecord):
		return "record"
	case errors.Is(err, transport.ErrClosed):
		return "closed"
	case errors.Is(err, transport.ErrInvalidConfig):
		return "invalid-config"
	}
	return "unknown"
}

func historyToken(t transport.FencingToken) history.Token {
	return history.Token{ProducerID: t.ProducerID, Epoch: t.Epoch}
}

// Register records a registration of the client's member.
func (c *client) Register(ctx context.Context, role string) (int64, error) {
	k := c.begin(history.KindRegister, role, history.Args{})
	off, err := c.tr.Register(ctx, transport.Role(role), transport.MemberID(c.member))
	k.end(err, history.Result{Offset: &off})
	return off, err
}

// Acquire records an acquire.
func (c *client) Acquire(ctx context.Context, role string) (transport.FencingToken, error) {
	k := c.begin(history.KindAcquire, role, history.Args{})
	tok, err := c.tr.AcquireEpoch(ctx, transport.Role(role))
	ht := historyToken(tok)
	k.end(err, history.Result{Token: &ht})
	return tok, err
}

// WriteLease records a lease write under tok; the lease carries the operation id as its Seq.
// It returns when the lease was stamped (its WrittenAt), from which the writer believes it
// holds the role for the lease duration.
func (c *client) WriteLease(ctx context.Context, role string, tok transport.FencingToken) (time.Time, error) {
	k := c.begin(history.KindWriteLease, role, history.Args{Token: historyToken(tok)})
	lease := transport.Lease{
		Holder: transport.MemberID(c.member), Seq: uint64(k.id),
		Duration: c.rec.lease, WrittenAt: time.Now(),
	}
	err := c.tr.WriteLease(ctx, transport.Role(role), tok, lease)
	k.end(err, history.Result{})
	return lease.WrittenAt, err
}

// Work records a fenced application write under tok: n records (at least one) on partition
// of topic, all in one transaction on the producer bound to tok. Each record carries the
// operation id as its write id and, when there are several, its index among them and their
// count; the history records the count with the write.
func (c *client) Work(ctx context.Context, role string, tok transport.FencingToken, topic string, partition int32, payload []byte, n int) error {
	n = max(n, 1)
	args := history.Args{Token: historyToken(tok), Log: history.WorkLog(partition)}
	if n > 1 {
		args.Records = n
	}
	k := c.begin(history.KindWork, role, args)
	key := transport.EncodeKey(transport.Role(role))
	recs := make([]*kgo.Record, n)
	for i := range recs {
		v := transport.Value{
			Kind: transport.KindWork, Token: tok, Member: transport.MemberID(c.member),
			WriteID: uint64(k.id), Payload: payload,
		}
		if n > 1 {
			v.Index, v.Count = i, n
		}
		recs[i] = &kgo.Record{Topic: topic, Partition: partition, Key: key, Value: transport.AppendValue(nil, v)}
	}
	err := c.tr.WriteFenced(ctx, transport.Role(role), tok, recs...)
	k.end(err, history.Result{})
	return err
}

// Describe records a describe.
func (c *client) Describe(ctx context.Context, role string) (transport.FencingToken, bool, error) {
	k := c.begin(history.KindDescribe, role, history.Args{})
	tok, held, err := c.tr.Describe(ctx, transport.Role(role))
	res := history.Result{Held: held}
	if held {
		ht := historyToken(tok)
		res.Token = &ht
	}
	k.end(err, res)
	return tok, held, err
}

// ReadRole records a read (kind history.KindRead) or a final read (history.KindFinalRead) of
// role's lease log.
func (c *client) ReadRole(ctx context.Context, kind history.Kind, role string) (transport.RoleRecords, error) {
	k := c.begin(kind, role, history.Args{})
	rr, err := c.tr.ReadRoleRecords(ctx, transport.Role(role))
	var res history.Result
	if err == nil {
		res.Records = roleLog(rr)
	}
	k.end(err, res)
	return rr, err
}

// ReadWork records a read or a final read of one partition of the work topic.
func (c *client) ReadWork(ctx context.Context, kind history.Kind, topic string, partition int32) ([]history.Record, error) {
	k := c.begin(kind, "", history.Args{Log: history.WorkLog(partition)})
	recs, err := c.tr.ReadPartition(ctx, topic, partition)
	var out []history.Record
	if err == nil {
		out, err = workLog(recs)
	}
	k.end(err, history.Result{Records: out})
	return out, err
}

// roleLog merges a role's registrations and leases into one log in offset order.
func roleLog(rr transport.RoleRecords) []history.Record {
	out := make([]history.Record, 0, len(rr.Registrations)+len(rr.Leases))
	for _, r := range rr.Registrations {
		out = append(out, history.Record{Offset: r.JoinSeq, Kind: history.RecordRegistration, Member: string(r.Member)})
	}
	for _, l := range rr.Leases {
		out = append(out, history.Record{
			Offset: l.Offset, Kind: history.RecordLease, Member: string(l.Lease.Holder),
			Token: historyToken(l.Token), WriteID: writeID(l.Lease.Seq),
		})
	}
	slices.SortFunc(out, func(a, b history.Record) int { return cmp.Compare(a.Offset, b.Offset) })
	return out
}

// workLog decodes the records of a work partition. A record without a fencecheck key belongs
// to another writer and is dropped, as the transport's reads do; a fencecheck record that
// does not decode as work makes the read fail (transport.ErrRecord), because the checker
// cannot account for it.
func workLog(recs []*kgo.Record) ([]history.Record, error) {
	out := make([]history.Record, 0, len(recs))
	for _, r := range recs {
		role, err := transport.DecodeKey(r.Key)
		if err != nil {
			continue
		}
		v, err := transport.DecodeValue(r.Value)
		if err == nil && v.Kind != transport.KindWork {
			err = fmt.Errorf("a %s record on the work topic", v.Kind)
		}
		if err != nil {
			return nil, &transport.Error{Op: transport.OpRead, Role: role, Kind: transport.ErrRecord,
				Stage: transport.StageSend, Err: fmt.Errorf("work partition %d offset %d: %w", r.Partition, r.Offset, err)}
		}
		out = append(out, history.Record{
			Offset: r.Offset, Kind: history.RecordWork, Member: string(v.Member), Role: string(role),
			Token: historyToken(v.Token), WriteID: writeID(v.WriteID),
			Index: uint16(v.Index), Count: uint16(v.Count), // the codec bounds both by MaxWorkRecords
		})
	}
	return out, nil
}
