package lineproto

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fencecheck/fencecheck/transport"
	"github.com/fencecheck/fencecheck/transport/pipeline"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Subject is what Serve puts behind the protocol: *transport.BrokerTransport, or a wrapper of it.
type Subject interface {
	transport.CoordinationTransport
	WriteFenced(ctx context.Context, role transport.Role, token transport.FencingToken, recs ...*kgo.Record) error
	ReadPartition(ctx context.Context, topic string, partition int32) ([]*kgo.Record, error)
	HeldToken(role transport.Role) (transport.FencingToken, bool)
	TransactionVersion() int
	Close(ctx context.Context) error
}

// SubjectStart builds the subject from the configuration start carries.
type SubjectStart func(ctx context.Context, cfg transport.Config) (Subject, error)

// StartReal is the SubjectStart of fencecheck's own transport.
func StartReal(ctx context.Context, cfg transport.Config) (Subject, error) {
	t, err := transport.Start(ctx, cfg)
	if err != nil {
		return nil, err // not a typed nil
	}
	return t, nil
}

// Adapter is what Serve puts behind the protocol.
type Adapter struct {
	// Name is what hello reports: the adapter and its version.
	Name string
	// Start builds the subject when start comes.
	Start SubjectStart
	// Capabilities are announced in hello, and Serve then answers as a client with those
	// limits would: with CapGatewayToken acquire and held carry no token, with CapNoDescribe
	// describe fails. fencecheck's own transport has no such limits; serving it with them
	// tests the harness's side of each capability.
	Capabilities []string
	// Pipeline, when set, builds a pipeline member when member_start comes, and hello lists
	// the pipelines workload. The member dials the bootstrap it is given (the harness's
	// gateway) directly: Conn.Dial, Pause and Fetched are the harness's, on the wire.
	Pipeline func(ctx context.Context, cfg pipeline.Config) (pipeline.Member, error)
}

// Serve is the adapter side: it reads requests from in and writes responses to out until
// close or the end of in, running each call in its own goroutine (the subject serializes
// calls on one role). The subject's warnings go to log.
func Serve(ctx context.Context, in io.Reader, out io.Writer, log *slog.Logger, a Adapter) error {
	for _, c := range a.Capabilities {
		if !slices.Contains(capabilities, c) {
			return fmt.Errorf("unknown capability %q (want one of %s)", c, strings.Join(capabilities, ", "))
		}
	}
	s := &server{enc: json.NewEncoder(out), log: log, name: a.Name, start: a.Start, caps: a.Capabilities, newMember: a.Pipeline}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), maxFrame)
	var calls sync.WaitGroup
	defer func() {
		calls.Wait()
		if tr := s.subject(); tr != nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			_ = tr.Close(cctx)
			cancel()
		}
		if m := s.pipe; m != nil {
			m.Close()
		}
	}()
	for sc.Scan() {
		var req Request
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			return fmt.Errorf("%w: request %q: %v", ErrProtocol, sc.Text(), err)
		}
		switch req.Op {
		case OpHello, OpStart, OpMemberStart, OpPoll, OpTransact: // in order: a member makes one call at a time
			s.reply(s.handle(ctx, &req))
		case OpClose:
			calls.Wait()
			s.reply(s.handle(ctx, &req))
			return nil
		default:
			calls.Go(func() { s.reply(s.handle(ctx, &req)) })
		}
	}
	return sc.Err()
}

type server struct {
	enc   *json.Encoder
	wmu   sync.Mutex
	log   *slog.Logger
	name  string
	start SubjectStart
	caps  []string

	mu sync.Mutex
	tr Subject

	// A pipeline member's: the member, and the batch it last polled (transact copies it).
	newMember func(ctx context.Context, cfg pipeline.Config) (pipeline.Member, error)
	pipe      pipeline.Member
	polled    pipeline.Batch
}

func (s *server) subject() Subject {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tr
}

func (s *server) reply(r *Response) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_ = s.enc.Encode(r) // a harness that stopped reading has given up on this adapter
}

// failure is the response to a call that returned err.
func failure(id uint64, err error) *Response {
	outcome := OutcomeFail
	if transport.Classify(err) == transport.Unknown {
		outcome = OutcomeUnknown
	}
	return &Response{ID: id, Outcome: outcome, Error: &Error{Kind: kindName(err), Message: err.Error()}}
}

