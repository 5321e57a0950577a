/**
 * fencecheck's exec-protocol adapter on @platformatic/kafka (docs/exec-protocol.md): one JSON
 * request per line on stdin, one JSON answer per line on stdout, logs on stderr.
 *
 * A role is the transactional id topic + "/" + role. acquire builds a NEW transactional producer
 * for it (idempotent, transactionalId, timeout = the lease: the client sends its `timeout` option
 * as InitProducerId's transaction_timeout_ms) and calls producer.beginTransaction(), which is
 * where the client sends FindCoordinator and the transactional InitProducerId. The token is what
 * the producer then reports, producer.producerId and producer.producerEpoch: the pair that
 * InitProducerId returned to that producer, read before any transaction of it began (no
 * gateway-token). The local transaction beginTransaction opened is dropped with
 * transaction.cancel() (no I/O). Writes run beginTransaction (no I/O once initialised),
 * transaction.send, transaction.commit on that producer; any failed write closes it and forgets
 * the holding.
 *
 * Facts of @platformatic/kafka 2.12.1 this relies on (dist/..., read in node_modules):
 *  - InitProducerId goes out with producer_id 0 and producer_epoch 0 unless the producer's options
 *    name others (clients/producer/producer.js #initIdempotentProducer: `options.producerId ??
 *    this[kOptions].producerId ?? 0n`). A broker takes (0, 0) as "I am producer 0 at epoch 0"
 *    (KIP-360), not as a new producer (-1, -1): kfake answers INVALID_PRODUCER_ID_MAPPING to the
 *    first acquire of a role, and Apache Kafka PRODUCER_FENCED to any acquire of a role another
 *    producer id holds. Every producer here is built with producerId -1n and producerEpoch -1
 *    (quirks.test.js, test 1).
 *  - The client picks the highest version of each request that both it and the broker know
 *    (clients/base/base.js kGetApi). For AddPartitionsToTxn that is v5 on Kafka 4.x and kfake: a
 *    version Apache Kafka reserves for brokers (v4+ batch transactions for the KIP-890 verification
 *    and need CLUSTER_ACTION where an authorizer runs), and kfake reads only v0-3's fields of it, so
 *    it added no partition and every transactional Produce failed INVALID_TXN_STATE. The adapter
 *    sends v3, the newest client version, with the client's own encoder (addPartitionsToTxnV3:
 *    same arguments), by wrapping the producer's kGetApi (quirks.test.js, test 2).
 *  - The transaction version it speaks is 1 on any cluster: it implements EndTxn up to v4 and
 *    Produce up to v11 (KIP-890's client side needs EndTxn v5 and Produce v12), so a commit does
 *    not bump the epoch. start answers 1 and refuses a required 2.
 *  - The admin client has no describeTransactions, but the package exports DescribeTransactions v0
 *    as a low-level API (describeTransactionsV0): describe is Admin.findCoordinator (TRANSACTION
 *    key), then that API, negotiated by the admin client's kGetApi, on the admin client's
 *    connection to the coordinator, confirmed by up to two other brokers' FindCoordinator as
 *    fencecheck's own transport does (confirmCoordinator). No no-describe.
 *  - The consumer's read_committed filter (clients/consumer/consumer.js #filterUncommittedMessages)
 *    keeps one aborted range per producer id and needs the abort marker in the same answer: when a
 *    fetch answer holds two aborted transactions of one producer (a role's producer id aborts one
 *    transaction per deposed holder), the first one's records come out as committed
 *    (quirks.test.js, test 3). Reads therefore send Fetch themselves, through the consumer's
 *    negotiated Fetch API on its connections, and drop aborted batches as the Java consumer does
 *    (filterCommitted). The last stable offset comes from the public Consumer.listOffsets
 *    (READ_COMMITTED, the consumer's default isolation level).
 *  - ProtocolError marks INVALID_PRODUCER_EPOCH (47) producerFenced but not PRODUCER_FENCED (90),
 *    the code a broker answers the request versions this client sends (errors.js; quirks.test.js,
 *    test 4): the adapter maps both codes (and INVALID_TXN_STATE) to fenced by their codes.
 *  - Retries: kPerformWithRetry retries an error whose chain is all canRetry (connection errors,
 *    CONCURRENT_TRANSACTIONS, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, NOT_ENOUGH_REPLICAS,
 *    ...), `retries` times, `retryDelay` apart; an idempotent producer whose `retries` is unset or
 *    1 or less retries forever. EndTxn is retried too, so a commit's error may follow an attempt
 *    that committed: the adapter counts the EndTxn requests it sent (a kGetApi wrapper) and says
 *    fail only when exactly one went out and the coordinator refused it.
 *  - Closing a client closes its connection pool, which then refuses new connections (not
 *    retriable): a call given up on at its deadline is ended by closing its client, so that no retry
 *    of it reaches the cluster later (a retried InitProducerId minting after acquire answered).
 *
 * Every call is bounded by request_timeout_ms: the client's requestTimeout is set to it, its
 * retries are bounded, and each call races a deadline.
 */

