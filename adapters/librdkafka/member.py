"""One member of an exactly-once pipeline on librdkafka (docs/exec-protocol.md, "Pipelines").

A Consumer in the group at isolation.level=read_committed without auto-commit, and a
transactional Producer, in the loop confluent-kafka's own exactly-once example writes: consume;
begin_transaction, produce, send_offsets_to_transaction(positions,
consumer.consumer_group_metadata()), commit_transaction. After a transaction that did not
commit: abort_transaction, then rewind every assigned partition to the group's committed offset
from consumer.committed(), which librdkafka 2.16 sends as an OffsetFetch with require_stable set
when the consumer reads read_committed (KIP-447), and retries while the broker answers
UNSTABLE_OFFSET_COMMIT.

What librdkafka exposes and what the member reads:

- The member id is consumer.memberid(). The generation has no accessor: it is read from
  consumer_group_metadata(), librdkafka's serialized group metadata, "CGMDv2:" then the
  generation id (int32, host byte order), the group id and the member id, each NUL-terminated
  (rd_kafka_consumer_group_metadata_write). Under the consumer protocol (KIP-848) librdkafka
  keeps the member epoch there.
- Calls come one at a time (one member per adapter process); the member's lock serializes them
  anyway, since a call the harness gave up on may still run.
"""

import struct
import threading
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

CGMD_MAGIC = b"CGMDv2:"

# Errors of the group (a zombie's offsets refused by generation or member epoch): kind fenced.
GROUP_FENCED_CODES = {
    KafkaError.ILLEGAL_GENERATION,
    KafkaError.UNKNOWN_MEMBER_ID,
    KafkaError.FENCED_INSTANCE_ID,
    getattr(KafkaError, "FENCED_MEMBER_EPOCH", 110),
    getattr(KafkaError, "STALE_MEMBER_EPOCH", 113),
}


def group_identity(md):
    """(member id, generation) out of librdkafka's serialized consumer group metadata."""
    if not isinstance(md, (bytes, bytearray)) or not md.startswith(CGMD_MAGIC) or len(md) < len(CGMD_MAGIC) + 4:
        return "", -1
    of = len(CGMD_MAGIC)
    (gen,) = struct.unpack_from("=i", md, of)
    rest = bytes(md[of + 4:]).split(b"\x00")
    member = rest[1].decode("utf-8", "replace") if len(rest) > 1 else ""
    return member, gen



def transactional_conf(base, txn_id, txn_timeout_ms, bound_ms):
    """A transactional producer's configuration: base (the connection's settings) with the
    transactional id, its transaction timeout, idempotence, and the socket, message and request
    timeouts at bound_ms, which must not exceed the transaction timeout (librdkafka refuses a
    socket or message timeout above it). Shared by the pipeline member and the lease adapter."""
    conf = dict(base)
    conf.update({
        "transactional.id": txn_id,
        "transaction.timeout.ms": txn_timeout_ms,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 0,
        "socket.timeout.ms": max(10, bound_ms),
        "message.timeout.ms": bound_ms,
        "request.timeout.ms": bound_ms,
    })
    return conf

