'use strict'
/**
 * One member of an exactly-once pipeline on KafkaJS (docs/exec-protocol.md, "Pipelines"): a
 * consumer group member reading the input at read_committed, a transactional producer, and the
 * loop KafkaJS's own documentation shows for exactly-once: a transaction, its sends,
 * transaction.sendOffsets({ consumerGroupId, topics }), commit.
 *
 * KafkaJS's consumer is a run loop that pushes batches into eachBatch; the protocol pulls
 * (poll, then transact). The member keeps KafkaJS's loop and turns it around without a second
 * buffer of its own: eachBatch parks on the batch KafkaJS handed it until the harness has taken
 * every record of it (poll hands out at most max_poll records at a time, each once) and the
 * transactions of those records have ended. Meanwhile KafkaJS fetches nothing more for that
 * worker (one batch at a time: partitionsConsumedConcurrently 1), and the member calls the
 * batch's heartbeat() while it waits, as a KafkaJS user processing a long batch must. After a
 * transaction that committed, the batch's resolveOffset moves KafkaJS's position past its
 * records; after one that did not, the member fetches the group's committed offsets
 * (admin.fetchOffsets: an OffsetFetch, the rewind the harness sees on the wire), seeks every
 * assigned partition there (consumer.seek), and ends the batch unresolved, so KafkaJS fetches
 * those records again. A heartbeat that learns of a rebalance never cuts a transaction short:
 * the member throws KafkaJS's error out of eachBatch only between transactions, and KafkaJS
 * rejoins.
 *
 * What KafkaJS 2.2.4 sends (its src/protocol/requests, and the gateway's view of a run):
 *  - transaction.sendOffsets sends AddOffsetsToTxn v0-1 to the transaction coordinator, then
 *    TxnOffsetCommit v0-1 to the group coordinator: transactional id, group id, producer id and
 *    epoch, offsets. Those versions have no member id, no generation and no group instance id
 *    (they came with v3, KIP-447), so a broker takes them as from a client outside the group's
 *    generations: nothing fences a member's offsets by its group membership.
 *  - its consumer fetches where to start with OffsetFetch v1-4 (KafkaJS has no later version),
 *    which has no require_stable flag (v7, KIP-447): the broker answers the last committed
 *    offsets, ignoring offsets a transaction still holds pending.
 *  - JoinGroup up to v5, SyncGroup and Heartbeat up to v3: the classic protocol only (no
 *    ConsumerGroupHeartbeat, KIP-848).
 * So with one transactional id per member, a member that lost its partitions (a zombie) can
 * still commit its offsets and outputs. docs/clients.md ("Pipelines through KafkaJS") has the
 * runs.
 *
 * KafkaJS has no accessor for the member id and generation (its consumer keeps them on an
 * internal ConsumerGroup object): the member wraps ConsumerGroup.prototype.joinAndSync, an
 * INTERNAL, to read them after each join. Nothing else of KafkaJS is changed.
 */

const ConsumerGroup = require('kafkajs/src/consumer/consumerGroup')

let current = null // the process's one member (one adapter per member)

// The member id and generation live on KafkaJS's internal ConsumerGroup; joinAndSync sets them.
const joinAndSync = ConsumerGroup.prototype.joinAndSync
ConsumerGroup.prototype.joinAndSync = async function (...args) {
  const r = await joinAndSync.apply(this, args)
  // Before KafkaJS fetches the new assignment's offsets (its next fetch does): what
  // kafka-clients' onPartitionsAssigned is, which KafkaJS lacks.
  if (current) await current.joined(this)
  return r
}

/**
 * Builds the member from member_start's config. lib holds the adapter's helpers (errors,
 * deadlines, socket gates, the KafkaJS client factory). Refuses what KafkaJS cannot do.
 */