import { readFileSync, realpathSync } from 'node:fs'
import readline from 'node:readline'
import { pathToFileURL } from 'node:url'

// Everything anyone prints goes to stderr: stdout carries answers only.
const stdoutWrite = process.stdout.write.bind(process.stdout)
for (const m of ['log', 'info', 'warn', 'debug', 'trace']) console[m] = console.error.bind(console)

const kafka = await import('@platformatic/kafka')
const {
  Admin,
  Consumer,
  Producer,
  FetchIsolationLevels,
  FindCoordinatorKeyTypes,
  ProduceAcks,
  addPartitionsToTxnV3,
  kGetApi,
  kGetConnection,
  kMetadata,
} = kafka

const CLIENT_VERSION = JSON.parse(
  readFileSync(new URL('./node_modules/@platformatic/kafka/package.json', import.meta.url), 'utf8')
).version

const VERSION = 1
const NAME = `@platformatic/kafka ${CLIENT_VERSION} (node ${process.version}, fencecheck platformatic adapter)`
// What a fetch's request limit allows beyond its partition's: more than one batch (a batch may be
// up to message.max.bytes, 1 MiB by default). kfake leaves the aborted transactions out of a
// read_committed answer that the REQUEST's limit cut (docs/regressions.md#kfake-deviations).
const FETCH_BATCH_ROOM = 64 << 20
const IS_CONTROL = 0x20
const IS_TRANSACTIONAL = 0x10

// ---- logging (stderr) ----

const verbose = /^(1|true|debug)$/i.test(process.env.FENCECHECK_PLATFORMATIC_LOG || '')

function log(msg) {
  process.stderr.write(`${new Date().toISOString()} platformatic-adapter: ${msg}\n`)
}

function debugLog(msg) {
  if (verbose) log(msg)
}

process.on('unhandledRejection', e => log(`unhandled rejection (ignored): ${describe(e)}`))
process.on('uncaughtException', e => log(`uncaught exception (ignored): ${describe(e)}`))

// ---- JSON with 64-bit integers ----

// Producer ids are int64: kfake's exceed 2^53, so they are parsed and written exactly.
export function parseRequest(line) {
  return JSON.parse(line, (key, value, ctx) =>
    key === 'producer_id' && ctx && typeof ctx.source === 'string' ? BigInt(ctx.source) : value
  )
}

export function formatAnswer(obj) {
  return JSON.stringify(obj, (_, v) => (typeof v === 'bigint' ? JSON.rawJSON(v.toString()) : v))
}

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

/** Every error of an error's tree (MultipleErrors' errors, causes), depth first. */
function* walk(e, depth = 0) {
  if (!e || depth > 8) return
  yield e
  if (Array.isArray(e.errors)) for (const x of e.errors) yield* walk(x, depth + 1)
  if (e.cause && e.cause !== e) yield* walk(e.cause, depth + 1)
}

/** The broker error codes in an error's tree (ProtocolError.apiCode), in order. */
export function protocolCodes(e) {
  const out = []
  for (const x of walk(e)) if (typeof x.apiCode === 'number') out.push(x.apiCode)
  return out
}

/** What the client said: each leaf error with its code and broker error name. */
export function describe(e) {
  if (!(e instanceof Error)) return String(e)
  const parts = []
  const leaves = []
  for (const x of walk(e)) {
    if (!(Array.isArray(x.errors) && x.errors.length) && !(x.cause && x.cause instanceof Error)) leaves.push(x)
  }
  const top = e.message || e.name
  for (const x of leaves.length ? leaves : [e]) {
    let s = x.name || 'Error'
    if (x.apiId) s += ` ${x.apiId} (code ${x.apiCode})`
    else if (x.code) s += ` ${x.code}`
    if (x.canRetry != null) s += x.canRetry ? ' [retriable]' : ' [not retriable]'
    s += `: ${x.message}`
    if (x.serverErrorMessage) s += ` (${x.serverErrorMessage})`
    parts.push(s)
  }
  const body = parts.join('; ')
  return leaves.length && leaves[0] !== e ? `${top}: ${body}` : body
}

const FENCED_CODES = new Set([
  47, // INVALID_PRODUCER_EPOCH (the client marks only this one producerFenced)
  48, // INVALID_TXN_STATE
  90, // PRODUCER_FENCED (not marked producerFenced by the client)
])

// EndTxn errors the transaction coordinator answers from its checks, before it appends anything
// to the transaction log: that EndTxn was refused. Not COORDINATOR_LOAD_IN_PROGRESS (14): the
// coordinator also answers it after the PrepareCommit was appended, when the transaction log's
// partition moved while the append waited for its acks; the loader then completes that commit.
const COMMIT_REFUSED_CODES = new Set([
  35, // UNSUPPORTED_VERSION
  42, // INVALID_REQUEST
  47, // INVALID_PRODUCER_EPOCH
  48, // INVALID_TXN_STATE
  49, // INVALID_PRODUCER_ID_MAPPING
  53, // TRANSACTIONAL_ID_AUTHORIZATION_FAILED
  90, // PRODUCER_FENCED
])

