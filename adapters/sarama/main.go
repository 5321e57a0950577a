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
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"os"
	"runtime/debug"
	"sync"

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
	a.run(os.Stdin)
	os.Exit(0)
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
				case "hello", "start":
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
		return &response{Version: protocolVersion, Name: "sarama " + saramaVersion() + " (go adapter)",
			Capabilities: []string{"gateway-token"}}
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
