'use strict'
/**
 * fencecheck's exec-protocol adapter on KafkaJS (docs/exec-protocol.md): one JSON request per
 * line on stdin, one JSON answer per line on stdout, logs (ours and KafkaJS's) on stderr.
 *
 * A role is the transactional id topic + "/" + role. acquire builds a NEW transactional producer
 * for it and awaits its first producer.transaction(), which is where KafkaJS sends the
 * transactional InitProducerId (FindCoordinator, then InitProducerId to the coordinator); the
 * answer comes only after that InitProducerId was answered. KafkaJS keeps the producer id and
 * epoch in a closure of its EosManager with no public accessor, so the adapter announces the
 * capability gateway-token: the harness reads the minted pair from the InitProducerId answer its
 * gateway relayed. Writes run producer.transaction() (no I/O once initialized), send, commit on
 * that producer; any failed write drops it and forgets the holding.
 *
 * KafkaJS facts this relies on (kafkajs 2.2.4, src/...):
 *  - producer.connect() sends InitProducerId only for `idempotent: true`, and then a
 *    NON-transactional one (no transactional id, to the metadata's controller broker) on the
 *    producer's idempotent EosManager, which the transactional path never uses
 *    (producer/index.js). The transactional producers here are therefore built with
 *    `idempotent: false`: the transactional message producer is idempotent regardless
 *    (producer/index.js builds it with `idempotent: true`, acks -1, sequences from the
 *    transactional EosManager), and acquire does not depend on reaching the controller broker.
 *  - the first producer.transaction() sends the transactional InitProducerId (retried by the
 *    client's retrier on CONCURRENT_TRANSACTIONS and coordinator errors); later ones only begin
 *    a transaction locally. A transaction with no partitions added ends without an EndTxn
 *    (eosManager commit/abort), so acquire aborts the empty first transaction with no I/O.
 *  - commit sends one EndTxn and does not retry it (eosManager.commit: only the coordinator
 *    lookup is retried). A refusal the coordinator answers from its checks (fenced epoch, invalid
 *    state, ...) therefore means the transaction's only commit request was refused: fail. Errors
 *    it also answers when its transaction-log append failed or timed out stay unknown (see
 *    COMMIT_REFUSED_CODES).
 *  - KafkaJS speaks AddPartitionsToTxn v0-1, EndTxn v0-1, InitProducerId v0-1: transaction
 *    version 1 only (no KIP-890), on any cluster.
 *  - KafkaJS 2.2.4 has no DescribeTransactions (no request definition, no admin call): the
 *    adapter announces no-describe.
 *  - PRODUCER_FENCED (90) is not in KafkaJS's error table (it knows codes up to 88): it surfaces as
 *    KAFKAJS_UNKNOWN_ERROR_CODE "Unknown error code 90", which is mapped to fenced here. Apache
 *    Kafka answers these old request versions INVALID_PRODUCER_EPOCH (47) instead (KIP-588);
 *    kfake answers PRODUCER_FENCED.
 *
 * Reads. KafkaJS's public consumer only reads inside a consumer group (no assign()), and the
 * public admin.fetchTopicOffsets lists every partition of a topic at once, so a read goes through
 * KafkaJS INTERNALS: a Cluster built from require('kafkajs/src/cluster') (isolation level
 * READ_COMMITTED) and its Broker objects: ListOffsets (READ_COMMITTED: latest is the last stable
 * offset; earliest the log start) on the partition's leader, then Fetch at read_committed from
 * the log start up to that LSO. Aborted records are dropped here, as the Java consumer does (the
 * broker leaves that to the client under read_committed): see read and filterCommitted.
 *
 * Every call is bounded by request_timeout_ms: KafkaJS's request timeout is set to it, its retries
 * are bounded (a few, short backoffs), and each call races a deadline. A producer given up on is
 * cut off at its sockets (a socket factory of our own, KafkaJS's public socketFactory option) so
 * that KafkaJS's retriers, which keep going after a caller stopped waiting, cannot reach the
 * cluster later (e.g. a retried InitProducerId minting after acquire answered).
 */

const net = require('net')
const readline = require('readline')

// Everything KafkaJS or anyone prints goes to stderr: stdout carries answers only.
const stdoutWrite = process.stdout.write.bind(process.stdout)
for (const m of ['log', 'info', 'warn', 'debug', 'trace']) console[m] = console.error.bind(console)

const { Kafka, logLevel: LEVELS, Partitioners, CompressionTypes, CompressionCodecs } = require('kafkajs')
// KafkaJS decodes gzip only; other codecs are plugins its users register. franz-go (the harness's
// pipeline input and the conformance suite's) compresses batches with snappy by default, and
// KafkaJS's consumer crashes on a batch it cannot decode ("Snappy compression not implemented"):
// the snappy plugin KafkaJS's documentation names, pinned in package.json.
CompressionCodecs[CompressionTypes.Snappy] = require('kafkajs-snappy')
const KAFKAJS_VERSION = require('kafkajs/package.json').version
// KafkaJS internals (no public API reads a partition outside a consumer group): see reads.
const Cluster = require('kafkajs/src/cluster')
const { createLogger } = require('kafkajs/src/loggers')
const ISOLATION_READ_COMMITTED = 1
// What a fetch's request limit allows beyond its partition's: more than one batch (a batch may be
// up to message.max.bytes, 1 MiB by default).
const FETCH_BATCH_ROOM = 64 << 20

