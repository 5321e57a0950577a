//! One member of an exactly-once pipeline on krabka (docs/exec-protocol.md, "Pipelines").
//!
//! A group `Consumer` at read_committed without auto-commit, and a transactional `Producer`, in
//! the loop a krabka user writes: poll; `begin_transaction`, enqueue the outputs and await
//! them, `send_offsets_to_transaction(offsets, &group_metadata)`, commit. krabka's
//! `ConsumerGroupMetadata` carries the group's generation (the member epoch under KIP-848) and
//! member id, and `send_offsets_to_transaction` puts them into TxnOffsetCommit, where the
//! group coordinator fences a zombie (KIP-447). Under the classic protocol the metadata sent is
//! the one read with the batch's poll (`GroupMetadata::Polled`), not
//! `consumer.group_metadata()` at the commit: krabka 0.7.1 answers a removed member's
//! `group_metadata()` with generation -1 and no member id, the group-id-only shape that no
//! coordinator fences (docs/findings.md); `--group-metadata live` sends that call's answer, to
//! show it. After a transaction that did not commit: abort,
//! then seek every assigned partition to the group's committed offset from
//! `Consumer::committed`, which krabka sends as an OffsetFetch with require_stable set (and
//! asks again while the coordinator answers UNSTABLE_OFFSET_COMMIT).
//!
//! krabka's classic `Consumer::build()` is the group join itself: it returns once the member
//! joined (JoinGroup twice, SyncGroup) and fetched its assignment's committed offsets, stably.
//! Both can wait on other members: the join until every member rejoined or was dropped (a
//! member cut off, after its session timeout), the fetch until the transactions holding the
//! group's offsets end. The protocol's `member_start` answers before the member joins ("it
//! joins the group on its first poll"), so the build runs in a task of its own from
//! `member_start` on, and `poll` waits for it within its wait, answering no records until it
//! is done.
//!
//! The harness pauses the member and records its offset fetches on the wire (its gateway), so
//! the member has no pause points of its own.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use krabka_client_consumer::{
    AutoOffsetReset, Consumer, ConsumerError, ConsumerGroupMetadata, GroupProtocol, IsolationLevel,
};
use krabka_client_producer::{Producer, ProducerError, ProducerRecord};
use krabka_units::convert::TimeExt as _;
use krabka_units::Time;
use serde::Deserialize;
use tokio::sync::Mutex;
use tokio::task::JoinHandle;
use tokio::time::{timeout_at, Instant};

use crate::errors::{consumer_text, producer_kind, producer_text};
use crate::protocol::{fail, kind, unknown, Answer, CallError, Read, Request, Token};

/// member_start's `pipeline` object.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(default)]
pub struct MemberConfig {
    pub bootstrap: String,
    pub client_id: String,
    pub group: String,
    pub input: String,
    pub output: String,
    pub transactional_id: String,
    pub txn_id_per_partition: bool,
    pub session_timeout_ms: i64,
    pub rebalance_timeout_ms: i64,
    pub transaction_timeout_ms: i64,
    pub request_timeout_ms: i64,
    pub max_poll: i64,
    pub protocol: String,
    pub transaction_version: i64,
}

/// transact's offsets: one past the last record copied, per input partition.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(default)]
pub struct Offset {
    pub partition: i32,
    pub offset: i64,
}

/// transact's outputs, written to the output topic as given.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(default)]
pub struct Output {
    pub partition: i32,
    #[serde(deserialize_with = "crate::protocol::b64")]
    pub key: Option<bytes::Bytes>,
    #[serde(deserialize_with = "crate::protocol::b64")]
    pub value: Option<bytes::Bytes>,
}

/// The member's group consumer.
enum Group {
    /// `Consumer::build()` runs in this task: it joins the group and fetches the committed
    /// offsets of its assignment.
    Joining(JoinHandle<Result<Consumer, ConsumerError>>),
    /// The build failed (the poll that saw it said why): the next poll builds it again.
    Failed,
    Joined(Consumer),
    Closed,
}

/// Which group metadata `transact` sends with the batch's offsets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupMetadata {
    /// The member id and generation the batch was polled under (the request's, which `poll`
    /// read after `Consumer::poll`): a krabka user who keeps `group_metadata()` with each
    /// batch. Under the consumer protocol `Live` all the same (the member epoch moves in the
    /// background, and the coordinator refuses an old one).
    Polled,
    /// `consumer.group_metadata()` at the commit. After the coordinator removed the member
    /// (classic), krabka 0.7.1 answers it with generation -1 and no member id, which the
    /// coordinator accepts from anyone: a zombie commits (docs/findings.md).
    Live,
}

