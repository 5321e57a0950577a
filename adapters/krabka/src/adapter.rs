//! One process's transport on krabka: the seed's BrokerTransport behind the exec protocol.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use krabka_client_admin::features::DescribeFeaturesOptions;
use krabka_client_admin::{AdminClient, AdminClientConfig};
use krabka_client_consumer::{AutoOffsetReset, Consumer, IsolationLevel};
use krabka_client_producer::{Producer, ProducerRecord};
use krabka_units::convert::TimeExt as _;
use krabka_units::Time;
use tokio::time::{timeout_at, Instant};

use crate::errors::{
    admin_code, admin_text, consumer_text, producer_kind, producer_sent_nothing, producer_text,
};
use crate::member::{GroupMetadata, Member};
use crate::protocol::{fail, kind, unknown, Answer, CallError, Config, Read, Request, Token, Write};

/// The krabka version this adapter is built on (Cargo.lock pins it), for hello's name.
const KRABKA_VERSION: &str = "0.7.1";

/// How much longer than the request timeout start's first contact with the cluster may take:
/// the harness gives hello and start 30 s more than the request timeout (docs/exec-protocol.md).
const STARTUP_GRACE: Duration = Duration::from_secs(20);

/// transaction.version, the feature KIP-890's second phase is finalized under.
const TRANSACTION_VERSION_FEATURE: &str = "transaction.version";

struct Settings {
    cfg: Config,
    /// request_timeout_ms: bounds every call.
    rt: Duration,
    /// lease_ms: the transaction timeout of every role.
    lease: Duration,
}

/// One holding: the producer `acquire` built for a role, bound to the pair it minted.
struct Holding {
    producer: Arc<Producer>,
    token: Token,
}

#[derive(Default)]
struct RoleState {
    /// One call on the role at a time (the harness sends at most one per role).
    op: tokio::sync::Mutex<()>,
    /// The holding, readable without I/O (held).
    held: Mutex<Option<Arc<Holding>>>,
}

pub struct Adapter {
    settings: OnceLock<Settings>,
    closed: AtomicBool,
    roles: Mutex<HashMap<String, Arc<RoleState>>>,
    /// Registrations: one idempotent, non-transactional producer, rebuilt after a failure.
    plain: tokio::sync::Mutex<Option<Arc<Producer>>>,
    /// Idle read_committed consumers (no group, assign only), one per concurrent read.
    readers: Mutex<Vec<Consumer>>,
    admin: tokio::sync::Mutex<Option<Arc<AdminClient>>>,
    /// A pipeline run's member (member_start), one per adapter process.
    member: OnceLock<Member>,
    /// What the member's transact sends as the group's metadata (the command line's
    /// `--group-metadata`).
    metadata: GroupMetadata,
}

impl Adapter {
    pub fn new(metadata: GroupMetadata) -> Self {
        Adapter {
            metadata,
            settings: OnceLock::new(),
            closed: AtomicBool::new(false),
            roles: Mutex::new(HashMap::new()),
            plain: tokio::sync::Mutex::new(None),
            readers: Mutex::new(Vec::new()),
            admin: tokio::sync::Mutex::new(None),
            member: OnceLock::new(),
        }
    }