const { startMember } = require('./pipeline')

const VERSION = 1
const NAME = `kafkajs ${KAFKAJS_VERSION} (node ${process.version}, fencecheck kafkajs adapter)`

// ---- logging (stderr) ----

const logLevel = (() => {
  const l = String(process.env.FENCECHECK_KAFKAJS_LOG || 'info').toUpperCase()
  return LEVELS[l] != null ? LEVELS[l] : LEVELS.INFO
})()

function log(msg) {
  process.stderr.write(`${new Date().toISOString()} adapter: ${msg}\n`)
}

const logCreator = () => ({ namespace, label, log: entry }) => {
  const { message, timestamp, logger, ...extra } = entry
  let rest = ''
  try {
    rest = Object.keys(extra).length ? ' ' + JSON.stringify(extra) : ''
  } catch (_) {}
  process.stderr.write(`${timestamp} kafkajs ${label} [${namespace}] ${message}${rest}\n`)
}

process.on('unhandledRejection', e => log(`unhandled rejection (ignored): ${describe(e)}`))
process.on('uncaughtException', e => log(`uncaught exception (ignored): ${describe(e)}`))

// ---- errors ----

class CallError extends Error {
  constructor(kind, unknown, message) {
    super(message)
    this.kind = kind
    this.unknown = unknown
  }
}

class DeadlineError extends Error {
  constructor(what, ms) {
    super(`${what}: no answer within the request timeout (${ms} ms)`)
    this.name = 'DeadlineError'
  }
}

/** The innermost error: KafkaJS wraps retried errors (KafkaJSNumberOfRetriesExceeded, ...). */
function root(e) {
  let seen = 0
  while (e && e.cause && e.cause !== e && seen++ < 10) e = e.cause
  return e
}

/** What the client said: each error of the cause chain with its name, type, code, retriable flag. */
function describe(e) {
  const parts = []
  let seen = 0
  while (e && seen++ < 10) {
    if (!(e instanceof Error)) {
      parts.push(String(e))
      break
    }
    let s = e.name || 'Error'
    const unknownCode = e.type === 'KAFKAJS_UNKNOWN_ERROR_CODE' ? protocolCode(e) : null
    if (unknownCode != null && BROKER_CODES[unknownCode]) {
      // A broker error newer than KafkaJS's table: name it, and keep what KafkaJS said.
      s += ` ${BROKER_CODES[unknownCode]} (code ${unknownCode}, unknown to KafkaJS ${KAFKAJS_VERSION}: ${e.type})`
    } else if (e.type) s += ` ${e.type}`
    if (unknownCode != null && BROKER_CODES[unknownCode]) {
      // named above
    } else if (e.type && e.code != null) s += ` (code ${e.code})`
    else if (e.code) s += ` (${e.code})`
    if (e.retriable != null) s += e.retriable ? ' [retriable]' : ' [not retriable]'
    if (e.retryCount != null) s += ` [after ${e.retryCount} retries]`
    if (e.broker) s += ` [broker ${e.broker}]`
    s += `: ${e.message}`
    parts.push(s)
    if (!e.cause || e.cause === e) break
    e = e.cause
  }
  return parts.join(' <- ')
}

/** The broker error code of a protocol error, also for codes KafkaJS does not know. */
function protocolCode(e) {
  if (!e || e.name !== 'KafkaJSProtocolError' && !e.type) return null
  if (e.type === 'KAFKAJS_UNKNOWN_ERROR_CODE') {
    const m = /Unknown error code (-?\d+)/.exec(e.message || '')
    return m ? Number(m[1]) : null
  }
  return e.code
}

function isProtocolError(e) {
  return !!e && (e.name === 'KafkaJSProtocolError' || e.name === 'KafkaJSOffsetOutOfRange')
}

// Broker error codes KafkaJS 2.2.4 does not know (its table ends at 88) that a transactional
// producer can meet.
const BROKER_CODES = {
  89: 'THROTTLING_QUOTA_EXCEEDED',
  90: 'PRODUCER_FENCED',
  95: 'INVALID_UPDATE_VERSION',
  105: 'TRANSACTIONAL_ID_NOT_FOUND',
  120: 'TRANSACTION_ABORTABLE',
}

const FENCED_CODES = new Set([
  47, // INVALID_PRODUCER_EPOCH
  48, // INVALID_TXN_STATE
  90, // PRODUCER_FENCED (unknown to KafkaJS 2.2.4)
])

// EndTxn errors the transaction coordinator answers from its checks, before it appends anything
// to the transaction log: the commit was refused and cannot happen later. Not
// COORDINATOR_LOAD_IN_PROGRESS (14): the coordinator also answers it after the PrepareCommit
// was appended, when the transaction log's partition left the broker and came back while the
// append waited for its acks; the loader then completes that commit.
const COMMIT_REFUSED_CODES = new Set([
  35, // UNSUPPORTED_VERSION
  42, // INVALID_REQUEST
  47, // INVALID_PRODUCER_EPOCH
  48, // INVALID_TXN_STATE
  49, // INVALID_PRODUCER_ID_MAPPING
  51, // CONCURRENT_TRANSACTIONS
  53, // TRANSACTIONAL_ID_AUTHORIZATION_FAILED
  90, // PRODUCER_FENCED
])