pub struct Member {
    cfg: MemberConfig,
    protocol: GroupProtocol,
    metadata: GroupMetadata,
    rt: Duration,
    /// One call at a time: a call the harness gave up on may still be running.
    op: Mutex<()>,
    consumer: Mutex<Group>,
    /// None once the producer failed: the member must be restarted.
    producer: Mutex<Option<Arc<Producer>>>,
    /// init_transactions, started by member_start; the first transact awaits it.
    init: Mutex<Option<JoinHandle<Result<(), ProducerError>>>>,
    /// Where the last poll started on each partition: the rewind when the group committed
    /// nothing there.
    first_polled: std::sync::Mutex<HashMap<i32, i64>>,
}

fn bad(field: &str, why: impl std::fmt::Display) -> CallError {
    fail(kind::INVALID_CONFIG, format!("{field}: {why}"))
}

impl Member {
    /// Starts the consumer's build (subscribed to the input; the build is the group join, and
    /// the polls wait for it) in a task, builds the transactional producer, and starts
    /// init_transactions in the background: it fences the previous producer of the id (a
    /// restarted member's), and the first transact waits for it. Neither waits on the group.
    pub async fn start(c: MemberConfig, metadata: GroupMetadata) -> Result<Member, CallError> {
        if c.bootstrap.split(',').all(|a| a.trim().is_empty()) {
            return Err(bad("Bootstrap", "no address"));
        }
        for (field, v) in [("Group", &c.group), ("Input", &c.input), ("TransactionalID", &c.transactional_id)] {
            if v.is_empty() {
                return Err(bad(field, "empty"));
            }
        }
        if c.output.is_empty() || c.output == c.input {
            return Err(bad("Output", "empty, or the input topic"));
        }
        let protocol = match c.protocol.as_str() {
            "" | "classic" => GroupProtocol::Classic,
            "consumer" => GroupProtocol::Consumer,
            p => return Err(bad("Protocol", format!("{p:?}, want classic or consumer"))),
        };
        if c.request_timeout_ms <= 0 || c.transaction_timeout_ms <= 0 {
            return Err(bad("RequestTimeout, LeaseDuration", "must be positive"));
        }
        if c.session_timeout_ms < 0 || c.rebalance_timeout_ms < 0 || c.max_poll < 0 {
            return Err(bad("SessionTimeout, RebalanceTimeout, MaxPoll", "must not be negative"));
        }
        if !(0..=2).contains(&c.transaction_version) {
            return Err(bad("TransactionVersion", format!("{}, want 0, 1 or 2", c.transaction_version)));
        }
        if c.txn_id_per_partition {
            return Err(bad("TxnIDPerPartition", "the krabka adapter's member has one producer (a transactional id per member)"));
        }
        let rt = Duration::from_millis(c.request_timeout_ms as u64);
        let deadline = Instant::now() + rt;
        let client_id = if c.client_id.is_empty() { "fencecheck-krabka-member".to_owned() } else { c.client_id.clone() };
        // The join runs beside member_start and the polls (the module's comment says why); the
        // producer is built and init_transactions started meanwhile.
        let joining = tokio::spawn(build_consumer(&c, protocol, rt));
        let txn_timeout = Duration::from_millis(c.transaction_timeout_ms as u64);
        let built = Producer::builder()
            .bootstrap(c.bootstrap.clone())
            .client_id(client_id)
            .linger(Duration::ZERO)
            .request_timeout(rt)
            .delivery_timeout(rt)
            .max_block(rt)
            .init_retry_timeout(rt)
            .flush_timeout(rt)
            .retry_backoff(Duration::from_millis(100))
            .retry_backoff_max(Duration::from_millis(1000))
            .metadata_max_age((rt / 20).max(Duration::from_millis(100)))
            .enable_metrics_push(false)
            .maybe_transactional_id(Some(c.transactional_id.clone()))
            .maybe_transaction_timeout(Some(txn_timeout))
            .build();
        let producer = match timeout_at(deadline, built).await {
            Ok(Ok(p)) => Arc::new(p),
            Ok(Err(e)) => {
                joining.abort();
                return Err(fail(producer_kind(&e), format!("build the producer: {}", producer_text(&e))));
            }
            Err(_) => {
                joining.abort();
                return Err(fail(kind::CLIENT, "build the producer: not within the request timeout"));
            }
        };
        let p = Arc::clone(&producer);
        let init = tokio::spawn(async move { p.init_transactions().await });
        Ok(Member {
            cfg: c,
            protocol,
            metadata,
            rt,
            op: Mutex::new(()),
            consumer: Mutex::new(Group::Joining(joining)),
            producer: Mutex::new(Some(producer)),
            init: Mutex::new(Some(init)),
            first_polled: std::sync::Mutex::new(HashMap::new()),
        })
    }