    pub async fn handle(&self, req: &Request) -> Result<Answer, CallError> {
        match req.op.as_str() {
            "hello" => {
                return Ok(Answer {
                    version: Some(crate::protocol::PROTOCOL_VERSION),
                    name: Some(format!("krabka {KRABKA_VERSION} (rust adapter)")),
                    // The token comes from Producer::transactional_identity, describe from the
                    // admin client's DescribeTransactions: nothing for the harness to do.
                    capabilities: vec![],
                    // A krabka pipeline member too: its group metadata carries the generation
                    // and member id (KIP-447), and its offset fetches are stable (member.rs).
                    workloads: vec!["leases".to_owned(), "pipelines".to_owned()],
                    ..Default::default()
                })
            }
            "start" => {
                let Some(c) = &req.config else {
                    return Err(fail(kind::INVALID_CONFIG, "start without config"));
                };
                let tv = self.start(c.clone()).await?;
                return Ok(Answer { transaction_version: Some(tv), ..Default::default() });
            }
            "member_start" => {
                let Some(c) = &req.pipeline else {
                    return Err(fail(kind::INVALID_CONFIG, "member_start without pipeline"));
                };
                if self.settings.get().is_some() || self.member.get().is_some() {
                    return Err(fail(kind::INVALID_CONFIG, "member_start: the adapter already serves a transport or a member"));
                }
                let m = Member::start(c.clone(), self.metadata).await?;
                if self.member.set(m).is_err() {
                    return Err(fail(kind::INVALID_CONFIG, "member_start: already started"));
                }
                return Ok(Answer::default());
            }
            "poll" | "transact" => {
                let Some(m) = self.member.get() else {
                    return Err(fail(kind::INVALID_CONFIG, format!("{} before member_start", req.op)));
                };
                if self.closed.load(Ordering::Acquire) {
                    return Err(fail(kind::CLOSED, "member closed"));
                }
                return if req.op == "poll" { m.poll(req.wait_ms).await } else { m.transact(req).await };
            }
            _ => {}
        }
        let Some(s) = self.settings.get() else {
            return Err(fail(kind::INVALID_CONFIG, format!("{} before start", req.op)));
        };
        if self.closed.load(Ordering::Acquire) {
            return Err(fail(kind::CLOSED, "transport closed"));
        }
        let deadline = Instant::now() + s.rt;
        match req.op.as_str() {
            "acquire" => {
                let token = self.acquire(s, &req.role, deadline).await?;
                Ok(Answer { token: Some(token), ..Default::default() })
            }
            "register" => {
                let partition = req.partition.ok_or_else(|| fail(kind::INVALID_CONFIG, "register without partition"))?;
                let w = Write { topic: req.topic.clone(), partition, key: req.key.clone(), value: req.value.clone() };
                let off = self.register(s, w, deadline).await?;
                Ok(Answer { join_seq: Some(off), ..Default::default() })
            }
            "write_lease" => {
                let partition = req.partition.ok_or_else(|| fail(kind::INVALID_CONFIG, "write_lease without partition"))?;
                let w = Write { topic: req.topic.clone(), partition, key: req.key.clone(), value: req.value.clone() };
                self.write(&req.role, req.token, vec![w], deadline).await?;
                Ok(Answer::default())
            }
            "write_fenced" => {
                self.write(&req.role, req.token, req.records.clone(), deadline).await?;
                Ok(Answer::default())
            }
            "read_role" => {
                let partition = req.partition.ok_or_else(|| fail(kind::INVALID_CONFIG, "read_role without partition"))?;
                let recs = self.read(s, &req.topic, partition, deadline).await?;
                Ok(Answer { records: Some(recs), ..Default::default() })
            }
            "describe" => {
                let (held, token) = self.describe(s, &req.role, deadline).await?;
                Ok(Answer { held, token, ..Default::default() })
            }
            "held" => {
                let h = self.holding(&req.role);
                Ok(Answer { held: h.is_some(), token: h.map(|h| h.token), ..Default::default() })
            }
            op => Err(fail(kind::INVALID_CONFIG, format!("unknown op {op:?}"))),
        }
    }

    // ---- start ----

