//! `POST /codec/decode` and `POST /codec/encode`: the codec server the Temporal UI
//! (`TEMPORAL_CODEC_ENDPOINT`, or its "Codec Server" setting) and the Temporal CLI
//! (`--codec-endpoint`) call to show the payloads the workers encrypted
//! (`runtime_cloud_temporal::codec`).
//!
//! Temporal's remote codec protocol: the body, asked and answered, is the proto3 JSON of
//! `temporal.api.common.v1.Payloads`, `{"payloads":[{"metadata":{"encoding":"<base64>"},
//! "data":"<base64>"}]}`; only the path's last segment says which of the two is asked.
//!
//! The product's bearer token is the only credential, sent in `Authorization` (the UI's "Pass
//! the user access token", the CLI's `--codec-auth`): decoding needs
//! `factory.provisioning.read`, encoding too. The UI calls from the browser, from its own
//! origin, so both routes answer CORS for any origin, preflight included, but never with
//! `Access-Control-Allow-Credentials`: a browser sends no cookie here, and a request made with
//! credentials is refused by the browser. With payload encryption off both answer 404.

use crate::auth::{ProvisioningRead, Scoped};
use crate::json::Json;
use crate::openapi::Problems;
use crate::{AppState, Error};
use axum::extract::{FromRequestParts, State};
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE};
use axum::http::request::Parts;
use axum::http::{HeaderName, Method};
use base64::Engine;
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use runtime_cloud_temporal::PayloadKeys;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use temporalio_common::protos::temporal::api::common::v1::Payload;
use tower_http::cors::{Any, CorsLayer};
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

/// The header the Temporal UI and CLI name the namespace in.
const X_NAMESPACE: HeaderName = HeaderName::from_static("x-namespace");

/// How long a browser may keep a preflight's answer.
const PREFLIGHT_MAX_AGE: std::time::Duration = std::time::Duration::from_secs(600);

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(decode))
        .routes(routes!(encode))
        .layer(cors())
}

/// Any origin (the Temporal UI's, wherever it is deployed), `POST` with the headers the UI
/// sends, and no credentials: without `allow_credentials` a browser neither sends cookies nor
/// lets a page read an answer it asked for with them.
fn cors() -> CorsLayer {
    CorsLayer::new()
        .allow_origin(Any)
        .allow_methods([Method::POST])
        .allow_headers([AUTHORIZATION, CONTENT_TYPE, X_NAMESPACE])
        .max_age(PREFLIGHT_MAX_AGE)
}

/// `temporal.api.common.v1.Payloads` as proto3 JSON.
#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
pub struct CodecPayloads {
    /// The payloads, in order; answered in the same order.
    #[serde(default)]
    payloads: Vec<CodecPayload>,
}

/// `temporal.api.common.v1.Payload` as proto3 JSON: bytes in base64.
#[derive(Debug, Default, Serialize, Deserialize, ToSchema)]
pub struct CodecPayload {
    /// Each metadata value in base64 (`encoding`, `encryption-key-id` …).
    #[serde(default)]
    metadata: BTreeMap<String, String>,
    /// The data in base64.
    #[serde(default)]
    data: String,
}

/// Proto3 JSON parsers take both base64 alphabets, padded or not.
const LENIENT: GeneralPurposeConfig =
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent);
const STANDARD: GeneralPurpose = GeneralPurpose::new(&alphabet::STANDARD, LENIENT);
const URL_SAFE: GeneralPurpose = GeneralPurpose::new(&alphabet::URL_SAFE, LENIENT);

fn from_base64(text: &str, what: &str) -> Result<Vec<u8>, Error> {
    STANDARD
        .decode(text)
        .or_else(|_| URL_SAFE.decode(text))
        .map_err(|_| Error::BadRequest(format!("{what} is not base64")))
}

impl CodecPayloads {
    fn into_payloads(self) -> Result<Vec<Payload>, Error> {
        self.payloads
            .into_iter()
            .enumerate()
            .map(|(i, p)| {
                let metadata = p
                    .metadata
                    .into_iter()
                    .map(|(k, v)| {
                        let value = from_base64(&v, &format!("payloads[{i}].metadata.{k}"))?;
                        Ok((k, value))
                    })
                    .collect::<Result<_, Error>>()?;
                Ok(Payload {
                    metadata,
                    data: from_base64(&p.data, &format!("payloads[{i}].data"))?,
                    ..Default::default()
                })
            })
            .collect()
    }

    fn from_payloads(payloads: Vec<Payload>) -> Self {
        let b64 = base64::engine::general_purpose::STANDARD;
        CodecPayloads {
            payloads: payloads
                .into_iter()
                .map(|p| CodecPayload {
                    metadata: p
                        .metadata
                        .into_iter()
                        .map(|(k, v)| (k, b64.encode(v)))
                        .collect(),
                    data: b64.encode(p.data),
                })
                .collect(),
        }
    }
}

/// The payload keys, or 404 when payloads go plain. An extractor, so that it answers after
/// the token is checked and before the body is read.
struct Encryption(PayloadKeys);

