package io.github.fencecheck.adapter;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.DescribeFeaturesOptions;
import org.apache.kafka.clients.admin.FinalizedVersionRange;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.FencedInstanceIdException;
import org.apache.kafka.common.errors.FencedMemberEpochException;
import org.apache.kafka.common.errors.IllegalGenerationException;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.StaleMemberEpochException;
import org.apache.kafka.common.errors.UnknownMemberIdException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * One member of an exactly-once pipeline on kafka-clients (docs/exec-protocol.md, "Pipelines"):
 * a KafkaConsumer in the group at read_committed without auto-commit, and a transactional
 * KafkaProducer, in the loop kafka-clients users write (poll; beginTransaction, send,
 * sendOffsetsToTransaction(offsets, consumer.groupMetadata()), commitTransaction).
 *
 * <p>The harness calls it one call at a time, and the adapter runs every call on one thread, so
 * the consumer (which is not thread-safe) only ever runs there. Producer calls that block (a send
 * waiting for metadata, sendOffsetsToTransaction, commitTransaction, abortTransaction) run on a
 * helper thread and are waited for with the call's bound: kafka-clients has no timeout argument
 * on them, only max.block.ms.
 *
 * <p>After a transaction that did not commit the member aborts and rewinds every assigned
 * partition to the group's committed offset, fetched with consumer.committed (kafka-clients asks
 * require_stable under read_committed, KIP-447). A producer that failed for good (fenced, or its
 * abort failed), or a rewind that could not fetch, ends the member: the answer says restart.
 */
final class PipelineMember {
  private static final JsonNodeFactory NODES = JsonNodeFactory.instance;
  /** How much longer than the request timeout member_start's first requests may take. */
  private static final long STARTUP_GRACE_MS = 25_000;

  private final String input;
  private final String output;
  private final long rtMs;
  private final KafkaConsumer<byte[], byte[]> consumer;
  private final ExecutorService blocking;
  private final ExecutorService closer;
  /** null once the producer failed for good: the member then asks to be restarted. */
  private KafkaProducer<byte[], byte[]> producer;
  /** The producer's initTransactions, begun at member_start; the first transact waits for it. */
  private Future<?> ready;
  /** The first offset per partition of the last poll: where to rewind with nothing committed. */
  private final Map<Integer, Long> lastPolled = new HashMap<>();

  private PipelineMember(String input, String output, long rtMs, KafkaConsumer<byte[], byte[]> consumer,
      KafkaProducer<byte[], byte[]> producer, ExecutorService closer) {
    this.input = input;
    this.output = output;
    this.rtMs = rtMs;
    this.consumer = consumer;
    this.producer = producer;
    this.closer = closer;
    this.blocking = Executors.newCachedThreadPool(r -> {
      Thread t = new Thread(r, "adapter-member-blocking");
      t.setDaemon(true);
      return t;
    });
  }

  long requestTimeoutMs() {
    return rtMs;
  }

  private static Adapter.CallError bad(String field, String why) {
    return new Adapter.CallError("invalid_config", false, field + ": " + why, null);
  }