/** The protocol's error kind of an error from a producer call. */
export function kindOf(e) {
  const codes = protocolCodes(e)
  if (codes.some(c => FENCED_CODES.has(c))) return 'fenced'
  if (codes.length) return 'producer'
  return 'client'
}

// ---- deadlines ----

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

function abandoned(e) {
  return e instanceof DeadlineError
}

function sleep(ms) {
  return new Promise(r => setTimeout(r, ms))
}

// ---- state ----

const config = {} // set by start
let started = false
let closed = false
let admin = null // describe
let reader = null // reads: a Consumer that never joins its group
let plain = null // { producer }: registrations, idempotent, outside transactions
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

function shuffled(list) {
  const a = list.slice()
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1))
    ;[a[i], a[j]] = [a[j], a[i]]
  }
  return a
}

/** The options every client here shares (c: start's settings). */
function baseOptions(c = config) {
  return {
    clientId: c.clientId,
    // A fresh order per client: each starts at its first seed.
    bootstrapBrokers: shuffled(c.bootstrap),
    connectTimeout: c.connectTimeout,
    // How long the client waits for an answer on a connection (default 30 s).
    requestTimeout: c.rt,
    retries: c.retries,
    retryDelay: c.retryDelay,
    metadataMaxAge: c.metadataMaxAge,
    autocreateTopics: false,
  }
}

/** A producer's options: transactional for txnId, or (txnId null) idempotent outside transactions. */
export function producerOptions(txnId, c = config) {
  return {
    ...baseOptions(c),
    idempotent: true,
    ...(txnId ? { transactionalId: txnId } : {}),
    // See the header: without these the client sends InitProducerId with (0, 0).
    producerId: -1n,
    producerEpoch: -1,
    // The client sends `timeout` as InitProducerId's transaction timeout (and as Produce's
    // timeout_ms): the lease, for a role's producer.
    timeout: txnId ? c.lease : c.rt,
    acks: ProduceAcks.ALL,
  }
}

/**
 * Requests the client sent, by name, counted in kGetApi (which every request of the producer
 * goes through just before it is sent). AddPartitionsToTxn is held at v3: see the header.
 */
const kWrapped = Symbol('fencecheck.wrapped')

// The request versions this process sent, logged once each with FENCECHECK_PLATFORMATIC_LOG=debug:
// what the transaction version the client speaks rests on (docs/clients.md).
const versionsSeen = new Set()
function noteVersion(name, version) {
  const k = `${name} v${version}`
  if (verbose && !versionsSeen.has(k)) {
    versionsSeen.add(k)
    log(`sent ${k}`)
  }
}

export function instrument(client, counts) {
  const getApi = client[kGetApi].bind(client)
  client[kGetApi] = (name, callback) =>
    getApi(name, (error, api) => {
      // The client's kGetApi calls itself (this wrapper) once it has listed the broker's APIs:
      // an API wrapped there is not wrapped again.
      if (error || api[kWrapped]) return callback(error, api)
      const inner = name === 'AddPartitionsToTxn' && api.version > 3 ? addPartitionsToTxnV3.api : api
      const wrapped = function (...args) {
        if (counts) counts[name] = (counts[name] || 0) + 1
        noteVersion(name, inner.version)
        return inner(...args)
      }
      wrapped.version = inner.version
      wrapped.key = inner.key
      wrapped.async = inner.async
      wrapped[kWrapped] = true
      callback(null, wrapped)
    })
  return client
}

/** A new producer (producerOptions), its requests counted in counts. */
function newProducer(txnId, counts) {
  return instrument(new Producer(producerOptions(txnId)), counts)
}

/**
 * Closes a client; closing its pool stops its retries from reaching the cluster. Producer and
 * Consumer take close(force, callback), Admin (Base) close(callback) only.
 */
function closeClient(client) {
  try {
    return (client instanceof Admin ? client.close() : client.close(true)).catch(e => debugLog(`close: ${describe(e)}`))
  } catch (e) {
    debugLog(`close: ${describe(e)}`)
    return Promise.resolve()
  }
}

function drop(client) {
  if (client) closeClient(client)
}