impl FromRequestParts<AppState> for Encryption {
    type Rejection = Error;

    async fn from_request_parts(_: &mut Parts, state: &AppState) -> Result<Self, Error> {
        state.payload_keys.clone().map(Encryption).ok_or_else(|| {
            Error::NotFound(
                "payload encryption is off (RUNTIME_CLOUD_PAYLOAD_KEY_FILES): there is nothing \
                 to decode"
                    .into(),
            )
        })
    }
}

/// A codec failure: a payload this deployment's keys cannot open is the request's fault (422,
/// naming the key), never an internal error.
fn refused(e: runtime_cloud_temporal::Error) -> Error {
    use runtime_cloud_temporal::Error as E;
    match e {
        E::UnknownPayloadKey { .. } | E::UndecryptablePayload { .. } | E::MalformedPayload(_) => {
            Error::Unprocessable(e.to_string())
        }
        e => Error::internal(e),
    }
}

/// Decodes payloads as the workers do: each encrypted one decrypted with the key it names,
/// the others as they are.
#[utoipa::path(operation_id = "codecDecode", post, path = "/codec/decode", tag = "operations",
    security(("bearer" = ["factory.provisioning.read"])),
    request_body = CodecPayloads,
    responses(
        (status = 200, description = "The payloads decoded, in the order asked", body = CodecPayloads),
        Problems<400>, Problems<401>, Problems<403>, Problems<404>, Problems<413>, Problems<415>,
        Problems<422>, Problems<500>,
    ))]
async fn decode(
    State(_): State<AppState>,
    auth: Scoped<ProvisioningRead>,
    Encryption(keys): Encryption,
    Json(body): Json<CodecPayloads>,
) -> Result<axum::Json<CodecPayloads>, Error> {
    let payloads = body.into_payloads()?;
    let count = payloads.len();
    let decoded = keys.decrypt_all(payloads).map_err(refused)?;
    // Who read what, for the audit trail: the count, never the payloads.
    tracing::info!(
        subject = auth.subject(),
        tenant = auth.tenant(),
        count,
        "codec: payloads decoded"
    );
    Ok(axum::Json(CodecPayloads::from_payloads(decoded)))
}

/// Encodes payloads as the workers do: each encrypted with the key that encrypts today.
#[utoipa::path(operation_id = "codecEncode", post, path = "/codec/encode", tag = "operations",
    security(("bearer" = ["factory.provisioning.read"])),
    request_body = CodecPayloads,
    responses(
        (status = 200, description = "The payloads encrypted, in the order asked", body = CodecPayloads),
        Problems<400>, Problems<401>, Problems<403>, Problems<404>, Problems<413>, Problems<415>,
        Problems<500>,
    ))]
async fn encode(
    State(_): State<AppState>,
    _auth: Scoped<ProvisioningRead>,
    Encryption(keys): Encryption,
    Json(body): Json<CodecPayloads>,
) -> Result<axum::Json<CodecPayloads>, Error> {
    let payloads = body.into_payloads()?;
    let encoded = keys.encrypt_all(&payloads).map_err(refused)?;
    Ok(axum::Json(CodecPayloads::from_payloads(encoded)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The JSON the UI and the CLI send (proto3: base64, padded or not, either alphabet)
    /// reads as the payload, and the payload writes back as standard base64.
    #[test]
    fn proto3_json_reads_and_writes_as_the_payload() {
        let body: CodecPayloads = serde_json::from_value(serde_json::json!({
            "payloads": [
                { "metadata": { "encoding": "anNvbi9wbGFpbg==" }, "data": "In5+Pj8i" },
                { "metadata": { "encoding": "anNvbi9wbGFpbg" }, "data": "Ing/PiI" },
                { "data": "In5-Pj8i" },
                {}
            ]
        }))
        .expect("body");
        let payloads = body.into_payloads().expect("payloads");
        assert_eq!(payloads[0].metadata["encoding"], b"json/plain");
        assert_eq!(payloads[0].data, b"\"~~>?\"");
        assert_eq!(payloads[1].metadata["encoding"], b"json/plain");
        assert_eq!(payloads[1].data, b"\"x?>\"");
        assert_eq!(payloads[2].data, b"\"~~>?\"");
        assert_eq!(payloads[3], Payload::default());
        let back = serde_json::to_value(CodecPayloads::from_payloads(payloads)).expect("json");
        assert_eq!(
            back["payloads"][0]["metadata"]["encoding"],
            "anNvbi9wbGFpbg=="
        );
        assert_eq!(back["payloads"][0]["data"], "In5+Pj8i");
        assert_eq!(back["payloads"][1]["data"], "Ing/PiI=");
        assert_eq!(
            back["payloads"][3],
            serde_json::json!({ "metadata": {}, "data": "" })
        );

        let bad: CodecPayloads =
            serde_json::from_value(serde_json::json!({ "payloads": [{ "data": "%%%" }] }))
                .expect("body");
        let e = bad.into_payloads().unwrap_err();
        assert!(e.to_string().contains("payloads[0].data"), "{e}");
    }
}