    async fn start(&self, c: Config) -> Result<i64, CallError> {
        if self.settings.get().is_some() {
            return Err(fail(kind::INVALID_CONFIG, "start: already started"));
        }
        if c.bootstrap.split(',').all(|a| a.trim().is_empty()) {
            return Err(fail(kind::INVALID_CONFIG, "Bootstrap: no address"));
        }
        if c.request_timeout_ms <= 0 || c.lease_ms <= 0 {
            return Err(fail(kind::INVALID_CONFIG, "LeaseDuration and RequestTimeout must be positive"));
        }
        if c.topic.is_empty() {
            return Err(fail(kind::INVALID_CONFIG, "Topic: empty"));
        }
        if !(0..=2).contains(&c.transaction_version) {
            return Err(fail(
                kind::INVALID_CONFIG,
                format!("TransactionVersion: {} is not 0, 1 or 2", c.transaction_version),
            ));
        }
        let rt = Duration::from_millis(c.request_timeout_ms as u64);
        let lease = Duration::from_millis(c.lease_ms as u64);
        let deadline = Instant::now() + rt + STARTUP_GRACE;

        // The admin client, and through it the cluster's finalized transaction.version: krabka's
        // producer follows it (Producer::transaction_v2, read from the coordinator's ApiVersions
        // at init_transactions, as Kafka's TransactionManager does), so it is what the producers
        // speak, and a pin it cannot honour is refused.
        let addrs = bootstrap_addrs(&c.bootstrap);
        let admin = match timeout_at(deadline, AdminClient::connect_with_config(&addrs, admin_config(&c, rt))).await {
            Ok(Ok(a)) => Arc::new(a),
            Ok(Err(e)) => return Err(fail(kind::ADMIN, format!("no bootstrap address answered: {}", admin_text(&e)))),
            Err(_) => return Err(fail(kind::ADMIN, "no bootstrap address answered within the request timeout")),
        };
        let opts = DescribeFeaturesOptions { timeout: Some(Time::from_std(rt)), node_id: None };
        let features = match timeout_at(deadline, admin.describe_features(opts)).await {
            Ok(Ok(f)) => f,
            Ok(Err(e)) => return Err(fail(kind::ADMIN, format!("describe features (ApiVersions): {}", admin_text(&e)))),
            Err(_) => return Err(fail(kind::ADMIN, "describe features (ApiVersions): no answer in time")),
        };
        let level = features
            .finalized
            .iter()
            .find(|f| f.name == TRANSACTION_VERSION_FEATURE)
            .map_or(0, |f| f.max_version);
        let tv2 = level >= 2;
        if c.transaction_version == 2 && !tv2 {
            return Err(fail(
                kind::INVALID_CONFIG,
                format!("TransactionVersion: 2 required, but the cluster finalized transaction.version {level}"),
            ));
        }
        if c.transaction_version == 1 && tv2 {
            return Err(fail(
                kind::INVALID_CONFIG,
                "TransactionVersion: krabka follows the cluster's finalized transaction.version and cannot pin 1 on a cluster that finalized 2",
            ));
        }
        *self.admin.lock().await = Some(admin);
        let tv = if tv2 { 2 } else { 1 };
        if self.settings.set(Settings { cfg: c, rt, lease }).is_err() {
            return Err(fail(kind::INVALID_CONFIG, "start: already started"));
        }
        let s = self.settings.get().expect("just set");
        self.warm_up(s, deadline).await;
        Ok(tv)
    }

    /// Builds the registrar and a reader inside start's budget, so that the first calls of the
    /// run do not pay for them. A failure is not start's: the next call tries again. (The
    /// topics do not exist yet at start: the harness creates them after starting the
    /// transports.)
    async fn warm_up(&self, s: &Settings, deadline: Instant) {
        if let Err(e) = self.registrar(s, deadline).await {
            eprintln!("krabka-adapter: warm-up: registrar: {}", e.message);
        }
        match timeout_at(deadline, new_reader(s)).await {
            Ok(Ok(c)) => self.readers.lock().unwrap().push(c),
            Ok(Err(e)) => eprintln!("krabka-adapter: warm-up: reader: {}", consumer_text(&e)),
            Err(_) => eprintln!("krabka-adapter: warm-up: reader: not built in time"),
        }
    }

    // ---- roles ----

    fn role(&self, role: &str) -> Arc<RoleState> {
        let mut roles = self.roles.lock().unwrap();
        Arc::clone(roles.entry(role.to_owned()).or_default())
    }

    fn holding(&self, role: &str) -> Option<Arc<Holding>> {
        self.role(role).held.lock().unwrap().clone()
    }

    /// Forgets `h` as the role's holding, if it still is. The producer is dropped, not closed
    /// and not aborted: dropping stops its sender and sends no EndTxn (closing would flush, and
    /// an abort could fence the role's next holder under TV1 rules or bump the epoch).
    fn drop_holding(rs: &RoleState, h: &Arc<Holding>, why: &str) {
        let mut held = rs.held.lock().unwrap();
        if held.as_ref().is_some_and(|cur| Arc::ptr_eq(cur, h)) {
            *held = None;
            eprintln!(
                "krabka-adapter: dropping the producer of ({}, {}): {why}",
                h.token.producer_id, h.token.epoch
            );
        }
    }

    // ---- acquire ----

