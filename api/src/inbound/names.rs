//! The JetStream names of the inbound events: read by the consumer, and by the metrics and the
//! fleet host, which report its lag.

/// The stream of inbound events.
pub const STREAM: &str = "RUNTIME_CLOUD_INBOUND";
/// The durable consumer.
pub const CONSUMER: &str = "runtime-cloud-inbox";
/// The stream of dead letters, and their subjects' prefix.
pub const DEAD_LETTER_STREAM: &str = "RUNTIME_CLOUD_DEAD_LETTER";
pub const DEAD_LETTER_PREFIX: &str = "runtime-cloud.dead-letter";
