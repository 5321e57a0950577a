// Package preflight asks a broker, before fencecheck attacks it, whether it can do what the
// transport and the checks rest on: the transaction APIs at the versions the transport uses,
// and one real transaction of each kind. A Kafka-compatible broker that implements them partly
// (or not at all) would otherwise produce failures that read like fencing bugs.
//
// Run first lists every broker's API versions, then runs a smoke test on a topic and a
// transactional id of its own: a committed record is visible at read_committed, an aborted one
// is not, a producer whose epoch a successor bumped is fenced, and DescribeTransactions
// answers. A step that needs a missing API is not tried, and says which one it needed.
package preflight

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// Status is the outcome of one check.
type Status string

// A check passed, failed, or was not tried because an earlier one it needs failed.
const (
	StatusOK       Status = "ok"
	StatusMissing  Status = "missing"
	StatusNotTried Status = "not tried"
)

// A Check is one thing fencecheck needs from the broker, and what the broker answered.
type Check struct {
	Name   string `json:"name"`   // e.g. "EndTxn v0+" or "aborted record hidden"
	Why    string `json:"why"`    // what fencecheck uses it for
	Status Status `json:"status"` // ok, missing or not tried
	Detail string `json:"detail"` // what the broker answered, or what was needed first
	// Advisory checks look for a known broker bug that no verdict rests on: one that fails
	// is reported, and the run goes on.
	Advisory bool `json:"advisory,omitempty"`
}

// A Report is a preflight's outcome: the checks in the order they ran.
type Report struct {
	Bootstrap []string `json:"bootstrap"`
	Brokers   int      `json:"brokers"` // how many brokers the metadata listed
	Checks    []Check  `json:"checks"`
}

// OK reports whether every check but the advisory ones passed: the broker can give
// fencecheck's verdicts.
func (r Report) OK() bool {
	return len(r.Checks) > 0 && !slices.ContainsFunc(r.Checks, func(c Check) bool { return !c.Advisory && c.Status != StatusOK })
}

// Missing is the names of the checks the broker failed, in order (the checks not tried because
// of them, and the advisory ones, are not among them).
func (r Report) Missing() []string { return r.named(StatusMissing, false) }

// NotTried is the names of the checks that were not tried: each needed a missing API or a step
// that failed. Advisory checks are not among them.
func (r Report) NotTried() []string { return r.named(StatusNotTried, false) }

// Advisories is the names of the advisory checks that did not pass.
func (r Report) Advisories() []string {
	return append(r.named(StatusMissing, true), r.named(StatusNotTried, true)...)
}

func (r Report) named(s Status, advisory bool) []string {
	var out []string
	for _, c := range r.Checks {
		if c.Status == s && c.Advisory == advisory {
			out = append(out, c.Name)
		}
	}
	return out
}

// Summary says in one line what the broker cannot do, e.g. "EndTxn v0+, DescribeTransactions
// v0+ (8 checks that need them not tried)"; empty when it can do everything.
func (r Report) Summary() string {
	if r.OK() {
		return ""
	}
	out := strings.Join(r.Missing(), ", ")
	if n := len(r.NotTried()); n > 0 {
		out += fmt.Sprintf(" (%d checks that need them not tried)", n)
	}
	return out
}

// Table is the report as aligned text: one line per check, its status first.
func (r Report) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "preflight of %s (%d brokers)\n", strings.Join(r.Bootstrap, ","), r.Brokers)
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	for _, c := range r.Checks {
		why := c.Why
		if c.Advisory {
			why += " (advisory)"
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\n", c.Status, c.Name, why, c.Detail)
	}
	w.Flush()
	if a := r.Advisories(); len(a) > 0 {
		fmt.Fprintf(&b, "advisory checks that did not pass: %s (known broker bugs no verdict rests on)\n", strings.Join(a, ", "))
	}
	if r.OK() {
		b.WriteString("the broker can do everything fencecheck needs\n")
	} else {
		fmt.Fprintf(&b, "the broker cannot do %s: fencecheck gives no verdict on it\n", r.Summary())
	}
	return b.String()
}

// An API is a request the transport or the harness sends, and the lowest version it needs.
type API struct {
	Key        int16
	MinVersion int16
	Why        string
}