    async fn acquire(&self, s: &Settings, role: &str, deadline: Instant) -> Result<Token, CallError> {
        let rs = self.role(role);
        let _op = rs.op.lock().await;
        if let Some(old) = rs.held.lock().unwrap().take() {
            eprintln!(
                "krabka-adapter: role {role}: acquired again; dropping the producer of ({}, {})",
                old.token.producer_id, old.token.epoch
            );
        }
        let tid = format!("{}/{}", s.cfg.topic, role);
        // The build sends only the idempotent InitProducerId, with no transactional id: nothing
        // of the role is minted if it fails.
        let producer = match timeout_at(deadline, build_producer(s, Some(&tid))).await {
            Ok(Ok(p)) => Arc::new(p),
            Ok(Err(e)) => return Err(fail(producer_kind(&e), format!("build the producer of {tid}: {}", producer_text(&e)))),
            Err(_) => {
                return Err(fail(
                    kind::CLIENT,
                    format!("build the producer of {tid}: not built within the request timeout {:?} (no InitProducerId for the role sent)", s.rt),
                ))
            }
        };
        // init_transactions: FindCoordinator, then InitProducerId on the coordinator. Any
        // failure may follow an InitProducerId that reached the coordinator: unknown.
        match timeout_at(deadline, producer.init_transactions()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(unknown(producer_kind(&e), format!("init_transactions: {}", producer_text(&e)))),
            Err(_) => {
                return Err(unknown(
                    kind::CLIENT,
                    format!("init_transactions: no answer within the request timeout {:?}", s.rt),
                ))
            }
        }
        let Some((producer_id, epoch)) = producer.transactional_identity().await else {
            return Err(unknown(
                kind::PRODUCER,
                format!("init_transactions returned, but Producer::transactional_identity reports no pair (krabka {KRABKA_VERSION})"),
            ));
        };
        let token = Token { producer_id, epoch };
        if self.closed.load(Ordering::Acquire) {
            return Err(unknown(kind::CLOSED, "the transport was closed while InitProducerId ran"));
        }
        *rs.held.lock().unwrap() = Some(Arc::new(Holding { producer, token }));
        Ok(token)
    }

    // ---- writes ----

    /// Commits `ws` in one transaction on the producer bound to `token`. Anything failing
    /// before the commit is asked for is `fail` (the transaction can only be aborted); an
    /// error or a timeout of the commit itself is `unknown` (its EndTxn may have been sent).
    /// Any failure ends the holding.
    async fn write(&self, role: &str, token: Option<Token>, ws: Vec<Write>, deadline: Instant) -> Result<(), CallError> {
        let rs = self.role(role);
        let _op = rs.op.lock().await;
        let not_held = || fail(kind::NOT_HELD, format!("write {role:?}: not held"));
        let h = rs.held.lock().unwrap().clone().ok_or_else(not_held)?;
        if token != Some(h.token) {
            return Err(not_held());
        }
        let p = Arc::clone(&h.producer);
        let txn = match timeout_at(deadline, p.begin_transaction()).await {
            Ok(Ok(t)) => t,
            Ok(Err(e)) => {
                Self::drop_holding(&rs, &h, "begin_transaction failed");
                return Err(fail(producer_kind(&e), format!("begin_transaction: {}", producer_text(&e))));
            }
            Err(_) => {
                Self::drop_holding(&rs, &h, "begin_transaction timed out");
                return Err(fail(kind::CLIENT, "begin_transaction: not within the request timeout"));
            }
        };
        let n = ws.len();
        let produced = timeout_at(deadline, async {
            let mut handles = Vec::with_capacity(n);
            for w in ws {
                let (topic, partition) = (w.topic.clone(), w.partition);
                let rec = ProducerRecord {
                    topic: w.topic,
                    partition: Some(w.partition),
                    key: w.key,
                    value: w.value,
                    ..Default::default()
                };
                handles.push((topic.clone(), partition, p.enqueue(rec).await.map_err(|e| (topic, partition, e))?));
            }
            for (topic, partition, d) in handles {
                d.await.map_err(|e| (topic, partition, e))?;
            }
            Ok::<(), (String, i32, krabka_client_producer::ProducerError)>(())
        })
        .await;
        match produced {
            Ok(Ok(())) => {}
            Ok(Err((topic, partition, e))) => {
                drop(txn);
                Self::drop_holding(&rs, &h, "produce failed");
                return Err(fail(
                    producer_kind(&e),
                    format!("produce to {topic}/{partition}: {} (no commit requested)", producer_text(&e)),
                ));
            }
            Err(_) => {
                drop(txn);
                Self::drop_holding(&rs, &h, "produce timed out");
                return Err(fail(
                    kind::CLIENT,
                    format!("produce: {n} record(s) not all acknowledged within the request timeout (no commit requested)"),
                ));
            }
        }
        let committed = timeout_at(deadline, txn.commit()).await;
        let result = match committed {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => {
                Self::drop_holding(&rs, &h, "commit failed");
                // Even an error krabka calls definite may follow an EndTxn attempt that
                // committed (a retry's answer): unknown, as docs/exec-protocol.md asks.
                Err(unknown(producer_kind(&e.source), format!("commit: {}", producer_text(&e.source))))
            }
            Err(_) => {
                Self::drop_holding(&rs, &h, "commit timed out");
                Err(unknown(kind::CLIENT, "commit: no answer within the request timeout"))
            }
        };
        result
    }

