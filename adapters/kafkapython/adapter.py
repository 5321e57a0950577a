#!/usr/bin/env python3
"""fencecheck's exec-protocol adapter on kafka-python (pure Python).

One JSON request per line on stdin, one JSON answer per line on stdout, logs on stderr
(docs/exec-protocol.md). Standard library plus kafka-python only. Every call other than hello,
start and close runs in a thread of its own; calls on one role are serialized by the role's
lock (the harness sends at most one per role at a time, plus reads).

What kafka-python can and cannot do here, and how the adapter answers (see README.md beside it):

- The token. KafkaProducer has no public accessor for the pair InitProducerId returned, but
  its TransactionManager keeps it in a plain attribute, producer._transaction_manager
  .producer_id_and_epoch (a ProducerIdAndEpoch with producer_id and epoch). The adapter reads
  it right after init_transactions() returned and before any transaction began: the pair that
  producer minted, not a second request. No gateway-token.
- Describe: KafkaAdminClient.describe_transactions (DescribeTransactions, routed to the
  coordinator FindCoordinator names). No no-describe.
- Transaction version 1 on any cluster: kafka-python 3.0.12 caps EndTxn at v3 and
  AddPartitionsToTxn at v3 (it adds partitions explicitly), Produce at v9 and InitProducerId
  at v4 (producer/transaction_manager.py, producer/sender.py): no KIP-890 part 2. start
  answers transaction_version 1 and refuses a start that requires 2.
- commit_transaction() takes no timeout (it waits on the EndTxn's result without one), so the
  adapter does what it does, begin_commit() and a wakeup of the sender, and waits on the
  result with the call's remaining time.
- A dropped producer is force-closed (its sender stops without sending what it still holds),
  never closed gracefully and never aborted: an abort after an error may bump the epoch with
  an InitProducerId of its own (KIP-360), which would fence whoever holds the role by then.
"""

import base64
import json
import logging
import os
import sys
import threading
import time
import traceback

import kafka
import kafka.errors as Errors
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition

PROTOCOL_VERSION = 1
CAPABILITIES = []
ADAPTER_VERSION = "0.1"

# The real stdout carries answers only: keep a private handle on it and point fd 1 at stderr,
# so that nothing else (a stray print) can reach the protocol.
_OUT = os.fdopen(os.dup(1), "wb", buffering=0)
os.dup2(2, 1)
sys.stdout = sys.stderr
_OUT_LOCK = threading.Lock()