    // ---- poll ----

    /// Up to max_poll committed records of the input, waiting up to wait_ms for the first, with
    /// the member id and generation they were polled under (krabka starts a rebalance only in
    /// poll, so the pair read after it is the one the records belong to). Until the consumer's
    /// build (the group join) is done, no records, no member id and generation -1, as a
    /// kafka-clients consumer that has not joined yet.
    pub async fn poll(&self, wait_ms: i64) -> Result<Answer, CallError> {
        let _op = self.op.lock().await;
        let deadline = Instant::now() + Duration::from_millis(wait_ms.max(0) as u64);
        let mut guard = self.consumer.lock().await;
        if matches!(*guard, Group::Failed) {
            *guard = Group::Joining(tokio::spawn(build_consumer(&self.cfg, self.protocol, self.rt)));
        }
        if let Group::Joining(h) = &mut *guard {
            let built = match timeout_at(deadline, h).await {
                Err(_) => {
                    return Ok(Answer { records: Some(Vec::new()), generation: Some(-1), ..Default::default() });
                }
                Ok(b) => b,
            };
            match built {
                Ok(Ok(cons)) => *guard = Group::Joined(cons),
                Ok(Err(e)) => {
                    *guard = Group::Failed;
                    return Err(fail(
                        consumer_kind(&e),
                        format!("build the consumer (join the group): {}; the next poll builds it again", consumer_text(&e)),
                    ));
                }
                Err(e) => {
                    *guard = Group::Failed;
                    return Err(fail(kind::CLIENT, format!("build the consumer (join the group): its task failed: {e}")));
                }
            }
        }
        let Group::Joined(cons) = &mut *guard else {
            return Err(fail(kind::CLOSED, "member closed"));
        };
        let left = deadline.saturating_duration_since(Instant::now());
        let recs = match cons.poll(Time::from_std(left)).await {
            Ok(r) => r,
            Err(e) => return Err(fail(kind::CLIENT, format!("poll: {}", consumer_text(&e)))),
        };
        let mut first = self.first_polled.lock().unwrap();
        first.clear();
        let mut out = Vec::with_capacity(recs.len());
        for r in recs {
            if r.topic != self.cfg.input {
                continue;
            }
            first.entry(r.partition).or_insert(r.offset);
            out.push(Read { partition: Some(r.partition), offset: r.offset, key: r.key, value: r.value });
        }
        Ok(Answer {
            records: Some(out),
            member_id: Some(cons.member_id()),
            generation: Some(cons.generation_id()),
            ..Default::default()
        })
    }

    // ---- transact ----