    // ---- register ----

    async fn registrar(&self, s: &Settings, deadline: Instant) -> Result<Arc<Producer>, CallError> {
        let mut plain = self.plain.lock().await;
        if let Some(p) = plain.as_ref() {
            return Ok(Arc::clone(p));
        }
        match timeout_at(deadline, build_producer(s, None)).await {
            Ok(Ok(p)) => {
                let p = Arc::new(p);
                *plain = Some(Arc::clone(&p));
                Ok(p)
            }
            Ok(Err(e)) => Err(fail(producer_kind(&e), format!("build the registrar: {}", producer_text(&e)))),
            Err(_) => Err(fail(kind::CLIENT, "build the registrar: not within the request timeout")),
        }
    }

    async fn register(&self, s: &Settings, w: Write, deadline: Instant) -> Result<i64, CallError> {
        let p = self.registrar(s, deadline).await?;
        let rec = ProducerRecord { topic: w.topic, partition: Some(w.partition), key: w.key, value: w.value, ..Default::default() };
        match timeout_at(deadline, p.send(rec)).await {
            Ok(Ok(md)) => Ok(md.offset),
            Ok(Err(e)) => {
                self.reset_registrar(&p).await;
                if producer_sent_nothing(&e) {
                    Err(fail(producer_kind(&e), format!("register: {}", producer_text(&e))))
                } else {
                    // The producer retries: an earlier attempt may have been appended.
                    Err(unknown(producer_kind(&e), format!("register: {}", producer_text(&e))))
                }
            }
            Err(_) => {
                self.reset_registrar(&p).await;
                Err(unknown(kind::CLIENT, "register: no acknowledgement within the request timeout"))
            }
        }
    }

    async fn reset_registrar(&self, p: &Arc<Producer>) {
        let mut plain = self.plain.lock().await;
        if plain.as_ref().is_some_and(|cur| Arc::ptr_eq(cur, p)) {
            *plain = None;
        }
    }

    // ---- reads ----

