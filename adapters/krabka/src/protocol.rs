//! The exec protocol's messages (docs/exec-protocol.md), written out here: one JSON object per
//! line each way. Bytes (`key`, `value`) are base64, standard alphabet with padding.

use base64::{engine::general_purpose::STANDARD, Engine as _};
use bytes::Bytes;
use serde::{Deserialize, Deserializer, Serialize};

pub const PROTOCOL_VERSION: i64 = 1;

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Request {
    pub id: u64,
    pub op: String,
    pub version: i64,
    pub config: Option<Config>,
    pub role: String,
    pub member: String,
    pub token: Option<Token>,
    pub topic: String,
    pub partition: Option<i32>,
    #[serde(deserialize_with = "b64")]
    pub key: Option<Bytes>,
    #[serde(deserialize_with = "b64")]
    pub value: Option<Bytes>,
    pub records: Vec<Write>,
    // Pipelines (docs/exec-protocol.md): member_start's config, poll's wait, transact's batch.
    pub pipeline: Option<crate::member::MemberConfig>,
    pub wait_ms: i64,
    pub timeout_ms: Option<i64>,
    pub offsets: Vec<crate::member::Offset>,
    pub outputs: Vec<crate::member::Output>,
    /// transact: the member id and generation (member epoch) the batch was polled under, as
    /// poll answered them.
    pub member_id: String,
    pub generation: Option<i32>,
    // `lease` (write_lease) is not read: the record's bytes carry it, and the adapter checks the
    // request's token against the holding instead.
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(default)]
pub struct Config {
    pub bootstrap: String,
    pub client_id: String,
    pub topic: String,
    pub lease_ms: i64,
    pub request_timeout_ms: i64,
    pub fetch_max_wait_ms: i64,
    pub fetch_partition_max: i32,
    pub topic_partitions: i32,
    pub topic_replication: i32,
    pub transaction_version: i64,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Token {
    pub producer_id: i64,
    pub epoch: i16,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(default)]
pub struct Write {
    pub topic: String,
    pub partition: i32,
    #[serde(deserialize_with = "b64")]
    pub key: Option<Bytes>,
    #[serde(deserialize_with = "b64")]
    pub value: Option<Bytes>,
}

#[derive(Debug, Serialize)]
pub struct Read {
    /// A polled record's partition; read_role's records leave it out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partition: Option<i32>,
    pub offset: i64,
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "b64_out")]
    pub key: Option<Bytes>,
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "b64_out")]
    pub value: Option<Bytes>,
}

pub fn b64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Bytes>, D::Error> {
    let s: Option<String> = Option::deserialize(d)?;
    match s {
        None => Ok(None),
        Some(s) => STANDARD
            .decode(s.as_bytes())
            .map(|v| Some(Bytes::from(v)))
            .map_err(serde::de::Error::custom),
    }
}

fn b64_out<S: serde::Serializer>(v: &Option<Bytes>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(b) => s.serialize_str(&STANDARD.encode(b)),
        None => s.serialize_none(),
    }
}

/// The answer fields of an `ok` outcome; empty ones are left out.
#[derive(Debug, Default, Serialize)]
pub struct Answer {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub capabilities: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transaction_version: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<Token>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub held: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub join_seq: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub records: Option<Vec<Read>>,
    /// hello: the workloads served (leases when empty).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub workloads: Vec<String>,
    /// poll: the member id and generation (or KIP-848 member epoch) the records were polled
    /// under.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub member_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generation: Option<i32>,
}

/// The protocol's error kinds.
pub mod kind {
    pub const INVALID_CONFIG: &str = "invalid_config";
    pub const ADMIN: &str = "admin";
    pub const FENCED: &str = "fenced";
    pub const PRODUCER: &str = "producer";
    pub const CLIENT: &str = "client";
    pub const NOT_HELD: &str = "not_held";
    pub const CLOSED: &str = "closed";
}

/// A failed call: its kind, its message, and whether it may have taken effect (outcome
/// `unknown`) or certainly did not (`fail`).
#[derive(Debug, Clone)]
pub struct CallError {
    pub kind: &'static str,
    pub message: String,
    pub unknown: bool,
    /// A pipeline's transact: the token the failed transaction ran under, when the producer
    /// had one.
    pub token: Option<Token>,
    /// A pipeline's transact: the member cannot go on (its producer failed, or it could not
    /// rewind); the harness restarts it.
    pub restart: bool,
}

pub fn fail(kind: &'static str, message: impl Into<String>) -> CallError {
    CallError { kind, message: message.into(), unknown: false, token: None, restart: false }
}

pub fn unknown(kind: &'static str, message: impl Into<String>) -> CallError {
    CallError { kind, message: message.into(), unknown: true, token: None, restart: false }
}

/// The answer line of request `id`.
pub fn line(id: u64, result: Result<Answer, CallError>) -> String {
    let v = match result {
        Ok(a) => {
            let mut v = serde_json::to_value(a).unwrap_or_else(|_| serde_json::json!({}));
            v["id"] = id.into();
            v["outcome"] = "ok".into();
            v
        }
        Err(e) => {
            let mut msg = e.message;
            if msg.len() > 2000 {
                let mut cut = 2000;
                while !msg.is_char_boundary(cut) {
                    cut -= 1;
                }
                msg.truncate(cut);
            }
            let mut v = serde_json::json!({
                "id": id,
                "outcome": if e.unknown { "unknown" } else { "fail" },
                "error": {"kind": e.kind, "message": msg},
            });
            if let Some(t) = e.token {
                v["token"] = serde_json::to_value(t).unwrap_or_default();
            }
            if e.restart {
                v["restart"] = true.into();
            }
            v
        }
    };
    let mut s = v.to_string();
    s.push('\n');
    s
}
