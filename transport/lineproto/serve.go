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
	s := &server{enc: json.NewEncoder(out), log: log, name: a.Name, start: a.Start, caps: a.Capabilities}
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
	}()
	for sc.Scan() {
		var req Request
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			return fmt.Errorf("%w: request %q: %v", ErrProtocol, sc.Text(), err)
		}
		switch req.Op {
		case OpHello, OpStart: // in order: every other call needs their result
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
		return ok
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