function release(rs, h) {
  if (h && rs.held === h) {
    rs.held = null
    drop(h.producer)
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
      `TransactionVersion: 2 required, but @platformatic/kafka ${CLIENT_VERSION} speaks transaction version 1 only ` +
        '(EndTxn up to v4, Produce up to v11; no KIP-890)'
    )
  }
  if (want !== 0 && want !== 1) {
    throw new CallError('invalid_config', false, `TransactionVersion: ${want} is not 0, 1 or 2`)
  }
  Object.assign(config, {
    bootstrap,
    clientId: c.client_id || 'fencecheck-platformatic',
    topic: String(c.topic),
    rt,
    lease,
    fetchMaxWait: Math.max(1, Math.min(Number(c.fetch_max_wait_ms) || 100, rt)),
    fetchPartitionMax: Number(c.fetch_partition_max) > 0 ? Number(c.fetch_partition_max) : 1 << 20,
    connectTimeout: Math.max(100, Math.min(1000, Math.floor(rt / 2))),
    // Short, bounded retries: the defaults (3 retries 1 s apart; an idempotent producer's
    // forever) either outlast the request timeout or give up on a moving coordinator too soon.
    retries: 8,
    retryDelay: Math.max(20, Math.min(250, Math.floor(rt / 20))),
    // The client refreshes a topic's metadata before a call that finds it older than this (a
    // Metadata request in front of the call); it also refreshes after a moved leader or a
    // connection error. The default is 5 s.
    metadataMaxAge: Number(process.env.FENCECHECK_PLATFORMATIC_METADATA_MAX_AGE_MS) || 5000,
  })
  const deadline = Date.now() + rt + 20000 // hello and start get 30 s more than the request timeout
  admin = instrument(new Admin(baseOptions()))
  reader = instrument(new Consumer({
    ...baseOptions(),
    // The Consumer requires a group id; this one never joins it (no consume, no commit).
    groupId: `${config.clientId}-reader`,
    autocommit: false,
    isolationLevel: FetchIsolationLevels.READ_COMMITTED,
  }))
  try {
    // A check that the bootstrap answers, and the warm-up: ApiVersions and Metadata (no topic:
    // the run's topics do not exist yet) for the admin and the reader.
    await within(admin.metadata({ topics: [] }), deadline, 'admin metadata')
    await within(reader.metadata({ topics: [] }), deadline, 'reader metadata')
  } catch (e) {
    drop(admin)
    drop(reader)
    admin = reader = null
    throw new CallError('admin', false, `start: no bootstrap address answered: ${describe(e)}`)
  }
  plain = { producer: newProducer(null) }
  started = true
  return 1
}

// ---- register: an idempotent producer outside transactions ----

async function register(req) {
  const deadline = Date.now() + config.rt
  const p = plain
  const partition = Number(req.partition || 0)
  try {
    const res = await within(
      p.producer.send({
        messages: [{ topic: req.topic, partition, key: bytes(req.key), value: bytes(req.value) }],
        acks: ProduceAcks.ALL,
      }),
      deadline,
      'produce'
    )
    const o = (res.offsets || []).find(x => x.topic === req.topic && x.partition === partition) || (res.offsets || [])[0]
    if (!o || o.offset == null) throw new Error(`no offset in the produce answer ${formatAnswer(res)}`)
    return Number(o.offset)
  } catch (e) {
    // The client retries a produce (same sequence) after a cut connection, so even a refusal
    // can follow an attempt that appended: unknown. The producer is replaced, so that no later
    // registration waits behind its retries or inherits its sequence state.
    if (plain === p) {
      drop(p.producer)
      plain = { producer: newProducer(null) }
    }
    throw new CallError(kindOf(e), true, `register: ${describe(e)}`)
  }
}

// ---- acquire ----

async function acquire(role) {
  const rs = state(role)
  return serialized(rs, async () => {
    release(rs, rs.held)
    if (closed) throw new CallError('closed', false, 'transport closed')
    const deadline = Date.now() + config.rt
    const txnId = `${config.topic}/${role}`
    const counts = {}
    const producer = newProducer(txnId, counts)
    let tx
    try {
      // FindCoordinator, then the transactional InitProducerId on the coordinator, retried.
      tx = await within(producer.beginTransaction(), deadline, 'InitProducerId')
    } catch (e) {
      drop(producer)
      // No InitProducerId sent (the coordinator lookup failed): nothing was minted. Otherwise
      // it may have reached the coordinator and minted (even an attempt answered
      // CONCURRENT_TRANSACTIONS aborted the holder's transaction): unknown.
      const sent = (counts.InitProducerId || 0) > 0
      throw new CallError(kindOf(e), sent, `acquire "${role}": ${sent ? 'InitProducerId' : 'coordinator lookup'}: ${describe(e)}`)
    }
    const token = { producer_id: producer.producerId, epoch: producer.producerEpoch }
    try {
      await tx.cancel() // the local transaction beginTransaction opened: no I/O
    } catch (e) {
      drop(producer)
      throw new CallError('producer', true, `acquire "${role}": cancel the empty transaction: ${describe(e)}`)
    }
    if (typeof token.producer_id !== 'bigint' || typeof token.epoch !== 'number') {
      drop(producer)
      throw new CallError('producer', true, `acquire "${role}": the producer reports no id and epoch after InitProducerId`)
    }
    rs.held = { producer, token, counts, txnId }
    debugLog(`acquire ${role}: ${token.producer_id}/${token.epoch}`)
    return token
  })
}