    /// Every committed record of the partition from its log start to the last stable offset
    /// taken when the read starts: a read_committed consumer (no group, assign only) takes
    /// `end_offsets`, which under read_committed is the LSO (a ListOffsets at isolation 1), seeks
    /// to the beginning and polls until its position reaches the LSO. The position moves past
    /// transaction markers and aborted batches, so trailing markers do not hold the read.
    async fn read(&self, s: &Settings, topic: &str, partition: i32, deadline: Instant) -> Result<Vec<Read>, CallError> {
        let idle = self.readers.lock().unwrap().pop();
        let mut c = match idle {
            Some(c) => c,
            None => match timeout_at(deadline, new_reader(s)).await {
                Ok(Ok(c)) => c,
                Ok(Err(e)) => return Err(fail(kind::CLIENT, format!("read {topic}/{partition}: build the consumer: {}", consumer_text(&e)))),
                Err(_) => return Err(fail(kind::CLIENT, format!("read {topic}/{partition}: the consumer was not built within the request timeout"))),
            },
        };
        let tp = vec![(topic.to_owned(), partition)];
        let r = timeout_at(deadline, async {
            let mut where_ = "assign";
            let res: Result<Vec<Read>, krabka_client_consumer::ConsumerError> = async {
                c.assign(&tp).await?;
                where_ = "end_offsets (read_committed: the last stable offset)";
                let ends = c.end_offsets(&tp).await?;
                let Some(&end) = ends.get(&tp[0]) else {
                    return Err(krabka_client_consumer::ConsumerError::IllegalState(format!(
                        "end_offsets answered no offset for {topic}/{partition}"
                    )));
                };
                where_ = "seek_to_beginning";
                c.seek_to_beginning(&tp).await?;
                let mut recs = Vec::new();
                loop {
                    where_ = "position";
                    if c.position(topic, partition).await? >= end {
                        return Ok(recs);
                    }
                    where_ = "poll";
                    for r in c.poll(Time::from_millis(100)).await? {
                        if r.topic != topic || r.partition != partition || r.offset >= end {
                            continue;
                        }
                        recs.push(Read { partition: None, offset: r.offset, key: r.key, value: r.value });
                    }
                }
            }
            .await;
            res.map_err(|e| format!("{where_}: {}", consumer_text(&e)))
        })
        .await;
        match r {
            Ok(Ok(recs)) => {
                if !self.closed.load(Ordering::Acquire) {
                    self.readers.lock().unwrap().push(c);
                }
                Ok(recs)
            }
            Ok(Err(msg)) => Err(fail(kind::CLIENT, format!("read {topic}/{partition}: {msg}"))),
            Err(_) => Err(fail(
                kind::CLIENT,
                format!("read {topic}/{partition}: did not reach the last stable offset within the request timeout"),
            )),
        }
        // A failed reader is dropped, not pooled: its next read starts on fresh connections.
    }

    // ---- describe ----

    async fn describe(&self, s: &Settings, role: &str, deadline: Instant) -> Result<(bool, Option<Token>), CallError> {
        let admin = {
            let mut a = self.admin.lock().await;
            match a.as_ref() {
                Some(a) => Arc::clone(a),
                None => {
                    let addrs = bootstrap_addrs(&s.cfg.bootstrap);
                    match timeout_at(deadline, AdminClient::connect_with_config(&addrs, admin_config(&s.cfg, s.rt))).await {
                        Ok(Ok(c)) => {
                            let c = Arc::new(c);
                            *a = Some(Arc::clone(&c));
                            c
                        }
                        Ok(Err(e)) => return Err(fail(kind::ADMIN, format!("describe: connect the admin client: {}", admin_text(&e)))),
                        Err(_) => return Err(fail(kind::ADMIN, "describe: the admin client did not connect within the request timeout")),
                    }
                }
            }
        };
        let tid = format!("{}/{}", s.cfg.topic, role);
        match timeout_at(deadline, admin.describe_transaction(&tid)).await {
            Ok(Ok(d)) if d.producer_id >= 0 => Ok((true, Some(Token { producer_id: d.producer_id, epoch: d.producer_epoch }))),
            Ok(Ok(_)) => Ok((false, None)),
            // TRANSACTIONAL_ID_NOT_FOUND: no member ever acquired the role.
            Ok(Err(e)) if admin_code(&e) == Some(105) => Ok((false, None)),
            Ok(Err(e)) => {
                if matches!(e, krabka_client_admin::AdminError::Transport(_)) {
                    self.reset_admin(&admin).await;
                }
                Err(fail(kind::ADMIN, format!("describe {tid}: {}", admin_text(&e))))
            }
            Err(_) => {
                self.reset_admin(&admin).await;
                Err(fail(kind::ADMIN, format!("describe {tid}: no answer within the request timeout")))
            }
        }
    }

    async fn reset_admin(&self, admin: &Arc<AdminClient>) {
        let mut a = self.admin.lock().await;
        if a.as_ref().is_some_and(|cur| Arc::ptr_eq(cur, admin)) {
            *a = None;
        }
    }

    // ---- close ----