const CLIENT_ERRORS = new Set([
  'DeadlineError',
  'KafkaJSConnectionError',
  'KafkaJSConnectionClosedError',
  'KafkaJSRequestTimeoutError',
  'KafkaJSLockTimeout',
  'KafkaJSBrokerNotFound',
  'KafkaJSGroupCoordinatorNotFound',
  'KafkaJSMetadataNotLoaded',
  'KafkaJSTopicMetadataNotLoaded',
])

/** The protocol's error kind of a KafkaJS error from a producer call. */
function kindOf(e) {
  const r = root(e)
  if (FENCED_CODES.has(protocolCode(r))) return 'fenced'
  if (r && CLIENT_ERRORS.has(r.name)) return 'client'
  if (isProtocolError(r)) return 'producer'
  if (r && r.name && r.name.startsWith('KafkaJS')) return 'client'
  return 'producer'
}

// ---- deadlines and sockets ----

/** Races p against the deadline; p keeps running (its rejection is swallowed) when it loses. */
function within(p, deadline, what) {
  p.catch(() => {})
  const ms = deadline - Date.now()
  if (ms <= 0) return Promise.reject(new DeadlineError(what, config.rt))
  let timer
  return Promise.race([
    p,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new DeadlineError(what, config.rt)), ms)
    }),
  ]).finally(() => clearTimeout(timer))
}

/**
 * A socket factory (KafkaJS's public socketFactory option) whose sockets can all be cut at once.
 * Once killed, every socket it made is destroyed with an error (so KafkaJS rejects what was in
 * flight on it at once) and every new one fails: KafkaJS's retriers, still running after the
 * adapter gave up on a call, cannot reach the cluster again.
 */
function newGate(name) {
  const sockets = new Set()
  let dead = false
  const factory = ({ host, port, ssl, onConnect }) => {
    if (ssl) throw new Error('TLS is not supported behind the gateway')
    if (dead) {
      const s = new net.Socket()
      process.nextTick(() => s.destroy(new Error(`${name}: dropped by the adapter`)))
      return s
    }
    const s = net.connect({ host, port }, onConnect)
    s.setNoDelay(true)
    s.setKeepAlive(true, 60000)
    // A connection the peer closes before it answered anything is reported to KafkaJS as a
    // connection error (what a refused connection gives), not as a clean end: KafkaJS moves on to
    // another seed broker only after a KafkaJSConnectionError, and an 'end' makes a
    // KafkaJSConnectionClosedError, after which a new client retried the same dead seed until its
    // retries ran out (kill-leader, kill-coordinator runs: the gateway accepts, then closes when
    // its upstream dial is refused). Outcomes do not depend on which of the two it is.
    let answered = false
    s.once('data', () => {
      answered = true
    })
    const emit = s.emit
    s.emit = function (event, ...args) {
      if (event === 'end' && !answered) {
        s.destroy(new Error(`connection to ${host}:${port} closed by the peer before any answer`))
        return true
      }
      return emit.call(this, event, ...args)
    }
    sockets.add(s)
    s.on('close', () => sockets.delete(s))
    return s
  }
  return {
    factory,
    // hard: destroy with an error, so that KafkaJS rejects at once what is in flight (and logs
    // it); otherwise close quietly (after a disconnect, nothing is in flight).
    kill(hard = true) {
      dead = true
      for (const s of sockets) hard ? s.destroy(new Error(`${name}: dropped by the adapter`)) : s.destroy()
      sockets.clear()
    },
  }
}

// ---- state ----

const config = {} // set by start
let started = false
let closed = false
let readCluster = null // shared: the KafkaJS internal Cluster reads fetch through
let sharedGate = null
let plain = null // { producer, gate, ready }: registrations, idempotent, outside transactions
let member = null // a pipeline adapter's one member (pipeline.js), after member_start
const roles = new Map()

/** One role's state in this process: at most one holding; acquire and writes in order. */
function state(role) {
  let rs = roles.get(role)
  if (!rs) {
    rs = { held: null, tail: Promise.resolve() }
    roles.set(role, rs)
  }
  return rs
}

function serialized(rs, fn) {
  const run = rs.tail.then(fn, fn)
  rs.tail = run.catch(() => {})
  return run
}

function kafkaClient(gate) {
  return new Kafka({
    clientId: config.clientId,
    brokers: config.brokers,
    connectionTimeout: config.connectionTimeout,
    authenticationTimeout: config.rt,
    requestTimeout: config.rt,
    enforceRequestTimeout: true,
    retry: config.retry,
    socketFactory: gate.factory,
    logLevel,
    logCreator,
  })
}

/**
 * Drops a producer. hard (a call given up on at its deadline, KafkaJS possibly still working on
 * it) cuts its sockets at once; otherwise (KafkaJS finished: answered, refused, or gave up) it
 * disconnects and is cut a moment later if the disconnect hangs.
 */