// ---- writes ----

function sameToken(a, b) {
  return !!a && !!b && BigInt(a.producer_id) === BigInt(b.producer_id) && Number(a.epoch) === Number(b.epoch)
}

async function write(role, token, records) {
  const rs = state(role)
  return serialized(rs, async () => {
    const h = rs.held
    if (!h || !sameToken(h.token, token)) {
      throw new CallError('not_held', false, `write "${role}": not held${h ? ` (holding ${h.token.producer_id}/${h.token.epoch})` : ''}`)
    }
    const p = h.producer
    if (p.producerId !== h.token.producer_id || p.producerEpoch !== h.token.epoch) {
      // The client dropped or changed its producer state (it does after a fencing error): a
      // beginTransaction would send a new InitProducerId. Nothing is sent.
      release(rs, h)
      throw new CallError('not_held', false, `write "${role}": the producer no longer reports the minted pair`)
    }
    const deadline = Date.now() + config.rt
    const mintsBefore = h.counts.InitProducerId || 0
    let tx
    try {
      // No I/O once initialised (unless the coordinator must be looked up again).
      tx = await within(p.beginTransaction(), deadline, 'begin')
    } catch (e) {
      release(rs, h)
      // Not expected to send anything but a coordinator lookup; if it sent an InitProducerId,
      // that may have minted.
      const minted = (h.counts.InitProducerId || 0) !== mintsBefore
      throw new CallError(kindOf(e), minted, `write "${role}": begin: ${describe(e)}`)
    }
    if ((h.counts.InitProducerId || 0) !== mintsBefore) {
      // Never seen: beginTransaction minted again. That fenced whoever held the role.
      release(rs, h)
      throw new CallError('producer', true, `write "${role}": beginTransaction sent an InitProducerId of its own`)
    }
    const messages = records.map(r => ({
      topic: String(r.topic),
      partition: Number(r.partition || 0),
      key: bytes(r.key),
      value: bytes(r.value),
    }))
    try {
      // AddPartitionsToTxn (v3, see the header), then Produce, retried by the client.
      await within(tx.send({ messages, acks: ProduceAcks.ALL }), deadline, 'produce')
    } catch (e) {
      release(rs, h)
      // No commit was requested: the transaction can only be aborted (by the coordinator, at the
      // transaction timeout or the next InitProducerId), so none of it can ever be committed.
      throw new CallError(kindOf(e), false, `write "${role}": produce: ${describe(e)}`)
    }
    const endsBefore = h.counts.EndTxn || 0
    try {
      await within(tx.commit(), deadline, 'commit')
    } catch (e) {
      release(rs, h)
      // The client retries EndTxn after a retriable error (a cut connection included), so a
      // refusal may follow an attempt that committed. Only a coordinator's refusal of the one
      // EndTxn sent means that no commit can follow.
      const ends = (h.counts.EndTxn || 0) - endsBefore
      const codes = protocolCodes(e)
      const refused = !abandoned(e) && ends === 1 && codes.length > 0 && codes.every(c => COMMIT_REFUSED_CODES.has(c))
      throw new CallError(kindOf(e), !refused, `write "${role}": commit (${ends} EndTxn sent): ${describe(e)}`)
    }
  })
}

// ---- describe ----

async function describeRole(role) {
  const deadline = Date.now() + config.rt
  const txnId = `${config.topic}/${role}`
  let lastError = null
  for (let attempt = 0; ; attempt++) {
    try {
      const coordinators = await within(
        admin.findCoordinator({ keyType: FindCoordinatorKeyTypes.TRANSACTION, keys: [txnId] }),
        deadline,
        'find coordinator'
      )
      const co = coordinators.find(x => x.key === txnId) || coordinators[0]
      if (!co || co.nodeId < 0) throw new Error(`no coordinator for ${txnId}`)
      const answer = await within(
        new Promise((resolve, reject) => {
          admin[kGetApi]('DescribeTransactions', (error, api) => {
            if (error) return reject(error)
            admin[kGetConnection]({ host: co.host, port: co.port }, (error, connection) => {
              if (error) return reject(error)
              api(connection, [txnId], (error, response) => {
                if (error) {
                  error.coordinator = co.nodeId
                  reject(error)
                } else resolve(response)
              })
            })
          })
        }),
        deadline,
        'DescribeTransactions'
      )
      const st = (answer.transactionStates || []).find(s => s.transactionalId === txnId)
      if (!st) throw new Error(`the coordinator's answer does not name ${txnId}`)
      const result = st.producerId < 0n ? { held: false } : { held: true, token: { producer_id: st.producerId, epoch: st.producerEpoch } }
      await confirmCoordinator(role, txnId, co.nodeId, result, deadline)
      return result
    } catch (e) {
      if (e instanceof CallError) throw e
      // The client throws a ResponseError for a transactional id the coordinator does not know:
      // "not held", once confirmed.
      const codes = protocolCodes(e)
      if (codes.length === 1 && codes[0] === 105 && e.coordinator != null) {
        await confirmCoordinator(role, txnId, e.coordinator, { held: false }, deadline)
        return { held: false } // TRANSACTIONAL_ID_NOT_FOUND
      }
      const retriable = codes.length === 0 || codes.every(c => [14, 15, 16].includes(c)) // coordinator moving
      if (e instanceof DeadlineError || !retriable || Date.now() >= deadline) {
        const before = lastError ? `; before: ${describe(lastError)}` : ''
        throw new CallError('admin', false, `describe "${role}": ${describe(e)}${before}`)
      }
      lastError = e
      if (attempt === 0) log(`describe ${role}: ${describe(e)}; again until the request timeout`)
      await sleep(Math.min(config.retryDelay * (attempt + 1), Math.max(0, deadline - Date.now())))
    }
  }
}