class Member:
    """A pipeline member. lib is the adapter module (errors, logging, the common settings)."""

    def __init__(self, c, lib, common):
        self.lib = lib
        bad = lambda field, why: lib.CallError("invalid_config", False, "%s: %s" % (field, why))  # noqa: E731
        protocol = c.get("protocol") or "classic"
        rt = int(c.get("request_timeout_ms") or 0)
        txn_timeout = int(c.get("transaction_timeout_ms") or 0)
        session = int(c.get("session_timeout_ms") or 0)
        rebalance = int(c.get("rebalance_timeout_ms") or 0)
        max_poll = int(c.get("max_poll") or 0)
        tv = int(c.get("transaction_version") or 0)
        if not c.get("bootstrap"):
            raise bad("Bootstrap", "no address")
        for field, key in (("Group", "group"), ("Input", "input"), ("TransactionalID", "transactional_id")):
            if not c.get(key):
                raise bad(field, "empty")
        if not c.get("output") or c.get("output") == c.get("input"):
            raise bad("Output", "empty, or the input topic")
        if protocol not in ("classic", "consumer"):
            raise bad("Protocol", '"%s", want classic or consumer' % protocol)
        if rt <= 0:
            raise bad("RequestTimeout", "%d ms, must be positive" % rt)
        if txn_timeout < 1000:
            raise bad("LeaseDuration", "a transaction timeout of %d ms: librdkafka's transaction.timeout.ms is at least 1000 ms" % txn_timeout)
        if session < 0 or rebalance < 0 or max_poll < 0:
            raise bad("SessionTimeout, RebalanceTimeout, MaxPoll", "must not be negative")
        if tv == 2:
            raise bad("TransactionVersion", "2 required, but librdkafka speaks transaction version 1 only (no KIP-890 client support)")
        if tv not in (0, 1):
            raise bad("TransactionVersion", "%d, want 0, 1 or 2" % tv)
        if c.get("txn_id_per_partition"):
            raise bad("TxnIDPerPartition", "the librdkafka adapter's member has one producer (a transactional id per member)")
        self.input = c["input"]
        self.output = c["output"]
        self.rt = rt / 1000.0
        self.max_poll = max_poll or 500
        self.lock = threading.Lock()
        self.first_polled = {}  # partition -> first offset of the last poll: the rewind with nothing committed
        self.closed = False

        base = dict(common)
        base["bootstrap.servers"] = c["bootstrap"]
        base["client.id"] = c.get("client_id") or "fencecheck-librdkafka-member"
        cc = dict(base)
        cc.update({
            "group.id": c["group"],
            "group.protocol": protocol,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 100,
            "socket.timeout.ms": rt,
        })
        if protocol == "classic":
            # Under the consumer protocol the session timeout and heartbeat interval are the
            # group's, set on the cluster (librdkafka ignores these there).
            if session > 0:
                cc["session.timeout.ms"] = session
                cc["heartbeat.interval.ms"] = max(1, min(3000, session // 3))
            if rebalance > 0:
                # librdkafka's JoinGroup rebalance timeout is max.poll.interval.ms, which must
                # not be below the session timeout.
                cc["max.poll.interval.ms"] = max(rebalance, session)
        elif rebalance > 0:
            cc["max.poll.interval.ms"] = rebalance
        # The lease adapter's txn_conf says why these timeouts.
        pc = transactional_conf(base, c["transactional_id"], txn_timeout, min(rt, txn_timeout))
        try:
            self.consumer = Consumer(cc)
        except KafkaException as e:
            raise lib.CallError("invalid_config", False, "build the consumer: %s" % lib.describe_exc(e))
        try:
            self.producer = Producer(pc)
        except KafkaException as e:
            lib.close_consumer(self.consumer)
            raise lib.CallError("invalid_config", False, "build the producer: %s" % lib.describe_exc(e))
        self.consumer.subscribe([self.input])
        # InitProducerId fences the previous producer of the id (a restarted member's) and ends
        # its open transaction. It runs in the background, so member_start answers at once and
        # the member joins the group on its first poll meanwhile; the first transact waits.
        self.ready = threading.Event()
        self.ready_err = None
        threading.Thread(target=self.init, args=(time.monotonic() + self.rt,), daemon=True, name="init-transactions").start()

    def init(self, deadline):
        p = self.producer
        while True:
            try:
                p.init_transactions(max(0.001, deadline - time.monotonic()))
                break
            except BaseException as e:  # noqa: BLE001
                err = self.lib.kafka_error(e)
                # A timed-out init_transactions may be called again and resumes.
                if err is not None and err.retriable() and deadline - time.monotonic() > 0.05 and not self.closed:
                    continue
                self.ready_err = e
                break
        self.ready.set()

    def identity(self):
        try:
            member, gen = group_identity(self.consumer.consumer_group_metadata())
        except KafkaException:
            return "", -1
        return member or (self.consumer.memberid() or ""), gen

    # ---- poll ----

    def poll(self, wait_ms):
        with self.lock:
            deadline = time.monotonic() + max(0, wait_ms) / 1000.0
            out = []
            self.first_polled = {}
            try:
                # The first record waits up to wait_ms; the rest are what is already fetched
                # (consume waits out its whole timeout unless max_poll records come).
                while not out:
                    rem = deadline - time.monotonic()
                    msgs = self.consumer.consume(num_messages=1, timeout=max(0.0, rem))
                    if msgs and self.max_poll > len(msgs):  # consume refuses num_messages 0
                        msgs += self.consumer.consume(num_messages=self.max_poll - len(msgs), timeout=0)
                    for m in msgs:
                        err = m.error()
                        if err is not None:
                            if err.fatal():
                                raise self.lib.CallError(self.lib.kind_of(err), False, "poll: %s" % self.lib.describe_error(err))
                            self.lib.log("member: poll: %s", self.lib.describe_error(err))
                            continue
                        if m.topic() != self.input:
                            continue
                        self.first_polled.setdefault(m.partition(), m.offset())
                        rec = {"partition": m.partition(), "offset": m.offset()}
                        if m.key() is not None:
                            rec["key"] = self.lib.b64(m.key())
                        if m.value() is not None:
                            rec["value"] = self.lib.b64(m.value())
                        out.append(rec)
                    if rem <= 0:
                        break
            except KafkaException as e:
                raise self.lib.CallError(self.lib.kind_of(self.lib.kafka_error(e)), False, "poll: %s" % self.lib.describe_exc(e))
            member, gen = self.identity()
            return {"records": out, "member_id": member, "generation": gen}

    # ---- transact ----

    def transact(self, req):
        with self.lock:
            return self._transact(req)

    def _transact(self, req):
        lib = self.lib
        start = time.monotonic()
        bounded = req.get("timeout_ms") is not None
        left = max(0, int(req.get("timeout_ms"))) / 1000.0 if bounded else 3 * self.rt
        # As the Java member: the transaction up to its commit gets at most twice the request
        # timeout, leaving time for an abort and a rewind; a commit may take the whole bound.
        txn_deadline = start + min(left, 2 * self.rt)
        commit_deadline = start + min(left, 3 * self.rt)
        res = {"outcome": "ok"}

        def fail(kind, unknown, message):
            res["outcome"] = "unknown" if unknown else "fail"
            res["error"] = {"kind": kind, "message": message}

        p = self.producer
        if p is None:
            fail("producer", False, "the member's producer failed earlier: restart it")
            res["restart"] = True
            return res
        if bounded and left == 0:
            fail("client", False, "the call's deadline had passed: no transaction began")
            self.rewind(res)
            return res
        if not self.ready.wait(max(0.0, txn_deadline - time.monotonic())):
            fail("client", False, "init_transactions: no answer within the call's bound")
            self.give_up(res)
            return res
        if self.ready_err is not None:
            fail(kind_of(lib, self.ready_err), False, "init_transactions: %s" % lib.describe_exc(self.ready_err))
            self.give_up(res)
            return res
        offsets = [TopicPartition(self.input, int(o.get("partition") or 0), int(o.get("offset"))) for o in req.get("offsets") or []]
        step = "begin_transaction"
        try:
            p.begin_transaction()
            step = "produce"
            reports = []
            for o in req.get("outputs") or []:
                p.produce(self.output, value=lib.unb64(o.get("value")), key=lib.unb64(o.get("key")),
                          partition=int(o.get("partition") or 0), on_delivery=lambda err, msg: reports.append(err))
            left_over = p.flush(max(0.0, txn_deadline - time.monotonic()))
            failed = [e for e in reports if e is not None]
            if failed:
                raise KafkaException(failed[0])
            if left_over > 0:
                raise lib.CallError("client", False, "%d output(s) not delivered within the call's bound" % left_over)
            step = "send_offsets_to_transaction"
            # The group metadata of now, as a librdkafka user passes it: its generation and
            # member id go into TxnOffsetCommit (v3+), where the group coordinator checks them.
            p.send_offsets_to_transaction(offsets, self.consumer.consumer_group_metadata(),
                                          max(0.001, txn_deadline - time.monotonic()))
        except BaseException as e:  # noqa: BLE001
            # No commit was asked: the transaction can only be aborted.
            if isinstance(e, lib.CallError):
                fail(e.kind, False, "%s: %s" % (step, e))
            else:
                fail(kind_of(lib, e), False, "%s: %s" % (step, lib.describe_exc(e)))
            err = lib.kafka_error(e)
            if err is not None and err.fatal():
                self.give_up(res)
                return res
            if step != "begin_transaction":
                self.abort(res)
            if not res.get("restart"):
                self.rewind(res)
            return res
        try:
            p.commit_transaction(max(0.001, commit_deadline - time.monotonic()))
        except BaseException as e:  # noqa: BLE001
            # The EndTxn went out, or may have (librdkafka retries an EndTxn whose answer did not
            # come): unknown, and the member restarts: the next producer's InitProducerId ends
            # whatever is open.
            fail(kind_of(lib, e), True, "commit_transaction: %s" % lib.describe_exc(e))
            self.give_up(res)
        return res

    def abort(self, res):
        """abort_transaction within a request timeout. librdkafka answers a call that ran out of
        its own timeout with a retriable _TIMED_OUT ("retry call to resume"): the abort is
        called again while time is left, as librdkafka asks."""
        deadline = time.monotonic() + self.rt
        while True:
            try:
                self.producer.abort_transaction(max(0.001, min(self.rt / 2, deadline - time.monotonic())))
                return
            except BaseException as e:  # noqa: BLE001
                err = self.lib.kafka_error(e)
                if err is not None and err.retriable() and not err.fatal() and deadline - time.monotonic() > 0.05:
                    continue
                res["error"]["message"] += "; abort_transaction: %s" % self.lib.describe_exc(e)
                self.give_up(res)
                return

    def give_up(self, res):
        res["restart"] = True
        p, self.producer = self.producer, None
        if p is not None:
            self.lib.destroy(p)

    def rewind(self, res):
        """Seeks every assigned partition back to the group's committed offset (consumer.committed:
        an OffsetFetch with require_stable under read_committed), or where the last poll started
        on it when the group committed nothing there. A fetch that fails restarts the member: its
        position is past the batch."""
        try:
            assigned = [tp for tp in self.consumer.assignment() if tp.topic == self.input]
            if not assigned:
                return
            at = self.consumer.committed(assigned, timeout=max(self.rt / 2, 0.001))
            for tp in at:
                off = tp.offset
                if off < 0:
                    off = self.first_polled.get(tp.partition, -1)
                if off >= 0:
                    self.consumer.seek(TopicPartition(self.input, tp.partition, off))
        except KafkaException as e:
            res["error"]["message"] += "; rewind to the committed offsets: %s" % self.lib.describe_exc(e)
            res["restart"] = True

    def close(self):
        self.closed = True
        with self.lock:
            p, self.producer = self.producer, None
            t = self.lib.close_consumer(self.consumer)
            t.join(min(3.0, self.rt))
            if p is not None:
                self.lib.destroy(p).join(min(3.0, self.rt))


def kind_of(lib, exc):
    err = lib.kafka_error(exc)
    if err is not None and err.code() in GROUP_FENCED_CODES:
        return "fenced"
    return lib.kind_of(err)
