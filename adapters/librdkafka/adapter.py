#!/usr/bin/env python3
"""fencecheck's exec-protocol adapter on librdkafka, through confluent-kafka-python.

One JSON request per line on stdin, one JSON answer per line on stdout, logs on stderr
(docs/exec-protocol.md). Standard library plus confluent_kafka only. Every call other than
hello, start and close runs in a thread of its own; calls on one role are serialized by the
role's lock (the harness sends at most one per role at a time, plus reads).

What librdkafka can and cannot do here, and how the adapter answers (see README.md beside it):

- The token. librdkafka exposes neither the producer id nor the epoch that InitProducerId
  minted: confluent-kafka has no accessor, and librdkafka's C API has none either (the pair is
  internal, rk_eos.pid; it appears in debug logs and in the statistics JSON, which is emitted
  at most once a second, so neither is a way to read it at acquire time). The adapter
  announces the capability `gateway-token`: acquire answers ok without a token once
  init_transactions() returned (so InitProducerId completed on this adapter's own connections,
  where the harness's gateway saw the pair), and held answers only held true/false. Every
  acquire builds a NEW transactional Producer, so every acquire is a fresh InitProducerId.
- No DescribeTransactions: neither confluent_kafka.admin.AdminClient (2.16.1) nor librdkafka's
  public C API has it (no rd_kafka_DescribeTransactions symbol). The adapter announces
  `no-describe` and answers a describe anyway with kind admin.
- Transaction version: librdkafka speaks TV1 whatever the cluster finalized (no KIP-890 part 2
  client support): it sends AddPartitionsToTxn (v0) before producing and EndTxn v1 (TV2 needs
  EndTxn v5 and Produce v12), seen with debug=eos,protocol on a TV2 kfake cluster. start
  answers transaction_version 1 and refuses a start that pins 2 (invalid_config).
- A dropped producer is destroyed, never closed: Producer.close() aborts an open transaction,
  and abort_transaction() after an abortable error bumps the epoch with a new InitProducerId
  (KIP-360) on the role's transactional id, which would be a mint the harness's gateway could
  attribute to the next acquire of the role. Destroying (dropping the last reference, which
  runs rd_kafka_destroy) sends neither EndTxn nor InitProducerId.
"""

import base64
import json
import os
import sys
import threading
import time
import traceback

import confluent_kafka
from confluent_kafka import KafkaError, KafkaException, Producer, Consumer, TopicPartition

import member

PROTOCOL_VERSION = 1
CAPABILITIES = ["gateway-token", "no-describe"]
ADAPTER_VERSION = "0.1"

# The real stdout carries answers only: keep a private handle on it and point fd 1 at stderr,
# so that nothing else (a stray print, a C library writing to stdout) can reach the protocol.
_OUT = os.fdopen(os.dup(1), "wb", buffering=0)
os.dup2(2, 1)
sys.stdout = sys.stderr
_OUT_LOCK = threading.Lock()


