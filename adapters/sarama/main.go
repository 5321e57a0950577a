// Command fencecheck-sarama-adapter serves fencecheck's transport design on IBM/sarama behind
// the exec protocol (docs/exec-protocol.md): one JSON request per line on stdin, one JSON
// answer per line on stdout, Sarama's and its own logs on stderr.
//
// A role is the transactional id topic + "/" + role. acquire builds a new transactional
// AsyncProducer for it; Sarama's constructor runs InitProducerId (newTransactionManager), so
// when it returns the pair is minted and every earlier producer of the id fenced. Sarama does
// not expose that pair (no accessor on AsyncProducer; it lives in the unexported
// transactionManager), so the adapter announces the gateway-token capability: the harness
// reads the pair from the InitProducerId answer its gateway relayed to this adapter. Writes
// run BeginTxn, sends, CommitTxn on the producer of the holding; any failed write drops it.
//
// The adapter serves the pipeline workload too (hello lists leases and pipelines): after
// member_start the process is one consumer-group member (member.go). Its flag --offsets
// group-id makes that member add its offsets to a transaction by group id alone
// (AddOffsetsToTxn), which the group coordinator does not fence; the default sends the
// session's generation (AddOffsetsToTxnWithGroupMetadata).
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

const protocolVersion = 1

var logf = log.New(os.Stderr, "sarama-adapter: ", log.LstdFlags|log.Lmicroseconds).Printf

func main() {
	// Sarama's own log (connections, retries, the transaction manager's transitions) goes to
	// stderr, which the harness records in harness.log.
	// Its debug log (every transaction state transition, about 25 lines per lease write) only
	// with FENCECHECK_SARAMA_DEBUG=1: by default Sarama sends it to the same Logger.
	sarama.Logger = log.New(os.Stderr, "sarama: ", log.LstdFlags|log.Lmicroseconds)
	sarama.DebugLogger = log.New(io.Discard, "", 0)
	if os.Getenv("FENCECHECK_SARAMA_DEBUG") == "1" {
		sarama.DebugLogger = log.New(os.Stderr, "sarama debug: ", log.LstdFlags|log.Lmicroseconds)
	}
	a := newAdapter(os.Stdout)
	api, err := parseArgs(os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "fencecheck-sarama-adapter: %v\n", err)
		os.Exit(2)
	}
	a.offsets = api
	a.run(os.Stdin)
	os.Exit(0)
}

// parseArgs reads the adapter's flags: --offsets metadata (the default: a pipeline member adds
// its offsets to the transaction with its session's member id and generation,
// AddOffsetsToTxnWithGroupMetadata) or --offsets group-id (with the group id alone,
// AddOffsetsToTxn: the group coordinator cannot fence a zombie by its generation).
func parseArgs(args []string) (offsetsAPI, error) {
	api := offsetsGroupMetadata
	for i := 0; i < len(args); i++ {
		v, ok := strings.CutPrefix(args[i], "--offsets=")
		if !ok && args[i] == "--offsets" && i+1 < len(args) {
			v, ok = args[i+1], true
			i++
		}
		if !ok {
			return "", fmt.Errorf("unknown argument %q (want --offsets metadata or --offsets group-id)", args[i])
		}
		switch offsetsAPI(v) {
		case offsetsGroupMetadata, offsetsGroupID:
			api = offsetsAPI(v)
		default:
			return "", fmt.Errorf("--offsets %q: want metadata or group-id", v)
		}
	}
	return api, nil
}

// saramaVersion is the version of github.com/IBM/sarama linked in, for hello's name.
func saramaVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/IBM/sarama" {
				if d.Replace != nil {
					return d.Replace.Version
				}
				return d.Version
			}
		}
	}
	return "(unknown version)"
}

func (a *adapter) run(stdin io.Reader) {
	in := bufio.NewReaderSize(stdin, 1<<20)
	var calls sync.WaitGroup
	for {
		line, err := in.ReadBytes('\n')
		if len(line) > 0 && !(len(line) == 1 && line[0] == '\n') {
			var req request
			if jerr := json.Unmarshal(line, &req); jerr != nil {
				// Not a request we can answer (no id): say so on stderr; the harness times it out.
				logf("malformed request line %q: %v", line, jerr)
			} else {
				switch req.Op {
				case "hello", "start", "member_start", "poll", "transact":
					// A member's calls come one at a time, in order.
					a.answer(&req, a.handle(&req)) // in order, before anything else
				case "close":
					calls.Wait() // every other call answered first
					a.shutdown()
					a.answer(&req, &response{})
					return
				default:
					calls.Add(1)
					go func() {
						defer calls.Done()
						a.answer(&req, a.handle(&req))
					}()
				}
			}
		}
		if err != nil {
			if err != io.EOF {
				logf("stdin: %v", err)
			}
			a.shutdown()
			return
		}
	}
}

