package io.github.fencecheck.adapter;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.Phaser;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.DescribeFeaturesOptions;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.FinalizedVersionRange;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ApiException;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.InvalidTxnStateException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.errors.TransactionalIdNotFoundException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The seed's transport on Apache Kafka's own kafka-clients, behind fencecheck's exec protocol
 * (docs/exec-protocol.md): one JSON request per line on stdin, one JSON answer per line on
 * stdout, logs on stderr.
 *
 * <p>A role is the transactional id topic + "/" + role. acquire builds the role's transactional
 * producer and calls initTransactions (InitProducerId), which mints the fencing token and fences
 * every earlier producer of that id. The token is read from that producer's own
 * TransactionManager by reflection: kafka-clients does not expose the producer id and epoch, and
 * asking the coordinator afterwards (DescribeTransactions) would report whatever holds the role
 * by then, which may be a competitor (see Minted). Writes run in a transaction on the producer
 * bound to the token; any failed write closes that producer and forgets the holding.
 */
public final class Adapter {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final int VERSION = 1;

  private final PrintStream out;
  private final ExecutorService calls = Executors.newCachedThreadPool(daemon("call"));
  private final ExecutorService closer = Executors.newCachedThreadPool(daemon("close"));
  private final ExecutorService memberThread = Executors.newSingleThreadExecutor(daemon("member"));
  private final Phaser inFlight = new Phaser(1);
  private final Map<String, RoleState> roles = new ConcurrentHashMap<>();
  private final ConcurrentLinkedQueue<KafkaConsumer<byte[], byte[]>> idleReaders =
      new ConcurrentLinkedQueue<>();

  private volatile boolean closed;
  private JsonNode config;
  private Properties common;
  private Duration timeout;
  private String topic;
  private long leaseMs;
  private Admin admin;
  private KafkaProducer<byte[], byte[]> plain; // registrations: idempotent, outside transactions
  private volatile PipelineMember member; // a pipeline member's adapter: its one member

  /** This process's view of one role: at most one holding, calls serialized. */
  private static final class RoleState {
    final Object lock = new Object();
    volatile Holding held;
  }

  /** A token this process holds and the producer that minted it. */
  private record Holding(long producerId, short epoch, KafkaProducer<byte[], byte[]> producer) {}

  /** A failed call: the seed's error kind and whether it may have taken effect. */
  static final class CallError extends Exception {
    private static final long serialVersionUID = 1L;
    final String kind;
    final boolean unknown;

    CallError(String kind, boolean unknown, String message, Throwable cause) {
      super(message, cause);
      this.kind = kind;
      this.unknown = unknown;
    }
  }

  Adapter(OutputStream stdout) {
    this.out = new PrintStream(stdout, false, StandardCharsets.UTF_8);
  }