// How many brokers other than the one that answered DescribeTransactions are asked to confirm
// it as the coordinator: every other broker of a 3-broker cluster.
const CONFIRMERS = 2

/**
 * Asks up to CONFIRMERS other brokers (those following node in id order) which broker
 * coordinates txnId, in parallel, for at most rt/5, and refuses the describe (kind admin, fail)
 * when one of them names another broker, or none. As fencecheck's own transport does
 * (transport/confirm.go): an Apache Kafka broker cut off from its peers keeps answering
 * DescribeTransactions as the coordinator from the state it had when it was cut off, while the
 * controller has moved the coordinator to a broker that may have minted a newer epoch
 * (docs/regressions.md#deposed-coordinator-describe). A broker that cannot be reached or does
 * not answer in time has no say.
 */
async function confirmCoordinator(role, txnId, node, result, deadline) {
  let others
  try {
    const md = await within(
      new Promise((resolve, reject) => admin[kMetadata]({ topics: [] }, (e, m) => (e ? reject(e) : resolve(m)))),
      deadline,
      'metadata'
    )
    const ids = [...md.brokers.keys()].filter(id => id !== node).sort((a, b) => a - b)
    const i = ids.findIndex(id => id > node)
    const rotated = i < 0 ? ids : [...ids.slice(i), ...ids.slice(0, i)]
    others = rotated.slice(0, CONFIRMERS).map(id => ({ id, broker: md.brokers.get(id) }))
  } catch (e) {
    debugLog(`describe ${role}: no brokers to confirm coordinator ${node}: ${describe(e)}`)
    return // no broker to ask: the answer stays unconfirmed
  }
  const wait = Math.min(Math.floor(config.rt / 5), Math.max(0, deadline - Date.now()))
  const ask = ({ id, broker }) =>
    new Promise((resolve, reject) => {
      admin[kGetConnection](broker, (error, connection) => {
        if (error) return reject(error)
        admin[kGetApi]('FindCoordinator', (error, api) => {
          if (error) return reject(error)
          api(connection, FindCoordinatorKeyTypes.TRANSACTION, [txnId], (error, response) => {
            if (error) {
              // COORDINATOR_NOT_AVAILABLE: this broker sees no leader of the id's partition.
              if (protocolCodes(error).includes(15)) return resolve({ id, coordinator: -1 })
              return reject(error)
            }
            const c = (response.coordinators || []).find(x => x.key === txnId) || (response.coordinators || [])[0]
            resolve({ id, coordinator: c ? c.nodeId : -1 })
          })
        })
      })
    }).then(
      a => a,
      e => {
        debugLog(`describe ${role}: broker ${id} did not confirm coordinator ${node}: ${describe(e)}`)
        return null
      }
    )
  // The answers that come within the wait count; a broker still silent then has no say.
  const answers = []
  await Promise.race([Promise.all(others.map(o => ask(o).then(a => a && answers.push(a)))), sleep(wait)])
  for (const a of answers) {
    if (!a || a.coordinator === node) continue
    const said = result.held ? `${result.token.producer_id}/${result.token.epoch}` : 'not held'
    const why =
      a.coordinator < 0
        ? `broker ${a.id} knows no coordinator for it`
        : `broker ${a.id} names broker ${a.coordinator} as its coordinator`
    log(`describe ${role}: refused the answer of broker ${node} (${said}), which may not be the coordinator: ${why}`)
    throw new CallError('admin', false, `describe "${role}": broker ${node} answered DescribeTransactions for ${txnId}, but ${why} (NOT_COORDINATOR)`)
  }
}

// ---- reads ----

/**
 * Every committed record of topic/partition from the log start to the last stable offset taken
 * when the read starts, in offset order. The offsets come from the public Consumer.listOffsets
 * (READ_COMMITTED: latest is the LSO; -2 is the log start). The records come from Fetch requests
 * this adapter sends itself through the consumer's negotiated Fetch API (kGetApi) on the
 * consumer's connections (kGetConnection), at read_committed, without a fetch session, and are
 * filtered by filterCommitted: the consumer's own fetch() filters aborted records wrongly (see the
 * header). The scan stops at the LSO even when the tail holds only transaction markers. Errors that
 * may pass (a leader moving, a cut connection) are retried until the request timeout.
 */