    pub async fn shutdown(&self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        if let Some(m) = self.member.get() {
            m.close().await;
        }
        // Holdings are dropped without ending their transactions (see drop_holding).
        let roles: Vec<_> = self.roles.lock().unwrap().values().cloned().collect();
        for rs in roles {
            rs.held.lock().unwrap().take();
        }
        self.readers.lock().unwrap().clear();
        let plain = self.plain.lock().await.take();
        if let (Some(p), Some(s)) = (plain, self.settings.get()) {
            if let Ok(p) = Arc::try_unwrap(p) {
                let _ = tokio::time::timeout(s.rt, p.close()).await;
            }
        }
        self.admin.lock().await.take();
    }
}

fn bootstrap_addrs(bootstrap: &str) -> Vec<String> {
    bootstrap.split(',').map(str::trim).filter(|a| !a.is_empty()).map(str::to_owned).collect()
}

fn client_id(c: &Config) -> String {
    if c.client_id.is_empty() {
        "fencecheck-krabka".to_owned()
    } else {
        c.client_id.clone()
    }
}

/// Metadata is refreshed quickly after a leader or coordinator moves, as the Go transport and
/// the Java adapter do.
fn metadata_max_age(rt: Duration) -> Duration {
    (rt / 20).max(Duration::from_millis(100))
}

fn admin_config(c: &Config, rt: Duration) -> AdminClientConfig {
    AdminClientConfig {
        client_id: Some(client_id(c)),
        request_timeout: Time::from_std(rt),
        default_api_timeout: Some(Time::from_std(rt)),
        retry_backoff: Time::from_millis(100),
        retry_backoff_max: Time::from_millis(1000),
        enable_metrics_push: false,
        ..AdminClientConfig::default()
    }
}

/// A producer: transactional for `tid`, else idempotent. Every blocking part of it ends within
/// the request timeout: a request (`request_timeout`), a send waiting for metadata or memory
/// (`max_block`), a batch with its retries (`delivery_timeout`, which Kafka's rule wants at
/// least linger + request timeout), init_transactions and EndTxn with their retries
/// (`init_retry_timeout`), a flush. The transaction timeout is the lease.
async fn build_producer(s: &Settings, tid: Option<&str>) -> Result<Producer, krabka_client_producer::ProducerError> {
    Producer::builder()
        .bootstrap(s.cfg.bootstrap.clone())
        .client_id(client_id(&s.cfg))
        .linger(Duration::ZERO)
        .request_timeout(s.rt)
        .delivery_timeout(s.rt)
        .max_block(s.rt)
        .init_retry_timeout(s.rt)
        .flush_timeout(s.rt)
        .retry_backoff(Duration::from_millis(100))
        .retry_backoff_max(Duration::from_millis(1000))
        .metadata_max_age(metadata_max_age(s.rt))
        .enable_metrics_push(false)
        .maybe_transactional_id(tid.map(str::to_owned))
        .maybe_transaction_timeout(tid.map(|_| s.lease))
        .build()
        .await
}

async fn new_reader(s: &Settings) -> Result<Consumer, krabka_client_consumer::ConsumerError> {
    let rt = Time::from_std(s.rt);
    let partition_max = if s.cfg.fetch_partition_max > 0 { s.cfg.fetch_partition_max } else { 1 << 20 };
    let wait = if s.cfg.fetch_max_wait_ms > 0 { s.cfg.fetch_max_wait_ms } else { 100 };
    Consumer::builder()
        .bootstrap(s.cfg.bootstrap.clone())
        .client_id(client_id(&s.cfg))
        .isolation_level(IsolationLevel::ReadCommitted)
        .auto_offset_reset(AutoOffsetReset::Earliest)
        .enable_auto_commit(false)
        .allow_auto_create_topics(false)
        .enable_metrics_push(false)
        .fetch_partition_max(partition_max)
        // The request's limit well above the partition's: kfake leaves a partition's aborted
        // transactions out of a read_committed Fetch that the request's limit ends
        // (docs/clients.md), and the Go transport asks for 64 MiB more for the same reason.
        .fetch_max(partition_max.saturating_add(64 << 20))
        .fetch_max_wait(Time::from_millis(wait))
        .request_timeout(rt)
        .default_api_timeout(rt)
        .metadata_max_age(Time::from_std(metadata_max_age(s.rt)))
        .build()
        .await
}