function drop(p, hard) {
  if (!p) return
  if (hard) p.gate.kill(true)
  const t = setTimeout(() => p.gate.kill(true), Math.min(1000, config.rt))
  p.producer
    .disconnect()
    .catch(() => {})
    .finally(() => {
      clearTimeout(t)
      p.gate.kill(false)
    })
}

/** Whether KafkaJS may still be working on the call that failed with e (we stopped waiting). */
function abandoned(e) {
  return root(e) instanceof DeadlineError
}

function release(rs, h, hard) {
  if (h && rs.held === h) {
    rs.held = null
    drop(h, hard)
  }
}

/**
 * The client settings every KafkaJS client of this process shares (start's, and a pipeline
 * member's member_start): the seeds, the client id, the request timeout and the retries.
 */
function configure({ bootstrap, clientId, rt }) {
  Object.assign(config, {
    bootstrap,
    // A function (KafkaJS calls it whenever it picks a seed broker): a fresh random order each
    // time. KafkaJS takes the seed at a counter that starts at 0 in every client and moves on to
    // the next seed only after a KafkaJSConnectionError (cluster/brokerPool.js compares the
    // error's name exactly), not after a KafkaJSConnectionClosedError, which is what a listener
    // that accepts and then closes gives (the gateway, when its upstream dial is refused). With
    // the list as given, every new producer retried the first seed until its retries ran out
    // while the other brokers were reachable (a coordinator-partition run).
    brokers: async () => shuffled(bootstrap),
    clientId,
    rt,
    // KafkaJS has no rule tying its timeouts to the transaction timeout (kafka-clients refuses a
    // request timeout above it; KafkaJS does not): the request timeout is request_timeout_ms.
    connectionTimeout: Math.max(100, Math.min(1000, Math.floor(rt / 2))),
    // KafkaJS refreshes metadata synchronously, before the call that finds it older than this,
    // from a random broker: a short age puts a Metadata request (to a broker that may be paused
    // or cut off) in front of most calls. It refreshes anyway after a moved leader or a
    // connection error, and looks the transaction coordinator up on every transactional call
    // (FindCoordinator each time, no cache), so the default age (5 min) is kept.
    metadataMaxAge: Number(process.env.FENCECHECK_KAFKAJS_METADATA_MAX_AGE_MS) || 300000,
    // Bounded retries with short backoffs: KafkaJS's defaults (5 retries, 300 ms doubling up to
    // 30 s; an idempotent producer's retries unbounded) could outlast the request timeout.
    retry: retryConfig(rt),
  })
}

function retryConfig(rt = config.rt) {
  return {
    retries: 5,
    initialRetryTime: 50,
    maxRetryTime: Math.max(100, Math.min(1000, Math.floor(rt / 4))),
    factor: 0.2,
    multiplier: 2,
  }
}

// ---- start ----

async function start(c) {
  if (started) throw new CallError('invalid_config', false, 'start: already started')
  const bootstrap = String(c.bootstrap || '')
    .split(',')
    .map(s => s.trim())
    .filter(Boolean)
  if (bootstrap.length === 0) throw new CallError('invalid_config', false, 'Bootstrap: no address')
  const rt = Number(c.request_timeout_ms)
  const lease = Number(c.lease_ms)
  if (!(rt > 0) || !(lease > 0)) {
    throw new CallError('invalid_config', false, 'LeaseDuration and RequestTimeout must be positive')
  }
  if (c.security) throw new CallError('invalid_config', false, 'Security: not supported behind the gateway')
  if (!c.topic) throw new CallError('invalid_config', false, 'Topic: empty')
  const want = Number(c.transaction_version || 0)
  if (want === 2) {
    throw new CallError(
      'invalid_config',
      false,
      `TransactionVersion: 2 required, but KafkaJS ${KAFKAJS_VERSION} speaks transaction version 1 only ` +
        '(AddPartitionsToTxn v0-1, EndTxn v0-1, InitProducerId v0-1; no KIP-890)'
    )
  }
  if (want !== 0 && want !== 1) {
    throw new CallError('invalid_config', false, `TransactionVersion: ${want} is not 0, 1 or 2`)
  }
  configure({ bootstrap, clientId: c.client_id || 'fencecheck-kafkajs', rt })
  Object.assign(config, {
    topic: String(c.topic),
    lease,
    fetchMaxWait: Math.max(1, Math.min(Number(c.fetch_max_wait_ms) || 100, rt)),
    fetchPartitionMax: Number(c.fetch_partition_max) > 0 ? Number(c.fetch_partition_max) : 1 << 20,
  })
  const deadline = Date.now() + rt
  sharedGate = newGate('reader')
  readCluster = new Cluster({
    logger: createLogger({ level: logLevel, logCreator }),
    socketFactory: sharedGate.factory,
    brokers: config.brokers,
    clientId: config.clientId,
    connectionTimeout: config.connectionTimeout,
    authenticationTimeout: config.rt,
    requestTimeout: config.rt,
    enforceRequestTimeout: true,
    metadataMaxAge: config.metadataMaxAge,
    retry: config.retry,
    allowAutoTopicCreation: false,
    isolationLevel: ISOLATION_READ_COMMITTED,
  })
  try {
    // A check that the bootstrap answers, and the reader's warm-up: connect (ApiVersions) and
    // the cluster's brokers (Metadata for no topic: the run's topics do not exist yet).
    await within(readCluster.connect(), deadline, 'connect')
    await within(readCluster.refreshMetadata(), deadline, 'metadata')
  } catch (e) {
    sharedGate.kill(false)
    readCluster = null
    throw new CallError('admin', false, `start: no bootstrap address answered: ${describe(e)}`)
  }
  plain = newPlain()
  plain.ready.catch(e => log(`start: the registration producer did not connect yet: ${describe(e)}`))
  started = true
  return 1
}

