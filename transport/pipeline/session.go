package pipeline

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fencecheck/fencecheck/transport"
)

// errSessionAborted is what a session's transaction that ended aborted without an error
// carries: kgo.GroupTransactSession aborts when the group rebalanced during the transaction
// or refused its offsets (a superseded generation).
var errSessionAborted = errors.New("aborted by the transact session: the group rebalanced or refused the offsets")

// session is a member on kgo.GroupTransactSession: the session polls, aborts a transaction
// the group rebalanced under, commits the offsets it polled past with the group's metadata,
// and rewinds to the committed offsets after an abort. The member adds nothing to what it
// decides, so the session itself is under test.
type session struct {
	cfg Config
	s   *kgo.GroupTransactSession
}

func newSession(_ context.Context, cfg Config) (*session, error) {
	opts, err := clientOpts(cfg)
	if err != nil {
		return nil, err
	}
	made := newMadeClient()
	s, err := kgo.NewGroupTransactSession(append(opts, reportStarts(cfg, made, nil))...)
	if err != nil {
		return nil, &transport.Error{Op: transport.OpStart, Kind: transport.ErrInvalidConfig, Err: err, Stage: transport.StageLocal}
	}
	made.set(s.Client())
	return &session{cfg: cfg, s: s}, nil
}

func (m *session) Poll(ctx context.Context) (Batch, error) {
	return poll(ctx, m.s.Client(), m.cfg.MaxPoll)
}

func (m *session) Transact(ctx context.Context, b Batch, outs []Output) Result {
	if len(outs) == 0 {
		return Result{Outcome: transport.Fail, Err: errNoOutput}
	}
	if err := m.s.Begin(); err != nil {
		return Result{Outcome: transport.Fail, Err: err, Restart: true}
	}
	if err := m.s.ProduceSync(ctx, records(outs)...).FirstErr(); err != nil {
		// No commit was asked: whatever the abort does, nothing of this transaction commits.
		// An abort that fails leaves the session in its transaction, unrewound.
		tok := token(ctx, m.s.Client()) // before the abort, which bumps the epoch under TV2
		_, aerr := m.s.End(context.WithoutCancel(ctx), kgo.TryAbort)
		return Result{Outcome: transport.Fail, Token: tok, Err: errors.Join(err, aerr), Restart: aerr != nil}
	}
	tok := token(ctx, m.s.Client())
	m.cfg.pause(ctx, PointAfterProduce) // End sends the offsets and commits: no point between
	ok, err := m.s.End(ctx, kgo.TryCommit)
	switch {
	case err == nil && ok:
		return Result{Outcome: transport.OK, Token: tok}
	case err == nil:
		return Result{Outcome: transport.Fail, Token: tok, Err: errSessionAborted}
	}
	// The session does not say how far its commit got, and does not go on after an error.
	return Result{Outcome: transport.Unknown, Token: tok, Err: err, Restart: true}
}

func (m *session) Close() { m.s.Close() }