// APIs are the requests fencecheck's transport and checks rely on. The lowest versions are
// where the feature first exists: isolation levels in Fetch v4 and ListOffsets v2, the
// transaction coordinator in FindCoordinator v1, transactional batches in Produce v3.
var APIs = []API{
	{kmsg.Produce.Int16(), 3, "transactional writes"},
	{kmsg.Fetch.Int16(), 4, "reads at read_committed"},
	{kmsg.ListOffsets.Int16(), 2, "the last stable offset"},
	{kmsg.FindCoordinator.Int16(), 1, "the transaction coordinator"},
	{kmsg.InitProducerID.Int16(), 0, "acquire: a fencing token per transactional id"},
	{kmsg.AddPartitionsToTxn.Int16(), 0, "a transaction's partitions (transaction version 1)"},
	{kmsg.EndTxn.Int16(), 0, "commit and abort"},
	{kmsg.DescribeTransactions.Int16(), 0, "describe: the coordinator's view of a role"},
	{kmsg.CreateTopics.Int16(), 0, "the run's topics"},
}

// Options configure Run.
type Options struct {
	// Client are the franz-go options that reach the cluster (seed brokers, dialer, TLS,
	// SASL). Run adds its own transactional id and timeouts.
	Client []kgo.Opt
	// Bootstrap names the cluster in the report.
	Bootstrap []string
	// StepTimeout bounds each step (default 20s: a fresh Kafka creates its transaction log on
	// the first InitProducerId).
	StepTimeout time.Duration
}

// Run checks the cluster's API versions and then runs the smoke transactions. It returns an
// error only when it could not reach the cluster at all; everything the broker cannot do is in
// the report.
func Run(ctx context.Context, opts Options) (Report, error) {
	if opts.StepTimeout <= 0 {
		opts.StepTimeout = 20 * time.Second
	}
	rep := Report{Bootstrap: opts.Bootstrap}
	admCl, err := kgo.NewClient(append(slices.Clone(opts.Client), kgo.RetryTimeout(opts.StepTimeout))...)
	if err != nil {
		return rep, err
	}
	defer admCl.Close()
	cl, adm := admCl, kadm.NewClient(admCl)

	versions, err := apiVersions(ctx, adm, opts.StepTimeout)
	if err != nil {
		return rep, fmt.Errorf("metadata of %s: %w", strings.Join(opts.Bootstrap, ","), err)
	}
	rep.Brokers = len(versions)
	// KIP-1242: franz-go names the cluster and the node it expects in ApiVersions v5 on every
	// connection but the first to a seed. A broker that drops such a connection can be reached
	// at all only at v4: say so, and go on at v4 to learn what else it lacks.
	if failed := unanswered(versions); len(failed) > 0 {
		capped := kversion.Stable()
		capped.SetMaxKeyVersion(kmsg.ApiVersions.Int16(), 4)
		v4Opts := append(slices.Clone(opts.Client), kgo.MaxVersions(capped))
		v4Cl, err := kgo.NewClient(append(slices.Clone(v4Opts), kgo.RetryTimeout(opts.StepTimeout))...)
		if err != nil {
			return rep, err
		}
		defer v4Cl.Close()
		if v4, err := apiVersions(ctx, kadm.NewClient(v4Cl), opts.StepTimeout); err == nil && len(unanswered(v4)) == 0 {
			rep.Checks = append(rep.Checks, Check{Name: "ApiVersions v5 naming the cluster (KIP-1242)", Why: "every connection of the transport",
				Status: StatusMissing, Detail: strings.Join(failed, "; ") + "; at ApiVersions v4 every broker answers"})
			// The rest of the preflight, its smoke producers included, speaks v4.
			opts.Client, cl, adm, versions = v4Opts, v4Cl, kadm.NewClient(v4Cl), v4
		}
	}
	has := make(map[int16]bool)
	for _, api := range APIs {
		c, ok := checkAPI(api, versions)
		has[api.Key] = ok
		rep.Checks = append(rep.Checks, c)
	}
	// ListTransactions is for an advisory check only: a broker without it is not refused.
	_, ok := checkAPI(API{Key: kmsg.ListTransactions.Int16()}, versions)
	has[kmsg.ListTransactions.Int16()] = ok
	s := &smoke{opts: opts, cl: cl, adm: adm, has: has, rep: &rep,
		txnID: fmt.Sprintf("fencecheck.preflight.%d", time.Now().UnixNano())}
	s.topic = s.txnID
	s.run(ctx)
	return rep, nil
}

