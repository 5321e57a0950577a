"""Regressions of the kafka-python quirks fencecheck found (README.md, "Quirks found"; the
header of adapter.py): each test passes while the quirk is there and fails, saying so, once a
kafka-python release fixes it; the internals the adapter reads are checked beside them. No
broker: kafka-python's own objects, a producer whose bootstrap address nothing listens on.

    adapters/kafkapython/target/venv/bin/python -m unittest discover -s adapters/kafkapython -p 'quirks_test.py'
    (make test-adapters)
"""

import inspect
import threading
import time
import types
import unittest

import kafka
import kafka.errors as Errors
from kafka import KafkaAdminClient, KafkaProducer
from kafka.cluster import ClusterMetadata
from kafka.producer.transaction_manager import (
    AddPartitionsToTxnHandler, EndTxnHandler, InitProducerIdHandler, ProducerIdAndEpoch,
    TransactionManager, TransactionState,
)
from kafka.protocol.metadata import CoordinatorType

KP = "kafka-python %s" % kafka.__version__
# Nothing listens on the discard port of loopback: a producer built with api_version set does
# not bootstrap, and its requests never get an answer.
NOWHERE = "127.0.0.1:9"


def new_producer(**extra):
    conf = dict(bootstrap_servers=NOWHERE, api_version=(4, 1), transactional_id="quirks",
                metrics_enabled=False, reconnect_backoff_max_ms=100)
    conf.update(extra)
    return KafkaProducer(**conf)


def stop(p):
    p._sender.force_close()
    p.close(timeout=1)


def in_transaction(p, producer_id=1000, epoch=0):
    """Puts p's TransactionManager where init_transactions() and a first send would: a minted
    pair, a transaction begun, a partition added (so its EndTxn must go out)."""
    tm = p._transaction_manager
    tm._transition_to(TransactionState.INITIALIZING)
    tm.set_producer_id_and_epoch(ProducerIdAndEpoch(producer_id, epoch))
    tm._transition_to(TransactionState.READY)
    p.begin_transaction()
    tm._transaction_started = True
    return tm