  public static void main(String[] args) throws Exception {
    new Adapter(System.out).run(new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)));
    System.exit(0);
  }

  void run(BufferedReader in) throws Exception {
    String line;
    while ((line = in.readLine()) != null) {
      if (line.isBlank()) {
        continue;
      }
      JsonNode req = JSON.readTree(line);
      String op = req.path("op").asText();
      switch (op) {
        case "hello", "start" -> answer(req, () -> handle(req)); // in order
        case "close" -> {
          inFlight.arriveAndAwaitAdvance(); // every other call answered first
          shutdown();
          answer(req, JSON::createObjectNode);
          return;
        }
        default -> {
          inFlight.register();
          // A pipeline member's calls come one at a time; its consumer is not thread-safe, so
          // they all run on one thread.
          boolean pipe = op.equals("member_start") || op.equals("poll") || op.equals("transact");
          (pipe ? memberThread : calls).execute(() -> {
            try {
              answer(req, () -> handle(req));
            } finally {
              inFlight.arriveAndDeregister();
            }
          });
        }
      }
    }
    shutdown();
  }

  private interface Call {
    ObjectNode run() throws Exception;
  }

  private void answer(JsonNode req, Call call) {
    ObjectNode resp;
    try {
      resp = call.run();
      if (!resp.has("outcome")) { // a transact answer carries its own
        resp.put("outcome", "ok");
      }
    } catch (CallError e) {
      resp = failure(e.kind, e.unknown, e.getMessage());
    } catch (Throwable t) {
      // Not classified: we cannot know how far it got.
      resp = failure("client", true, String.valueOf(t));
    }
    resp.put("id", req.path("id").asLong());
    String line = resp.toString();
    synchronized (out) {
      out.println(line);
      out.flush();
    }
  }

  private static ObjectNode failure(String kind, boolean unknown, String message) {
    ObjectNode resp = JSON.createObjectNode();
    resp.put("outcome", unknown ? "unknown" : "fail");
    resp.putObject("error").put("kind", kind).put("message", message == null ? "" : message);
    return resp;
  }

  private ObjectNode handle(JsonNode req) throws Exception {
    String op = req.path("op").asText();
    ObjectNode ok = JSON.createObjectNode();
    switch (op) {
      case "hello":
        ok.put("version", VERSION);
        ok.put("name", "kafka-clients " + org.apache.kafka.common.utils.AppInfoParser.getVersion() + " (java adapter)");
        ok.putArray("workloads").add("leases").add("pipelines");
        return ok;
      case "start":
        ok.put("transaction_version", start(req.path("config")));
        return ok;
      case "member_start", "poll", "transact":
        return member(op, req);
      default:
    }
    if (config == null) {
      throw new CallError("invalid_config", false, op + " before start", null);
    }
    if (closed) {
      throw new CallError("closed", false, "transport closed", null);
    }
    String role = req.path("role").asText();
    switch (op) {
      case "acquire" -> putToken(ok, acquire(role));
      case "register" -> ok.put("join_seq", register(req));
      case "write_lease" -> {
        List<ProducerRecord<byte[], byte[]>> recs = new ArrayList<>();
        recs.add(new ProducerRecord<>(req.path("topic").asText(), req.path("partition").asInt(),
            bytes(req.path("key")), bytes(req.path("value"))));
        write(role, req.path("token"), recs);
      }
      case "write_fenced" -> {
        List<ProducerRecord<byte[], byte[]>> recs = new ArrayList<>();
        for (JsonNode w : req.path("records")) {
          recs.add(new ProducerRecord<>(w.path("topic").asText(), w.path("partition").asInt(),
              bytes(w.path("key")), bytes(w.path("value"))));
        }
        write(role, req.path("token"), recs);
      }
      case "read_role" -> read(req.path("topic").asText(), req.path("partition").asInt(), ok.putArray("records"));
      case "describe" -> describe(role, ok);
      case "held" -> {
        Holding h = state(role).held;
        if (h != null) {
          ok.put("held", true);
          putToken(ok, h);
        }
      }
      default -> throw new CallError("invalid_config", false, "unknown op " + op, null);
    }
    return ok;
  }

  // ---- pipelines ----

  /** The pipeline calls (docs/exec-protocol.md, "Pipelines"), on the member's one thread. */
  private ObjectNode member(String op, JsonNode req) throws CallError {
    if (closed) {
      throw new CallError("closed", false, "transport closed", null);
    }
    PipelineMember m = member;
    switch (op) {
      case "member_start" -> {
        if (m != null || config != null) {
          throw new CallError("invalid_config", false, "member_start: a second one, or after start", null);
        }
        if (!req.path("pipeline").isObject()) {
          throw new CallError("invalid_config", false, "member_start without pipeline config", null);
        }
        member = PipelineMember.start(req.path("pipeline"), closer);
        return JSON.createObjectNode();
      }
      case "poll" -> {
        if (m == null) {
          throw new CallError("invalid_config", false, "poll before member_start", null);
        }
        return m.poll(req.path("wait_ms").asLong());
      }
      default -> {
        if (m == null) {
          throw new CallError("invalid_config", false, "transact before member_start", null);
        }
        return m.transact(req);
      }
    }
  }

  private static void putToken(ObjectNode resp, Holding h) {
    resp.putObject("token").put("producer_id", h.producerId).put("epoch", h.epoch);
  }

  private static byte[] bytes(JsonNode n) {
    return n.isMissingNode() || n.isNull() ? null : Base64.getDecoder().decode(n.asText());
  }

  private RoleState state(String role) {
    return roles.computeIfAbsent(role, r -> new RoleState());
  }

  // ---- start ----

  /** How much longer than the request timeout start's first contact with the cluster may take. */
  private static final long STARTUP_GRACE_MS = 25_000;

  private int start(JsonNode c) throws CallError {
    String bootstrap = c.path("bootstrap").asText();
    if (bootstrap.isEmpty()) {
      throw new CallError("invalid_config", false, "Bootstrap: no address", null);
    }
    long rt = c.path("request_timeout_ms").asLong();
    leaseMs = c.path("lease_ms").asLong();
    if (rt <= 0 || leaseMs <= 0) {
      throw new CallError("invalid_config", false, "LeaseDuration and RequestTimeout must be positive", null);
    }
    timeout = Duration.ofMillis(rt);
    topic = c.path("topic").asText();
    common = new Properties();
    common.put("bootstrap.servers", bootstrap);
    common.put("client.id", c.path("client_id").asText("fencecheck-java"));
    common.put("request.timeout.ms", (int) rt);
    common.put("default.api.timeout.ms", (int) rt);
    // Metadata is refreshed quickly after a leader or coordinator moves, as the Go transport does.
    common.put("metadata.max.age.ms", (int) Math.max(100, rt / 20 * 20));
    common.put("reconnect.backoff.max.ms", 1000);
    common.put("enable.metrics.push", false);

    Properties ap = new Properties();
    ap.putAll(common);
    admin = Admin.create(ap);
    boolean tv2;
    // The first contact loads the client's classes: on a loaded machine, with a dozen JVMs
    // booting at once, that alone can outlast a request timeout. The harness gives hello and
    // start 30 s more than the request timeout (docs/exec-protocol.md), so this call may take
    // 25 s more.
    long first = rt + STARTUP_GRACE_MS;
    try {
      FeatureMetadata fm = admin.describeFeatures(new DescribeFeaturesOptions().timeoutMs((int) first))
          .featureMetadata().get(first, TimeUnit.MILLISECONDS);
      FinalizedVersionRange r = fm.finalizedFeatures().get("transaction.version");
      tv2 = r != null && r.maxVersionLevel() >= 2;
    } catch (Exception e) {
      admin.close(Duration.ZERO);
      throw new CallError("admin", false, "no bootstrap address answered: " + e, e);
    }
    int want = c.path("transaction_version").asInt();
    if (want == 2 && !tv2) {
      admin.close(Duration.ZERO);
      throw new CallError("invalid_config", false,
          "TransactionVersion: 2 required, but the cluster has not finalized transaction.version 2", null);
    }
    if (want == 1 && tv2) {
      // kafka-clients follows the cluster's finalized transaction.version; it cannot speak TV1
      // to a TV2 cluster, so it cannot honour a pin.
      admin.close(Duration.ZERO);
      throw new CallError("invalid_config", false,
          "TransactionVersion: kafka-clients cannot pin 1 on a cluster that has finalized transaction.version 2", null);
    }
    Properties pp = producerProps();
    pp.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
    plain = new KafkaProducer<>(pp);
    config = c;
    warmUp();
    return tv2 ? 2 : 1;
  }

  /**
   * Runs a reader's cold path once, inside start rather than inside the run. A cold JVM's first
   * read (building a consumer, loading its classes, connecting) took about 2 s on a loaded
   * 2-core machine, which delayed every member's first acquire and moved the first holders'
   * scramble onto a scenario's early fault steps. The harness creates the topics after starting
   * the transports, so this fetches only the cluster's metadata (listTopics creates no topic);
   * the reader is kept for the first read. A failure here is not start's: the reader is dropped.
   */
  private void warmUp() {
    KafkaConsumer<byte[], byte[]> c = newReader();
    try {
      c.listTopics(timeout);
      idleReaders.add(c);
    } catch (RuntimeException e) {
      closer.execute(() -> c.close(CloseOptions.timeout(Duration.ZERO)));
    }
  }

  private Properties producerProps() {
    Properties p = new Properties();
    p.putAll(common);
    p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    p.put(ProducerConfig.LINGER_MS_CONFIG, 0);
    p.put(ProducerConfig.ACKS_CONFIG, "all");
    // Every blocking call (initTransactions, commitTransaction, a send waiting for metadata)
    // ends within the request timeout; the delivery timeout must be at least the request timeout.
    p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, (int) timeout.toMillis());
    p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, (int) timeout.toMillis());
    return p;
  }

  // ---- acquire ----

  private Holding acquire(String role) throws CallError {
    RoleState rs = state(role);
    synchronized (rs.lock) {
      release(rs, rs.held);
      Properties p = producerProps();
      p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, topic + "/" + role);
      p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, (int) leaseMs);
      KafkaProducer<byte[], byte[]> producer;
      try {
        producer = new KafkaProducer<>(p);
      } catch (KafkaException e) {
        throw new CallError("producer", false, "build the producer: " + e, e);
      }
      try {
        producer.initTransactions();
      } catch (Exception e) {
        closeLater(producer);
        // InitProducerId may have reached the coordinator and minted: always unknown.
        throw new CallError(kindOf(e), true, "initTransactions: " + e, e);
      }
      Holding h;
      try {
        h = Minted.token(producer);
      } catch (ReflectiveOperationException | RuntimeException e) {
        closeLater(producer);
        throw new CallError("producer", true,
            "cannot read the minted token from kafka-clients " + org.apache.kafka.common.utils.AppInfoParser.getVersion()
                + " (its internals changed?): " + e, e);
      }
      if (closed) {
        closeLater(producer);
        throw new CallError("closed", false, "transport closed", null);
      }
      rs.held = h;
      return h;
    }
  }

  /**
   * Reads the producer id and epoch that initTransactions just installed in a producer's
   * TransactionManager. kafka-clients has no public accessor: this reads the private fields
   * KafkaProducer.transactionManager and TransactionManager.producerIdAndEpoch, which are
   * internals and may change in any release (the risk; a changed name fails every acquire with a
   * clear error, checked by the conformance suite). It is called right after initTransactions
   * returned and before any transaction began, so no commit (TV2) or epoch bump on the client has
   * moved the pair yet: it is the minted one.
   */
  static final class Minted {
    private static final Field TM;
    private static final Field PID_EPOCH;
    private static final ReflectiveOperationException BROKEN; // the internals are not what we read

    static {
      Field tm = null;
      Field pe = null;
      ReflectiveOperationException broken = null;
      try {
        tm = KafkaProducer.class.getDeclaredField("transactionManager");
        tm.setAccessible(true);
        pe = org.apache.kafka.clients.producer.internals.TransactionManager.class.getDeclaredField("producerIdAndEpoch");
        pe.setAccessible(true);
      } catch (ReflectiveOperationException e) {
        broken = e;
      }
      TM = tm;
      PID_EPOCH = pe;
      BROKEN = broken;
    }

    static Holding token(KafkaProducer<byte[], byte[]> producer) throws ReflectiveOperationException {
      long[] pe = pair(producer);
      return new Holding(pe[0], (short) pe[1], producer);
    }

    /** The producer id and epoch the producer's TransactionManager holds now. */
    static long[] pair(KafkaProducer<byte[], byte[]> producer) throws ReflectiveOperationException {
      if (BROKEN != null) {
        throw BROKEN;
      }
      Object tm = TM.get(producer);
      var pe = (org.apache.kafka.common.utils.ProducerIdAndEpoch) PID_EPOCH.get(tm);
      if (pe == null || !pe.isValid()) {
        throw new IllegalStateException("no valid producer id after initTransactions: " + pe);
      }
      return new long[] {pe.producerId, pe.epoch};
    }
  }

  private void release(RoleState rs, Holding h) {
    if (h != null && rs.held == h) {
      rs.held = null;
      closeLater(h.producer);
    }
  }

  /** Closes a producer in the background: closing waits for in-flight requests. */
  private void closeLater(KafkaProducer<byte[], byte[]> p) {
    closer.execute(() -> p.close(Duration.ZERO));
  }

  // ---- writes ----

  private void write(String role, JsonNode token, List<ProducerRecord<byte[], byte[]>> recs) throws CallError {
    RoleState rs = state(role);
    long deadline = System.nanoTime() + timeout.toNanos();
    synchronized (rs.lock) {
      Holding h = rs.held;
      if (h == null || h.producerId != token.path("producer_id").asLong()
          || h.epoch != (short) token.path("epoch").asInt()) {
        throw new CallError("not_held", false, "write \"" + role + "\": not held", null);
      }
      try {
        h.producer.beginTransaction();
      } catch (Exception e) {
        release(rs, h);
        throw new CallError("producer", false, "beginTransaction: " + e, e);
      }
      List<Future<RecordMetadata>> acks = new ArrayList<>();
      try {
        for (ProducerRecord<byte[], byte[]> r : recs) {
          acks.add(h.producer.send(r));
        }
        for (Future<RecordMetadata> f : acks) {
          f.get(remaining(deadline), TimeUnit.NANOSECONDS);
        }
      } catch (Exception e) {
        release(rs, h);
        // No commit was requested: the transaction can only be aborted, so nothing of it can
        // ever be committed.
        throw new CallError(kindOf(e), false, "produce: " + cause(e), e);
      }
      // commitTransaction blocks up to max.block.ms; bound it by what is left of the call.
      Future<?> commit = calls.submit(() -> {
        h.producer.commitTransaction();
        return null;
      });
      try {
        commit.get(remaining(deadline), TimeUnit.NANOSECONDS);
      } catch (Exception e) {
        release(rs, h); // closing the producer cuts a commit still in flight
        // The EndTxn went out (or may have): even a fencing answer can follow an attempt that
        // committed.
        throw new CallError(kindOf(e), true, "commit: " + cause(e), e);
      }
    }
  }

  private static long remaining(long deadline) {
    return Math.max(1, deadline - System.nanoTime());
  }

  // ---- register ----

  private long register(JsonNode req) throws CallError {
    ProducerRecord<byte[], byte[]> r = new ProducerRecord<>(req.path("topic").asText(), req.path("partition").asInt(),
        bytes(req.path("key")), bytes(req.path("value")));
    try {
      return plain.send(r).get(timeout.toMillis(), TimeUnit.MILLISECONDS).offset();
    } catch (ExecutionException e) {
      Throwable c = e.getCause();
      // A definite refusal by the broker appended nothing; anything else may still land.
      boolean rejected = c instanceof ApiException && !(c instanceof RetriableException);
      throw new CallError(rejected ? "producer" : kindOf(c), !rejected, "register: " + c, c);
    } catch (Exception e) {
      throw new CallError("client", true, "register: " + e, e);
    }
  }

  // ---- reads ----

  private void read(String topic, int partition, ArrayNode records) throws CallError {
    long deadline = System.nanoTime() + timeout.toNanos();
    TopicPartition tp = new TopicPartition(topic, partition);
    KafkaConsumer<byte[], byte[]> c = idleReaders.poll();
    if (c == null) {
      c = newReader();
    }
    boolean healthy = false;
    try {
      c.assign(List.of(tp));
      // Under read_committed, endOffsets is the last stable offset: the scan stops there and does
      // not wait for transactions still open.
      long end = c.endOffsets(List.of(tp), Duration.ofNanos(remaining(deadline))).get(tp);
      c.seekToBeginning(List.of(tp));
      while (c.position(tp, Duration.ofNanos(remaining(deadline))) < end) {
        if (System.nanoTime() > deadline) {
          throw new TimeoutException("read " + tp + " did not reach the last stable offset " + end);
        }
        for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(100)).records(tp)) {
          if (r.offset() >= end) {
            break;
          }
          ObjectNode n = records.addObject();
          n.put("offset", r.offset());
          if (r.key() != null) {
            n.put("key", Base64.getEncoder().encodeToString(r.key()));
          }
          if (r.value() != null) {
            n.put("value", Base64.getEncoder().encodeToString(r.value()));
          }
        }
      }
      healthy = true;
    } catch (Exception e) {
      throw new CallError("client", false, "read " + tp + ": " + e, e);
    } finally {
      if (healthy && !closed) {
        idleReaders.add(c);
      } else {
        KafkaConsumer<byte[], byte[]> dead = c;
        closer.execute(() -> dead.close(CloseOptions.timeout(Duration.ZERO)));
      }
    }
  }

  private KafkaConsumer<byte[], byte[]> newReader() {
    Properties p = new Properties();
    p.putAll(common);
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
    p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, Math.max(1, config.path("fetch_max_wait_ms").asInt(100)));
    return new KafkaConsumer<>(p);
  }

  private void describe(String role, ObjectNode ok) throws CallError {
    String id = topic + "/" + role;
    try {
      TransactionDescription d = admin.describeTransactions(List.of(id)).description(id)
          .get(timeout.toMillis(), TimeUnit.MILLISECONDS);
      if (d.producerId() >= 0) {
        ok.put("held", true);
        ok.putObject("token").put("producer_id", d.producerId()).put("epoch", d.producerEpoch());
      }
    } catch (ExecutionException e) {
      if (e.getCause() instanceof TransactionalIdNotFoundException) {
        return; // no member ever acquired the role
      }
      throw new CallError("admin", false, "describe: " + e.getCause(), e);
    } catch (Exception e) {
      throw new CallError("admin", false, "describe: " + e, e);
    }
  }

  // ---- errors and shutdown ----

  private static Throwable cause(Throwable e) {
    while ((e instanceof ExecutionException || e.getClass() == KafkaException.class) && e.getCause() != null) {
      e = e.getCause();
    }
    return e;
  }

  private static String kindOf(Throwable e) {
    Throwable c = cause(e);
    if (c instanceof ProducerFencedException || c instanceof InvalidProducerEpochException
        || c instanceof InvalidTxnStateException) {
      return "fenced";
    }
    if (c instanceof TimeoutException || c instanceof org.apache.kafka.common.errors.TimeoutException
        || c instanceof InterruptedException || c instanceof org.apache.kafka.common.errors.NetworkException) {
      return "client";
    }
    return "producer";
  }

  private void shutdown() {
    closed = true;
    PipelineMember m = member;
    member = null;
    if (m != null) {
      // The consumer leaves the group; both within the harness's wait for close.
      m.close(Duration.ofMillis(Math.max(1, m.requestTimeoutMs() / 3)));
    }
    for (RoleState rs : roles.values()) {
      Holding h = rs.held;
      rs.held = null;
      if (h != null) {
        h.producer.close(timeout);
      }
    }
    KafkaConsumer<byte[], byte[]> c;
    while ((c = idleReaders.poll()) != null) {
      c.close(CloseOptions.timeout(Duration.ZERO));
    }
    if (plain != null) {
      plain.close(timeout);
    }
    if (admin != null) {
      admin.close(timeout);
    }
    out.flush();
  }

  private static java.util.concurrent.ThreadFactory daemon(String name) {
    return r -> {
      Thread t = new Thread(r, "adapter-" + name);
      t.setDaemon(true);
      return t;
    };
  }
}