def log(msg, *args):
    if args:
        msg = msg % args
    sys.stderr.write("%s kafkapython-adapter: %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stderr.flush()


class CallError(Exception):
    """A failed call: the protocol's error kind and whether it may have taken effect."""

    def __init__(self, kind, unknown, message):
        super().__init__(message)
        self.kind = kind
        self.unknown = unknown


# ---- kafka-python errors ----

# A fence: the broker rejected this producer's epoch. kafka-python maps INVALID_PRODUCER_EPOCH
# on the coordinator's paths to ProducerFencedError itself; a Produce answers it as it is.
FENCED = (Errors.ProducerFencedError, Errors.InvalidProducerEpochError, Errors.InvalidTxnStateError)
CLIENT = (Errors.KafkaTimeoutError, Errors.KafkaConnectionError, Errors.NodeNotReadyError,
          Errors.RequestTimedOutError, Errors.MetadataEmptyBrokerList)
# A registration that failed with one of these certainly appended nothing: broker refusals no
# retry of the batch can turn into an append. Every other error (a timeout, a connection cut
# with the request in flight) may have appended the record: unknown.
REGISTER_REJECTED = (Errors.UnknownTopicOrPartitionError, Errors.MessageSizeTooLargeError,
                     Errors.RecordListTooLargeError, Errors.TopicAuthorizationFailedError,
                     Errors.ClusterAuthorizationFailedError, Errors.InvalidTimestampError,
                     Errors.PolicyViolationError, Errors.InvalidRecordError)


def cause(exc):
    """The kafka error behind exc: kafka-python wraps some (a failed AddPartitionsToTxn is
    KafkaError(InvalidTxnStateError()), a send after an error KafkaError(msg, last_error))."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, Errors.BrokerResponseError) or isinstance(exc, CLIENT):
            return exc
        inner = None
        for a in getattr(exc, "args", ()):
            if isinstance(a, BaseException):
                inner = a
        exc = inner or exc.__cause__ or exc.__context__
        seen += 1
    return None


def describe_exc(exc):
    """What the client said: the exception's class, the Kafka error's name and code, its text."""
    if exc is None:
        return "no error"
    s = "%s: %s" % (type(exc).__name__, exc)
    c = cause(exc)
    if c is not None and c is not exc:
        s += " (%s: %s)" % (type(c).__name__, c)
    return s


def kind_of(exc):
    c = cause(exc)
    if isinstance(c, FENCED):
        return "fenced"
    if isinstance(c, CLIENT) or c is None and isinstance(exc, CLIENT):
        return "client"
    return "producer"


def b64(data):
    return base64.b64encode(data).decode("ascii") if data is not None else None


def unb64(text):
    return base64.b64decode(text) if text else b""


def token_of(p):
    """The pair p's InitProducerId returned: kafka-python keeps it in its TransactionManager."""
    pe = p._transaction_manager.producer_id_and_epoch
    return {"producer_id": int(pe.producer_id), "epoch": int(pe.epoch)}


def bounded(fn, timeout, name):
    """Runs fn in a thread of its own and waits at most timeout seconds. Returns fn's value or
    raises its exception; raises TimeoutError when it did not end in time (it goes on alone)."""
    box = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001
            box["error"] = e

    t = threading.Thread(target=run, daemon=True, name=name)
    t.start()
    t.join(max(0.0, timeout))
    if t.is_alive():
        raise TimeoutError("%s did not end within %.1f s" % (name, timeout))
    if "error" in box:
        raise box["error"]
    return box.get("value")


# ---- the adapter ----


class Holding:
    """A producer that minted a holding for a role: built by acquire, used by its writes."""

    def __init__(self, producer, token):
        self.producer = producer
        self.token = token


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
        self.admin = None
        self.admin_lock = threading.Lock()

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
                    "name": "kafka-python %s (fencecheck kafkapython adapter %s)" % (kafka.__version__, ADAPTER_VERSION),
                    "capabilities": CAPABILITIES}
        if op == "start":
            return {"transaction_version": self.start(req.get("config") or {})}
        if self.config is None:
            raise CallError("invalid_config", False, "%s before start" % op)
        if self.closed:
            raise CallError("closed", False, "transport closed")
        role = req.get("role", "")
        if op == "acquire":
            return {"token": self.acquire(role)}
        if op == "register":
            return {"join_seq": self.register(req)}
        if op == "write_lease":
            recs = [(req.get("topic", ""), int(req.get("partition") or 0), req.get("key"), req.get("value"))]
            self.write(role, req.get("token") or {}, recs)
            return {}
        if op == "write_fenced":
            recs = [(w.get("topic", ""), int(w.get("partition") or 0), w.get("key"), w.get("value"))
                    for w in req.get("records") or []]
            self.write(role, req.get("token") or {}, recs)
            return {}
        if op == "read_role":
            return {"records": self.read(req.get("topic", ""), int(req.get("partition") or 0))}
        if op == "held":
            h = self.state(role).held
            return {"held": True, "token": h.token} if h is not None else {}
        if op == "describe":
            return self.describe(role)
        raise CallError("invalid_config", False, "unknown op %r" % op)

    def state(self, role):
        with self.roles_lock:
            rs = self.roles.get(role)
            if rs is None:
                rs = self.roles[role] = RoleState()
            return rs

    # -- start --

    def start(self, c):
        bootstrap = c.get("bootstrap") or ""
        if not bootstrap:
            raise CallError("invalid_config", False, "Bootstrap: no address")
        rt = int(c.get("request_timeout_ms") or 0)
        lease = int(c.get("lease_ms") or 0)
        if rt <= 0 or lease <= 0:
            raise CallError("invalid_config", False, "LeaseDuration and RequestTimeout must be positive")
        want = int(c.get("transaction_version") or 0)
        if want == 2:
            raise CallError("invalid_config", False,
                            "TransactionVersion: 2 required, but kafka-python %s speaks transaction version 1 only "
                            "(AddPartitionsToTxn v3, EndTxn v3, Produce v9; no KIP-890 client support)" % kafka.__version__)
        if want not in (0, 1):
            raise CallError("invalid_config", False, "TransactionVersion: %d, want 0, 1 or 2" % want)
        self.rt_ms = rt
        self.lease_ms = lease
        self.timeout = rt / 1000.0
        self.topic = c.get("topic") or ""
        self.client_id = c.get("client_id") or "fencecheck-kafkapython"
        self.fetch_max_wait_ms = max(1, int(c.get("fetch_max_wait_ms") or 100))
        self.fetch_partition_max = int(c.get("fetch_partition_max") or 0)
        # Settings every client shares. Metadata is refreshed at most a request timeout apart
        # (a leader or coordinator that moved is also found at once from the error that says
        # so); reconnects back off at most a second, not kafka-python's 30 s.
        self.common = {
            "bootstrap_servers": bootstrap.split(","),
            "client_id": self.client_id,
            "request_timeout_ms": rt,
            "metadata_max_age_ms": max(1000, rt),
            "reconnect_backoff_ms": 50,
            "reconnect_backoff_max_ms": 1000,
            "retry_backoff_ms": 50,
        }
        deadline = time.monotonic() + self.timeout
        try:
            self.plain = self.new_plain(deadline)
        except Errors.KafkaConfigurationError as e:
            raise CallError("invalid_config", False, "build the registration producer: %s" % describe_exc(e))
        except Exception as e:  # noqa: BLE001 - the constructor bootstraps: no broker answered
            raise CallError("admin", False, "no bootstrap address answered: %s" % describe_exc(e))
        self.config = c
        # Warm up one reader and the admin client (threads, first connections) so the first
        # read_role and describe are cheap.
        try:
            r = self.new_reader(time.monotonic() + self.timeout)
            with self.readers_lock:
                self.readers.append(r)
        except Exception as e:  # noqa: BLE001
            log("warm-up reader failed (not start's): %s", describe_exc(e))
        try:
            self.get_admin(time.monotonic() + self.timeout)
        except Exception as e:  # noqa: BLE001
            log("warm-up admin client failed (not start's): %s", describe_exc(e))
        log("started: bootstrap %s, lease %d ms, request timeout %d ms, transaction version 1", bootstrap, lease, rt)
        return 1

    def remaining_ms(self, deadline, floor=1):
        return max(floor, int((deadline - time.monotonic()) * 1000))

    def new_plain(self, deadline):
        conf = dict(self.common)
        conf.update({
            "enable_idempotence": True,
            "acks": "all",
            "linger_ms": 0,
            # A registration is bounded by the request timeout: its record expires then.
            "delivery_timeout_ms": self.rt_ms,
            "max_block_ms": self.rt_ms,
            "allow_auto_create_topics": False,
            "bootstrap_timeout_ms": self.remaining_ms(deadline),
            "metrics_enabled": False,
        })
        return KafkaProducer(**conf)

    def txn_conf(self, role, deadline):
        """The transactional producer of role:

        - transaction_timeout_ms = the lease (the protocol's rule).
        - request_timeout_ms (every request's: InitProducerId, AddPartitionsToTxn, Produce,
          EndTxn) = min(request timeout, lease), so a request that hangs is retried within the
          lease rather than outliving it; delivery_timeout_ms (a record's whole delivery,
          retries included) the same: kafka-python requires it >= linger_ms + request_timeout_ms.
        - max_block_ms (send's wait for metadata, and init_transactions' wait) = what is left of
          the call's request timeout; bootstrap_timeout_ms too: the constructor bootstraps
          (ApiVersions, Metadata) before it returns.
        """
        bound = min(self.rt_ms, self.lease_ms)
        left = self.remaining_ms(deadline)
        conf = dict(self.common)
        conf.update({
            "transactional_id": self.topic + "/" + role,
            "transaction_timeout_ms": self.lease_ms,
            "enable_idempotence": True,
            "acks": "all",
            "linger_ms": 0,
            "request_timeout_ms": bound,
            "delivery_timeout_ms": bound,
            "max_block_ms": left,
            "bootstrap_timeout_ms": left,
            "allow_auto_create_topics": False,
            "metrics_enabled": False,
        })
        return conf

    # -- acquire --

    def acquire(self, role):
        rs = self.state(role)
        deadline = time.monotonic() + self.timeout
        with rs.lock:
            self.release(rs, rs.held)
            try:
                p = KafkaProducer(**self.txn_conf(role, deadline))
            except Errors.KafkaConfigurationError as e:
                raise CallError("invalid_config", False, "acquire %r: build the producer: %s" % (role, describe_exc(e)))
            except Exception as e:  # noqa: BLE001 - the constructor's bootstrap failed: no InitProducerId yet
                raise CallError("client", False, "acquire %r: build the producer (bootstrap): %s" % (role, describe_exc(e)))
            try:
                # InitProducerId: mints the token and fences every earlier producer of the id.
                # init_transactions waits max_block_ms (set to what is left of the call).
                p.init_transactions()
            except BaseException as e:  # noqa: BLE001
                # InitProducerId may have reached the coordinator and minted: always unknown.
                # The producer is force-closed so that it stops retrying InitProducerId.
                drop(p)
                raise CallError(kind_of(e), True, "acquire %r: init_transactions: %s" % (role, describe_exc(e)))
            tok = token_of(p)
            rs.held = Holding(p, tok)
            return tok

    def release(self, rs, h):
        if h is not None and rs.held is h:
            rs.held = None
            drop(h.producer)

    # -- writes --

    def write(self, role, token, recs):
        rs = self.state(role)
        deadline = time.monotonic() + self.timeout
        with rs.lock:
            h = rs.held
            what = "write %r" % role
            if h is None or h.token.get("producer_id") != token.get("producer_id", 0) or \
                    h.token.get("epoch") != token.get("epoch", 0):
                raise CallError("not_held", False, "%s: not held%s" % (what, "" if h is None else " under that token"))
            p = h.producer
            try:
                p.begin_transaction()
            except BaseException as e:  # noqa: BLE001
                self.release(rs, h)
                raise CallError(kind_of(e), False, "%s: begin_transaction: %s" % (what, describe_exc(e)))
            futures = []
            try:
                for topic, partition, key, value in recs:
                    futures.append(p.send(topic, value=unb64(value), key=unb64(key), partition=partition))
                p.flush(timeout=max(0.0, deadline - time.monotonic()))
            except BaseException as e:  # noqa: BLE001
                # No commit was requested: the transaction can only be aborted, nothing of it
                # can commit.
                self.release(rs, h)
                raise CallError(kind_of(e), False, "%s: produce: %s" % (what, describe_exc(e)))
            for f in futures:
                if not f.is_done:
                    self.release(rs, h)
                    raise CallError("client", False, "%s: produce: not acknowledged within the request timeout" % what)
                if f.failed():
                    self.release(rs, h)
                    raise CallError(kind_of(f.exception), False, "%s: produce: %s" % (what, describe_exc(f.exception)))
            rem = deadline - time.monotonic()
            if rem <= 0:
                self.release(rs, h)
                raise CallError("client", False, "%s: the request timeout passed before the commit" % what)
            tm = p._transaction_manager
            try:
                # What commit_transaction() does, with a timeout it lacks: begin_commit enqueues
                # the EndTxn(commit), the wakeup gets the sender to send it.
                result = tm.begin_commit()
            except BaseException as e:  # noqa: BLE001 - refused before EndTxn was enqueued
                self.release(rs, h)
                raise CallError(kind_of(e), False, "%s: commit: %s" % (what, describe_exc(e)))
            p._sender.wakeup()
            try:
                done = result.wait(timeout_ms=max(1, int((deadline - time.monotonic()) * 1000)))
            except BaseException as e:  # noqa: BLE001
                # The EndTxn(commit) went out, or may have: kafka-python retries an EndTxn whose
                # answer never came, so even a fencing answer can follow an attempt that
                # committed. Whatever the error, the result is unknown.
                self.release(rs, h)
                raise CallError(kind_of(e), True, "%s: commit: %s" % (what, describe_exc(e)))
            if not done:
                self.release(rs, h)
                raise CallError("client", True, "%s: commit: no EndTxn answer within the request timeout" % what)

    # -- register --

    def register(self, req):
        deadline = time.monotonic() + self.timeout
        p = self.plain_producer(deadline)
        try:
            f = p.send(req.get("topic", ""), value=unb64(req.get("value")), key=unb64(req.get("key")),
                       partition=int(req.get("partition") or 0))
        except BaseException as e:  # noqa: BLE001 - refused before the record was queued
            raise CallError(kind_of(e), False, "register: send: %s" % describe_exc(e))
        try:
            md = f.get(timeout=max(0.001, deadline - time.monotonic()))
        except Errors.KafkaTimeoutError as e:
            raise CallError("client", True, "register: no answer within the request timeout: %s" % describe_exc(e))
        except BaseException as e:  # noqa: BLE001
            c = cause(e)
            rejected = isinstance(c, REGISTER_REJECTED)
            raise CallError("producer" if rejected else kind_of(e), not rejected, "register: %s" % describe_exc(e))
        return md.offset

    def plain_producer(self, deadline):
        """The registration producer, built again when the last one went fatal (an idempotent
        producer in FATAL_ERROR fails every later send)."""
        with self.plain_lock:
            p = self.plain
            tm = getattr(p, "_transaction_manager", None)
            if p is not None and tm is not None and tm.has_fatal_error() and not self.closed:
                log("the registration producer failed fatally (%s); building another", describe_exc(tm.last_error))
                drop(p)
                try:
                    p = self.plain = self.new_plain(deadline)
                except Exception as e:  # noqa: BLE001 - nothing was sent
                    self.plain = None
                    raise CallError("client", False, "register: build the registration producer: %s" % describe_exc(e))
            if p is None:
                raise CallError("closed" if self.closed else "client", False, "register: no registration producer")
            return p

    # -- reads --

    def new_reader(self, deadline):
        conf = dict(self.common)
        conf.update({
            "group_id": None,
            "enable_auto_commit": False,
            "isolation_level": "read_committed",
            "auto_offset_reset": "earliest",
            "fetch_max_wait_ms": self.fetch_max_wait_ms,
            # kafka-python requires fetch_max_wait_ms < request_timeout_ms.
            "request_timeout_ms": max(self.rt_ms, self.fetch_max_wait_ms + 1),
            "allow_auto_create_topics": False,
            "bootstrap_timeout_ms": self.remaining_ms(deadline),
            "metrics_enabled": False,
        })
        if self.fetch_partition_max > 0:
            conf["max_partition_fetch_bytes"] = self.fetch_partition_max
        return KafkaConsumer(**conf)

    def read(self, topic, partition):
        """Every committed record of the partition from its log start to the last stable offset
        taken when the read starts, in offset order.

        end_offsets on a read_committed consumer sends ListOffsets with its isolation level, so
        it returns the last stable offset, not the high watermark. The read ends when the
        consumer's position reaches it: the position moves past transaction markers and the
        aborted batches it skips, so a log ending in a commit marker ends the read without
        waiting for a record at LSO-1."""
        deadline = time.monotonic() + self.timeout
        what = "read %s[%d]" % (topic, partition)
        tp = TopicPartition(topic, partition)
        with self.readers_lock:
            c = self.readers.pop() if self.readers else None
        healthy = False
        try:
            if c is None:
                c = self.new_reader(deadline)
            c.assign([tp])
            try:
                lso = c.end_offsets([tp], timeout_ms=self.remaining_ms(deadline))[tp]
                low = c.beginning_offsets([tp], timeout_ms=self.remaining_ms(deadline))[tp]
            except Exception as e:  # noqa: BLE001
                raise CallError("client", False, "%s: query the log start and last stable offset: %s" % (what, describe_exc(e)))
            out = []
            if lso > low:
                c.seek(tp, low)
                self.scan(c, tp, lso, deadline, out, what)
            healthy = True
            return out
        except CallError:
            raise
        except Exception as e:  # noqa: BLE001
            raise CallError("client", False, "%s: %s" % (what, describe_exc(e)))
        finally:
            if c is not None:
                if healthy and not self.closed:
                    try:
                        c.assign([])
                    except Exception:  # noqa: BLE001
                        healthy = False
                if healthy and not self.closed:
                    with self.readers_lock:
                        self.readers.append(c)
                else:
                    close_consumer(c)

    def scan(self, c, tp, lso, deadline, out, what):
        while True:
            rem = deadline - time.monotonic()
            if rem <= 0:
                raise CallError("client", False, "%s: did not reach the last stable offset %d within the request "
                                "timeout (%d record(s) read)" % (what, lso, len(out)))
            got = c.poll(timeout_ms=max(1, min(50, int(rem * 1000))))
            for m in got.get(tp, []):
                if m.offset >= lso:
                    return
                rec = {"offset": m.offset}
                if m.key is not None:
                    rec["key"] = b64(m.key)
                if m.value is not None:
                    rec["value"] = b64(m.value)
                out.append(rec)
                if m.offset + 1 >= lso:
                    return
            pos = c.position(tp, timeout_ms=max(1, int((deadline - time.monotonic()) * 1000)))
            if pos is not None and pos >= lso:
                return

    # -- describe --

    def get_admin(self, deadline):
        with self.admin_lock:
            if self.admin is None:
                conf = dict(self.common)
                conf["bootstrap_timeout_ms"] = self.remaining_ms(deadline)
                self.admin = KafkaAdminClient(**conf)
            return self.admin

    def describe(self, role):
        """DescribeTransactions on the role's transactional id, at its coordinator.

        KafkaAdminClient caches the coordinator FindCoordinator named and never forgets it: a
        NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE answer is raised and the next describe goes
        to the same broker. The adapter removes the cached entry on such an error and asks
        again within the request timeout. An answer is then confirmed, as the seed's transport
        does (confirm_coordinator): without it, a broker cut off from its peers kept answering
        every describe from its old state (isolate-broker on Kafka 4.1.2, invalid on
        describe-consistent), since nothing made the admin client ask FindCoordinator again."""
        from kafka.protocol.metadata import CoordinatorType
        deadline = time.monotonic() + self.timeout
        tid = self.topic + "/" + role
        what = "describe %r" % role
        last = None
        while True:
            rem = deadline - time.monotonic()
            if rem <= 0:
                raise CallError("admin", False, "%s: %s" % (what, describe_exc(last) if last else "the request timeout passed"))
            admin = None
            try:
                admin = self.get_admin(deadline)
                d = bounded(lambda: admin.describe_transactions([tid]), rem, "describe")[tid]
            except Errors.TransactionalIdNotFoundError:
                # held false: the coordinator does not know the id; confirmed like a holder,
                # since a deposed coordinator answers "no holder" from its old state too.
                node = admin._manager.cluster.get_coordinator(tid, CoordinatorType.TRANSACTION)
                refused = self.confirm_coordinator(admin, tid, node, deadline) if isinstance(node, int) else ""
                if refused:
                    admin._manager.cluster._coordinators.pop((CoordinatorType.TRANSACTION, tid), None)
                    log("%s: refused the answer of broker %s (no holder): %s", what, node, refused)
                    raise CallError("admin", False, "%s: %s (NOT_COORDINATOR)" % (what, refused))
                return {}
            except TimeoutError as e:
                raise CallError("admin", False, "%s: %s" % (what, e))
            except Exception as e:  # noqa: BLE001
                last = e
                c = cause(e)
                if admin is not None and (isinstance(c, (Errors.NotCoordinatorError, Errors.CoordinatorNotAvailableError)) or
                                          isinstance(c, CLIENT)):
                    try:
                        gone = admin._manager.cluster._coordinators.pop((CoordinatorType.TRANSACTION, tid), None)
                        if gone is not None:
                            log("%s: %s; forgetting the cached coordinator %s and asking again", what, describe_exc(e), gone)
                    except Exception:  # noqa: BLE001
                        pass
                if isinstance(c, Errors.RetriableError) or isinstance(c, CLIENT):
                    time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
                    continue
                raise CallError("admin", False, "%s: %s" % (what, describe_exc(e)))
            refused = self.confirm_coordinator(admin, tid, d.coordinator_id, deadline)
            if refused:
                # The next describe asks FindCoordinator again instead of the cached broker.
                try:
                    admin._manager.cluster._coordinators.pop((CoordinatorType.TRANSACTION, tid), None)
                except Exception:  # noqa: BLE001
                    pass
                log("%s: refused the answer of broker %s (%s): %s", what, d.coordinator_id,
                    "no holder" if d.producer_id < 0 else "(%d,%d)" % (d.producer_id, d.producer_epoch), refused)
                raise CallError("admin", False, "%s: %s (NOT_COORDINATOR)" % (what, refused))
            if d.producer_id < 0:
                return {}
            return {"held": True, "token": {"producer_id": int(d.producer_id), "epoch": int(d.producer_epoch)}}

    def confirm_coordinator(self, admin, tid, node, deadline):
        """The seed's check of a describe's answer: up to two brokers other than node, the one
        that answered DescribeTransactions for tid, are asked (FindCoordinator) whether node is
        still its coordinator. An Apache Kafka broker cut off from its peers keeps answering as
        the coordinator from the state it had, naming a deposed holder, while the controller
        has moved the coordinator elsewhere; kafka-python's admin client keeps asking the
        broker it cached until that broker says otherwise. Returns why the answer is refused
        (a broker names another coordinator, or none), or "" to accept it. A broker that cannot
        be reached or does not answer within a fifth of the request timeout has no say, so a
        fault that hides the other brokers leaves the answer unconfirmed, as transport/confirm.go
        does."""
        from kafka.protocol.metadata import FindCoordinatorRequest
        try:
            ids = sorted({b.node_id for b in admin._manager.cluster.brokers()
                          if isinstance(b.node_id, int) and b.node_id != node})
        except Exception:  # noqa: BLE001
            return ""
        # The brokers following node in id order first, then wrapping around.
        ids = [i for i in ids if i > node] + [i for i in ids if i < node]
        ids = ids[:2]
        if not ids:
            return ""
        wait = min(self.timeout / 5, max(0.0, deadline - time.monotonic()))
        answers = {}

        def ask(b):
            async def find():
                req = FindCoordinatorRequest(key=tid, key_type=1, coordinator_keys=[tid])
                return await admin._manager.send(req, node_id=b, request_timeout_ms=max(1, int(wait * 1000)))
            try:
                resp = admin._manager.run(find)
                c = resp.coordinators[0] if resp.coordinators else resp
                answers[b] = (c.error_code, c.node_id)
            except Exception as e:  # noqa: BLE001 - no say
                answers[b] = e

        threads = [threading.Thread(target=ask, args=(b,), daemon=True, name="confirm") for b in ids]
        for t in threads:
            t.start()
        end = time.monotonic() + wait
        for t in threads:
            t.join(max(0.0, end - time.monotonic()))
        for b in ids:
            a = answers.get(b)
            if not isinstance(a, tuple):
                continue
            code, coordinator = a
            if code == Errors.CoordinatorNotAvailableError.errno:
                return "broker %s answered DescribeTransactions for %r, but broker %s knows no coordinator for it" % (node, tid, b)
            if code == 0 and coordinator != node:
                return "broker %s answered DescribeTransactions for %r, but broker %s names broker %s as its coordinator" % (
                    node, tid, b, coordinator)
        return ""

    # -- shutdown --

    def shutdown(self):
        self.closed = True
        dead = []
        with self.roles_lock:
            for rs in self.roles.values():
                if rs.held is not None:
                    dead.append(rs.held.producer)
                    rs.held = None
        threads = [drop(p) for p in dead]
        with self.plain_lock:
            p, self.plain = self.plain, None
        if p is not None:

            def close_plain():
                try:
                    p.close(timeout=min(1.0, self.timeout))
                except BaseException:  # noqa: BLE001
                    pass
            t = threading.Thread(target=close_plain, daemon=True, name="close-plain")
            t.start()
            threads.append(t)
        with self.readers_lock:
            readers, self.readers = self.readers, []
        threads += [close_consumer(c) for c in readers]
        if self.admin is not None:
            a, self.admin = self.admin, None
            threads.append(close_in_thread(a.close))
        end = time.monotonic() + min(5.0, getattr(self, "timeout", 5.0))
        for t in threads:
            t.join(max(0.0, end - time.monotonic()))