async function startMember(c, lib) {
  const { CallError } = lib
  const bad = (field, why) => new CallError('invalid_config', false, `${field}: ${why}`)
  const bootstrap = String(c.bootstrap || '')
    .split(',')
    .map(s => s.trim())
    .filter(Boolean)
  const protocol = c.protocol || 'classic'
  const rt = Number(c.request_timeout_ms)
  const txnTimeout = Number(c.transaction_timeout_ms)
  const session = Number(c.session_timeout_ms || 0)
  const rebalance = Number(c.rebalance_timeout_ms || 0)
  const maxPoll = Number(c.max_poll || 0)
  const tv = Number(c.transaction_version || 0)
  if (bootstrap.length === 0) throw bad('Bootstrap', 'no address')
  if (!c.group) throw bad('Group', 'empty')
  if (!c.input) throw bad('Input', 'empty')
  if (!c.output || c.output === c.input) throw bad('Output', 'empty, or the input topic')
  if (!c.transactional_id) throw bad('TransactionalID', 'empty')
  if (protocol !== 'classic' && protocol !== 'consumer') throw bad('Protocol', `"${protocol}", want classic or consumer`)
  if (protocol === 'consumer') {
    throw bad('Protocol', `consumer: KafkaJS ${lib.KAFKAJS_VERSION} speaks the classic group protocol only (no KIP-848)`)
  }
  if (!(rt > 0)) throw bad('RequestTimeout', `${c.request_timeout_ms} ms, must be positive`)
  if (!(txnTimeout > 0)) throw bad('LeaseDuration', `a transaction timeout of ${c.transaction_timeout_ms} ms, must be positive`)
  if (session < 0) throw bad('SessionTimeout', `${session} ms, must not be negative`)
  if (rebalance < 0) throw bad('RebalanceTimeout', `${rebalance} ms, must not be negative`)
  if (maxPoll < 0) throw bad('MaxPoll', `${maxPoll}, must not be negative`)
  if (tv === 2) {
    throw bad('TransactionVersion', `2 required, but KafkaJS ${lib.KAFKAJS_VERSION} speaks transaction version 1 only (no KIP-890)`)
  }
  if (tv !== 0 && tv !== 1) throw bad('TransactionVersion', `${tv} is not 0, 1 or 2`)
  lib.configure({ bootstrap, clientId: c.client_id || 'fencecheck-kafkajs-member', rt })
  const m = new Member(c, lib, { rt, txnTimeout, session, rebalance, maxPoll: maxPoll || 500 })
  current = m
  return m
}

class Member {
  constructor(c, lib, o) {
    this.lib = lib
    this.group = String(c.group)
    this.input = String(c.input)
    this.output = String(c.output)
    this.rt = o.rt
    this.maxPoll = o.maxPoll
    this.gate = lib.newGate(`member ${c.client_id}`)
    const kafka = lib.kafkaClient(this.gate)
    const session = o.session || 10000
    this.consumer = kafka.consumer({
      groupId: this.group,
      sessionTimeout: session,
      rebalanceTimeout: o.rebalance || session,
      // KafkaJS sends a heartbeat only when asked (between batches, or the batch's heartbeat())
      // and at most once an interval.
      heartbeatInterval: Math.max(50, Math.min(3000, Math.floor(session / 3))),
      maxWaitTimeInMs: 100,
      readUncommitted: false,
      allowAutoTopicCreation: false,
      // The consumer's own retries; after them KafkaJS restarts the consumer (restartOnFailure).
      retry: { ...lib.retryConfig(), restartOnFailure: async () => !this.closed },
    })
    this.kafka = kafka
    this.txnId = String(c.transactional_id)
    this.txnTimeout = o.txnTimeout
    // One producer for the member, or (txn_id_per_partition) one per assigned input partition,
    // id transactional_id-PARTITION, made on the assignment (joined) before KafkaJS fetches the
    // partition's offsets: its InitProducerId fences the partition's previous owner and aborts
    // its open transaction, so the group's committed offsets are final when KafkaJS reads them.
    this.perPartition = !!c.txn_id_per_partition
    this.producers = new Map() // partition (or -1 for the member's one) -> { producer, ready }
    this.fencedParts = new Set() // partitions whose producer was fenced: paused until assigned again
    this.admin = kafka.admin()
    this.closed = false
    this.running = false
    this.joinedGroup = null // KafkaJS's ConsumerGroup after its last join
    this.assigned = [] // the input partitions of the last join
    this.batch = null // the batch eachBatch is parked on
    this.rebalancing = null // KafkaJS's error of a heartbeat that learned of a rebalance, until the next join
    this.waiters = [] // polls waiting for a batch
    this.failed = false // the producer failed for good: restart
    // InitProducerId fences the previous producer of the id (a restarted member's) and ends its
    // open transaction. It starts now; the first transact waits for it.
    if (!this.perPartition) this.producers.set(-1, this.newProducer(this.txnId))
    this.consumer.on(this.consumer.events.GROUP_JOIN, e => {
      this.assigned = ((e.payload.memberAssignment || {})[this.input] || []).map(Number)
    })
  }

  /**
   * A transactional producer for txnId, its InitProducerId begun: KafkaJS sends it with the
   * first transaction(); a transaction with nothing in it ends without an EndTxn.
   */
  newProducer(txnId) {
    const producer = this.kafka.producer({
      transactionalId: txnId,
      transactionTimeout: this.txnTimeout,
      idempotent: false, // the transactional producer is idempotent anyway (adapter.js, header)
      maxInFlightRequests: 1,
      allowAutoTopicCreation: false,
    })
    const ready = (async () => {
      await producer.connect()
      const txn = await producer.transaction()
      await txn.abort()
    })()
    ready.catch(e => this.lib.log(`member: InitProducerId of ${txnId}: ${this.lib.describe(e)}`))
    return { producer, ready, txnId }
  }