// apiVersions asks every broker the metadata lists for its API versions, within timeout.
func apiVersions(ctx context.Context, adm *kadm.Client, timeout time.Duration) (kadm.BrokersApiVersions, error) {
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return adm.ApiVersions(sctx)
}

// unanswered says which brokers did not answer ApiVersions, and what the client saw.
func unanswered(versions kadm.BrokersApiVersions) []string {
	var out []string
	for _, v := range versions.Sorted() {
		if v.Err != nil {
			why := v.Err.Error()
			if strings.Contains(why, "closed the connection immediately during api versions") {
				why = "it closed the connection unanswered" // kgo's guess at a TLS listener does not apply here
			}
			out = append(out, fmt.Sprintf("b%d did not answer ApiVersions v5 on a connection of its own: %s", v.NodeID, why))
		}
	}
	return out
}

// checkAPI requires every broker to offer api at its lowest version or above.
func checkAPI(api API, versions kadm.BrokersApiVersions) (Check, bool) {
	name := kmsg.NameForKey(api.Key)
	c := Check{Name: fmt.Sprintf("%s v%d+", name, api.MinVersion), Why: api.Why, Status: StatusOK}
	var lacking, offered []string
	for _, v := range versions.Sorted() {
		b := fmt.Sprintf("b%d", v.NodeID)
		if v.Err != nil {
			lacking = append(lacking, fmt.Sprintf("%s did not answer ApiVersions (%v)", b, v.Err))
			continue
		}
		lo, hi, ok := v.KeyVersions(api.Key)
		switch {
		case !ok:
			lacking = append(lacking, b+" does not offer it")
		case hi < api.MinVersion:
			lacking = append(lacking, fmt.Sprintf("%s offers v%d–v%d", b, lo, hi))
		default:
			offered = append(offered, fmt.Sprintf("%s v%d–v%d", b, lo, hi))
		}
	}
	if len(lacking) > 0 {
		c.Status, c.Detail = StatusMissing, strings.Join(lacking, "; ")
		return c, false
	}
	c.Detail = strings.Join(offered, ", ")
	return c, true
}

// smoke is the smoke test in progress: one topic, one transactional id, two producers.
type smoke struct {
	opts         Options
	cl           *kgo.Client // adm's client, for requests to one broker
	adm          *kadm.Client
	has          map[int16]bool
	rep          *Report
	txnID, topic string
	failed       map[string]bool // steps that did not pass, for the steps that need them
}

type step struct {
	name, why string
	advisory  bool     // see Check.Advisory
	apis      []int16  // requests the step sends
	after     []string // steps it needs
	fn        func(ctx context.Context) (detail string, err error)
}