// answer writes the answer line of req: resp with outcome ok, or a failure.
func (a *adapter) answer(req *request, resp *response) {
	resp.ID = req.ID
	if resp.Error != nil {
		if resp.Error.unknown {
			resp.Outcome = "unknown"
		} else {
			resp.Outcome = "fail"
		}
		if len(resp.Error.Message) > 2000 {
			resp.Error.Message = resp.Error.Message[:2000]
		}
		logf("%s %s id %d: %s %s: %s", req.Op, req.Role, req.ID, resp.Outcome, resp.Error.Kind, resp.Error.Message)
	} else {
		resp.Outcome = "ok"
	}
	b, err := json.Marshal(resp)
	if err != nil {
		b, _ = json.Marshal(&response{ID: req.ID, Outcome: "unknown",
			Error: &callError{Kind: kindClient, Message: "encode the answer: " + err.Error()}})
	}
	b = append(b, '\n')
	a.outMu.Lock()
	defer a.outMu.Unlock()
	if _, err := a.out.Write(b); err != nil {
		logf("stdout: %v", err)
	}
}

func errResp(e *callError) *response { return &response{Error: e} }

func (a *adapter) handle(req *request) *response {
	switch req.Op {
	case "hello":
		name := "sarama " + saramaVersion() + " (go adapter)"
		if a.offsets == offsetsGroupID {
			name += ", offsets by group id"
		}
		return &response{Version: protocolVersion, Name: name,
			Capabilities: []string{"gateway-token"}, Workloads: []string{"leases", "pipelines"}}
	case "member_start":
		if req.Pipeline == nil {
			return errResp(fail(kindInvalidConfig, "member_start without pipeline"))
		}
		if a.started.Load() || a.member != nil {
			return errResp(fail(kindInvalidConfig, "member_start: already started"))
		}
		m, err := startMember(req.Pipeline, a.offsets)
		if err != nil {
			return errResp(err)
		}
		a.member = m
		return &response{}
	case "poll", "transact":
		if a.member == nil {
			return errResp(fail(kindInvalidConfig, req.Op+" before member_start"))
		}
		if req.Op == "poll" {
			recs, id, gen := a.member.poll(time.Duration(req.WaitMS) * time.Millisecond)
			if recs == nil {
				recs = []read{}
			}
			return &response{Records: &recs, MemberID: id, Generation: &gen}
		}
		r := a.member.transact(req.Offsets, req.Outputs, req.MemberID, generationOf(req), req.TimeoutMS)
		return &response{Error: r.err, Restart: r.restart}
	case "start":
		if req.Config == nil {
			return errResp(fail(kindInvalidConfig, "start without config"))
		}
		tv, err := a.start(req.Config)
		if err != nil {
			return errResp(err)
		}
		return &response{TransactionVersion: tv}
	}
	if !a.started.Load() {
		return errResp(fail(kindInvalidConfig, req.Op+" before start"))
	}
	if a.closed.Load() {
		return errResp(fail(kindClosed, "transport closed"))
	}
	switch req.Op {
	case "acquire":
		if err := a.acquire(req.Role); err != nil {
			return errResp(err)
		}
		return &response{} // gateway-token: no token
	case "register":
		if req.Partition == nil {
			return errResp(fail(kindInvalidConfig, "register without partition"))
		}
		off, err := a.register(req.Topic, *req.Partition, req.Key, req.Value)
		if err != nil {
			return errResp(err)
		}
		return &response{JoinSeq: &off}
	case "write_lease":
		if req.Partition == nil {
			return errResp(fail(kindInvalidConfig, "write_lease without partition"))
		}
		ws := []write{{Topic: req.Topic, Partition: *req.Partition, Key: req.Key, Value: req.Value}}
		if err := a.write(req.Role, ws); err != nil {
			return errResp(err)
		}
		return &response{}
	case "write_fenced":
		if err := a.write(req.Role, req.Records); err != nil {
			return errResp(err)
		}
		return &response{}
	case "read_role":
		if req.Partition == nil {
			return errResp(fail(kindInvalidConfig, "read_role without partition"))
		}
		recs, err := a.read(req.Topic, *req.Partition)
		if err != nil {
			return errResp(err)
		}
		return &response{Records: &recs}
	case "describe":
		held, tok, err := a.describe(req.Role)
		if err != nil {
			return errResp(err)
		}
		return &response{Held: held, Token: tok}
	case "held":
		return &response{Held: a.holding(req.Role) != nil}
	}
	return errResp(fail(kindInvalidConfig, fmt.Sprintf("unknown op %q", req.Op)))
}

func generationOf(req *request) int32 {
	if req.Generation == nil {
		return -1
	}
	return *req.Generation
}
