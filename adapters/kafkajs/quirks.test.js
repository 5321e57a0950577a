'use strict'
/**
 * Regressions of the KafkaJS quirks fencecheck found (adapter.js's header and start()): each test
 * passes while the quirk is there and fails, saying so, once a KafkaJS release fixes it; the
 * adapter's workarounds are checked beside them. No broker: KafkaJS's own error decoding, and
 * loopback listeners standing in for dead seed brokers.
 *
 *   node --test adapters/kafkajs/        (make test-adapters)
 */

const test = require('node:test')
const assert = require('node:assert/strict')
const net = require('node:net')

const { Kafka, logLevel } = require('kafkajs')
const { KafkaJSNumberOfRetriesExceeded } = require('kafkajs/src/errors')
const { createErrorFromCode, errorCodes } = require('kafkajs/src/protocol/error')
const endTxnResponseV0 = require('kafkajs/src/protocol/requests/endTxn/v0/response')

const KAFKAJS = `KafkaJS ${require('kafkajs/package.json').version}`

// adapter.js as a module (it runs main() only as a program). Loading it sends console output to
// stderr and installs process handlers that log and swallow uncaught errors, which the adapter
// process wants and a test process does not: both are undone here.
const consoleBefore = { ...console }
const handlersBefore = {}
for (const ev of ['unhandledRejection', 'uncaughtException']) handlersBefore[ev] = process.listeners(ev)
const adapter = require('./adapter.js')
Object.assign(console, consoleBefore)
for (const [ev, before] of Object.entries(handlersBefore)) {
  for (const l of process.listeners(ev)) if (!before.includes(l)) process.removeListener(ev, l)
}

// ---- 1. PRODUCER_FENCED (90) is not in KafkaJS's error table ----

const PRODUCER_FENCED = 90

test('KafkaJS decodes PRODUCER_FENCED (90) as KAFKAJS_UNKNOWN_ERROR_CODE', async () => {
  const known = errorCodes.find(e => e.code === PRODUCER_FENCED)
  assert.equal(
    known,
    undefined,
    `${KAFKAJS} now has error code 90 in its table (${known && known.type}): the quirk is fixed; ` +
      "update adapter.js (its header, BROKER_CODES) and this regression"
  )

  // The function every response parser throws through (protocol/error.js).
  const e = createErrorFromCode(PRODUCER_FENCED)
  assert.equal(e.name, 'KafkaJSProtocolError')
  assert.equal(e.type, 'KAFKAJS_UNKNOWN_ERROR_CODE', `${KAFKAJS} now names code 90 ${e.type}: the quirk is fixed`)
  assert.equal(e.message, 'Unknown error code 90')
  // The broker's code survives only in the message: the error's code is KafkaJS's own -99.
  assert.equal(e.code, -99)
  assert.equal(e.retriable, false)

  // The same from the wire: an EndTxn v0 answer (throttle_time_ms INT32, error_code INT16) with 90.
  const raw = Buffer.alloc(6)
  raw.writeInt16BE(PRODUCER_FENCED, 4)
  const decoded = await endTxnResponseV0.decode(raw)
  assert.equal(decoded.errorCode, PRODUCER_FENCED)
  await assert.rejects(endTxnResponseV0.parse(decoded), err => {
    assert.equal(err.name, 'KafkaJSProtocolError')
    assert.equal(
      err.type,
      'KAFKAJS_UNKNOWN_ERROR_CODE',
      `${KAFKAJS} now decodes an EndTxn answer of code 90 as ${err.type}: the quirk is fixed`
    )
    assert.equal(err.message, 'Unknown error code 90')
    return true
  })
})