async function read(topic, partition) {
  const deadline = Date.now() + config.rt
  let retries = 0
  let lastError = null
  const again = async (what, fn) => {
    for (;;) {
      try {
        return await within(fn(), deadline, what)
      } catch (e) {
        if (e instanceof DeadlineError || Date.now() >= deadline) {
          if (lastError) e.message += `; before: ${describe(lastError)}`
          throw e
        }
        // A read has no effect: anything but a broker's lasting refusal is asked again (a
        // topic the metadata does not show yet, a leader moving, a cut connection, a timeout).
        if (lastingRefusal(e)) throw e
        lastError = e
        if (retries++ === 0) log(`read ${topic}/${partition}: ${what}: ${describe(e)}; again until the request timeout`)
        reader.clearMetadata()
        await sleep(Math.min(Math.min(200, 25 << Math.min(retries, 3)), Math.max(0, deadline - Date.now())))
      }
    }
  }
  const offset = timestamp =>
    again('list offsets', async () => {
      const m = await reader.listOffsets({
        topics: [topic],
        partitions: { [topic]: [partition] },
        isolationLevel: FetchIsolationLevels.READ_COMMITTED,
        timestamp,
      })
      const o = m.get(topic)?.[partition]
      if (o == null) throw new Error(`ListOffsets answered no offset for ${topic}/${partition}`)
      return BigInt(o)
    })
  try {
    // LATEST under READ_COMMITTED is the last stable offset; EARLIEST the log start offset.
    const end = await offset(-1n)
    let next = await offset(-2n)
    const out = []
    while (next < end) {
      const pd = await again('fetch', () => fetchOnce(topic, partition, next))
      const after = pd ? filterCommitted(pd, next, end, out) : next
      if (after > next) next = after
      else {
        // nothing came back: ask again, with fresh metadata
        reader.clearMetadata()
        if (Date.now() >= deadline) throw new DeadlineError(`read up to the last stable offset ${end}`, config.rt)
        await sleep(5)
      }
    }
    return out
  } catch (e) {
    throw new CallError('client', false, `read ${topic}/${partition}: ${describe(e)}`)
  }
}

// Broker errors a read asks again for although the client calls them final.
const READ_RETRIABLE_CODES = new Set([3, 5, 6, 74]) // UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH

/** Whether e holds a broker error that asking again will not change. */
function lastingRefusal(e) {
  for (const x of walk(e)) {
    if (typeof x.apiCode === 'number' && x.canRetry === false && !READ_RETRIABLE_CODES.has(x.apiCode)) return true
  }
  return false
}

/** One read_committed Fetch of topic/partition from offset on its leader: the partition's answer. */
function fetchOnce(topic, partition, offset) {
  return new Promise((resolve, reject) => {
    reader[kMetadata]({ topics: [topic] }, (error, metadata) => {
      if (error) return reject(error)
      const t = metadata.topics.get(topic)
      const pm = t && t.partitions[partition]
      if (!pm) return reject(Object.assign(new Error(`no metadata for ${topic}/${partition}`), { canRetry: true }))
      const broker = metadata.brokers.get(pm.leader)
      if (!broker) return reject(Object.assign(new Error(`no broker ${pm.leader} for ${topic}/${partition}`), { canRetry: true }))
      reader[kGetConnection](broker, (error, connection) => {
        if (error) return reject(error)
        reader[kGetApi]('Fetch', (error, api) => {
          if (error) return reject(error)
          // Fetch v13+ names topics by id, older versions by name.
          const topicId = api.version <= 12 ? topic : t.id
          const topics = [
            {
              topicId,
              partitions: [
                {
                  partition,
                  currentLeaderEpoch: -1,
                  fetchOffset: offset,
                  lastFetchedEpoch: -1,
                  partitionMaxBytes: config.fetchPartitionMax,
                },
              ],
            },
          ]
          const maxBytes = Math.min(config.fetchPartitionMax + FETCH_BATCH_ROOM, 0x7fffffff)
          // No fetch session (id 0, epoch -1): a full answer each time.
          api(connection, config.fetchMaxWait, 1, maxBytes, FetchIsolationLevels.READ_COMMITTED, 0, -1, topics, [], '', (error, response) => {
            if (error) return reject(error)
            for (const tr of response.responses || []) {
              if (tr.topicId !== topicId) continue
              for (const p of tr.partitions || []) if (p.partitionIndex === partition) return resolve(p)
            }
            resolve(null)
          })
        })
      })
    })
  })
}

/**
 * Appends the committed data records of one Fetch answer's partition with offsets in [from, end)
 * to out and returns the next offset to fetch (past the last whole batch). The aborted-transaction
 * filter is the Java consumer's (CompletedFetch): a batch of a producer whose aborted transaction
 * began at or before the batch's last offset is dropped until that producer's abort marker;
 * control batches (markers) are never records.
 */