class Quirks(unittest.TestCase):

    def test_commit_transaction_has_no_timeout(self):
        """commit_transaction() takes no timeout and waits for its EndTxn without a bound:
        max_block_ms does not bound it (Java's commitTransaction throws TimeoutException after
        max.block.ms). The adapter calls begin_commit() and waits on the result itself."""
        params = inspect.signature(KafkaProducer.commit_transaction).parameters
        self.assertNotIn("timeout", params, "%s: commit_transaction takes a timeout now (%s): the quirk is fixed; "
                         "use it in adapter.py's write and update README.md and this regression" % (KP, list(params)))
        p = new_producer(max_block_ms=300)
        try:
            in_transaction(p)
            box = {}

            def commit():
                try:
                    p.commit_transaction()
                    box["outcome"] = "returned"
                except BaseException as e:  # noqa: BLE001
                    box["outcome"] = "raised %s: %s" % (type(e).__name__, e)

            t = threading.Thread(target=commit, daemon=True)
            t.start()
            t.join(2.0)  # more than six times max_block_ms
            self.assertTrue(t.is_alive(), "%s: commit_transaction() with no coordinator ended within 2 s with "
                            "max_block_ms 300 (%s): the quirk is fixed; update README.md and this regression"
                            % (KP, box.get("outcome")))
        finally:
            stop(p)  # the thread stays blocked: nothing will ever complete its result

    def test_refused_epoch_bump_falls_back_to_a_new_mint(self):
        """A KIP-360 epoch bump (InitProducerId with the producer's id and epoch) refused with
        INVALID_PRODUCER_EPOCH, which is how a broker answers InitProducerId v3 for a stale
        epoch, makes a transactional producer send a fresh InitProducerId without its id: a new
        mint on its transactional id, which fences whoever holds it. Java goes to a fatal
        ProducerFencedException there. kafka-python sends v4, which Kafka 2.7+ answers
        PRODUCER_FENCED (fatal), so the fallback needs a broker that answers v3 (2.5, 2.6)."""
        tm = TransactionManager(transactional_id="quirks", transaction_timeout_ms=1000, api_version=(2, 6))
        tm._transition_to(TransactionState.INITIALIZING)
        tm.set_producer_id_and_epoch(ProducerIdAndEpoch(1000, 3))
        tm._transition_to(TransactionState.READY)
        tm.bump_producer_id_and_epoch()  # what the sender does on a Produce's INVALID_PRODUCER_EPOCH
        _, _, bump = tm._pending_requests.pop()
        self.assertIsInstance(bump, InitProducerIdHandler)
        self.assertEqual((bump.request.producer_id, bump.request.producer_epoch), (1000, 3))
        with tm._lock:
            bump.handle_response(types.SimpleNamespace(error_code=Errors.InvalidProducerEpochError.errno,
                                                       producer_id=-1, producer_epoch=-1))
        following = [h for _, _, h in tm._pending_requests if isinstance(h, InitProducerIdHandler)]
        self.assertTrue(following and following[0].request.producer_id == -1,
                        "%s: a refused epoch bump no longer sends a fresh InitProducerId (state %s, pending %s): "
                        "the quirk is fixed; update README.md, docs/findings.md and this regression"
                        % (KP, tm._current_state.name, [type(h).__name__ for _, _, h in tm._pending_requests]))
        self.assertNotEqual(tm._current_state, TransactionState.FATAL_ERROR)

    def test_admin_never_forgets_a_coordinator(self):
        """KafkaAdminClient caches the coordinator FindCoordinator named
        (ClusterMetadata._coordinators) and nothing removes an entry: after NOT_COORDINATOR,
        describe_transactions raises and asks the same broker next time, forever. The adapter
        removes the entry itself and asks again."""
        cluster = ClusterMetadata(bootstrap_servers=NOWHERE)
        key = "quirks/r1"
        cluster._coordinators[(CoordinatorType.TRANSACTION, key)] = 2
        sent = []

        async def send(request, node_id=None, request_timeout_ms=None):
            sent.append(node_id)
            state = types.SimpleNamespace(error_code=Errors.NotCoordinatorError.errno, transactional_id=key,
                                          transaction_state="", producer_id=-1, producer_epoch=-1,
                                          transaction_timeout_ms=0, transaction_start_time_ms=0, topics=[])
            return types.SimpleNamespace(transaction_states=[state])

        admin = object.__new__(KafkaAdminClient)
        admin._manager = types.SimpleNamespace(cluster=cluster, send=send)
        for _ in range(2):
            coro = admin._async_describe_transactions([key])
            with self.assertRaises(Errors.NotCoordinatorError):
                coro.send(None)
        self.assertEqual(sent, [2, 2])
        self.assertEqual(cluster.get_coordinator(key, CoordinatorType.TRANSACTION), 2,
                         "%s: NOT_COORDINATOR now removes the cached coordinator: the quirk is fixed; "
                         "update adapter.py's describe, README.md and this regression" % KP)
        removers = [n for n, f in inspect.getmembers(ClusterMetadata, inspect.isfunction)
                    if "_coordinators" in inspect.getsource(f) and n not in ("__init__", "add_coordinator",
                                                                              "get_coordinator", "__str__")]
        self.assertEqual(removers, [], "%s: ClusterMetadata has a method that touches _coordinators now (%s): "
                         "check whether the quirk is fixed" % (KP, removers))


    def test_a_timed_out_transactional_request_is_fatal(self):
        """A transactional request (InitProducerId, AddPartitionsToTxn, EndTxn) whose connection
        closes with RequestTimedOutError (kafka-python closes the connection when any request on
        it times out, and fails every request in flight with that error) puts the producer in
        FATAL_ERROR ("Could not execute transactional request for unknown reasons"): only a
        KafkaConnectionError is retried. Java treats a request timeout as a disconnection and
        retries the request. Seen in regression/commit-after-timeout-abort: the delayed EndTxn."""
        def handler_after(exc):
            tm = TransactionManager(transactional_id="quirks", transaction_timeout_ms=1000, api_version=(4, 1))
            tm._transition_to(TransactionState.INITIALIZING)
            tm.set_producer_id_and_epoch(ProducerIdAndEpoch(1000, 0))
            tm._transition_to(TransactionState.READY)
            tm.begin_transaction()
            tm._transaction_started = True
            h = EndTxnHandler(tm, True)
            h.on_complete(tm.next_in_flight_request_correlation_id(), exc)
            return tm, h
        tm, h = handler_after(Errors.KafkaConnectionError("closed"))
        self.assertNotEqual(tm._current_state, TransactionState.FATAL_ERROR)
        self.assertTrue(h.is_retry)
        tm, h = handler_after(Errors.RequestTimedOutError("Request timed out after 2000 ms"))
        self.assertEqual(tm._current_state, TransactionState.FATAL_ERROR,
                         "%s: a transactional request that timed out is no longer fatal (state %s): the quirk is "
                         "fixed; update README.md, docs/findings.md and this regression" % (KP, tm._current_state.name))
        self.assertTrue(h.result.failed)


    def test_close_with_a_short_timeout_raises_and_leaves_the_producer_running(self):
        """KafkaProducer.close(timeout=0) flushes first, and the flush raises KafkaTimeoutError
        while a batch is incomplete, before close stops the sender: the producer stays open and
        its sender keeps running (Java's close(Duration.ZERO) fails the incomplete sends and
        stops). The adapter stops a dropped producer with _sender.force_close() first."""
        from kafka.structs import TopicPartition
        p = KafkaProducer(bootstrap_servers=NOWHERE, api_version=(4, 1), metrics_enabled=False,
                          enable_idempotence=False, acks=1)
        try:
            p._accumulator.append(TopicPartition("quirks", 0), None, b"k", b"v", [])
            raised = None
            try:
                p.close(timeout=0)
            except Errors.KafkaTimeoutError as e:
                raised = e
            self.assertIsNotNone(raised, "%s: close(timeout=0) with an incomplete batch no longer raises "
                                 "KafkaTimeoutError: the quirk is fixed; update README.md and this regression" % KP)
            self.assertTrue(p._sender.is_alive() and not p._closed,
                            "%s: close(timeout=0) raised but stopped the producer: update README.md" % KP)
        finally:
            stop(p)