def log(msg, *args):
    if args:
        msg = msg % args
    sys.stderr.write("%s librdkafka-adapter: %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stderr.flush()


class CallError(Exception):
    """A failed call: the protocol's error kind and whether it may have taken effect."""

    def __init__(self, kind, unknown, message):
        super().__init__(message)
        self.kind = kind
        self.unknown = unknown


# ---- librdkafka errors ----

FENCED_CODES = {
    KafkaError._FENCED,  # librdkafka's own: "This instance has been fenced by a newer instance"
    KafkaError.PRODUCER_FENCED,
    KafkaError.INVALID_PRODUCER_EPOCH,
    KafkaError.INVALID_TXN_STATE,
}
CLIENT_CODES = {
    KafkaError._TIMED_OUT,
    KafkaError._TIMED_OUT_QUEUE,
    KafkaError._MSG_TIMED_OUT,
    KafkaError._TRANSPORT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._RESOLVE,
    KafkaError._DESTROY,
    KafkaError.NETWORK_EXCEPTION,
    KafkaError.REQUEST_TIMED_OUT,
}
# A registration that failed with one of these certainly appended nothing: errors librdkafka
# raises before a request carrying the record leaves the client, and broker refusals that no
# retry of the batch can turn into an append. Every other delivery error (a timeout, a
# retriable broker error librdkafka gave up on, a purge of an in-flight request) may have
# appended the record: unknown.
REGISTER_REJECTED_CODES = {
    KafkaError._UNKNOWN_TOPIC,
    KafkaError._UNKNOWN_PARTITION,
    KafkaError._INVALID_ARG,
    KafkaError._QUEUE_FULL,
    KafkaError._PURGE_QUEUE,  # purged before it was sent
    KafkaError.MSG_SIZE_TOO_LARGE,
    KafkaError.RECORD_LIST_TOO_LARGE,
    KafkaError.INVALID_REQUIRED_ACKS,
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    KafkaError.INVALID_TIMESTAMP,
    KafkaError.POLICY_VIOLATION,
    KafkaError.INVALID_RECORD,
}


def kafka_error(exc):
    """The KafkaError behind exc, following the chain (confluent-kafka raises a fatal error from
    poll/flush as KafkaException, and a callback run after it as SystemError caused by it)."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
            return exc.args[0]
        if isinstance(exc, KafkaError):
            return exc
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


def describe_error(err):
    """What the client said: the error's name, code, text and librdkafka's classification."""
    if err is None:
        return "no error"
    flags = []
    for name in ("retriable", "txn_requires_abort", "fatal"):
        try:
            if getattr(err, name)():
                flags.append(name)
        except Exception:  # noqa: BLE001 - not every KafkaError carries the flags
            pass
    s = "%s (%d): %s" % (err.name(), err.code(), err.str())
    if flags:
        s += " [%s]" % ", ".join(flags)
    return s


def describe_exc(exc):
    err = kafka_error(exc)
    if err is not None:
        return describe_error(err)
    return "%s: %s" % (type(exc).__name__, exc)


def kind_of(err):
    if err is None:
        return "client"
    code = err.code()
    if code in FENCED_CODES:
        return "fenced"
    if code in CLIENT_CODES:
        return "client"
    return "producer"


def b64(data):
    return base64.b64encode(data).decode("ascii") if data is not None else None


def unb64(text):
    return base64.b64decode(text) if text else b""


# ---- the adapter ----


class Holding:
    """A producer that minted a holding for a role: built by acquire, used by its writes."""

    def __init__(self, producer):
        self.producer = producer


class RoleState:
    def __init__(self):
        self.lock = threading.Lock()
        self.held = None


class Adapter:
    def __init__(self):
        self.config = None
        self.closed = False
        self.roles = {}
        self.roles_lock = threading.Lock()
        self.inflight = 0
        self.inflight_cv = threading.Condition()
        self.readers = []  # idle read_committed consumers
        self.readers_lock = threading.Lock()
        self.plain = None  # registrations: idempotent, outside transactions
        self.plain_lock = threading.Lock()
        self.member = None  # a pipeline adapter's one member (member.py), after member_start

    # -- dispatch --

    def run(self):
        stdin = sys.stdin.buffer
        for raw in stdin:
            line = raw.strip()
            if not line:
                continue
            try:
                req = json.loads(line)
            except ValueError as e:
                log("unparsable request %r: %s", line[:200], e)
                continue
            op = req.get("op", "")
            if op in ("hello", "start"):
                self.answer(req, self.handle)
            elif op == "close":
                self.wait_idle()
                self.shutdown()
                self.answer(req, lambda r: {})
                return
            else:
                with self.inflight_cv:
                    self.inflight += 1
                threading.Thread(target=self.call, args=(req,), daemon=True,
                                 name="call-%s-%s" % (op, req.get("id"))).start()
        self.wait_idle()
        self.shutdown()

    def call(self, req):
        try:
            self.answer(req, self.handle)
        finally:
            with self.inflight_cv:
                self.inflight -= 1
                self.inflight_cv.notify_all()

    def wait_idle(self):
        with self.inflight_cv:
            while self.inflight > 0:
                self.inflight_cv.wait()

    def answer(self, req, fn):
        try:
            resp = fn(req)
            if "raw" in resp:
                resp = resp["raw"]  # a pipeline transact says its own outcome
            else:
                resp["outcome"] = "ok"
        except CallError as e:
            resp = {"outcome": "unknown" if e.unknown else "fail",
                    "error": {"kind": e.kind, "message": str(e)}}
        except BaseException as e:  # noqa: BLE001 - unclassified: we cannot know how far it got
            log("unexpected error in %s: %s", req.get("op"), traceback.format_exc())
            resp = {"outcome": "unknown", "error": {"kind": "client", "message": "%s: %s" % (req.get("op"), describe_exc(e))}}
        resp["id"] = req.get("id", 0)
        line = json.dumps(resp, separators=(",", ":")).encode("utf-8") + b"\n"
        with _OUT_LOCK:
            try:
                _OUT.write(line)
            except OSError as e:
                log("cannot write the answer: %s", e)
                os._exit(1)

    def handle(self, req):
        op = req.get("op", "")
        if op == "hello":
            return {"version": PROTOCOL_VERSION,
                    "name": "confluent-kafka-python %s, librdkafka %s (fencecheck librdkafka adapter %s)"
                    % (confluent_kafka.__version__, confluent_kafka.libversion()[0], ADAPTER_VERSION),
                    "capabilities": CAPABILITIES, "workloads": ["leases", "pipelines"]}
        if op == "member_start":
            return self.member_start(req.get("pipeline"))
        if op in ("poll", "transact"):
            m = self.member
            if m is None:
                raise CallError("invalid_config", False, "%s before member_start" % op)
            if self.closed:
                raise CallError("closed", False, "member closed")
            if op == "poll":
                return m.poll(int(req.get("wait_ms") or 0))
            return {"raw": m.transact(req)}
        if op == "start":
            if self.member is not None:
                raise CallError("invalid_config", False, "start: this adapter serves a pipeline member")
            return {"transaction_version": self.start(req.get("config") or {})}
        if self.config is None:
            raise CallError("invalid_config", False, "%s before start" % op)
        if self.closed:
            raise CallError("closed", False, "transport closed")
        role = req.get("role", "")
        if op == "acquire":
            self.acquire(role)
            return {}  # gateway-token: no token
        if op == "register":
            return {"join_seq": self.register(req)}
        if op == "write_lease":
            recs = [(req.get("topic", ""), int(req.get("partition") or 0), req.get("key"), req.get("value"))]
            self.write(role, recs)
            return {}
        if op == "write_fenced":
            recs = [(w.get("topic", ""), int(w.get("partition") or 0), w.get("key"), w.get("value"))
                    for w in req.get("records") or []]
            self.write(role, recs)
            return {}
        if op == "read_role":
            return {"records": self.read(req.get("topic", ""), int(req.get("partition") or 0))}
        if op == "held":
            return {"held": True} if self.state(role).held is not None else {}
        if op == "describe":
            raise CallError("admin", False, "describe: librdkafka has no DescribeTransactions (capability no-describe)")
        raise CallError("invalid_config", False, "unknown op %r" % op)

    def state(self, role):
        with self.roles_lock:
            rs = self.roles.get(role)
            if rs is None:
                rs = self.roles[role] = RoleState()
            return rs

    # -- pipelines --

    def member_start(self, c):
        if self.member is not None or self.config is not None:
            raise CallError("invalid_config", False, "member_start: this adapter already started")
        if not isinstance(c, dict):
            raise CallError("invalid_config", False, "member_start without pipeline config")
        rt = int(c.get("request_timeout_ms") or 0)
        common = {
            "socket.connection.setup.timeout.ms": max(1000, rt),
            "api.version.request.timeout.ms": max(1, rt),
            "topic.metadata.refresh.interval.ms": max(1000, rt),
            "reconnect.backoff.ms": 50,
            "reconnect.backoff.max.ms": 1000,
            "retry.backoff.ms": 50,
            "retry.backoff.max.ms": 500,
            "enable.metrics.push": False,
            "allow.auto.create.topics": False,
            "log.connection.close": False,
            "error_cb": self.on_error,
        }
        debug = os.environ.get("FENCECHECK_LIBRDKAFKA_DEBUG", "")
        if debug:
            common["debug"] = debug
        self.member = member.Member(c, sys.modules[__name__], common)
        log("member started: group %s, protocol %s, transactional id %s", c.get("group"), c.get("protocol") or "classic",
            c.get("transactional_id"))
        return {}

    # -- start --

    def start(self, c):
        bootstrap = c.get("bootstrap") or ""
        if not bootstrap:
            raise CallError("invalid_config", False, "Bootstrap: no address")
        rt = int(c.get("request_timeout_ms") or 0)
        lease = int(c.get("lease_ms") or 0)
        if rt <= 0 or lease <= 0:
            raise CallError("invalid_config", False, "LeaseDuration and RequestTimeout must be positive")
        if lease < 1000:
            raise CallError("invalid_config", False,
                            "LeaseDuration: librdkafka's transaction.timeout.ms is at least 1000 ms, the lease is %d ms" % lease)
        want = int(c.get("transaction_version") or 0)
        if want == 2:
            raise CallError("invalid_config", False,
                            "TransactionVersion: 2 required, but librdkafka %s speaks transaction version 1 only "
                            "(AddPartitionsToTxn, EndTxn v1; no KIP-890 client support)" % confluent_kafka.libversion()[0])
        if want not in (0, 1):
            raise CallError("invalid_config", False, "TransactionVersion: %d, want 0, 1 or 2" % want)
        self.rt_ms = rt
        self.lease_ms = lease
        self.timeout = rt / 1000.0
        self.topic = c.get("topic") or ""
        client_id = c.get("client_id") or "fencecheck-librdkafka"
        self.client_id = client_id
        self.fetch_max_wait_ms = max(1, int(c.get("fetch_max_wait_ms") or 100))
        self.fetch_partition_max = int(c.get("fetch_partition_max") or 0)
        # Properties every client shares. socket.connection.setup.timeout.ms has a floor of
        # 1000 in librdkafka. Metadata is refreshed at most a request timeout apart (a leader or
        # coordinator that moved is also found at once from the error that says so).
        self.common = {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "socket.connection.setup.timeout.ms": max(1000, rt),
            "api.version.request.timeout.ms": rt,
            "topic.metadata.refresh.interval.ms": max(1000, rt),
            "reconnect.backoff.ms": 50,
            "reconnect.backoff.max.ms": 1000,
            "retry.backoff.ms": 50,
            "retry.backoff.max.ms": 500,
            "enable.metrics.push": False,  # no GetTelemetrySubscriptions through the gateway
            "allow.auto.create.topics": False,  # the harness creates the topics
            "log.connection.close": False,
            "error_cb": self.on_error,
        }
        # FENCECHECK_LIBRDKAFKA_DEBUG (e.g. eos,protocol) turns on librdkafka's debug contexts;
        # its lines go to stderr, that is to the run's harness.log.
        debug = os.environ.get("FENCECHECK_LIBRDKAFKA_DEBUG", "")
        if debug:
            self.common["debug"] = debug
        try:
            self.plain = self.new_plain()
        except KafkaException as e:
            raise CallError("invalid_config", False, "build the registration producer: %s" % describe_exc(e))
        # A broker must answer (the harness creates the topics after start, so only metadata).
        try:
            self.plain.list_topics(timeout=self.timeout)
        except KafkaException as e:
            raise CallError("admin", False, "no bootstrap address answered: %s" % describe_exc(e))
        self.config = c
        # Warm up one reader (threads, first connection) so the first read_role is cheap.
        try:
            r = self.new_reader()
            r.list_topics(timeout=self.timeout)
            with self.readers_lock:
                self.readers.append(r)
        except KafkaException as e:
            log("warm-up reader failed (not start's): %s", describe_exc(e))
        log("started: bootstrap %s, lease %d ms, request timeout %d ms, transaction version 1", bootstrap, lease, rt)
        return 1

    def on_error(self, err):
        # Non-fatal client errors (a broker down, a connection refused): librdkafka retries them
        # itself. Fatal errors do not come here: confluent-kafka raises them from poll/flush.
        log("client error: %s", describe_error(err))

    def new_plain(self):
        rt = self.rt_ms
        conf = dict(self.common)
        conf.update({
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 0,
            # A registration is bounded by the request timeout: its message times out then.
            "message.timeout.ms": rt,
            "request.timeout.ms": rt,
            "socket.timeout.ms": rt,
        })
        return Producer(conf)

    def txn_conf(self, role):
        """The transactional producer of role. The consistent set of timeouts (librdkafka checks
        them at construction):

        - transaction.timeout.ms = the lease (the protocol's rule; librdkafka's floor is 1000).
        - socket.timeout.ms (every request's timeout: InitProducerId, AddPartitionsToTxn,
          Produce, EndTxn) = min(request timeout, lease). librdkafka refuses a socket.timeout.ms
          above transaction.timeout.ms + 100, and without it would pick lease - 100: with a 2 s
          lease and a 5 s request timeout it is 2 s, so a request that hangs is retried within
          the lease rather than outliving it.
        - message.timeout.ms (a record's whole delivery, retries included) = min(request timeout,
          lease): librdkafka refuses one above transaction.timeout.ms (its default would be the
          transaction timeout, and 300 s without a transactional id).
        - request.timeout.ms (the broker's ack timeout of a Produce) = the same.
        - init_transactions and commit_transaction take the call's remaining time as their own
          timeout (librdkafka's default would be transaction.timeout.ms, or twice it for init).
        """
        return member.transactional_conf(self.common, self.topic + "/" + role, self.lease_ms,
                                         min(self.rt_ms, self.lease_ms))

    # -- acquire --

    def acquire(self, role):
        rs = self.state(role)
        deadline = time.monotonic() + self.timeout
        with rs.lock:
            self.release(rs, rs.held)
            try:
                p = Producer(self.txn_conf(role))
            except KafkaException as e:
                raise CallError("invalid_config", False, "acquire %r: build the producer: %s" % (role, describe_exc(e)))
            # Part of the call's time is kept back for destroying a producer whose
            # init_transactions failed: librdkafka goes on acquiring in the background after a
            # timeout, and only a finished destroy guarantees that no late InitProducerId of it
            # follows the next acquire.
            reserve = min(1.0, self.timeout / 4)
            try:
                # InitProducerId: mints the token and fences every earlier producer of the id.
                p.init_transactions(max(0.001, deadline - reserve - time.monotonic()))
            except BaseException as e:  # noqa: BLE001
                # InitProducerId may have reached the coordinator and minted: always unknown.
                t = destroy(p)
                p = None
                t.join(max(0.001, deadline - time.monotonic()))
                if t.is_alive():
                    log("acquire %r: the failed producer was not destroyed within the request timeout; a late InitProducerId of it may follow" % role)
                err = kafka_error(e)
                raise CallError(kind_of(err), True, "acquire %r: init_transactions: %s" % (role, describe_exc(e)))
            rs.held = Holding(p)

    def release(self, rs, h):
        if h is not None and rs.held is h:
            rs.held = None
            destroy(h.producer)

    # -- writes --

    def write(self, role, recs):
        rs = self.state(role)
        deadline = time.monotonic() + self.timeout
        with rs.lock:
            h = rs.held
            if h is None:
                # gateway-token: the harness checks the request's token against the one it
                # recorded; the adapter only knows whether it holds a producer for the role.
                raise CallError("not_held", False, "write %r: not held" % role)
            p = h.producer
            what = "write %r" % role
            try:
                p.begin_transaction()
            except BaseException as e:  # noqa: BLE001
                self.release(rs, h)
                raise CallError(kind_of(kafka_error(e)), False, "%s: begin_transaction: %s" % (what, describe_exc(e)))
            reports = []

            def delivered(err, msg):
                reports.append(err)

            try:
                for topic, partition, key, value in recs:
                    p.produce(topic, value=unb64(value), key=unb64(key), partition=partition, on_delivery=delivered)
                left = p.flush(max(0.0, deadline - time.monotonic()))
            except BaseException as e:  # noqa: BLE001
                # A fatal error (fenced at AddPartitionsToTxn) is raised from flush. No commit was
                # requested: the transaction can only be aborted, nothing of it can commit.
                self.release(rs, h)
                raise CallError(kind_of(kafka_error(e)), False, "%s: produce: %s" % (what, describe_exc(e)))
            failed = [e for e in reports if e is not None]
            if failed or left > 0:
                self.release(rs, h)
                if failed:
                    raise CallError(kind_of(failed[0]), False, "%s: produce: %s" % (what, describe_error(failed[0])))
                raise CallError("client", False, "%s: produce: %d record(s) not delivered within the request timeout" % (what, left))
            rem = deadline - time.monotonic()
            if rem <= 0:
                self.release(rs, h)
                raise CallError("client", False, "%s: the request timeout passed before the commit" % what)
            try:
                p.commit_transaction(rem)
            except BaseException as e:  # noqa: BLE001
                # Every record was delivered, so commit_transaction's own flush had nothing to
                # wait for and its error comes from the EndTxn phase: the EndTxn(commit) went out,
                # or may have. librdkafka retries an EndTxn whose answer never came, so even a
                # fencing answer (PRODUCER_FENCED, fatal) can follow an attempt that committed,
                # and a retriable error (a timeout) leaves the commit running in the background.
                # Whatever retriable()/txn_requires_abort()/fatal() say, the result is unknown.
                self.release(rs, h)
                raise CallError(kind_of(kafka_error(e)), True, "%s: commit_transaction: %s" % (what, describe_exc(e)))

    # -- register --

    def register(self, req):
        deadline = time.monotonic() + self.timeout
        with self.plain_lock:
            p = self.plain
        done = threading.Event()
        result = {}

        def delivered(err, msg):
            result["err"] = err
            if err is None:
                result["offset"] = msg.offset()
            done.set()

        try:
            p.produce(req.get("topic", ""), value=unb64(req.get("value")), key=unb64(req.get("key")),
                      partition=int(req.get("partition") or 0), on_delivery=delivered)
        except BufferError as e:
            raise CallError("producer", False, "register: produce: queue full: %s" % e)
        except KafkaException as e:
            err = kafka_error(e)
            self.replace_plain(p, err)
            raise CallError("producer", False, "register: produce: %s" % describe_error(err))
        try:
            while not done.is_set():
                rem = deadline - time.monotonic()
                if rem <= 0:
                    break
                p.poll(min(0.05, rem))  # serves any thread's delivery reports
        except BaseException as e:  # noqa: BLE001 - a fatal error of the producer
            self.replace_plain(p, kafka_error(e))
            if not done.is_set():
                raise CallError(kind_of(kafka_error(e)), True, "register: %s" % describe_exc(e))
        if not done.is_set():
            raise CallError("client", True, "register: no delivery report within the request timeout")
        err = result["err"]
        if err is not None:
            # A definite refusal by the broker appended nothing, and so does an error raised
            # before the record was sent; anything else (a timeout) may still have landed.
            rejected = err.code() in REGISTER_REJECTED_CODES
            raise CallError("producer" if rejected else kind_of(err), not rejected, "register: %s" % describe_error(err))
        return result["offset"]

    def replace_plain(self, p, err):
        if err is None or not err.fatal():
            return
        with self.plain_lock:
            if self.plain is p and not self.closed:
                log("the registration producer failed fatally (%s); building another", describe_error(err))
                self.plain = self.new_plain()
                destroy(p)

    # -- reads --

    def new_reader(self):
        conf = dict(self.common)
        conf.update({
            # confluent-kafka insists on a group.id even for a consumer that only assigns; it
            # never joins the group (no subscribe) and never commits.
            "group.id": "fencecheck-reader-" + self.client_id,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
            "fetch.wait.max.ms": self.fetch_max_wait_ms,
            "socket.timeout.ms": self.rt_ms,
        })
        if self.fetch_partition_max > 0:
            conf["max.partition.fetch.bytes"] = self.fetch_partition_max
        return Consumer(conf)

    def read(self, topic, partition):
        """Every committed record of the partition from its log start to the last stable offset
        taken when the read starts, in offset order.

        With isolation.level=read_committed, get_watermark_offsets(cached=False) sends ListOffsets
        with the consumer's isolation level (rd_kafka_query_watermark_offsets), so its high mark
        is the last stable offset, not the high watermark (checked on kfake: 4 while a
        transaction was open at offset 4, the high watermark being 5). The read ends when the
        consumer's position reaches it: librdkafka advances the position past control records
        (transaction markers) and aborted batches it skips, so a log ending in a commit marker
        ends the read without waiting for a record at LSO-1; a partition EOF at or past the LSO
        ends it as well."""
        deadline = time.monotonic() + self.timeout
        what = "read %s[%d]" % (topic, partition)
        with self.readers_lock:
            c = self.readers.pop() if self.readers else None
        healthy = False
        try:
            if c is None:
                c = self.new_reader()
            low, lso = self.last_stable(c, TopicPartition(topic, partition), deadline, what)
            out = []
            if lso > low:
                c.assign([TopicPartition(topic, partition, confluent_kafka.OFFSET_BEGINNING)])
                try:
                    self.scan(c, topic, partition, lso, deadline, out, what)
                finally:
                    c.unassign()
            healthy = True
            return out
        except KafkaException as e:
            raise CallError("client", False, "%s: %s" % (what, describe_exc(e)))
        finally:
            if c is not None:
                if healthy and not self.closed:
                    with self.readers_lock:
                        self.readers.append(c)
                else:
                    close_consumer(c)

    def last_stable(self, c, tp, deadline, what):
        """(log start, last stable offset) of tp. librdkafka fails the query at once, without
        waiting out its timeout, when its metadata does not know the partition's leader
        (_UNKNOWN_PARTITION, _LEADER_NOT_AVAILABLE) or no broker is up (_ALL_BROKERS_DOWN), as
        under a partition of this process's links: a read has no effect, so it asks again until
        the request timeout, as kafka-clients' endOffsets waits for the metadata."""
        while True:
            try:
                return c.get_watermark_offsets(tp, timeout=max(0.001, deadline - time.monotonic()), cached=False)
            except KafkaException as e:
                err = kafka_error(e)
                if (err is not None and err.fatal()) or deadline - time.monotonic() < 0.1:
                    raise CallError("client", False, "%s: query the last stable offset: %s" % (what, describe_exc(e)))
            time.sleep(0.1)

    def scan(self, c, topic, partition, lso, deadline, out, what):
        tp = TopicPartition(topic, partition)
        last_err = None
        while True:
            rem = deadline - time.monotonic()
            if rem <= 0:
                pos = c.position([tp])[0].offset
                raise CallError("client", False, "%s: did not reach the last stable offset %d within the request "
                                "timeout (position %d, %d record(s) read%s)"
                                % (what, lso, pos, len(out), ", last error " + describe_error(last_err) if last_err else ""))
            # A short wait: the position moves past trailing markers without a message to
            # return, so a long poll would only wait out its timeout before we look again.
            for m in c.consume(num_messages=1000, timeout=min(0.005, rem)):
                err = m.error()
                if err is None:
                    if m.topic() != topic or m.partition() != partition:
                        continue
                    off = m.offset()
                    if off >= lso:
                        return
                    rec = {"offset": off}
                    if m.key() is not None:
                        rec["key"] = b64(m.key())
                    if m.value() is not None:
                        rec["value"] = b64(m.value())
                    out.append(rec)
                    if off + 1 >= lso:
                        return
                elif err.code() == KafkaError._PARTITION_EOF:
                    if m.offset() >= lso:
                        return
                else:
                    last_err = err
                    if err.fatal():
                        raise CallError("client", False, "%s: %s" % (what, describe_error(err)))
            if c.position([tp])[0].offset >= lso:
                return

    # -- shutdown --

    def shutdown(self):
        self.closed = True
        if self.member is not None:
            self.member.close()
        dead = []
        with self.roles_lock:
            for rs in self.roles.values():
                if rs.held is not None:
                    dead.append(rs.held.producer)
                    rs.held = None
        with self.plain_lock:
            if self.plain is not None:
                try:
                    self.plain.flush(min(1.0, getattr(self, "timeout", 1.0)))
                except BaseException:  # noqa: BLE001
                    pass
                dead.append(self.plain)
                self.plain = None
        with self.readers_lock:
            readers, self.readers = self.readers, []
        threads = [destroy(p) for p in dead] + [close_consumer(c) for c in readers]
        dead.clear()  # the destroy threads wait for theirs to be the last reference
        end = time.monotonic() + min(5.0, getattr(self, "timeout", 5.0))
        for t in threads:
            t.join(max(0.0, end - time.monotonic()))


def destroy(p):
    """Destroys a producer without Producer.close() (which would abort an open transaction, see
    the module's comment): purges what it still holds, then drops the reference, which runs
    rd_kafka_destroy. confluent-kafka has no other way to destroy: the last reference to go
    runs it, so the thread waits (bounded) until its reference is the only one, and
    rd_kafka_destroy, which waits for the client's own threads, never runs in a call's thread.
    Returns the thread."""
    holder = [p]

    def run():
        q = holder.pop()
        try:
            q.purge(in_queue=True, in_flight=True, blocking=False)
        except BaseException:  # noqa: BLE001
            pass
        end = time.monotonic() + 30
        while sys.getrefcount(q) > 2 and time.monotonic() < end:
            time.sleep(0.02)
        del q

    t = threading.Thread(target=run, daemon=True, name="destroy")
    t.start()
    return t


def close_consumer(c):
    def run():
        try:
            c.close()
        except BaseException:  # noqa: BLE001
            pass

    t = threading.Thread(target=run, daemon=True, name="close-reader")
    t.start()
    return t


def main():
    a = Adapter()
    try:
        a.run()
    except KeyboardInterrupt:
        pass
    try:
        _OUT.flush()
    finally:
        sys.stderr.flush()
        os._exit(0)  # do not wait for the client's threads or a destroy still running


if __name__ == "__main__":
    main()