  /** After each join of KafkaJS's consumer: its identity, and the partitions' producers. */
  async joined(cg) {
    this.joinedGroup = cg
    this.rebalancing = null
    if (!this.perPartition) return
    const assigned = new Set(((cg.assigned() || []).find(t => t.topic === this.input) || { partitions: [] }).partitions.map(Number))
    for (const [p, e] of this.producers) {
      if (!assigned.has(p)) {
        // Given away: dropped without ending its transaction (the new owner's InitProducerId does).
        this.producers.delete(p)
        e.producer.disconnect().catch(() => {})
      }
    }
    const resume = [...this.fencedParts].filter(p => assigned.has(p))
    this.fencedParts.clear()
    if (resume.length) this.consumer.resume([{ topic: this.input, partitions: resume }])
    const waits = []
    for (const p of assigned) {
      if (!this.producers.has(p)) this.producers.set(p, this.newProducer(`${this.txnId}-${p}`))
      waits.push(this.producers.get(p).ready.catch(() => {}))
    }
    // Bounded: a producer that could not initialise fails its partition's first transact.
    await this.lib.within(Promise.all(waits), Date.now() + this.rt, 'InitProducerId on the assignment').catch(() => {})
  }

  identity() {
    const g = this.joinedGroup
    return { member_id: (g && g.memberId) || '', generation: g && g.generationId != null ? g.generationId : -1 }
  }

  /** Starts KafkaJS's loop on the first poll: the member joins the group then. */
  async run() {
    if (this.running) return
    this.running = true
    await this.consumer.connect()
    await this.consumer.subscribe({ topic: this.input, fromBeginning: true })
    // Not awaited past the join: run() resolves once KafkaJS joined, then loops by itself.
    this.consumer
      .run({
        autoCommit: false,
        eachBatchAutoResolve: false,
        partitionsConsumedConcurrently: 1,
        eachBatch: payload => this.eachBatch(payload),
      })
      .catch(e => this.lib.log(`member: consumer run: ${this.lib.describe(e)}`))
  }

  /**
   * KafkaJS's eachBatch: parks until the harness has taken and transacted every record of the
   * batch, or a failed transaction rewound, or the member closes.
   */
  async eachBatch(payload) {
    const { batch, isRunning, isStale } = payload
    // A batch fetched before a seek (a rewind) or queued across a stop is not handed out.
    if (this.closed || !isRunning() || isStale() || batch.messages.length === 0) return
    if (this.fencedParts.has(batch.partition)) return
    // A batch KafkaJS queued before it learned of a rebalance (it hands the queued batches of
    // its other fetchers to eachBatch while it stops them) is not handed out: the member
    // rejoins first. The heartbeat() a KafkaJS user calls at a batch's start says the same.
    if (this.rebalancing) throw this.rebalancing
    try {
      await payload.heartbeat()
    } catch (e) {
      if (isRebalanceError(e)) this.rebalancing = e
      throw e
    }
    const b = {
      payload,
      partition: batch.partition,
      records: batch.messages,
      next: 0, // the first record not handed out
      outstanding: 0, // records handed out, not transacted yet
      identity: this.identity(),
      rebalance: null, // the error of a heartbeat that learned of a rebalance
    }
    let finish
    b.done = new Promise((resolve, reject) => (finish = { resolve, reject }))
    b.finish = finish
    this.batch = b
    for (const w of this.waiters.splice(0)) w()
    // The heartbeat a KafkaJS user calls while processing a long batch; KafkaJS sends it at most
    // once an interval. A rebalance it reports ends the batch between transactions.
    const beat = setInterval(() => {
      payload.heartbeat().catch(e => {
        if (!b.rebalance && isRebalanceError(e)) {
          b.rebalance = e
          this.rebalancing = e
          if (b.outstanding === 0) this.endBatch(b, e)
        }
      })
    }, 100)
    try {
      await b.done
    } finally {
      clearInterval(beat)
      if (this.batch === b) this.batch = null
    }
  }

  /** Ends the parked batch: resolved (KafkaJS goes on) or with KafkaJS's error (it rejoins). */
  endBatch(b, err) {
    if (this.batch === b) this.batch = null
    if (err) b.finish.reject(err)
    else b.finish.resolve()
  }

  // ---- poll ----