    pub async fn transact(&self, req: &Request) -> Result<Answer, CallError> {
        let _op = self.op.lock().await;
        let start = Instant::now();
        let left = match req.timeout_ms {
            Some(ms) => Duration::from_millis(ms.max(0) as u64),
            None => 3 * self.rt,
        };
        // As the other members: the transaction up to its commit gets at most twice the request
        // timeout, leaving time for an abort and a rewind; the commit may take the whole bound.
        let txn_deadline = start + left.min(2 * self.rt);
        let commit_deadline = start + left.min(3 * self.rt);
        let Some(p) = self.producer.lock().await.clone() else {
            let mut e = fail(kind::PRODUCER, "the member's producer failed earlier: restart it");
            e.restart = true;
            return Err(e);
        };
        if req.timeout_ms == Some(0) {
            let mut e = fail(kind::CLIENT, "the call's deadline had passed: no transaction began");
            self.rewind(&mut e).await;
            return Err(e);
        }
        // The first transact waits for member_start's init_transactions.
        let init = self.init.lock().await.take();
        if let Some(h) = init {
            let r = match timeout_at(txn_deadline, h).await {
                Ok(Ok(Ok(()))) => Ok(()),
                Ok(Ok(Err(e))) => Err(fail(producer_kind(&e), format!("init_transactions: {}", producer_text(&e)))),
                Ok(Err(e)) => Err(fail(kind::PRODUCER, format!("init_transactions: its task failed: {e}"))),
                Err(_) => Err(fail(kind::CLIENT, "init_transactions: no answer within the call's bound")),
            };
            if let Err(mut e) = r {
                self.give_up(&mut e).await;
                return Err(e);
            }
        }
        let txn = match timeout_at(txn_deadline, p.begin_transaction()).await {
            Ok(Ok(t)) => t,
            Ok(Err(e)) => {
                let mut e = fail(producer_kind(&e), format!("begin_transaction: {}", producer_text(&e)));
                self.give_up(&mut e).await;
                return Err(e);
            }
            Err(_) => {
                let mut e = fail(kind::CLIENT, "begin_transaction: not within the call's bound");
                self.give_up(&mut e).await;
                return Err(e);
            }
        };
        let token = p.transactional_identity().await.map(|(producer_id, epoch)| Token { producer_id, epoch });
        let outputs: Vec<Output> = req.outputs.clone();
        let offsets: Vec<((String, i32), i64)> =
            req.offsets.iter().map(|o| ((self.cfg.input.clone(), o.partition), o.offset)).collect();
        let before_commit = timeout_at(txn_deadline, async {
            let mut handles = Vec::with_capacity(outputs.len());
            for o in outputs {
                let rec = ProducerRecord {
                    topic: self.cfg.output.clone(),
                    partition: Some(o.partition),
                    key: o.key,
                    value: o.value,
                    ..Default::default()
                };
                handles.push(p.enqueue(rec).await.map_err(|e| ("produce", e))?);
            }
            for d in handles {
                d.await.map_err(|e| ("produce", e))?;
            }
            // The group's metadata: its generation and member id go into TxnOffsetCommit, where
            // the group coordinator checks them. Under classic, the batch's (GroupMetadata says
            // why).
            let live = match &*self.consumer.lock().await {
                Group::Joined(c) => c.group_metadata(),
                _ => return Err(("send_offsets_to_transaction", ProducerError::Closed)),
            };
            let meta = match (self.metadata, self.protocol, req.generation) {
                (GroupMetadata::Polled, GroupProtocol::Classic, Some(generation)) => ConsumerGroupMetadata {
                    generation_id: generation,
                    member_id: req.member_id.clone(),
                    ..live
                },
                _ => live,
            };
            p.send_offsets_to_transaction(offsets, &meta)
                .await
                .map_err(|e| ("send_offsets_to_transaction", e))
        })
        .await;
        let failed = match before_commit {
            Ok(Ok(())) => None,
            Ok(Err((step, e))) => Some(fail(group_kind(&e), format!("{step}: {}", producer_text(&e)))),
            Err(_) => Some(fail(kind::CLIENT, "the outputs or the offsets were not done within the call's bound")),
        };
        if let Some(mut e) = failed {
            // No commit was asked for: the transaction can only be aborted.
            e.token = token;
            match timeout_at(Instant::now() + self.rt, txn.abort()).await {
                Ok(Ok(())) => self.rewind(&mut e).await,
                Ok(Err(a)) => {
                    e.message += &format!("; abort: {}", producer_text(&a.source));
                    drop(a.transaction);
                    self.give_up(&mut e).await;
                }
                Err(_) => {
                    e.message += "; abort: no answer within the request timeout";
                    self.give_up(&mut e).await;
                }
            }
            return Err(e);
        }
        let committed = timeout_at(commit_deadline, txn.commit()).await;
        let mut e = match committed {
            Ok(Ok(())) => return Ok(Answer { token, ..Default::default() }),
            // The EndTxn went out, or may have (krabka retries it): unknown, and the member
            // restarts; the next producer's InitProducerId ends whatever is open.
            Ok(Err(ce)) => {
                let e = unknown(group_kind(&ce.source), format!("commit: {}", producer_text(&ce.source)));
                drop(ce.transaction);
                e
            }
            Err(_) => unknown(kind::CLIENT, "commit: no answer within the call's bound"),
        };
        e.token = token;
        self.give_up(&mut e).await;
        Err(e)
    }

    /// Marks the answer restart and drops the producer: it is not used again.
    async fn give_up(&self, e: &mut CallError) {
        e.restart = true;
        self.producer.lock().await.take();
    }

    /// Seeks every assigned input partition to the group's committed offset (an OffsetFetch
    /// with require_stable), or to where the last poll started on it when the group committed
    /// nothing there. A fetch that fails restarts the member: its position is past the batch.
    async fn rewind(&self, e: &mut CallError) {
        let guard = self.consumer.lock().await;
        // Not joined: nothing was polled, so there is nothing to rewind.
        let Group::Joined(cons) = &*guard else { return };
        let r = timeout_at(Instant::now() + self.rt, async {
            let assigned: Vec<(String, i32)> =
                cons.assignment().await.into_iter().filter(|(t, _)| *t == self.cfg.input).collect();
            if assigned.is_empty() {
                return Ok(());
            }
            let at = cons.committed(&assigned).await?;
            let first = self.first_polled.lock().unwrap().clone();
            for (t, part) in assigned {
                let off = match at.get(&(t.clone(), part)) {
                    Some(Some(om)) => om.offset,
                    _ => first.get(&part).copied().unwrap_or(-1),
                };
                if off >= 0 {
                    cons.seek(t, part, off).await?;
                }
            }
            Ok::<(), krabka_client_consumer::ConsumerError>(())
        })
        .await;
        let why = match r {
            Ok(Ok(())) => return,
            Ok(Err(err)) => consumer_text(&err),
            Err(_) => "no answer within the request timeout".to_owned(),
        };
        e.message += &format!("; rewind to the committed offsets: {why}");
        e.restart = true;
    }