class WhatTheAdapterReads(unittest.TestCase):
    """The internals adapter.py relies on, and the transaction version it reports: these fail
    when an upgrade moves them, before the conformance suite would."""

    def test_the_minted_pair_and_the_commit_internals(self):
        p = new_producer()
        try:
            tm = in_transaction(p, producer_id=4242, epoch=7)
            pe = p._transaction_manager.producer_id_and_epoch
            self.assertEqual((pe.producer_id, pe.epoch), (4242, 7))
            self.assertTrue(callable(tm.begin_commit) and callable(p._sender.wakeup) and callable(p._sender.force_close))
            self.assertTrue(callable(getattr(tm.begin_commit(), "wait")))
        finally:
            stop(p)

    def test_transaction_version_1(self):
        """No KIP-890 part 2: EndTxn and AddPartitionsToTxn at most v3 (TV2 needs EndTxn v5 and
        no AddPartitionsToTxn from the client), Produce at most v9 (TV2: v12)."""
        p = new_producer()
        try:
            tm = p._transaction_manager
            caps = {
                "EndTxn": EndTxnHandler(tm, True).request._max_version,
                "AddPartitionsToTxn": AddPartitionsToTxnHandler(tm, set()).request._max_version,
                "Produce": p._sender._produce_request(0, -1, 1000, [])._max_version,
                "InitProducerId": InitProducerIdHandler(tm, 1000).request._max_version,
            }
        finally:
            stop(p)
        self.assertEqual(caps, {"EndTxn": 3, "AddPartitionsToTxn": 3, "Produce": 9, "InitProducerId": 4},
                         "%s caps the transactional requests differently now: check whether it speaks "
                         "transaction version 2 (adapter.py's start, internal/adapters)" % KP)

    def test_version(self):
        self.assertEqual(kafka.__version__, "3.0.12")


if __name__ == "__main__":
    unittest.main()