  async poll(waitMs) {
    await this.lib.within(this.run(), Date.now() + this.rt, 'join the group')
    const deadline = Date.now() + Math.max(0, waitMs)
    for (;;) {
      const b = this.batch
      if (b && b.next < b.records.length) {
        // A poll while records are handed out and not transacted moves on past them, as a
        // consumer's position does: each record is handed out once.
        const take = b.records.slice(b.next, b.next + this.maxPoll)
        b.next += take.length
        b.outstanding += take.length
        b.firstPolled = Number(take[0].offset)
        return {
          records: take.map(r => {
            const rec = { partition: b.partition, offset: Number(r.offset) }
            if (r.key != null) rec.key = Buffer.from(r.key).toString('base64')
            if (r.value != null) rec.value = Buffer.from(r.value).toString('base64')
            return rec
          }),
          ...b.identity,
        }
      }
      if (b && b.outstanding > 0) {
        // Every record of the batch handed out and a poll again without a transact: the
        // position moves past them, as above, and KafkaJS may fetch on.
        b.outstanding = 0
        b.payload.resolveOffset(b.records[b.records.length - 1].offset)
        this.endBatch(b, b.rebalance)
        continue
      }
      const left = deadline - Date.now()
      if (left <= 0 || this.closed) return { records: [], ...this.identity() }
      await new Promise(resolve => {
        const t = setTimeout(resolve, left)
        this.waiters.push(() => {
          clearTimeout(t)
          resolve()
        })
      })
    }
  }

  // ---- transact ----

  async transact(req) {
    const { CallError, within, describe, kindOf, abandoned } = this.lib
    const start = Date.now()
    const bounded = req.timeout_ms != null
    const left = bounded ? Math.max(0, Number(req.timeout_ms)) : 3 * this.rt
    // As the Java member: the transaction up to its commit gets at most twice the request
    // timeout, leaving time for an abort and a rewind; a commit may take the whole bound.
    const txnDeadline = start + Math.min(left, 2 * this.rt)
    const commitDeadline = start + Math.min(left, 3 * this.rt)
    const b = this.batch
    const res = { outcome: 'ok' }
    const fail = (kind, unknown, message) => {
      res.outcome = unknown ? 'unknown' : 'fail'
      res.error = { kind, message }
    }
    if (this.failed) {
      fail('producer', false, "the member's producer failed earlier: restart it")
      res.restart = true
      return res
    }
    const part = b ? b.partition : offsetsPartition(req)
    const entry = this.perPartition ? this.producers.get(part) : this.producers.get(-1)
    if (!entry) {
      fail('fenced', false, `no producer for input partition ${part}: it is not assigned to this member, or its producer was fenced`)
      await this.rewind(res, b)
      return res
    }
    const producer = entry.producer
    if (bounded && left === 0) {
      fail('client', false, "the call's deadline had passed: no transaction began")
      await this.rewind(res, b)
      return res
    }
    const offsets = (req.offsets || []).map(o => ({ partition: Number(o.partition || 0), offset: String(o.offset) }))
    const messages = (req.outputs || []).map(o => ({
      partition: Number(o.partition || 0),
      key: o.key == null ? null : Buffer.from(o.key, 'base64'),
      value: o.value == null ? null : Buffer.from(o.value, 'base64'),
    }))
    let step = 'InitProducerId'
    let txn
    try {
      await within(entry.ready, txnDeadline, step)
      step = 'transaction'
      txn = await within(producer.transaction(), txnDeadline, step)
      step = 'send'
      if (messages.length) await within(txn.send({ topic: this.output, messages, acks: -1, timeout: this.rt }), txnDeadline, step)
      step = 'sendOffsets'
      await within(
        txn.sendOffsets({ consumerGroupId: this.group, topics: [{ topic: this.input, partitions: offsets }] }),
        txnDeadline,
        step
      )
    } catch (e) {
      // No commit was asked: the transaction can only be aborted.
      fail(kindOf(e), false, `${step}: ${describe(e)}`)
      if (this.perPartition && kindOf(e) === 'fenced') {
        this.fenced(entry, part, b)
        return res
      }
      if (abandoned(e) || !txn) {
        // KafkaJS may still be working on the call (or never began a transaction): the producer
        // is given up, and its successor's InitProducerId ends whatever is open.
        this.giveUp(res, abandoned(e))
        return res
      }
      try {
        await within(txn.abort(), Date.now() + Math.max(1, Math.floor(this.rt / 2)), 'abort')
      } catch (ae) {
        res.error.message += `; abort: ${describe(ae)}`
        this.giveUp(res, abandoned(ae))
        return res
      }
      await this.rewind(res, b)
      return res
    }
    try {
      await within(txn.commit(), commitDeadline, 'commit')
    } catch (e) {
      // KafkaJS sends EndTxn once and does not retry it (adapter.js, write): only a refusal the
      // coordinator answers from its checks is certain. Either way the member restarts: the
      // next producer's InitProducerId ends what is open.
      const refused = this.lib.isProtocolError(e) && this.lib.COMMIT_REFUSED_CODES.has(this.lib.protocolCode(e))
      fail(kindOf(e), !refused, `commit: ${describe(e)}`)
      if (this.perPartition && refused && kindOf(e) === 'fenced') {
        this.fenced(entry, part, b)
        return res
      }
      this.giveUp(res, abandoned(e))
      return res
    }
    // Committed: KafkaJS's position moves past the batch's records.
    if (b && this.batch === b) {
      b.outstanding = 0
      const last = offsets.find(o => o.partition === b.partition)
      if (last) b.payload.resolveOffset(String(Number(last.offset) - 1))
      if (b.next >= b.records.length) this.endBatch(b, null)
      else if (b.rebalance) this.endBatch(b, b.rebalance)
    }
    return res
  }