  /** member_start: validates the config, builds the consumer and the producer, initTransactions. */
  static PipelineMember start(JsonNode c, ExecutorService closer) throws Adapter.CallError {
    String bootstrap = c.path("bootstrap").asText();
    String group = c.path("group").asText();
    String input = c.path("input").asText();
    String output = c.path("output").asText();
    String txnId = c.path("transactional_id").asText();
    String protocol = c.path("protocol").asText("classic");
    long rt = c.path("request_timeout_ms").asLong();
    long session = c.path("session_timeout_ms").asLong();
    long rebalance = c.path("rebalance_timeout_ms").asLong();
    long txnTimeout = c.path("transaction_timeout_ms").asLong();
    int maxPoll = c.path("max_poll").asInt();
    int want = c.path("transaction_version").asInt();
    if (protocol.isEmpty()) {
      protocol = "classic";
    }
    if (bootstrap.isEmpty()) {
      throw bad("Bootstrap", "no address");
    } else if (group.isEmpty()) {
      throw bad("Group", "empty");
    } else if (input.isEmpty()) {
      throw bad("Input", "empty");
    } else if (output.isEmpty() || output.equals(input)) {
      throw bad("Output", "empty, or the input topic");
    } else if (txnId.isEmpty()) {
      throw bad("TransactionalID", "empty");
    } else if (!protocol.equals("classic") && !protocol.equals("consumer")) {
      throw bad("Protocol", "\"" + protocol + "\", want classic or consumer");
    } else if (rt <= 0 || txnTimeout <= 0 || session < 0 || rebalance < 0 || maxPoll < 0) {
      throw bad("RequestTimeout, LeaseDuration, SessionTimeout, RebalanceTimeout, MaxPoll",
          "the timeouts must be positive (request " + rt + " ms, transaction " + txnTimeout + " ms, session " + session
              + " ms, rebalance " + rebalance + " ms), max_poll not negative");
    } else if (c.path("txn_id_per_partition").asBoolean()) {
      throw bad("TxnIDPerPartition", "the java adapter's member has one producer (a transactional id per member)");
    }
    Properties common = new Properties();
    common.put("bootstrap.servers", bootstrap);
    common.put("client.id", c.path("client_id").asText("fencecheck-java"));
    common.put("request.timeout.ms", (int) rt);
    common.put("default.api.timeout.ms", (int) rt);
    common.put("metadata.max.age.ms", (int) Math.max(100, rt / 20 * 20));
    common.put("reconnect.backoff.max.ms", 1000);
    common.put("enable.metrics.push", false);
    long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(rt + STARTUP_GRACE_MS);

    if (want != 0) {
      // kafka-clients follows the cluster's finalized transaction.version: it can honour a pin
      // only where the cluster has that version.
      Properties ap = new Properties();
      ap.putAll(common);
      try (Admin admin = Admin.create(ap)) {
        long left = remainingMs(deadline);
        FinalizedVersionRange r = admin.describeFeatures(new DescribeFeaturesOptions().timeoutMs((int) left))
            .featureMetadata().get(left, TimeUnit.MILLISECONDS).finalizedFeatures().get("transaction.version");
        boolean tv2 = r != null && r.maxVersionLevel() >= 2;
        if (want == 2 && !tv2) {
          throw bad("TransactionVersion", "2 required, but the cluster has not finalized transaction.version 2");
        }
        if (want == 1 && tv2) {
          throw bad("TransactionVersion",
              "kafka-clients cannot pin 1 on a cluster that has finalized transaction.version 2");
        }
      } catch (Adapter.CallError e) {
        throw e;
      } catch (Exception e) {
        throw new Adapter.CallError("admin", false, "no bootstrap address answered: " + e, e);
      }
    }

    Properties cp = new Properties();
    cp.putAll(common);
    cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
    cp.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
    cp.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
    cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    cp.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, 100);
    if (maxPoll > 0) {
      cp.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, maxPoll);
    }
    if (rebalance > 0) {
      // The rebalance timeout of both protocols.
      cp.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, (int) rebalance);
    }
    if (protocol.equals("classic") && session > 0) {
      // Under the consumer protocol the session timeout is the group's, set on the cluster
      // (kafka-clients refuses session.timeout.ms there).
      cp.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, (int) session);
      cp.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, (int) Math.max(1, Math.min(3000, session / 3)));
    }

    Properties pp = new Properties();
    pp.putAll(common);
    pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    pp.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
    pp.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, (int) txnTimeout);
    pp.put(ProducerConfig.LINGER_MS_CONFIG, 0);
    pp.put(ProducerConfig.ACKS_CONFIG, "all");
    // The member bounds each blocking call itself (a helper thread, waited for with the call's
    // bound); max.block.ms only has to outlast a commit stalled by a freeze.
    pp.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, (int) (3 * rt));
    pp.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, (int) rt);

    KafkaConsumer<byte[], byte[]> consumer;
    KafkaProducer<byte[], byte[]> producer;
    try {
      consumer = new KafkaConsumer<>(cp);
    } catch (KafkaException e) {
      throw new Adapter.CallError("invalid_config", false, "build the consumer: " + e, e);
    }
    try {
      producer = new KafkaProducer<>(pp);
    } catch (KafkaException e) {
      closer.execute(() -> consumer.close(CloseOptions.timeout(Duration.ZERO)));
      throw new Adapter.CallError("invalid_config", false, "build the producer: " + e, e);
    }
    PipelineMember m = new PipelineMember(input, output, rt, consumer, producer, closer);
    // InitProducerId fences the previous producer of the id (a restarted member's) and ends its
    // open transaction. It runs in the background, so that member_start answers as soon as the
    // clients are built and the member joins the group on its first poll meanwhile (a cold JVM
    // on a loaded machine took seconds over it, past a scenario's first fault step); the first
    // transact waits for it. A first request may outlast max.block.ms: a timed-out
    // initTransactions may be called again, and resumes.
    m.ready = m.blocking.submit(() -> {
      while (true) {
        try {
          producer.initTransactions();
          return null;
        } catch (org.apache.kafka.common.errors.TimeoutException e) {
          if (remainingMs(deadline) <= 1) {
            throw e;
          }
        }
      }
    });
    // Subscribing does no I/O: the member joins the group on its first poll. The input's
    // metadata warms the consumer's classes and connection meanwhile (a cold consumer's first
    // poll took seconds on a loaded machine); a failure here is only a cold first poll.
    consumer.subscribe(List.of(input));
    try {
      consumer.partitionsFor(input, Duration.ofMillis(Math.min(rt, remainingMs(deadline))));
    } catch (RuntimeException e) {
      // The first poll fetches the metadata again.
    }
    return m;
  }

  // ---- poll ----

  ObjectNode poll(long waitMs) throws Adapter.CallError {
    ConsumerRecords<byte[], byte[]> rs;
    try {
      rs = consumer.poll(Duration.ofMillis(Math.max(0, waitMs)));
    } catch (KafkaException | IllegalStateException e) {
      throw new Adapter.CallError(kindOf(e), false, "poll: " + e, e);
    }
    ObjectNode ok = NODES.objectNode();
    ArrayNode records = ok.putArray("records");
    lastPolled.clear();
    for (ConsumerRecord<byte[], byte[]> r : rs) { // by partition, in offset order
      if (!r.topic().equals(input)) {
        continue;
      }
      lastPolled.putIfAbsent(r.partition(), r.offset());
      ObjectNode n = records.addObject();
      n.put("partition", r.partition());
      n.put("offset", r.offset());
      if (r.key() != null) {
        n.put("key", Base64.getEncoder().encodeToString(r.key()));
      }
      if (r.value() != null) {
        n.put("value", Base64.getEncoder().encodeToString(r.value()));
      }
    }
    ConsumerGroupMetadata md = consumer.groupMetadata();
    ok.put("member_id", md.memberId());
    ok.put("generation", md.generationId());
    return ok;
  }

  // ---- transact ----

  /** What a transact call came to. */
  private static final class Result {
    String outcome = "ok"; // ok, fail, unknown
    String kind;
    String message;
    boolean restart;
    long[] token;

    ObjectNode toJson() {
      ObjectNode n = NODES.objectNode();
      n.put("outcome", outcome);
      if (kind != null) {
        n.putObject("error").put("kind", kind).put("message", message == null ? "" : message);
      }
      if (token != null) {
        n.putObject("token").put("producer_id", token[0]).put("epoch", token[1]);
      }
      if (restart) {
        n.put("restart", true);
      }
      return n;
    }
  }

  ObjectNode transact(JsonNode req) {
    long start = System.nanoTime();
    boolean bounded = req.has("timeout_ms") && !req.path("timeout_ms").isNull();
    long left = bounded ? Math.max(0, req.path("timeout_ms").asLong()) : 3 * rtMs;
    // The transaction up to its commit gets at most twice the request timeout, leaving the
    // harness's bound (three request timeouts, or the time left plus one) for an abort and a
    // rewind; a commit may take the whole bound, since nothing follows a commit that did not
    // answer.
    long txnDeadline = start + TimeUnit.MILLISECONDS.toNanos(Math.min(left, 2 * rtMs));
    long commitDeadline = start + TimeUnit.MILLISECONDS.toNanos(Math.min(left, 3 * rtMs));
    long endDeadline = start + TimeUnit.MILLISECONDS.toNanos(Math.min(left, 2 * rtMs) + rtMs);

    Map<TopicPartition, OffsetAndMetadata> offsets = new LinkedHashMap<>();
    for (JsonNode o : req.path("offsets")) {
      offsets.put(new TopicPartition(input, o.path("partition").asInt()), new OffsetAndMetadata(o.path("offset").asLong()));
    }
    List<ProducerRecord<byte[], byte[]>> outs = new ArrayList<>();
    for (JsonNode o : req.path("outputs")) {
      outs.add(new ProducerRecord<>(output, o.path("partition").asInt(), bytes(o.path("key")), bytes(o.path("value"))));
    }

    Result res = new Result();
    KafkaProducer<byte[], byte[]> p = producer;
    if (p == null) {
      res.outcome = "fail";
      res.kind = "producer";
      res.message = "the member's producer failed earlier: restart it";
      res.restart = true;
      return res.toJson();
    }
    if (bounded && left == 0) {
      // The harness's deadline has passed: no transaction begins; the batch is polled again.
      res.outcome = "fail";
      res.kind = "client";
      res.message = "the call's deadline had passed: no transaction began";
      rewind(res, endDeadline);
      return res.toJson();
    }
    String step = "initTransactions";
    try {
      if (ready != null) {
        try {
          ready.get(remaining(txnDeadline), TimeUnit.NANOSECONDS);
          ready = null;
        } catch (TimeoutException e) {
          res.outcome = "fail";
          res.kind = "client";
          res.message = "initTransactions: no answer within the call's bound";
          giveUp(res);
          return res.toJson();
        } catch (ExecutionException e) {
          // No transaction began; the producer cannot be used.
          res.outcome = "fail";
          res.kind = kindOf(e);
          res.message = "initTransactions: " + cause(e);
          giveUp(res);
          return res.toJson();
        }
      }
      step = "beginTransaction";
      p.beginTransaction();
      res.token = token(p); // the epoch this transaction runs under (TV2 bumps it per commit)
      step = "send";
      List<Future<RecordMetadata>> acks = bounded(() -> {
        List<Future<RecordMetadata>> fs = new ArrayList<>();
        for (ProducerRecord<byte[], byte[]> r : outs) {
          fs.add(p.send(r));
        }
        return fs;
      }, txnDeadline);
      for (Future<RecordMetadata> f : acks) {
        f.get(remaining(txnDeadline), TimeUnit.NANOSECONDS);
      }
      step = "sendOffsetsToTransaction";
      ConsumerGroupMetadata md = consumer.groupMetadata();
      bounded(() -> {
        p.sendOffsetsToTransaction(offsets, md);
        return null;
      }, txnDeadline);
    } catch (Exception e) {
      // No commit was asked: the transaction can only be aborted.
      res.outcome = "fail";
      res.kind = kindOf(e);
      res.message = step + ": " + cause(e);
      if (e instanceof Stuck) {
        // Our own bound: the call still runs on its helper thread, and kafka-clients refuses
        // any other transactional call until it is retried. The producer is given up.
        res.message = step + ": no answer within the call's bound";
        giveUp(res);
        return res.toJson();
      }
      abort(res);
      if (!res.restart) {
        rewind(res, endDeadline);
      }
      return res.toJson();
    }
    try {
      bounded(() -> {
        p.commitTransaction();
        return null;
      }, commitDeadline);
    } catch (Exception e) {
      // The EndTxn went out, or may have: even an error can answer a retry of a commit that
      // took effect. kafka-clients allows only a retry of a commit that timed out, so the
      // member is restarted: the next producer's initTransactions ends the transaction.
      res.outcome = "unknown";
      res.kind = kindOf(e);
      res.message = "commitTransaction: " + (e instanceof Stuck ? e.getMessage() : cause(e));
      giveUp(res);
      return res.toJson();
    }
    return res.toJson();
  }

  /** Aborts the open transaction; a producer that cannot abort is given up. */
  private void abort(Result res) {
    KafkaProducer<byte[], byte[]> p = producer;
    try {
      bounded(() -> {
        p.abortTransaction();
        return null;
      }, System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(Math.max(1, rtMs / 2)));
    } catch (Exception e) {
      res.message = res.message + "; abortTransaction: " + (e instanceof Stuck ? e.getMessage() : cause(e));
      giveUp(res);
    }
  }

  /** Closes the producer for good: the member must be restarted. */
  private void giveUp(Result res) {
    res.restart = true;
    KafkaProducer<byte[], byte[]> p = producer;
    producer = null;
    if (p != null) {
      closer.execute(() -> p.close(Duration.ZERO));
    }
  }

  /**
   * Seeks every assigned partition back to the group's committed offset, fetched stable
   * (consumer.committed asks require_stable under read_committed), or where the last poll
   * started on it when the group committed nothing there. A fetch that fails restarts the
   * member: its position is past the batch.
   */
  private void rewind(Result res, long deadline) {
    try {
      Set<TopicPartition> assigned = consumer.assignment();
      if (assigned.isEmpty()) {
        return;
      }
      long bound = Math.max(TimeUnit.MILLISECONDS.toNanos(Math.max(1, rtMs / 2)), deadline - System.nanoTime());
      Map<TopicPartition, OffsetAndMetadata> at = consumer.committed(assigned, Duration.ofNanos(bound));
      for (TopicPartition tp : assigned) {
        OffsetAndMetadata o = at.get(tp);
        Long first = lastPolled.get(tp.partition());
        if (o != null) {
          consumer.seek(tp, o.offset());
        } else if (first != null) {
          consumer.seek(tp, first);
        }
      }
    } catch (RuntimeException e) {
      res.message = res.message + "; rewind to the committed offsets: " + e;
      res.restart = true;
    }
  }

  /** A blocking producer call that did not return within its bound: it still runs. */
  private static final class Stuck extends Exception {
    private static final long serialVersionUID = 1L;

    Stuck(String message) {
      super(message);
    }
  }

  /**
   * Runs call on a helper thread and waits for it until deadline: its exception comes wrapped
   * in an ExecutionException, and Stuck when it outlasts the deadline.
   */
  private <T> T bounded(Callable<T> call, long deadline) throws Exception {
    Future<T> f = blocking.submit(call);
    try {
      return f.get(remaining(deadline), TimeUnit.NANOSECONDS);
    } catch (TimeoutException e) {
      throw new Stuck("no answer within the call's bound");
    }
  }

  /** Closes the member: the consumer leaves the group, the producer ends. */
  void close(Duration timeout) {
    try {
      consumer.close(CloseOptions.timeout(timeout));
    } catch (RuntimeException e) {
      // Closing: nothing to tell.
    }
    KafkaProducer<byte[], byte[]> p = producer;
    producer = null;
    if (p != null) {
      p.close(timeout);
    }
    blocking.shutdownNow();
  }

  // ---- helpers ----

  private static long[] token(KafkaProducer<byte[], byte[]> p) {
    try {
      return Adapter.Minted.pair(p);
    } catch (ReflectiveOperationException | RuntimeException e) {
      return null; // the token is optional on a transact answer
    }
  }

  private static byte[] bytes(JsonNode n) {
    return n.isMissingNode() || n.isNull() ? null : Base64.getDecoder().decode(n.asText());
  }

  private static long remaining(long deadline) {
    return Math.max(1, deadline - System.nanoTime());
  }

  private static long remainingMs(long deadline) {
    return Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime()));
  }

  static Throwable cause(Throwable e) {
    while ((e instanceof ExecutionException || e.getClass() == KafkaException.class) && e.getCause() != null) {
      e = e.getCause();
    }
    return e;
  }

  /**
   * The seed's kind of a failure: fenced when the producer's epoch or the group's generation
   * (member epoch) was refused, client for a timeout, producer otherwise.
   */
  static String kindOf(Throwable e) {
    for (Throwable c = e; c != null; c = c.getCause()) {
      if (c instanceof ProducerFencedException || c instanceof InvalidProducerEpochException
          || c instanceof CommitFailedException || c instanceof FencedInstanceIdException
          || c instanceof IllegalGenerationException || c instanceof UnknownMemberIdException
          || c instanceof FencedMemberEpochException || c instanceof StaleMemberEpochException) {
        return "fenced";
      }
    }
    Throwable c = cause(e);
    if (c instanceof TimeoutException || c instanceof org.apache.kafka.common.errors.TimeoutException
        || c instanceof InterruptedException || c instanceof org.apache.kafka.common.errors.NetworkException) {
      return "client";
    }
    return "producer";
  }
}