func (s *smoke) run(ctx context.Context) {
	s.failed = make(map[string]bool)
	var holder, successor *kgo.Client
	defer func() {
		for _, cl := range []*kgo.Client{holder, successor} {
			if cl != nil {
				cl.Close()
			}
		}
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.StepTimeout)
		defer cancel()
		_, _ = s.adm.DeleteTopic(dctx, s.topic) // best effort: the topic is the preflight's own
	}()
	var seen []string
	steps := []step{
		{name: "create a topic", why: "the run's topics", apis: []int16{kmsg.CreateTopics.Int16()},
			fn: func(ctx context.Context) (string, error) {
				rf := int16(min(3, max(1, s.rep.Brokers)))
				resp, err := s.adm.CreateTopic(ctx, 1, rf, nil, s.topic)
				if err == nil {
					err = resp.Err
				}
				return fmt.Sprintf("%s, replication factor %d", s.topic, rf), err
			}},
		{name: "acquire", why: "InitProducerId mints a token", apis: []int16{kmsg.FindCoordinator.Int16(), kmsg.InitProducerID.Int16()},
			fn: func(ctx context.Context) (string, error) {
				var err error
				if holder, err = s.producer(); err != nil {
					return "", err
				}
				id, epoch, err := holder.ProducerID(ctx)
				return fmt.Sprintf("producer id %d, epoch %d", id, epoch), err
			}},
		{name: "commit", why: "a committed write", after: []string{"create a topic", "acquire"},
			apis: []int16{kmsg.Produce.Int16(), kmsg.EndTxn.Int16()},
			fn: func(ctx context.Context) (string, error) {
				return "", s.transaction(ctx, holder, "committed", kgo.TryCommit)
			}},
		{name: "abort", why: "an aborted write", after: []string{"commit"}, apis: []int16{kmsg.EndTxn.Int16()},
			fn: func(ctx context.Context) (string, error) {
				return "", s.transaction(ctx, holder, "aborted", kgo.TryAbort)
			}},
		{name: "commit after abort", why: "the read's end", after: []string{"abort"},
			fn: func(ctx context.Context) (string, error) { return "", s.transaction(ctx, holder, "end", kgo.TryCommit) }},
		{name: "read_committed", why: "final reads and reads", after: []string{"commit after abort"},
			apis: []int16{kmsg.Fetch.Int16(), kmsg.ListOffsets.Int16()},
			fn: func(ctx context.Context) (string, error) {
				var err error
				seen, err = s.readCommitted(ctx)
				return fmt.Sprintf("read %s", strings.Join(seen, ", ")), err
			}},
		{name: "committed record visible", why: "no-lost-write", after: []string{"read_committed"},
			fn: func(context.Context) (string, error) {
				if !slices.Contains(seen, "committed") {
					return "", errors.New("the committed record is not in the read")
				}
				return "", nil
			}},
		{name: "aborted record hidden", why: "no-zombie-commit", after: []string{"read_committed"},
			fn: func(context.Context) (string, error) {
				if slices.Contains(seen, "aborted") {
					return "", errors.New("a read_committed read delivered the aborted record")
				}
				return "", nil
			}},
		{name: "stale epoch fenced", why: "fenced-stale-write", after: []string{"commit"},
			fn: func(ctx context.Context) (string, error) {
				var err error
				if successor, err = s.producer(); err != nil {
					return "", err
				}
				id, epoch, err := successor.ProducerID(ctx)
				if err != nil {
					return "", fmt.Errorf("the successor's InitProducerId: %w", err)
				}
				werr := s.transaction(ctx, holder, "stale", kgo.TryCommit)
				detail := fmt.Sprintf("the successor got producer id %d, epoch %d; the holder's write: %v", id, epoch, werr)
				switch {
				case werr == nil:
					return detail, errors.New("the deposed producer's transaction committed")
				case errors.Is(werr, kerr.ProducerFenced), errors.Is(werr, kerr.InvalidProducerEpoch):
					return detail, nil
				}
				return detail, fmt.Errorf("refused, but not as fenced: %w", werr)
			}},
		{name: "describe", why: "describe-consistent", after: []string{"acquire"}, apis: []int16{kmsg.DescribeTransactions.Int16()},
			fn: func(ctx context.Context) (string, error) {
				d, err := s.adm.DescribeTransactions(ctx, s.txnID)
				if err != nil {
					return "", err
				}
				t, ok := d[s.txnID]
				if !ok {
					return "", errors.New("no answer for the transactional id")
				}
				return fmt.Sprintf("state %s, producer id %d, epoch %d", t.State, t.ProducerID, t.ProducerEpoch), t.Err
			}},
		{name: "listed by its coordinator only", why: "ListTransactions of every broker (KAFKA-21481)", advisory: true,
			after: []string{"acquire"}, apis: []int16{kmsg.FindCoordinator.Int16(), kmsg.ListTransactions.Int16()},
			fn: s.listedBy},
	}
	for _, st := range steps {
		s.do(ctx, st)
	}
}

