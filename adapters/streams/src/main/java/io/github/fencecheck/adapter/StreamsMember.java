package io.github.fencecheck.adapter;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.TreeMap;
import java.util.UUID;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaClientSupplier;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.apache.kafka.streams.processor.StreamPartitioner;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;

/**
 * One Kafka Streams instance (one stream thread, exactly_once_v2) that copies the input topic
 * to the output topic through a processor making the pipeline workload's output of each record,
 * and records what Streams did through the producer and consumer it hands Streams
 * (KafkaClientSupplier): each poll's records with the group metadata, and each transaction's
 * inputs, outputs, the offsets and group metadata Streams passed to sendOffsetsToTransaction,
 * the producer's id and epoch, and its outcome.
 *
 * <p>Transactions are numbered from 1 in this adapter; each output carries its transaction's
 * number and this adapter's ref (a random id), which the harness maps to the transaction
 * operation it recorded from the observed event. A transaction's outcome is ok when
 * commitTransaction returned, fail when it ended (aborted, or its producer closed) without a
 * commit ever asked, and unknown when a commit was asked and did not return.
 */
final class StreamsMember {
  private static final String STORE = "fencecheck-aggregates";
  private static final long MIN_REBALANCE_MS = 30_000;

  private final String ref = UUID.randomUUID().toString();
  private final LinkedBlockingQueue<ObjectNode> events = new LinkedBlockingQueue<>();
  private final String input;
  private final String output;
  private final String label;
  private final boolean stateful;
  private final String transactionalId;
  private final long requestTimeoutMs;
  private final Path stateDir;
  private KafkaStreams streams; // under this member's lock, once built
  private boolean closing; // under this member's lock
  private Thread starter;

  // What the stream thread records. Streams runs one thread here, and the processor, the
  // producer and the consumer are all called on it; observe reads only the queue.
  private volatile long lastObserve; // the id of the last observe request received
  private volatile String memberId = "";
  private volatile int generation = -1;
  private volatile String fatal; // why Streams stopped, once it has
  private long txnSeq; // the number of the last transaction begun
  private Txn open; // the transaction open on the producer, if any
  private final List<long[]> pending = new ArrayList<>(); // inputs processed before their transaction began
  private int inputPartition; // the partition of the record being processed (for the sink's partitioner)
  private Set<Integer> revoking; // the input partitions being revoked, while Streams handles their revocation

  /** A transaction as the producer saw it. */
  private static final class Txn {
    final long number;
    final long after;
    final long producerId;
    final int epoch;
    final List<long[]> inputs = new ArrayList<>();
    final TreeMap<Integer, Long> offsets = new TreeMap<>();
    String offsetsMember;
    int offsetsGeneration = -1;
    int outputs;
    boolean commitAsked;
    String errorKind;
    String error;

    Txn(long number, long after, long producerId, int epoch) {
      this.number = number;
      this.after = after;
      this.producerId = producerId;
      this.epoch = epoch;
    }
  }

  private StreamsMember(JsonNode c) throws IOException {
    input = c.path("input").asText();
    output = c.path("output").asText();
    label = c.path("label").asText();
    stateful = c.path("stateful").asBoolean();
    transactionalId = c.path("transactional_id").asText();
    requestTimeoutMs = c.path("request_timeout_ms").asLong();
    stateDir = Files.createTempDirectory("fencecheck-streams-");
  }

  private static Adapter.CallError bad(String field, String why) {
    return new Adapter.CallError("invalid_config", false, field + ": " + why, null);
  }

