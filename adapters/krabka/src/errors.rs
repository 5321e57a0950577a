//! What krabka's errors mean in the protocol: their kind, and a message that names the Kafka
//! error code where krabka gives only its number ("broker error_code 90").

use krabka_client_admin::AdminError;
use krabka_client_consumer::ConsumerError;
use krabka_client_producer::ProducerError;

use crate::protocol::kind;

/// Kafka's name of an error code, for the codes a transactional producer meets.
pub fn code_name(code: i16) -> &'static str {
    match code {
        0 => "NONE",
        1 => "OFFSET_OUT_OF_RANGE",
        3 => "UNKNOWN_TOPIC_OR_PARTITION",
        6 => "NOT_LEADER_OR_FOLLOWER",
        7 => "REQUEST_TIMED_OUT",
        13 => "NETWORK_EXCEPTION",
        14 => "COORDINATOR_LOAD_IN_PROGRESS",
        15 => "COORDINATOR_NOT_AVAILABLE",
        16 => "NOT_COORDINATOR",
        19 => "NOT_ENOUGH_REPLICAS",
        20 => "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
        22 => "ILLEGAL_GENERATION",
        25 => "UNKNOWN_MEMBER_ID",
        27 => "REBALANCE_IN_PROGRESS",
        35 => "UNSUPPORTED_VERSION",
        45 => "OUT_OF_ORDER_SEQUENCE_NUMBER",
        46 => "DUPLICATE_SEQUENCE_NUMBER",
        47 => "INVALID_PRODUCER_EPOCH",
        48 => "INVALID_TXN_STATE",
        49 => "INVALID_PRODUCER_ID_MAPPING",
        50 => "INVALID_TRANSACTION_TIMEOUT",
        51 => "CONCURRENT_TRANSACTIONS",
        52 => "TRANSACTION_COORDINATOR_FENCED",
        53 => "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
        59 => "UNKNOWN_PRODUCER_ID",
        90 => "PRODUCER_FENCED",
        105 => "TRANSACTIONAL_ID_NOT_FOUND",
        82 => "FENCED_INSTANCE_ID",
        88 => "UNSTABLE_OFFSET_COMMIT",
        110 => "FENCED_MEMBER_EPOCH",
        113 => "STALE_MEMBER_EPOCH",
        120 => "TRANSACTION_ABORTABLE",
        _ => "",
    }
}

fn fencing_code(code: i16) -> bool {
    // INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE, PRODUCER_FENCED: the other adapters call all
    // three a fence (the broker refused the producer's epoch or its transaction).
    matches!(code, 47 | 48 | 90)
}

/// The protocol's kind of a producer error.
pub fn producer_kind(e: &ProducerError) -> &'static str {
    match e {
        ProducerError::FencedProducer => kind::FENCED,
        ProducerError::Server(c) | ProducerError::FatalTransactionError(c) if fencing_code(*c) => kind::FENCED,
        ProducerError::Client(_)
        | ProducerError::SendTimeout
        | ProducerError::FlushTimeout
        | ProducerError::MetadataTimeout { .. }
        | ProducerError::RecoveryRequired => kind::CLIENT,
        ProducerError::InvalidConfig(_) => kind::INVALID_CONFIG,
        _ => kind::PRODUCER,
    }
}

/// What krabka said, with the name of a Kafka error code it gives only as a number.
pub fn producer_text(e: &ProducerError) -> String {
    match e {
        ProducerError::Server(c) => match code_name(*c) {
            "" => format!("{e}"),
            name => format!("broker answered {name} (Kafka error {c})"),
        },
        ProducerError::FatalTransactionError(c) => match code_name(*c) {
            "" => format!("{e}"),
            name => format!("{e} ({name})"),
        },
        _ => format!("{e} (ProducerError::{e:?})"),
    }
}

/// A producer error that certainly sent nothing for the call: the record or the config was
/// refused before any request, or the producer was already closed.
pub fn producer_sent_nothing(e: &ProducerError) -> bool {
    matches!(
        e,
        ProducerError::InvalidConfig(_)
            | ProducerError::InvalidPartition(_)
            | ProducerError::InvalidTimestamp(_)
            | ProducerError::InvalidPartitionerResult(_)
            | ProducerError::RecordTooLarge { .. }
            | ProducerError::BatchTooLarge { .. }
            | ProducerError::BufferExhausted { .. }
            | ProducerError::MetadataTimeout { .. }
            | ProducerError::Closed
            | ProducerError::NotTransactional
    )
}

pub fn consumer_text(e: &ConsumerError) -> String {
    match e {
        ConsumerError::Server(c) => format!("{e}: {} (Kafka error {c})", code_name(*c)),
        _ => format!("{e}"),
    }
}

pub fn admin_text(e: &AdminError) -> String {
    format!("{e}")
}

/// The code of a broker's refusal in an admin call, if it is one.
pub fn admin_code(e: &AdminError) -> Option<i16> {
    match e {
        AdminError::Broker { code, .. } => Some(*code),
        _ => None,
    }
}