// do runs one step unless an API or a step it needs is missing.
func (s *smoke) do(ctx context.Context, st step) {
	c := Check{Name: st.name, Why: st.why, Advisory: st.advisory}
	var needs []string
	for _, k := range st.apis {
		if !s.has[k] {
			needs = append(needs, kmsg.NameForKey(k))
		}
	}
	for _, a := range st.after {
		if s.failed[a] {
			needs = append(needs, a)
		}
	}
	if len(needs) > 0 {
		c.Status, c.Detail = StatusNotTried, "needs "+strings.Join(needs, ", ")
		s.failed[st.name] = true
		s.rep.Checks = append(s.rep.Checks, c)
		return
	}
	sctx, cancel := context.WithTimeout(ctx, s.opts.StepTimeout)
	detail, err := st.fn(sctx)
	cancel()
	c.Status, c.Detail = StatusOK, detail
	if err != nil {
		c.Status = StatusMissing
		if detail != "" {
			detail += ": "
		}
		c.Detail = detail + err.Error()
		s.failed[st.name] = true
	}
	s.rep.Checks = append(s.rep.Checks, c)
}

// producer is a transactional client of the smoke test's transactional id.
func (s *smoke) producer() (*kgo.Client, error) {
	return kgo.NewClient(append(slices.Clone(s.opts.Client),
		kgo.TransactionalID(s.txnID), kgo.TransactionTimeout(time.Minute),
		kgo.RetryTimeout(s.opts.StepTimeout), kgo.DefaultProduceTopic(s.topic))...)
}

// transaction writes value in one transaction and ends it (aborts it if the write failed).
func (s *smoke) transaction(ctx context.Context, cl *kgo.Client, value string, end kgo.TransactionEndTry) error {
	if err := cl.BeginTransaction(); err != nil {
		return err
	}
	perr := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(value)}).FirstErr()
	if perr != nil {
		end = kgo.TryAbort
	}
	eerr := cl.EndTransaction(ctx, end)
	if perr != nil {
		return fmt.Errorf("produce: %w", perr)
	}
	if eerr != nil {
		return fmt.Errorf("end transaction: %w", eerr)
	}
	return nil
}

// readCommitted reads the topic from its start at read_committed up to the record "end",
// which the last committed transaction wrote.
func (s *smoke) readCommitted(ctx context.Context) ([]string, error) {
	cl, err := kgo.NewClient(append(slices.Clone(s.opts.Client),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{s.topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var seen []string
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return seen, fmt.Errorf("no record \"end\" within the step's time: %w", err)
		}
		for _, fe := range fs.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) {
				return seen, fe.Err
			}
		}
		for _, rec := range fs.Records() {
			seen = append(seen, string(rec.Value))
			if string(rec.Value) == "end" {
				return seen, nil
			}
		}
	}
}

// listedBy asks every broker for the transactions it lists and requires the smoke test's
// transactional id to be listed by its coordinator and by no other broker. A broker that
// lists a transaction of a transaction-log partition it no longer leads answers from a stale
// cache (KAFKA-21481); the transport never sends ListTransactions, so this is advisory.
func (s *smoke) listedBy(ctx context.Context) (string, error) {
	coord, ok := s.adm.FindTxnCoordinators(ctx, s.txnID)[s.txnID]
	if !ok || coord.Err != nil {
		return "", fmt.Errorf("no coordinator for the transactional id: %v", coord.Err)
	}
	brokers, err := s.adm.ListBrokers(ctx)
	if err != nil {
		return "", err
	}
	var listing, unanswered []string
	for _, b := range brokers {
		req := kmsg.NewPtrListTransactionsRequest()
		resp, err := req.RequestWith(ctx, s.cl.Broker(int(b.NodeID)))
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err != nil {
			unanswered = append(unanswered, fmt.Sprintf("b%d: %v", b.NodeID, err))
			continue
		}
		if slices.ContainsFunc(resp.TransactionStates, func(t kmsg.ListTransactionsResponseTransactionState) bool {
			return t.TransactionalID == s.txnID
		}) {
			listing = append(listing, fmt.Sprintf("b%d", b.NodeID))
		}
	}
	detail := fmt.Sprintf("coordinator b%d; listed by %s", coord.NodeID, strings.Join(listing, ", "))
	if len(listing) == 0 {
		detail = fmt.Sprintf("coordinator b%d; listed by no broker", coord.NodeID)
	}
	switch {
	case len(unanswered) > 0:
		return detail, fmt.Errorf("not answered: %s", strings.Join(unanswered, "; "))
	case !slices.Equal(listing, []string{fmt.Sprintf("b%d", coord.NodeID)}):
		return detail, errors.New("want its coordinator alone to list it")
	}
	return detail, nil
}