  static StreamsMember start(JsonNode c) throws Exception {
    String protocol = c.path("protocol").asText("classic");
    if (!protocol.isEmpty() && !protocol.equals("classic")) {
      throw bad("Protocol", "\"" + protocol + "\": a Kafka Streams member runs the classic protocol only"
          + " (Streams does not take KIP-848's consumer protocol; its own, KIP-1071's, is not served here)");
    }
    if (c.path("txn_id_per_partition").asBoolean()) {
      throw bad("TxnIDPerPartition", "exactly_once_v2 has one producer per stream thread");
    }
    if (c.path("transaction_version").asInt() == 1) {
      throw bad("TransactionVersion", "kafka-clients follows the cluster's transaction version and cannot pin 1");
    }
    String[][] required = {{"bootstrap", "Bootstrap"}, {"group", "Group"}, {"input", "Input"}, {"output", "Output"},
        {"transactional_id", "TransactionalID"}};
    for (String[] f : required) {
      if (c.path(f[0]).asText().isEmpty()) {
        throw bad(f[1] + " (" + f[0] + ")", "required");
      }
    }
    long rt = c.path("request_timeout_ms").asLong();
    long session = c.path("session_timeout_ms").asLong();
    long txnTimeout = c.path("transaction_timeout_ms").asLong();
    if (rt <= 0) {
      throw bad("RequestTimeout (request_timeout_ms)", "must be positive");
    }
    if (session <= 0) {
      throw bad("SessionTimeout (session_timeout_ms)", "must be positive");
    }
    if (txnTimeout <= 0) {
      throw bad("LeaseDuration (transaction_timeout_ms, the transaction timeout)", "must be positive");
    }
    StreamsMember m = new StreamsMember(c);
    // Streams is built and started on a thread of its own, and member_start answers at once:
    // on a loaded machine loading Streams' classes took longer than the harness gives hello
    // and member_start together. The member joins the group when it is up; a failure to start
    // is reported by observe (restart, with the error).
    m.starter = new Thread(() -> {
      try {
        KafkaStreams ks = new KafkaStreams(m.topology(), m.config(c), m.new Supplier());
        ks.setUncaughtExceptionHandler(e -> {
          // Streams wraps the cause ("Exception caught in process"): say both.
          m.fatal = e.getCause() == null ? String.valueOf(e) : e + ", caused by " + e.getCause();
          System.err.println("streams adapter: the stream thread died: " + e);
          return StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        ks.setStateListener((now, before) -> {
          System.err.println("streams adapter: state " + before + " -> " + now);
          if (now == KafkaStreams.State.ERROR && m.fatal == null) {
            m.fatal = "Kafka Streams went to state ERROR";
          }
        });
        synchronized (m) {
          if (m.closing) {
            return;
          }
          m.streams = ks;
        }
        ks.start();
      } catch (RuntimeException e) {
        m.fatal = "Kafka Streams did not start: " + e;
        System.err.println("streams adapter: " + m.fatal);
      }
    }, "streams-start");
    m.starter.start();
    return m;
  }

  private Properties config(JsonNode c) {
    long rt = c.path("request_timeout_ms").asLong();
    long session = c.path("session_timeout_ms").asLong();
    // The rebalance timeout is also the classic consumer's max.poll.interval.ms: a stream
    // thread that does not poll within it leaves the group. Streams creates its tasks between
    // polls, which on a loaded machine took longer than the 3 s the pipeline scenarios give
    // their members, so they never left REBALANCING; 30 s at least. A zombie is still taken
    // out by its session timeout, which this does not change.
    long rebalance = Math.max(MIN_REBALANCE_MS, Math.max(session, c.path("rebalance_timeout_ms").asLong()));
    Properties p = new Properties();
    p.put(StreamsConfig.APPLICATION_ID_CONFIG, c.path("group").asText());
    p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, c.path("bootstrap").asText());
    p.put(StreamsConfig.CLIENT_ID_CONFIG, c.path("client_id").asText("fencecheck-streams"));
    p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
    p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
    p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
    p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
    p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.ByteArraySerde.class);
    p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.ByteArraySerde.class);
    // A transaction's outputs and offsets every 100 ms, Streams' default under exactly-once.
    p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
    // A task that cannot commit (a coordinator out of reach) gives up after this, not 5 min.
    p.put(StreamsConfig.TASK_TIMEOUT_MS_CONFIG, 3 * rt);
    p.put(StreamsConfig.REQUEST_TIMEOUT_MS_CONFIG, (int) rt);
    p.put(StreamsConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, 1000);
    p.put(StreamsConfig.METADATA_MAX_AGE_CONFIG, (int) Math.max(100, rt / 20 * 20));
    p.put(StreamsConfig.consumerPrefix("default.api.timeout.ms"), (int) rt);
    p.put(StreamsConfig.mainConsumerPrefix("max.poll.records"), Math.max(1, c.path("max_poll").asInt(10)));
    p.put(StreamsConfig.consumerPrefix("session.timeout.ms"), (int) session);
    p.put(StreamsConfig.consumerPrefix("heartbeat.interval.ms"), (int) Math.max(100, session / 3));
    p.put(StreamsConfig.consumerPrefix("max.poll.interval.ms"), (int) rebalance);
    p.put(StreamsConfig.ENABLE_METRICS_PUSH_CONFIG, false); // Streams' and every client's
    // No JMX reporter: registering Streams' hundreds of metrics as MBeans cost seconds of a
    // start on a loaded machine, and nobody reads them.
    p.put(StreamsConfig.METRIC_REPORTER_CLASSES_CONFIG, "");
    p.put(StreamsConfig.producerPrefix(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG), (int) c.path("transaction_timeout_ms").asLong());
    p.put(StreamsConfig.producerPrefix(ProducerConfig.MAX_BLOCK_MS_CONFIG), (int) rt);
    p.put(StreamsConfig.producerPrefix(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG), (int) (2 * rt + 1000));
    return p;
  }

  /** input → the copier (the workload's output of each record) → output, same partition. */
  private Topology topology() {
    Topology t = new Topology();
    t.addSource("input", input);
    t.addProcessor("copy", Copier::new, "input");
    if (stateful) {
      t.addStateStore(Stores.keyValueStoreBuilder(Stores.inMemoryKeyValueStore(STORE), Serdes.Integer(), Serdes.ByteArray()), "copy");
    }
    StreamPartitioner<byte[], byte[]> samePartition = new SamePartition();
    t.addSink("output", output, new ByteArraySerializer(), new ByteArraySerializer(), samePartition, "copy");
    return t;
  }

  /** Each output to the output partition of its input's number. */
  private final class SamePartition implements StreamPartitioner<byte[], byte[]> {
    @Override
    public Optional<Set<Integer>> partitions(String topic, byte[] key, byte[] value, int n) {
      return Optional.of(Set.of(inputPartition));
    }

    // The single-partition method kafka-streams 3.x declares abstract (4.0 removed it): so
    // the one source builds against an affected 3.9 release too (make streams-adapter
    // STREAMS_VERSION=3.9.0, docs/clients.md, KAFKA-18943); Streams calls partitions above.
    @SuppressWarnings("deprecation")
    public Integer partition(String topic, byte[] key, byte[] value, int n) {
      return inputPartition;
    }
  }

  /**
   * Makes the pipeline workload's output of each input record (history.PipeOutput in
   * checker/history/pipe.go): the input's partition, offset and id, the transaction the output
   * goes out in (this adapter's number, and its ref), the member and generation, and in a
   * stateful run the partition's running count and sum, kept in a state store that Streams
   * restores from its changelog.
   */
  private final class Copier implements Processor<byte[], byte[], byte[], byte[]> {
    private ProcessorContext<byte[], byte[]> ctx;
    private KeyValueStore<Integer, byte[]> store;

    @Override
    public void init(ProcessorContext<byte[], byte[]> context) {
      ctx = context;
      if (stateful) {
        store = context.getStateStore(STORE);
      }
    }

    @Override
    public void process(Record<byte[], byte[]> r) {
      var md = ctx.recordMetadata().orElseThrow();
      int partition = md.partition();
      long offset = md.offset();
      String id = r.value() == null ? "" : new String(r.value(), StandardCharsets.UTF_8);
      ObjectNode o = StreamsAdapter.JSON.createObjectNode();
      o.putObject("in").put("partition", partition).put("offset", offset);
      o.put("id", id);
      o.put("txn", txnFor(partition, offset));
      o.put("ref", ref);
      o.put("member", label);
      if (generation > 0) {
        o.put("generation", generation);
      }
      if (stateful) {
        byte[] prev = store.get(partition);
        ByteBuffer agg = prev == null ? ByteBuffer.allocate(16) : ByteBuffer.wrap(prev);
        long count = agg.getLong(0) + 1;
        long sum = agg.getLong(8) + number(id);
        store.put(partition, ByteBuffer.allocate(16).putLong(count).putLong(sum).array());
        o.put("count", count).put("sum", sum);
      }
      inputPartition = partition;
      ctx.forward(new Record<>(r.key(), o.toString().getBytes(StandardCharsets.UTF_8), r.timestamp()));
    }
  }

  /** An input record "i42" is 42 (the stateful variant sums them). */
  private static long number(String id) {
    try {
      return Long.parseLong(id.startsWith("i") ? id.substring(1) : id);
    } catch (NumberFormatException e) {
      return 0;
    }
  }

  /**
   * The number of the transaction an output made now goes out in, and the input it is made
   * of recorded with it: the open transaction, or, when none is open, the next one, which the
   * output's send begins (Streams serializes an output before its producer begins the
   * transaction, on the same thread).
   */
  private long txnFor(int partition, long offset) {
    if (open != null) {
      open.inputs.add(new long[] {partition, offset});
      return open.number;
    }
    pending.add(new long[] {partition, offset});
    return txnSeq + 1;
  }

  /** The clients Streams runs on: its own, with the main consumer and producer observed. */
  private final class Supplier implements KafkaClientSupplier {
    @Override
    public Admin getAdmin(Map<String, Object> config) {
      return Admin.create(config);
    }

    @Override
    public Producer<byte[], byte[]> getProducer(Map<String, Object> config) {
      // The harness's transactional id, as every member of the workload has: a member that
      // replaces this one fences its producer. Streams' own would name its process id.
      config.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
      return new ObservedProducer(config);
    }

    @Override
    public Consumer<byte[], byte[]> getConsumer(Map<String, Object> config) {
      return new ObservedConsumer(config);
    }

    @Override
    public Consumer<byte[], byte[]> getRestoreConsumer(Map<String, Object> config) {
      return new KafkaConsumer<>(config, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    @Override
    public Consumer<byte[], byte[]> getGlobalConsumer(Map<String, Object> config) {
      return new KafkaConsumer<>(config, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }
  }

  /** Streams' main consumer: each poll that returned records becomes a poll event. */
  private final class ObservedConsumer extends KafkaConsumer<byte[], byte[]> {
    ObservedConsumer(Map<String, Object> config) {
      super(config, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    @Override
    public void subscribe(Collection<String> topics, ConsumerRebalanceListener listener) {
      super.subscribe(topics, new Revocations(listener));
    }

    @Override
    public void subscribe(Pattern pattern, ConsumerRebalanceListener listener) {
      super.subscribe(pattern, new Revocations(listener));
    }

    @Override
    public ConsumerRecords<byte[], byte[]> poll(Duration timeout) {
      ConsumerRecords<byte[], byte[]> rs = super.poll(timeout);
      ConsumerGroupMetadata md = groupMetadata();
      memberId = md.memberId();
      generation = md.generationId();
      if (!rs.isEmpty()) {
        ObjectNode e = event("poll");
        e.put("member_id", md.memberId()).put("generation", md.generationId());
        ArrayNode recs = e.putArray("records");
        for (ConsumerRecord<byte[], byte[]> r : rs) {
          recs.addObject().put("partition", r.partition()).put("offset", r.offset());
        }
        events.add(e);
      }
      return rs;
    }
  }

  /**
   * Streams' rebalance listener, observed: each revocation of input partitions is logged on
   * stderr (the run's harness.log) with the input partitions the open transaction holds
   * outputs of, and whether Streams committed that transaction while it handled the
   * revocation, with which offsets. A transaction committed there with outputs of a partition
   * it sends no offset for is KAFKA-18943 (docs/clients.md); the checker judges it from the
   * transaction's event (eos-offsets-match-output), the log says the window was reached.
   */
  private final class Revocations implements ConsumerRebalanceListener {
    private final ConsumerRebalanceListener streams;

    Revocations(ConsumerRebalanceListener streams) {
      this.streams = streams;
    }

    @Override
    public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
      Set<Integer> revoked = new TreeSet<>();
      for (TopicPartition tp : partitions) {
        if (tp.topic().equals(input)) {
          revoked.add(tp.partition());
        }
      }
      if (revoked.isEmpty()) {
        streams.onPartitionsRevoked(partitions);
        return;
      }
      Set<Integer> held = new TreeSet<>();
      if (open != null) {
        open.inputs.forEach(in -> held.add((int) in[0]));
      }
      pending.forEach(in -> held.add((int) in[0]));
      revoking = revoked;
      try {
        streams.onPartitionsRevoked(partitions);
      } finally {
        revoking = null;
        System.err.println("streams adapter: revoked input partitions " + revoked + " (generation " + generation
            + "); the open transaction held outputs of partitions " + held);
      }
    }

    @Override
    public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
      streams.onPartitionsAssigned(partitions);
    }

    @Override
    public void onPartitionsLost(Collection<TopicPartition> partitions) {
      streams.onPartitionsLost(partitions);
    }
  }

  /** Streams' producer: each transaction becomes a txn event when it ends. */
  private final class ObservedProducer extends KafkaProducer<byte[], byte[]> {
    ObservedProducer(Map<String, Object> config) {
      super(config, new ByteArraySerializer(), new ByteArraySerializer());
    }

    @Override
    public void beginTransaction() {
      super.beginTransaction();
      long pid = -1;
      int epoch = -1;
      try {
        long[] pe = Adapter.Minted.pair(this);
        pid = pe[0];
        epoch = (int) pe[1];
      } catch (ReflectiveOperationException | RuntimeException e) {
        System.err.println("streams adapter: cannot read the producer's id and epoch: " + e);
      }
      txnSeq++;
      open = new Txn(txnSeq, lastObserve, pid, epoch);
      open.inputs.addAll(pending);
      pending.clear();
    }

    @Override
    public java.util.concurrent.Future<RecordMetadata> send(ProducerRecord<byte[], byte[]> r, Callback cb) {
      java.util.concurrent.Future<RecordMetadata> f = super.send(r, cb);
      if (open != null && output.equals(r.topic())) {
        open.outputs++;
      }
      return f;
    }

    @Override
    public void sendOffsetsToTransaction(Map<TopicPartition, OffsetAndMetadata> offsets, ConsumerGroupMetadata md) {
      if (open != null) {
        for (var e : offsets.entrySet()) {
          if (e.getKey().topic().equals(input)) {
            open.offsets.merge(e.getKey().partition(), e.getValue().offset(), Math::max);
          }
        }
        open.offsetsMember = md.memberId();
        open.offsetsGeneration = md.generationId();
      }
      try {
        super.sendOffsetsToTransaction(offsets, md);
      } catch (RuntimeException e) {
        failed(e);
        throw e;
      }
    }

    @Override
    public void commitTransaction() {
      Txn t = open;
      if (t != null) {
        t.commitAsked = true;
        if (revoking != null) {
          Set<Integer> held = new TreeSet<>();
          t.inputs.forEach(in -> held.add((int) in[0]));
          System.err.println("streams adapter: committing txn " + t.number + " while revoking input partitions " + revoking
              + ": outputs of partitions " + held + ", offsets of partitions " + t.offsets.keySet());
        }
      }
      try {
        super.commitTransaction();
      } catch (org.apache.kafka.common.errors.TimeoutException e) {
        // kafka-clients lets Streams retry the commit: the transaction is not over.
        failed(e);
        throw e;
      } catch (RuntimeException e) {
        failed(e);
        end("unknown");
        throw e;
      }
      end("ok");
    }

    @Override
    public void abortTransaction() {
      try {
        super.abortTransaction();
      } catch (RuntimeException e) {
        failed(e);
        end(null);
        throw e;
      }
      end(null);
    }

    @Override
    public void close(Duration timeout) {
      if (open != null) {
        failed(new IllegalStateException("the producer was closed with the transaction open"));
        end(null);
      }
      super.close(timeout);
    }

    @Override
    public void close() {
      close(Duration.ofMillis(Long.MAX_VALUE));
    }

    private void failed(RuntimeException e) {
      if (open != null && open.error == null) {
        open.errorKind = PipelineMember.kindOf(e);
        open.error = String.valueOf(e);
      }
    }

    /** Ends the open transaction: outcome, or (null) fail unless a commit was asked. */
    private void end(String outcome) {
      Txn t = open;
      open = null;
      if (t == null) {
        return;
      }
      if (outcome == null) {
        outcome = t.commitAsked ? "unknown" : "fail";
      }
      ObjectNode e = event("txn");
      e.put("txn", t.number).put("ref", ref).put("after", t.after).put("transactional_id", transactionalId);
      e.put("member_id", t.offsetsMember != null ? t.offsetsMember : memberId);
      e.put("generation", t.offsetsMember != null ? t.offsetsGeneration : generation);
      ArrayNode ins = e.putArray("inputs");
      t.inputs.sort(Comparator.<long[]>comparingLong(x -> x[0]).thenComparingLong(x -> x[1]));
      for (long[] in : t.inputs) {
        ins.addObject().put("partition", (int) in[0]).put("offset", in[1]);
      }
      ArrayNode offs = e.putArray("offsets");
      t.offsets.forEach((p, o) -> offs.addObject().put("partition", p).put("offset", o));
      e.put("outputs", t.outputs);
      if (t.producerId >= 0) {
        e.putObject("token").put("producer_id", t.producerId).put("epoch", t.epoch);
      }
      e.put("outcome", outcome);
      if (!outcome.equals("ok")) {
        e.putObject("error").put("kind", t.errorKind != null ? t.errorKind : "producer")
            .put("message", t.error != null ? t.error : "aborted by Kafka Streams");
      }
      events.add(e);
    }
  }

  private static ObjectNode event(String type) {
    ObjectNode e = StreamsAdapter.JSON.createObjectNode();
    e.put("type", type);
    return e;
  }

  /**
   * The events since the last observe, waiting up to waitMs for the first; restart when
   * Streams stopped (its thread died or it went to ERROR): the harness starts another member.
   */
  ObjectNode observe(long id, long waitMs) throws InterruptedException {
    lastObserve = id;
    ObjectNode resp = StreamsAdapter.JSON.createObjectNode();
    ArrayNode out = resp.putArray("events");
    ObjectNode first = events.poll(Math.max(0, waitMs), TimeUnit.MILLISECONDS);
    if (first != null) {
      out.add(first);
      List<ObjectNode> rest = new ArrayList<>();
      events.drainTo(rest);
      rest.forEach(out::add);
    }
    String why = fatal;
    if (why != null && events.isEmpty()) {
      resp.put("restart", true);
      resp.putObject("error").put("kind", "client").put("message", why);
    }
    return resp;
  }

  /** Closes Streams (it commits what it processed and leaves the group) and says what it did. */
  ObjectNode close() throws InterruptedException {
    KafkaStreams ks;
    synchronized (this) {
      closing = true;
      ks = streams;
    }
    if (ks == null) {
      starter.join(Math.max(1000, requestTimeoutMs)); // not built yet: closing keeps it from starting
      synchronized (this) {
        ks = streams;
      }
    }
    if (ks != null) {
      boolean done = ks.close(Duration.ofMillis(Math.max(1000, requestTimeoutMs)));
      if (!done) {
        System.err.println("streams adapter: Kafka Streams did not close in time");
      }
    }
    ObjectNode resp = StreamsAdapter.JSON.createObjectNode();
    ArrayNode out = resp.putArray("events");
    List<ObjectNode> rest = new ArrayList<>();
    events.drainTo(rest);
    rest.forEach(out::add);
    deleteTree(stateDir);
    return resp;
  }

  private static void deleteTree(Path dir) {
    try (var walk = Files.walk(dir)) {
      walk.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    } catch (IOException e) {
      System.err.println("streams adapter: cannot remove " + dir + ": " + e);
    }
  }
}