func (s *server) handle(ctx context.Context, req *Request) *Response {
	ok := &Response{ID: req.ID, Outcome: OutcomeOK}
	if req.Op == OpHello {
		ok.Version, ok.Name, ok.Capabilities = Version, s.name, s.caps
		if s.newMember != nil {
			ok.Workloads = []string{WorkloadLeases, WorkloadPipelines}
		}
		return ok
	}
	switch req.Op {
	case OpMemberStart, OpPoll, OpTransact:
		return s.member(ctx, req)
	case OpClose:
		if s.pipe != nil && s.subject() == nil {
			s.pipe.Close()
			s.pipe = nil
			return ok
		}
	}
	if req.Op == OpStart {
		if req.Config == nil {
			return failure(req.ID, &transport.Error{Op: transport.OpStart, Kind: transport.ErrInvalidConfig, Err: errors.New("start without config")})
		}
		c := req.Config
		cfg := transport.NewConfig(c.Bootstrap, time.Duration(c.LeaseMS)*time.Millisecond)
		cfg.ClientID, cfg.Topic = c.ClientID, c.Topic
		cfg.RequestTimeout = time.Duration(c.RequestTimeoutMS) * time.Millisecond
		cfg.FetchMaxWait = time.Duration(c.FetchMaxWaitMS) * time.Millisecond
		cfg.FetchPartitionMax = c.FetchPartitionMax
		cfg.TopicPartitions, cfg.TopicReplication = c.TopicPartitions, c.TopicReplication
		cfg.TransactionVersion = c.TransactionVersion
		cfg.Logger = s.log
		tr, err := s.start(ctx, cfg)
		if err != nil {
			return failure(req.ID, err)
		}
		s.mu.Lock()
		s.tr = tr
		s.mu.Unlock()
		ok.TransactionVersion = tr.TransactionVersion()
		return ok
	}
	tr := s.subject()
	if tr == nil {
		return failure(req.ID, &transport.Error{Op: transport.Op(req.Op), Kind: transport.ErrInvalidConfig,
			Err: fmt.Errorf("%s before start", req.Op)})
	}
	role := transport.Role(req.Role)
	var err error
	switch req.Op {
	case OpAcquire:
		var tok transport.FencingToken
		if tok, err = tr.AcquireEpoch(ctx, role); err == nil && !slices.Contains(s.caps, CapGatewayToken) {
			ok.Token = tokenOf(tok)
		}
	case OpRegister:
		var seq int64
		if seq, err = tr.Register(ctx, role, transport.MemberID(req.Member)); err == nil {
			ok.JoinSeq = &seq
		}
	case OpWriteLease:
		l := req.Lease
		if l == nil {
			l = &Lease{}
		}
		err = tr.WriteLease(ctx, role, req.Token.fencing(), transport.Lease{Holder: transport.MemberID(l.Holder), Seq: l.Seq,
			Duration: time.Duration(l.DurationNS), WrittenAt: time.Unix(0, l.WrittenAtNS)})
	case OpWriteFenced:
		recs := make([]*kgo.Record, len(req.Records))
		for i, w := range req.Records {
			recs[i] = &kgo.Record{Topic: w.Topic, Partition: w.Partition, Key: w.Key, Value: w.Value}
		}
		err = tr.WriteFenced(ctx, role, req.Token.fencing(), recs...)
	case OpReadRole:
		if req.Partition == nil {
			return failure(req.ID, &transport.Error{Op: transport.OpRead, Role: role, Kind: transport.ErrInvalidConfig,
				Err: errors.New("read_role without partition")})
		}
		var recs []*kgo.Record
		if recs, err = tr.ReadPartition(ctx, req.Topic, *req.Partition); err == nil {
			ok.Records = make([]Read, len(recs))
			for i, r := range recs {
				ok.Records[i] = Read{Offset: r.Offset, Key: r.Key, Value: r.Value}
			}
		}
		if err != nil {
			var te *transport.Error
			if errors.As(err, &te) {
				te.Role = role
			}
		}
	case OpDescribe:
		if slices.Contains(s.caps, CapNoDescribe) {
			return failure(req.ID, &transport.Error{Op: transport.OpDescribe, Role: role, Kind: transport.ErrAdmin,
				Stage: transport.StageLocal, Err: errors.New("describe: this adapter announced no-describe")})
		}
		var tok transport.FencingToken
		if tok, ok.Held, err = tr.Describe(ctx, role); err == nil && ok.Held {
			ok.Token = tokenOf(tok)
		}
	case OpHeld:
		var tok transport.FencingToken
		if tok, ok.Held = tr.HeldToken(role); ok.Held && !slices.Contains(s.caps, CapGatewayToken) {
			ok.Token = tokenOf(tok)
		}
	case OpClose:
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err = tr.Close(cctx)
		cancel()
		if err != nil {
			err = &transport.Error{Op: "close", Kind: transport.ErrClient, Stage: transport.StageLocal, Err: err}
		}
	default:
		return failure(req.ID, &transport.Error{Op: transport.Op(req.Op), Kind: transport.ErrInvalidConfig,
			Stage: transport.StageLocal, Err: fmt.Errorf("unknown op %q", req.Op)})
	}
	if err != nil {
		return failure(req.ID, err)
	}
	return ok
}