    /// Leaves the group (bounded by the request timeout) and drops the producer without ending
    /// its transaction: the next member's InitProducerId does.
    pub async fn close(&self) {
        self.producer.lock().await.take();
        if let Some(h) = self.init.lock().await.take() {
            h.abort();
        }
        let group = std::mem::replace(&mut *self.consumer.lock().await, Group::Closed);
        match group {
            Group::Joined(c) => {
                let _ = tokio::time::timeout(self.rt.min(Duration::from_secs(3)), c.close()).await;
            }
            // Dropping the build's future closes its connections; a member that joined meanwhile
            // leaves by its session timeout, as a process that was killed.
            Group::Joining(h) => h.abort(),
            Group::Failed | Group::Closed => {}
        }
    }
}

/// The protocol's kind of a producer error in a pipeline: the group's refusals of a zombie's
/// offsets (by generation, member id or member epoch) are fences too.
fn group_kind(e: &ProducerError) -> &'static str {
    match e {
        // ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, FENCED_MEMBER_EPOCH,
        // STALE_MEMBER_EPOCH.
        ProducerError::Server(22 | 25 | 82 | 110 | 113) => kind::FENCED,
        _ => producer_kind(e),
    }
}

/// The member's group consumer: subscribed to the input at read_committed without
/// auto-commit. Under the classic protocol krabka's build joins the group and fetches the
/// assignment's committed offsets (stable) before it returns; under the consumer protocol it
/// returns before the first ConsumerGroupHeartbeat, which its coordinator task sends.
fn build_consumer(
    c: &MemberConfig,
    protocol: GroupProtocol,
    rt: Duration,
) -> impl std::future::Future<Output = Result<Consumer, ConsumerError>> + Send + 'static {
    let client_id = if c.client_id.is_empty() { "fencecheck-krabka-member".to_owned() } else { c.client_id.clone() };
    let rtt = Time::from_std(rt);
    // Under the consumer protocol the session timeout and heartbeat interval are the group's,
    // set on the cluster. krabka's JoinGroup rebalance timeout is max_poll_interval, as
    // Kafka's, which must not be below the session timeout.
    let classic_session = (protocol == GroupProtocol::Classic && c.session_timeout_ms > 0).then_some(c.session_timeout_ms);
    Consumer::builder()
        .bootstrap(c.bootstrap.clone())
        .client_id(client_id)
        .group_id(c.group.clone())
        .group_protocol(protocol)
        .subscribe(vec![c.input.clone()])
        .isolation_level(IsolationLevel::ReadCommitted)
        .auto_offset_reset(AutoOffsetReset::Earliest)
        .enable_auto_commit(false)
        .allow_auto_create_topics(false)
        .enable_metrics_push(false)
        .fetch_max_wait(Time::from_millis(100))
        .request_timeout(rtt)
        .default_api_timeout(rtt)
        .max_poll_records(if c.max_poll > 0 { c.max_poll as usize } else { 500 })
        .metadata_max_age(Time::from_std((rt / 20).max(Duration::from_millis(100))))
        .maybe_session_timeout(classic_session.map(Time::from_millis))
        .maybe_heartbeat_interval(classic_session.map(|s| Time::from_millis((s / 3).clamp(1, 3000))))
        .maybe_max_poll_interval(
            (c.rebalance_timeout_ms > 0).then(|| Time::from_millis(c.rebalance_timeout_ms.max(c.session_timeout_ms))),
        )
        .build()
}

/// The protocol's kind of a consumer build's error: a configuration krabka refused before any
/// request, or anything else (a connection, a timeout, the group's refusal).
fn consumer_kind(e: &ConsumerError) -> &'static str {
    match e {
        ConsumerError::InvalidConfig(_) | ConsumerError::InvalidGroupId | ConsumerError::InvalidArgument(_) => {
            kind::INVALID_CONFIG
        }
        _ => kind::CLIENT,
    }
}
