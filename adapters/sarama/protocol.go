package main

// The exec protocol's messages (docs/exec-protocol.md), written out here so that this module
// does not import fencecheck's: one JSON object per line each way. []byte fields are base64
// in JSON, as the protocol wants (encoding/json's standard encoding, with padding).

type request struct {
	ID      uint64  `json:"id"`
	Op      string  `json:"op"`
	Version int     `json:"version,omitempty"` // hello
	Config  *config `json:"config,omitempty"`  // start

	Role      string  `json:"role,omitempty"`
	Member    string  `json:"member,omitempty"`
	Token     *token  `json:"token,omitempty"`
	Topic     string  `json:"topic,omitempty"`
	Partition *int32  `json:"partition,omitempty"`
	Key       []byte  `json:"key,omitempty"`
	Value     []byte  `json:"value,omitempty"`
	Records   []write `json:"records,omitempty"` // write_fenced

	Pipeline   *memberConfig `json:"pipeline,omitempty"`   // member_start
	WaitMS     int64         `json:"wait_ms,omitempty"`    // poll
	TimeoutMS  *int64        `json:"timeout_ms,omitempty"` // transact: the time left; 0: none
	Offsets    []offset      `json:"offsets,omitempty"`    // transact
	Outputs    []output      `json:"outputs,omitempty"`    // transact
	MemberID   string        `json:"member_id,omitempty"`  // transact: the batch's
	Generation *int32        `json:"generation,omitempty"` // transact: the batch's
	// lease (write_lease) is not read: the record's bytes carry it, and the harness checks the
	// token against the holding it recorded (gateway-token).
}

type response struct {
	ID      uint64     `json:"id"`
	Outcome string     `json:"outcome"`
	Error   *callError `json:"error,omitempty"`

	Version            int      `json:"version,omitempty"`
	Name               string   `json:"name,omitempty"`
	Capabilities       []string `json:"capabilities,omitempty"`
	TransactionVersion int      `json:"transaction_version,omitempty"`
	Token              *token   `json:"token,omitempty"`
	Held               bool     `json:"held,omitempty"`
	JoinSeq            *int64   `json:"join_seq,omitempty"`
	Records            *[]read  `json:"records,omitempty"`   // read_role, poll
	Workloads          []string `json:"workloads,omitempty"` // hello
	MemberID           string   `json:"member_id,omitempty"` // poll
	Generation         *int32   `json:"generation,omitempty"`
	Restart            bool     `json:"restart,omitempty"` // transact: the member cannot go on
}

// callError is a failed call: the protocol's kind, its message, and whether the call may
// have taken effect (outcome unknown) or certainly did not (fail).
type callError struct {
	Kind    string `json:"kind"`
	Message string `json:"message,omitempty"`
	unknown bool
}

func (e *callError) Error() string { return e.Kind + ": " + e.Message }

type config struct {
	Bootstrap          string `json:"bootstrap"`
	ClientID           string `json:"client_id"`
	Topic              string `json:"topic"`
	LeaseMS            int64  `json:"lease_ms"`
	RequestTimeoutMS   int64  `json:"request_timeout_ms"`
	FetchMaxWaitMS     int64  `json:"fetch_max_wait_ms"`
	FetchPartitionMax  int32  `json:"fetch_partition_max"`
	TopicPartitions    int32  `json:"topic_partitions"`
	TopicReplication   int16  `json:"topic_replication"`
	TransactionVersion int    `json:"transaction_version"`
}

type token struct {
	ProducerID int64 `json:"producer_id"`
	Epoch      int16 `json:"epoch"`
}

type write struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Key       []byte `json:"key,omitempty"`
	Value     []byte `json:"value,omitempty"`
}

// read is a committed record of read_role, or a polled record of poll (with its partition).
type read struct {
	Partition int32  `json:"partition,omitempty"`
	Offset    int64  `json:"offset"`
	Key       []byte `json:"key,omitempty"`
	Value     []byte `json:"value,omitempty"`
}

// The error kinds of the protocol.
const (
	kindInvalidConfig = "invalid_config"
	kindAdmin         = "admin"
	kindFenced        = "fenced"
	kindProducer      = "producer"
	kindClient        = "client"
	kindNotHeld       = "not_held"
	kindClosed        = "closed"
)

func fail(kind, msg string) *callError    { return &callError{Kind: kind, Message: msg} }
func unknown(kind, msg string) *callError { return &callError{Kind: kind, Message: msg, unknown: true} }