// member serves a pipeline member's calls (one at a time: Serve runs them in order).
func (s *server) member(ctx context.Context, req *Request) *Response {
	ok := &Response{ID: req.ID, Outcome: OutcomeOK}
	bad := func(format string, args ...any) *Response {
		return failure(req.ID, &transport.Error{Op: transport.Op(req.Op), Kind: transport.ErrInvalidConfig, Stage: transport.StageLocal,
			Err: fmt.Errorf(format, args...)})
	}
	switch {
	case s.newMember == nil:
		return bad("%s: this adapter serves leases only", req.Op)
	case req.Op == OpMemberStart && (req.Pipeline == nil || s.pipe != nil):
		return bad("member_start without pipeline config, or a second one")
	case req.Op != OpMemberStart && s.pipe == nil:
		return bad("%s before member_start", req.Op)
	}
	switch req.Op {
	case OpMemberStart:
		c := req.Pipeline
		conn := transport.NewConfig(c.Bootstrap, time.Duration(c.TransactionTimeoutMS)*time.Millisecond)
		conn.ClientID, conn.Logger = c.ClientID, s.log
		conn.RequestTimeout = time.Duration(c.RequestTimeoutMS) * time.Millisecond
		conn.TransactionVersion = c.TransactionVersion
		m, err := s.newMember(ctx, pipeline.Config{Conn: conn, Group: c.Group, Input: c.Input, Output: c.Output,
			TransactionalID: c.TransactionalID, TxnIDPerPartition: c.TxnIDPerPartition,
			SessionTimeout: time.Duration(c.SessionTimeoutMS) * time.Millisecond, RebalanceTimeout: time.Duration(c.RebalanceTimeoutMS) * time.Millisecond,
			MaxPoll: c.MaxPoll, Protocol: c.Protocol})
		if err != nil {
			return failure(req.ID, err)
		}
		s.pipe = m
	case OpPoll:
		pctx, cancel := context.WithTimeout(ctx, time.Duration(req.WaitMS)*time.Millisecond)
		b, err := s.pipe.Poll(pctx)
		cancel()
		if err != nil && len(b.Records) == 0 && pctx.Err() == nil {
			return failure(req.ID, &transport.Error{Op: transport.OpRead, Kind: transport.ErrClient, Stage: transport.StageLocal, Err: err})
		}
		s.polled = b
		ok.MemberID, ok.Generation = b.MemberID, &b.Generation
		for _, r := range b.Records {
			ok.Records = append(ok.Records, Read{Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value})
		}
	case OpTransact:
		// The batch is the records of the last poll on the partitions whose offsets come.
		upTo := map[int32]int64{}
		for _, o := range req.Offsets {
			upTo[o.Partition] = o.Offset
		}
		b := pipeline.Batch{MemberID: req.MemberID, Generation: -1}
		if req.Generation != nil {
			b.Generation = *req.Generation
		}
		for _, r := range s.polled.Records {
			if end, in := upTo[r.Partition]; in && r.Offset < end {
				b.Records = append(b.Records, r)
			}
		}
		outs := make([]pipeline.Output, len(req.Outputs))
		for i, o := range req.Outputs {
			outs[i] = pipeline.Output{Partition: o.Partition, Key: o.Key, Value: o.Value}
		}
		tctx := ctx
		if req.TimeoutMS != nil {
			var cancel context.CancelFunc
			tctx, cancel = context.WithTimeout(ctx, time.Duration(*req.TimeoutMS)*time.Millisecond)
			defer cancel()
		}
		res := s.pipe.Transact(tctx, b, outs)
		r := ok
		if res.Outcome != transport.OK {
			err := res.Err
			if err == nil {
				err = errors.New("the transaction did not commit")
			}
			r = &Response{ID: req.ID, Outcome: OutcomeFail, Error: &Error{Kind: kindName(err), Message: err.Error()}}
			if res.Outcome == transport.Unknown {
				r.Outcome = OutcomeUnknown
			}
		}
		if res.Token != (transport.FencingToken{}) {
			r.Token = tokenOf(res.Token)
		}
		r.Restart = res.Restart
		return r
	}
	return ok
}