export function filterCommitted(pd, from, end, out) {
  const aborted = (pd.abortedTransactions || [])
    .map(a => ({ producerId: BigInt(a.producerId), firstOffset: BigInt(a.firstOffset) }))
    .sort((a, b) => (a.firstOffset < b.firstOffset ? -1 : a.firstOffset > b.firstOffset ? 1 : 0))
  const abortedProducers = new Set()
  let next = from
  for (const batch of pd.records || []) {
    const first = BigInt(batch.firstOffset)
    const last = first + BigInt(batch.lastOffsetDelta)
    if (last + 1n > next) next = last + 1n
    const pid = BigInt(batch.producerId)
    const control = (batch.attributes & IS_CONTROL) !== 0
    let dropped = false
    if (pid >= 0n) {
      while (aborted.length && aborted[0].firstOffset <= last) abortedProducers.add(aborted.shift().producerId)
      if (control) {
        if (isAbortMarker(batch)) abortedProducers.delete(pid)
      } else if ((batch.attributes & IS_TRANSACTIONAL) !== 0 && abortedProducers.has(pid)) {
        dropped = true
      }
    }
    if (control || dropped) continue
    for (const r of batch.records || []) {
      const off = first + BigInt(r.offsetDelta)
      if (off < from || off >= end) continue
      const rec = { offset: Number(off) }
      if (r.key != null && r.key.length !== undefined) rec.key = Buffer.from(r.key).toString('base64')
      if (r.value != null && r.value.length !== undefined) rec.value = Buffer.from(r.value).toString('base64')
      out.push(rec)
    }
  }
  return next
}

/** A control record's key is version (int16) and type (int16): type 0 is ABORT, 1 is COMMIT. */
function isAbortMarker(batch) {
  const k = batch.records && batch.records[0] && batch.records[0].key
  return k != null && k.length >= 4 && Buffer.from(k).readInt16BE(2) === 0
}

// ---- dispatch ----

function bytes(b64) {
  return b64 == null ? null : Buffer.from(b64, 'base64')
}

async function handle(req) {
  const op = req.op
  switch (op) {
    case 'hello':
      if (Number(req.version) !== VERSION) {
        throw new CallError('invalid_config', false, `hello: protocol version ${req.version}, this adapter speaks ${VERSION}`)
      }
      return { version: VERSION, name: NAME }
    case 'start':
      return { transaction_version: await start(req.config || {}) }
    default:
  }
  if (!started) throw new CallError('invalid_config', false, `${op} before start`)
  if (closed) throw new CallError('closed', false, 'transport closed')
  const role = String(req.role || '')
  switch (op) {
    case 'acquire':
      return { token: await acquire(role) }
    case 'register':
      return { join_seq: await register(req) }
    case 'write_lease':
      await write(role, req.token, [{ topic: req.topic, partition: req.partition, key: req.key, value: req.value }])
      return {}
    case 'write_fenced':
      await write(role, req.token, req.records || [])
      return {}
    case 'read_role':
      return { records: await read(String(req.topic), Number(req.partition || 0)) }
    case 'held': {
      const h = roles.get(role) && roles.get(role).held
      return h ? { held: true, token: h.token } : {}
    }
    case 'describe':
      return await describeRole(role)
    default:
      throw new CallError('invalid_config', false, `unknown op ${op}`)
  }
}

function answer(id, resp) {
  resp.id = id
  stdoutWrite(formatAnswer(resp) + '\n')
}

async function serve(req) {
  try {
    const ok = await handle(req)
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
  const clients = []
  for (const rs of roles.values()) {
    if (rs.held) clients.push(rs.held.producer)
    rs.held = null
  }
  if (plain) clients.push(plain.producer)
  if (admin) clients.push(admin)
  if (reader) clients.push(reader)
  // Closing a producer sends nothing (no EndTxn): an open transaction is left to the coordinator.
  await Promise.race([Promise.allSettled(clients.map(closeClient)), sleep(Math.min(config.rt || 1000, 2000))])
}

function main() {
  const rl = readline.createInterface({ input: process.stdin, terminal: false })
  const inFlight = new Set()
  let ordered = Promise.resolve() // hello and start, one at a time, in order
  let ending = false
  const finish = async closeReq => {
    if (ending) return
    ending = true
    try {
      await ordered
      await Promise.allSettled([...inFlight])
      await shutdown()
    } catch (e) {
      log(`close: ${describe(e)}`)
    }
    if (closeReq) answer(closeReq.id, { outcome: 'ok' })
    process.exit(0)
  }
  rl.on('line', line => {
    if (!line.trim() || ending) return
    let req
    try {
      req = parseRequest(line)
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

// As a program (the launcher runs it); quirks.test.js imports it for its helpers.
if (process.argv[1] && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href) main()