test("the adapter maps code 90 to kind fenced and names it PRODUCER_FENCED", () => {
  const e = createErrorFromCode(PRODUCER_FENCED)
  assert.equal(adapter.kindOf(e), 'fenced', `kindOf(${e.type} "${e.message}") is not fenced`)
  // As KafkaJS's retrier wraps it.
  const wrapped = new KafkaJSNumberOfRetriesExceeded(e, { retryCount: 2, retryTime: 100 })
  assert.equal(adapter.kindOf(wrapped), 'fenced', 'kindOf of a wrapped code 90 is not fenced')
  const text = adapter.describe(e)
  assert.match(text, /PRODUCER_FENCED \(code 90\b/, `describe does not name code 90 PRODUCER_FENCED: ${text}`)
  // Controls: INVALID_PRODUCER_EPOCH (47), which KafkaJS knows, is fenced; another code it does
  // not know (91, RESOURCE_NOT_FOUND) is not.
  assert.equal(adapter.kindOf(createErrorFromCode(47)), 'fenced')
  assert.equal(adapter.kindOf(createErrorFromCode(91)), 'producer')
})

// ---- 2. Seed brokers: no move on after KafkaJSConnectionClosedError; every client starts at the first ----

/** A loopback listener; onConnection(socket) for each connection; .count of connections. */
async function listener(onConnection) {
  const l = { count: 0, sockets: new Set() }
  l.server = net.createServer(s => {
    l.count++
    l.sockets.add(s)
    s.on('close', () => l.sockets.delete(s))
    s.on('error', () => {})
    onConnection(s)
  })
  await new Promise((resolve, reject) => {
    l.server.once('error', reject)
    l.server.listen(0, '127.0.0.1', resolve)
  })
  l.address = `127.0.0.1:${l.server.address().port}`
  l.close = () => {
    for (const s of l.sockets) s.destroy()
    return new Promise(resolve => l.server.close(() => resolve()))
  }
  return l
}

// Seed A: accepts and closes at once (a clean FIN: what fencecheck's gateway does when its upstream
// dial is refused). Whatever the client sent is read and dropped first, so no RST turns the close
// into a connection reset.
const closingSeed = () =>
  listener(s => {
    s.resume()
    s.end()
  })
// Seed B: records that something connected, and closes too (no client waits for an answer).
const recordingSeed = closingSeed

const RETRIES = 3

/** A new KafkaJS admin client's connect() (ApiVersions with a seed broker); resolves to its error. */
async function connectError(brokers, extra = {}) {
  const kafka = new Kafka({
    clientId: 'fencecheck-quirks-test',
    brokers,
    connectionTimeout: 1000,
    requestTimeout: 2000,
    retry: { retries: RETRIES, initialRetryTime: 10, maxRetryTime: 30 },
    logLevel: logLevel.NOTHING,
    ...extra,
  })
  const admin = kafka.admin()
  try {
    await admin.connect()
  } catch (e) {
    return e
  } finally {
    await admin.disconnect().catch(() => {})
  }
  assert.fail('admin.connect() succeeded against seeds that close every connection')
}

function rootOf(e) {
  while (e && e.cause && e.cause !== e) e = e.cause
  return e
}

test('KafkaJS stays on a seed that closes at once, and every new client starts at the first seed', { timeout: 30000 }, async () => {
  const a = await closingSeed()
  const b = await recordingSeed()
  try {
    const clients = 3
    for (let i = 0; i < clients; i++) {
      const e = await connectError([a.address, b.address])
      assert.equal(
        b.count,
        0,
        `${KAFKAJS} now reaches the second seed (${b.count} connection(s) to B) after the first closed ` +
          `its connection: KafkaJS now rotates seeds after a KafkaJSConnectionClosedError (or no longer starts ` +
          `every client at the first seed). The quirk is fixed: adapter.js's workaround (newGate's close-to-error, ` +
          `shuffled seeds in start) can be revisited; update this regression. Client ${i + 1}'s error: ${adapter.describe(e)}`
      )
      const r = rootOf(e)
      assert.equal(r.name, 'KafkaJSConnectionClosedError', `the seed's close surfaced as: ${adapter.describe(e)}`)
    }
    // Every attempt of every client (1 + RETRIES each) went to seed A.
    assert.equal(a.count, clients * (1 + RETRIES), `connections to seed A: ${a.count}`)
  } finally {
    await Promise.all([a.close(), b.close()])
  }
})

test("the adapter's socket factory makes a new client move on to the second seed", { timeout: 30000 }, async () => {
  const a = await closingSeed()
  const b = await recordingSeed()
  const gate = adapter.newGate('quirks test')
  try {
    // The seeds in the given order: only the socket factory differs from the test above.
    const e = await connectError([a.address, b.address], { socketFactory: gate.factory })
    assert.ok(
      b.count > 0,
      `with adapter.js's socketFactory, the second seed was never reached (A: ${a.count} connection(s)): ` +
        `newGate no longer turns a close before any answer into a KafkaJSConnectionError. Error: ${adapter.describe(e)}`
    )
    assert.equal(rootOf(e).name, 'KafkaJSConnectionError', `error: ${adapter.describe(e)}`)
  } finally {
    gate.kill(false)
    await Promise.all([a.close(), b.close()])
  }
})

test("the adapter's shuffled seeds let a new client start at another seed", { timeout: 30000 }, async () => {
  const a = await closingSeed()
  const b = await recordingSeed()
  try {
    // start() gives KafkaJS brokers: async () => shuffled(bootstrap); without the socket factory,
    // so only the order helps. Each new client takes a fresh order's first seed: B with chance 1/2
    // per client (20 clients all missing B: about 1 in a million).
    const seeds = [a.address, b.address]
    let clients = 0
    while (b.count === 0 && clients < 20) {
      clients++
      await connectError(async () => adapter.shuffled(seeds), { retry: { retries: 0 } })
    }
    assert.ok(b.count > 0, `none of ${clients} new clients with shuffled seeds reached the second seed`)
  } finally {
    await Promise.all([a.close(), b.close()])
  }
})

// ---- 4. no KIP-447: offsets by group id alone, fetched without require_stable ----

test('KafkaJS sends a transaction\'s offsets with the group id alone (TxnOffsetCommit v0-1, no generation)', async () => {
  const txnOffsetCommit = require('kafkajs/src/protocol/requests/txnOffsetCommit')
  assert.deepEqual(
    txnOffsetCommit.versions,
    ['0', '1'],
    `${KAFKAJS} defines TxnOffsetCommit ${txnOffsetCommit.versions}: v3+ carries the member id and generation (KIP-447); ` +
      'if it sends them now, the pipeline member can send the group metadata: update docs/clients.md, adapters/kafkajs/README.md and internal/adapters (GroupIDOnly)'
  )
  // v1's encoding is transactional id, group id, producer id, epoch, offsets: nothing else.
  const { request } = txnOffsetCommit.protocol({ version: 1 })({
    transactionalId: 't',
    groupId: 'g',
    producerId: 7,
    producerEpoch: 3,
    topics: [{ topic: 'in', partitions: [{ partition: 0, offset: '5' }] }],
  })
  const b = (await request.encode()).buffer
  const want = Buffer.concat([
    Buffer.from([0, 1]), Buffer.from('t'), // transactional id
    Buffer.from([0, 1]), Buffer.from('g'), // group id
    Buffer.from([0, 0, 0, 0, 0, 0, 0, 7]), Buffer.from([0, 3]), // producer id, epoch
    Buffer.from([0, 0, 0, 1, 0, 2]), Buffer.from('in'), Buffer.from([0, 0, 0, 1]), // one topic "in", one partition
    Buffer.from([0, 0, 0, 0]), Buffer.from([0, 0, 0, 0, 0, 0, 0, 5]), Buffer.from([0xff, 0xff]), // 0, offset 5, null metadata
  ])
  assert.deepEqual(b, want, 'TxnOffsetCommit v1 as KafkaJS encodes it')
  // The transaction's API takes a group id and offsets, no group metadata.
  const src = require('node:fs').readFileSync(require.resolve('kafkajs/src/producer/eosManager/index.js'), 'utf8')
  assert.match(src, /async sendOffsets\(\{ consumerGroupId, topics \}\)/)
})

test('KafkaJS fetches committed offsets without require_stable (OffsetFetch v1-4)', () => {
  const offsetFetch = require('kafkajs/src/protocol/requests/offsetFetch')
  assert.deepEqual(
    offsetFetch.versions,
    ['1', '2', '3', '4'],
    `${KAFKAJS} defines OffsetFetch ${offsetFetch.versions}: require_stable is v7+ (KIP-447); update docs/clients.md if it sends it now`
  )
})