  /**
   * Seeks every assigned partition back to the group's committed offset (fetched with
   * admin.fetchOffsets: an OffsetFetch, without require_stable, since KafkaJS has none), or to
   * where the last poll started on the batch's partition when the group committed nothing
   * there, and ends the batch unresolved so that KafkaJS fetches the records again. A fetch that
   * fails restarts the member: its position is past the batch.
   */
  async rewind(res, b) {
    const { within, describe } = this.lib
    try {
      await within(this.admin.connect(), Date.now() + this.rt, 'admin connect')
      const got = await within(
        this.admin.fetchOffsets({ groupId: this.group, topics: [this.input] }),
        Date.now() + this.rt,
        'fetch the committed offsets'
      )
      const at = new Map()
      for (const t of got) {
        if (t.topic !== this.input) continue
        for (const p of t.partitions) at.set(Number(p.partition), Number(p.offset))
      }
      const parts = new Set(this.assigned)
      if (b) parts.add(b.partition)
      for (const p of parts) {
        const o = at.get(p)
        if (o != null && o >= 0) this.consumer.seek({ topic: this.input, partition: p, offset: String(o) })
        else if (b && b.partition === p && b.firstPolled != null) {
          this.consumer.seek({ topic: this.input, partition: p, offset: String(b.firstPolled) })
        }
      }
    } catch (e) {
      res.error.message += `; rewind to the committed offsets: ${describe(e)}`
      res.restart = true
    }
    if (b && this.batch === b) {
      b.outstanding = 0
      this.endBatch(b, null) // unresolved: KafkaJS fetches from the seek
    }
  }

  /**
   * A partition's producer was fenced (txn_id_per_partition): a new owner took the partition's
   * transactional id. The member drops the producer and stops reading the partition until the
   * group assigns it again (joined), as fencecheck's plain member does; the batch ends unresolved.
   */
  fenced(entry, part, b) {
    if (this.producers.get(part) === entry) this.producers.delete(part)
    entry.producer.disconnect().catch(() => {})
    this.fencedParts.add(part)
    this.consumer.pause([{ topic: this.input, partitions: [part] }])
    if (b && this.batch === b) {
      b.outstanding = 0
      this.endBatch(b, null)
    }
  }

  /** Gives the producer up for good: the member must be restarted. */
  giveUp(res, hard) {
    res.restart = true
    this.failed = true
    if (hard) this.gate.kill(true)
  }

  async close() {
    this.closed = true
    for (const w of this.waiters.splice(0)) w()
    if (this.batch) this.endBatch(this.batch, null)
    const bound = Math.min(this.rt, 3000)
    await Promise.race([
      Promise.allSettled([
        this.consumer.disconnect(),
        this.admin.disconnect(),
        ...[...this.producers.values()].map(e => e.producer.disconnect()),
      ]),
      new Promise(r => setTimeout(r, bound)),
    ])
    this.gate.kill(false)
  }
}

/** The input partition a transact's offsets name (the protocol's one batch is of one partition). */
function offsetsPartition(req) {
  const o = (req.offsets || [])[0]
  return o ? Number(o.partition || 0) : -1
}

function isRebalanceError(e) {
  for (let x = e, n = 0; x && n < 10; x = x.cause, n++) {
    if (['REBALANCE_IN_PROGRESS', 'UNKNOWN_MEMBER_ID', 'ILLEGAL_GENERATION'].includes(x.type)) return true
  }
  return false
}

module.exports = { startMember }