// ---- register: an idempotent producer outside transactions ----

function newPlain() {
  const gate = newGate('registration producer')
  const producer = kafkaClient(gate).producer({
    idempotent: true, // connect() sends a non-transactional InitProducerId
    maxInFlightRequests: 1,
    allowAutoTopicCreation: false,
    metadataMaxAge: config.metadataMaxAge,
    createPartitioner: Partitioners.DefaultPartitioner, // unused: every record names its partition
  })
  const p = { producer, gate }
  p.ready = within(producer.connect(), Date.now() + config.rt, 'registration producer connect')
  p.ready.catch(() => {})
  return p
}

async function register(req) {
  const deadline = Date.now() + config.rt
  const p = plain
  try {
    await within(p.ready, deadline, 'registration producer connect')
  } catch (e) {
    // connect sends ApiVersions, Metadata and a non-transactional InitProducerId: no record.
    if (plain === p) {
      drop(p, abandoned(e))
      plain = newPlain()
    }
    throw new CallError(kindOf(e), false, `register: connect: ${describe(e)}`)
  }
  const partition = Number(req.partition || 0)
  try {
    const md = await within(
      p.producer.send({
        topic: req.topic,
        acks: -1,
        timeout: config.rt,
        messages: [{ key: bytes(req.key), value: bytes(req.value), partition }],
      }),
      deadline,
      'produce'
    )
    const m = md.find(x => x.topicName === req.topic && x.partition === partition) || md[0]
    if (!m || m.baseOffset == null) throw new Error(`no offset in the produce answer ${JSON.stringify(md)}`)
    return Number(m.baseOffset)
  } catch (e) {
    // KafkaJS retries a produce (same sequence) after a timeout or a cut connection, so even a
    // refusal can follow an attempt that appended: unknown. The producer is replaced, so that no
    // later registration waits behind its retries or inherits its sequence state.
    if (plain === p) {
      drop(p, abandoned(e))
      plain = newPlain()
    }
    throw new CallError(kindOf(e), true, `register: ${describe(e)}`)
  }
}

// ---- acquire ----

async function acquire(role) {
  const rs = state(role)
  return serialized(rs, async () => {
    release(rs, rs.held, false)
    if (closed) throw new CallError('closed', false, 'transport closed')
    const deadline = Date.now() + config.rt
    const txnId = `${config.topic}/${role}`
    const gate = newGate(`producer ${txnId}`)
    const producer = kafkaClient(gate).producer({
      transactionalId: txnId,
      transactionTimeout: config.lease,
      idempotent: false, // see the header: true would only add a non-transactional InitProducerId
      maxInFlightRequests: 1,
      allowAutoTopicCreation: false,
      metadataMaxAge: config.metadataMaxAge,
      createPartitioner: Partitioners.DefaultPartitioner,
    })
    const h = { producer, gate, txnId }
    try {
      // ApiVersions with a seed broker; nothing about the role is sent.
      await within(producer.connect(), deadline, 'connect')
    } catch (e) {
      drop(h, abandoned(e))
      throw new CallError(kindOf(e), false, `acquire "${role}": connect: ${describe(e)}`)
    }
    let txn
    try {
      // The transactional InitProducerId (FindCoordinator first); KafkaJS retries it.
      txn = await within(producer.transaction(), deadline, 'InitProducerId')
    } catch (e) {
      drop(h, abandoned(e))
      // InitProducerId may have reached the coordinator and minted (even an attempt answered
      // CONCURRENT_TRANSACTIONS aborted the holder's transaction): unknown.
      throw new CallError(kindOf(e), true, `acquire "${role}": InitProducerId: ${describe(e)}`)
    }
    try {
      await txn.abort() // no partitions were added: KafkaJS sends no EndTxn
    } catch (e) {
      drop(h, true)
      throw new CallError('producer', true, `acquire "${role}": end the empty transaction: ${describe(e)}`)
    }
    rs.held = h
  })
}

// ---- writes ----