def drop(p):
    """Stops a producer without ending its transaction: force_close makes its sender fail what
    it still holds and stop without sending it (no EndTxn, no InitProducerId), then close()
    releases its connections. KafkaProducer.close() alone would first flush, and close(0)
    raises KafkaTimeoutError from that flush while a batch is incomplete, before it stops the
    sender. Returns the thread that does it."""

    def run():
        try:
            p._sender.force_close()
        except BaseException:  # noqa: BLE001
            pass
        try:
            p.close(timeout=1)
        except BaseException:  # noqa: BLE001
            pass

    t = threading.Thread(target=run, daemon=True, name="drop-producer")
    t.start()
    return t


def close_in_thread(fn):
    def run():
        try:
            fn()
        except BaseException:  # noqa: BLE001
            pass

    t = threading.Thread(target=run, daemon=True, name="close")
    t.start()
    return t


def close_consumer(c):
    return close_in_thread(lambda: c.close(autocommit=False, timeout_ms=1000))


def main():
    # kafka-python logs through the logging module; its warnings and errors (a fatal error, a
    # retried request) go to stderr, that is to the run's harness.log. FENCECHECK_KAFKAPYTHON_LOG
    # (DEBUG, INFO, ...) lowers the level: DEBUG logs every request and answer.
    level = os.environ.get("FENCECHECK_KAFKAPYTHON_LOG", "WARNING").upper()
    logging.basicConfig(stream=sys.stderr, level=getattr(logging, level, logging.WARNING),
                        format="%(asctime)s kafka-python %(levelname)s %(name)s: %(message)s")
    a = Adapter()
    try:
        a.run()
    except KeyboardInterrupt:
        pass
    try:
        _OUT.flush()
    finally:
        sys.stderr.flush()
        os._exit(0)  # do not wait for the clients' threads


if __name__ == "__main__":
    main()
