//! `runtime-cloud inbound sign`: signs an inbound event's approval with a source's private key
//! and prints the CloudEvent, for an operator checking a source's set-up (publish it, and read
//! the dead letters or the run it planned) and for a promotion service's developers to compare
//! their signatures with.

use runtime_cloud_api::inbound::sign::{SigningKey, signed_event};
use std::io::Read as _;
use std::path::PathBuf;

/// What to sign.
#[derive(Debug, clap::Subcommand)]
pub enum InboundCommand {
    /// Sign the approval of an event's `data` (a file, or `-` for stdin) and print the
    /// CloudEvents 1.0 envelope with `data.signature` set.
    Sign {
        /// The event type: `promotion.promotions.v1.promotion-approved` or
        /// `runcontrol.approvals.v1.approval-decided`.
        #[arg(long = "type")]
        event_type: String,
        /// The source's private key, PKCS#8 PEM (P-256: ES256, Ed25519: EdDSA, RSA: RS256).
        #[arg(long)]
        key: PathBuf,
        /// The `kid` header (a PEM source's key id is its public key file's stem).
        #[arg(long)]
        kid: Option<String>,
        /// The `iss` claim: the source's configured issuer.
        #[arg(long)]
        issuer: String,
        /// The `aud` claim.
        #[arg(long, default_value = runtime_cloud_api::inbound::sources::DEFAULT_AUDIENCE)]
        audience: String,
        /// Seconds until the approval expires (a promotion's `approval.expiresAt` wins).
        #[arg(long, default_value_t = 3600)]
        ttl: i64,
        /// The CloudEvents `source`.
        #[arg(long, default_value = "runtime-cloud-inbound-sign")]
        source: String,
        /// The event's `data`, JSON.
        data: PathBuf,
    },
}

/// Runs the command; the printed envelope on stdout.
pub fn run(command: InboundCommand) -> anyhow::Result<()> {
    let InboundCommand::Sign {
        event_type,
        key,
        kid,
        issuer,
        audience,
        ttl,
        source,
        data,
    } = command;
    let text = if data.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text)?;
        text
    } else {
        std::fs::read_to_string(&data)
            .map_err(|e| anyhow::anyhow!("reading {}: {e}", data.display()))?
    };
    let data: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| anyhow::anyhow!("the event's data is not JSON: {e}"))?;
    let pem = std::fs::read(&key).map_err(|e| anyhow::anyhow!("reading {}: {e}", key.display()))?;
    let key =
        SigningKey::from_pem(&pem, kid).map_err(|e| anyhow::anyhow!("{}: {e}", key.display()))?;
    let expires = chrono::Utc::now().timestamp() + ttl;
    let event = signed_event(
        &event_type,
        data,
        &key,
        &issuer,
        &audience,
        expires,
        &source,
    )
    .map_err(anyhow::Error::msg)?;
    println!("{}", serde_json::to_string_pretty(&event)?);
    Ok(())
}