async function write(role, records) {
  const rs = state(role)
  return serialized(rs, async () => {
    const h = rs.held
    // The harness checks the token (gateway-token); this adapter holds one producer per role.
    if (!h) throw new CallError('not_held', false, `write "${role}": not held`)
    const deadline = Date.now() + config.rt
    let txn
    try {
      txn = await within(h.producer.transaction(), deadline, 'begin')
    } catch (e) {
      release(rs, h, abandoned(e))
      throw new CallError(kindOf(e), false, `write "${role}": begin: ${describe(e)}`)
    }
    const byTopic = new Map()
    for (const r of records) {
      if (!byTopic.has(r.topic)) byTopic.set(r.topic, [])
      byTopic.get(r.topic).push({ key: bytes(r.key), value: bytes(r.value), partition: Number(r.partition || 0) })
    }
    const topicMessages = [...byTopic].map(([topic, messages]) => ({ topic, messages }))
    try {
      // AddPartitionsToTxn (FindCoordinator first), then Produce, retried by KafkaJS.
      await within(txn.sendBatch({ topicMessages, acks: -1, timeout: config.rt }), deadline, 'produce')
    } catch (e) {
      release(rs, h, abandoned(e))
      // No commit was requested: the transaction can only be aborted (by the coordinator, at the
      // transaction timeout or the next InitProducerId), so none of it can ever be committed.
      throw new CallError(kindOf(e), false, `write "${role}": produce: ${describe(e)}`)
    }
    try {
      await within(txn.commit(), deadline, 'commit')
    } catch (e) {
      release(rs, h, abandoned(e))
      // KafkaJS sends EndTxn once (no retry) and throws its answer's error as is (unwrapped; a
      // failed coordinator lookup before it comes wrapped by the retrier). Only the coordinator's
      // refusals before it logs anything mean that no commit can follow: a timeout, a cut
      // connection, or an error the coordinator also answers when its append to the transaction
      // log failed or timed out (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, UNKNOWN_SERVER_ERROR:
      // a PrepareCommit that reaches the log later is completed by the coordinator) is unknown.
      const refused = isProtocolError(e) && COMMIT_REFUSED_CODES.has(protocolCode(e))
      throw new CallError(kindOf(e), !refused, `write "${role}": commit: ${describe(e)}`)
    }
  })
}

// ---- reads ----

/**
 * Every committed record of topic/partition from the log start to the last stable offset taken
 * when the read starts, in offset order, through the INTERNAL Cluster and Broker objects of KafkaJS
 * (there is no public way to fetch a partition outside a consumer group):
 *  - the offsets: Cluster.fetchTopicsOffset for this one partition, ListOffsets v3 on its leader
 *    with isolation_level READ_COMMITTED (the Cluster's isolationLevel), latest (the LSO) and
 *    earliest (the log start). The public admin.fetchTopicOffsets(topic) sends the same
 *    ListOffsets (READ_COMMITTED is the request's default when no isolation level is set) but for
 *    EVERY partition of the topic, so a read failed whenever any partition's leader was out of
 *    reach (a coordinator-partition run), and it does not retry connection errors;
 *  - the records: Broker.fetch at read_committed from the log start, until the LSO.
 * The scan stops at the LSO even when the tail holds only transaction markers. Connection errors
 * and moved leaders are retried (a read has no effect) until the request timeout.
 */
async function read(topic, partition) {
  const deadline = Date.now() + config.rt
  let metadataStale = false
  let retries = 0
  let lastError = null
  // Runs fn(leader broker) until it succeeds, the deadline passes, or it fails for good.
  const onLeader = async (what, fn) => {
    for (;;) {
      try {
        if (metadataStale) {
          await within(readCluster.refreshMetadata(), deadline, 'metadata')
          metadataStale = false
        }
        await within(readCluster.addTargetTopic(topic), deadline, 'metadata')
        await within(readCluster.refreshMetadataIfNecessary(), deadline, 'metadata')
        const leaders = readCluster.findLeaderForPartitions(topic, [partition])
        const nodeId = Object.keys(leaders)[0]
        if (nodeId == null) {
          const e = new Error(`no leader for ${topic}/${partition} in the metadata`)
          e.retriable = true
          throw e
        }
        const broker = await within(readCluster.findBroker({ nodeId }), deadline, 'connect')
        return await within(fn(broker), deadline, what)
      } catch (e) {
        const r = root(e)
        if (r instanceof DeadlineError || Date.now() >= deadline) {
          // Say what the client said before it ran out of time.
          if (lastError) e.message += `; before: ${describe(lastError)}`
          throw e
        }
        const retriable =
          (r && (r.retriable === true || CLIENT_ERRORS.has(r.name))) ||
          ['NOT_LEADER_FOR_PARTITION', 'LEADER_NOT_AVAILABLE', 'UNKNOWN_TOPIC_OR_PARTITION', 'FENCED_LEADER_EPOCH'].includes(r && r.type)
        if (!retriable) throw e
        lastError = e
        if (retries++ === 0) log(`read ${topic}/${partition}: ${what}: ${describe(e)}; again until the request timeout`)
        metadataStale = true
        await sleep(Math.min(Math.min(200, 25 << Math.min(retries, 3)), Math.max(0, deadline - Date.now())))
      }
    }
  }
  const listOffset = (broker, timestamp) =>
    broker
      .listOffsets({
        isolationLevel: ISOLATION_READ_COMMITTED,
        topics: [{ topic, partitions: [{ partition, timestamp }] }],
      })
      .then(resp => {
        for (const t of resp.responses || []) {
          for (const p of t.partitions || []) {
            if (t.topic === topic && p.partition === partition) return BigInt(p.offset)
          }
        }
        throw new Error(`ListOffsets answered no offset for ${topic}/${partition}: ${JSON.stringify(resp)}`)
      })
  try {
    // LATEST under READ_COMMITTED is the last stable offset; EARLIEST the log start offset.
    const [end, low] = await onLeader('list offsets', broker =>
      Promise.all([listOffset(broker, -1), listOffset(broker, -2)])
    )
    let offset = low
    const out = []
    while (offset < end) {
      const resp = await onLeader('fetch', broker =>
        broker.fetch({
          isolationLevel: ISOLATION_READ_COMMITTED,
          maxWaitTime: config.fetchMaxWait,
          minBytes: 1,
          // The request's limit is the partition's plus room for the batch that crosses it, so
          // that the partition's limit is what cuts a long log: kfake leaves the aborted
          // transactions out of a read_committed answer that the REQUEST's limit cut (its aborted
          // records would then read as committed; docs/regressions.md#kfake-deviations,
          // read-committed-aborted-at-fetch-limit), as the Go transport does.
          maxBytes: Math.min(config.fetchPartitionMax + FETCH_BATCH_ROOM, 0x7fffffff),
          topics: [
            { topic, partitions: [{ partition, fetchOffset: offset.toString(), maxBytes: config.fetchPartitionMax }] },
          ],
        })
      )
      const pd = findPartition(resp, topic, partition)
      const next = pd ? filterCommitted(pd, offset, end, out) : offset
      if (next > offset) offset = next
      else {
        // nothing came back: ask again, with fresh metadata
        metadataStale = true
        if (Date.now() >= deadline) throw new DeadlineError(`read up to the last stable offset ${end}`, config.rt)
        await sleep(5)
      }
    }
    return out
  } catch (e) {
    throw new CallError('client', false, `read ${topic}/${partition}: ${describe(e)}`)
  }
}

function findPartition(resp, topic, partition) {
  for (const t of resp.responses || []) {
    if (t.topicName !== topic) continue
    for (const p of t.partitions) if (p.partition === partition) return p
  }
  return null
}

/**
 * Appends the committed data records of one Fetch answer with offsets in [from, end) to out and
 * returns the next offset to fetch (past the last whole batch). KafkaJS decodes the batches and
 * flattens them into records that carry their batch (batchContext); the aborted-transaction
 * filter is the Java consumer's (CompletedFetch): a batch of a producer whose aborted
 * transaction began at or before the batch's last offset is dropped until that producer's abort
 * marker; control batches (markers) are never records.
 */
function filterCommitted(pd, from, end, out) {
  const aborted = (pd.abortedTransactions || [])
    .map(a => ({ producerId: String(a.producerId), firstOffset: BigInt(a.firstOffset) }))
    .sort((a, b) => (a.firstOffset < b.firstOffset ? -1 : a.firstOffset > b.firstOffset ? 1 : 0))
  const abortedProducers = new Set()
  let next = from
  let batch = null
  let batchAborted = false
  for (const m of pd.messages || []) {
    const bc = m.batchContext
    if (!bc) continue // legacy message sets (magic 0/1) cannot hold transactions; none here
    if (bc !== batch) {
      batch = bc
      const last = BigInt(bc.firstOffset) + BigInt(bc.lastOffsetDelta)
      if (last + 1n > next) next = last + 1n
      batchAborted = false
      const pid = String(bc.producerId)
      if (BigInt(bc.producerId) >= 0n) {
        while (aborted.length && aborted[0].firstOffset <= last) abortedProducers.add(aborted.shift().producerId)
        if (bc.isControlBatch) {
          if (isAbortMarker(m)) abortedProducers.delete(pid)
        } else if (bc.inTransaction && abortedProducers.has(pid)) {
          batchAborted = true
        }
      }
    }
    if (bc.isControlBatch || m.isControlRecord || batchAborted) continue
    const off = BigInt(m.offset)
    if (off < from || off >= end) continue
    const rec = { offset: Number(off) }
    if (m.key != null) rec.key = Buffer.from(m.key).toString('base64')
    if (m.value != null) rec.value = Buffer.from(m.value).toString('base64')
    out.push(rec)
  }
  return next
}

/** A control record's key is version (int16) and type (int16): type 0 is ABORT, 1 is COMMIT. */
function isAbortMarker(m) {
  const k = m.key
  return k != null && k.length >= 4 && Buffer.from(k).readInt16BE(2) === 0
}

// ---- dispatch ----

/** What pipeline.js uses of this file. */
function memberLib() {
  return {
    CallError,
    KAFKAJS_VERSION,
    COMMIT_REFUSED_CODES,
    abandoned,
    configure,
    describe,
    isProtocolError,
    kafkaClient,
    kindOf,
    log,
    newGate,
    protocolCode,
    retryConfig: () => retryConfig(),
    within,
  }
}

function bytes(b64) {
  return b64 == null ? null : Buffer.from(b64, 'base64')
}

function shuffled(list) {
  const a = list.slice()
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1))
    ;[a[i], a[j]] = [a[j], a[i]]
  }
  return a
}

function sleep(ms) {
  return new Promise(r => setTimeout(r, ms))
}

async function handle(req) {
  const op = req.op
  switch (op) {
    case 'hello':
      if (Number(req.version) !== VERSION) {
        throw new CallError('invalid_config', false, `hello: protocol version ${req.version}, this adapter speaks ${VERSION}`)
      }
      return {
        version: VERSION,
        name: NAME,
        capabilities: ['gateway-token', 'no-describe'],
        workloads: ['leases', 'pipelines'],
      }
    case 'start':
      return { transaction_version: await start(req.config || {}) }
    case 'member_start':
      if (member || started) throw new CallError('invalid_config', false, 'member_start: this adapter already started')
      if (!req.pipeline || typeof req.pipeline !== 'object') {
        throw new CallError('invalid_config', false, 'member_start without pipeline config')
      }
      member = await startMember(req.pipeline, memberLib())
      return {}
    case 'poll':
    case 'transact':
      if (!member) throw new CallError('invalid_config', false, `${op} before member_start`)
      if (closed) throw new CallError('closed', false, 'member closed')
      if (op === 'poll') {
        try {
          return await member.poll(Number(req.wait_ms || 0))
        } catch (e) {
          throw e instanceof CallError ? e : new CallError(kindOf(e), false, `poll: ${describe(e)}`)
        }
      }
      // transact answers its outcome itself (ok, fail or unknown, restart).
      return { raw: await member.transact(req) }
    default:
  }
  if (!started) throw new CallError('invalid_config', false, `${op} before start`)
  if (closed) throw new CallError('closed', false, 'transport closed')
  const role = String(req.role || '')
  switch (op) {
    case 'acquire':
      await acquire(role)
      return {} // gateway-token: no token
    case 'register':
      return { join_seq: await register(req) }
    case 'write_lease':
      await write(role, [{ topic: req.topic, partition: req.partition, key: req.key, value: req.value }])
      return {}
    case 'write_fenced':
      await write(role, req.records || [])
      return {}
    case 'read_role':
      return { records: await read(String(req.topic), Number(req.partition || 0)) }
    case 'held':
      return roles.get(role) && roles.get(role).held ? { held: true } : {}
    case 'describe':
      throw new CallError('admin', false, `describe: KafkaJS ${KAFKAJS_VERSION} has no DescribeTransactions (capability no-describe)`)
    default:
      throw new CallError('invalid_config', false, `unknown op ${op}`)
  }
}

function answer(id, resp) {
  resp.id = id
  stdoutWrite(JSON.stringify(resp) + '\n')
}

async function serve(req) {
  try {
    const ok = await handle(req)
    if (ok && ok.raw) {
      answer(req.id, ok.raw)
      return
    }
    answer(req.id, { outcome: 'ok', ...ok })
  } catch (e) {
    if (e instanceof CallError) {
      answer(req.id, { outcome: e.unknown ? 'unknown' : 'fail', error: { kind: e.kind, message: e.message } })
    } else {
      // Not classified: we cannot know how far it got.
      answer(req.id, { outcome: 'unknown', error: { kind: 'client', message: `${req.op}: ${describe(e)}` } })
    }
  }
}

async function shutdown() {
  closed = true
  const waits = []
  if (member) waits.push(member.close())
  for (const rs of roles.values()) {
    if (rs.held) {
      const h = rs.held
      rs.held = null
      waits.push(h.producer.disconnect().catch(() => {}).finally(() => h.gate.kill(false)))
    }
  }
  if (plain) waits.push(plain.producer.disconnect().catch(() => {}))
  if (readCluster) waits.push(readCluster.disconnect().catch(() => {}))
  await Promise.race([Promise.all(waits), sleep(Math.min(config.rt || 1000, 2000))])
  if (plain) plain.gate.kill(false)
  if (sharedGate) sharedGate.kill(false)
}

function main() {
  const rl = readline.createInterface({ input: process.stdin, terminal: false })
  const inFlight = new Set()
  let ordered = Promise.resolve() // hello and start, one at a time, in order
  let ending = false
  const finish = async (closeReq) => {
    if (ending) return
    ending = true
    await ordered
    await Promise.allSettled([...inFlight])
    await shutdown()
    if (closeReq) answer(closeReq.id, { outcome: 'ok' })
    process.exit(0)
  }
  rl.on('line', line => {
    if (!line.trim() || ending) return
    let req
    try {
      req = JSON.parse(line)
    } catch (e) {
      log(`not a JSON request: ${line}`)
      return
    }
    switch (req.op) {
      case 'hello':
      case 'start':
        ordered = ordered.then(() => serve(req))
        return
      case 'close':
        finish(req)
        return
      default: {
        const p = ordered.then(() => serve(req))
        inFlight.add(p)
        p.finally(() => inFlight.delete(p))
      }
    }
  })
  rl.on('close', () => finish(null))
}

if (require.main === module) main()
// For quirks.test.js: the error mapping and the socket factory behind the seed-rotation workaround.
else module.exports = { kindOf, describe, newGate, shuffled }
