//! Payload encryption (`RUNTIME_CLOUD_PAYLOAD_KEY_FILES`): what the workers and the API send
//! to Temporal is ciphertext, so a run's history read back with `temporal workflow show` holds
//! no plaintext of what was declared; the API's codec endpoint, the one the Temporal UI and
//! the CLI call, turns it back for a token with `factory.provisioning.read`. Without keys the
//! same history shows the value in plain, which is what makes the first check able to fail.

use crate::common::{Api, Stack, StackOptions, decoded_payloads};
use base64::Engine;
use reqwest::Method;
use runtime_cloud_workflows::ids::run_workflow_id;
use serde_json::{Value, json};

/// The value declared: a workload's version, carried by the run's input, its plan and its
/// apply.
const MARKER: &str = "marker-7c1e9";

/// An origin the Temporal UI could be served from.
const UI_ORIGIN: &str = "http://127.0.0.1:8233";

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Two key files in a directory of their own: `2026-02` (first, so it encrypts) and
/// `2026-01`, as the setting's comma-separated value.
fn key_files(dir: &std::path::Path) -> String {
    let mut files = Vec::new();
    for (id, fill) in [("2026-02", 0x5a_u8), ("2026-01", 0xa5_u8)] {
        let path = dir.join(format!("{id}.key"));
        // As `head -c 32 /dev/urandom | base64` writes it: with a line break.
        std::fs::write(&path, format!("{}\n", b64(&[fill; 32]))).expect("key file");
        files.push(path.display().to_string());
    }
    files.join(",")
}

/// Declares a non-production environment whose workload version is [`MARKER`] and runs it
/// to `Applied`; the run's workflow id.
async fn applied_run(api: &Api) -> String {
    api.environment("dev", "non-production").await;
    api.declare("dev", &[("api", MARKER, 1)]).await;
    let run = api.plan_run("dev", "baseline").await;
    api.wait_state(&run, "Applied").await;
    run_workflow_id(&run)
}

/// `temporal workflow show -o json` of `workflow_id`, as the CLI prints it (JSON payloads
/// shown as their JSON, others as base64), with `extra` arguments.
fn history(stack: &Stack, workflow_id: &str, extra: &[&str]) -> String {
    let mut args = vec![
        "workflow",
        "show",
        "--workflow-id",
        workflow_id,
        "-o",
        "json",
    ];
    args.extend_from_slice(extra);
    String::from_utf8(stack.temporal_ok(&args).stdout).expect("UTF-8")
}

/// The marker's base64 at each of the three alignments it can take inside a longer text,
/// without the characters that depend on its neighbours.
fn marker_in_base64() -> Vec<String> {
    (0..3)
        .map(|shift| {
            let padded = format!("{}{MARKER}", "x".repeat(shift));
            let encoded = b64(padded.as_bytes());
            let skip = [0, 2, 3][shift];
            let keep = (MARKER.len() + shift) / 3 * 4;
            encoded[skip..keep].to_owned()
        })
        .collect()
}

/// Every payload of a history (`{"metadata":…,"data":…}`) whose encoding is
/// `binary/encrypted`, as the CLI printed it.
fn encrypted_payloads(v: &Value, found: &mut Vec<Value>) {
    match v {
        Value::Object(o) => {
            if o.get("metadata")
                .and_then(|m| m.get("encoding"))
                .and_then(Value::as_str)
                == Some(b64(b"binary/encrypted").as_str())
            {
                found.push(v.clone());
            }
            o.values().for_each(|v| encrypted_payloads(v, found));
        }
        Value::Array(a) => a.iter().for_each(|v| encrypted_payloads(v, found)),
        _ => {}
    }
}

/// With two keys configured, the run's history holds no trace of the marker, in plain or in
/// base64, and each payload names the first key; the codec endpoint decodes them (for the
/// read scope only), answers the UI's CORS preflight, and the Temporal CLI shows the marker
/// through it.
#[tokio::test]
async fn payloads_reach_temporal_encrypted_and_decode_through_the_codec_endpoint() {
    let keys = tempfile::tempdir().expect("dir");
    let stack = Stack::with(StackOptions::with_env(
        "RUNTIME_CLOUD_PAYLOAD_KEY_FILES",
        key_files(keys.path()),
    ))
    .await;
    let api = stack.operator("acme");
    let workflow_id = applied_run(&api).await;

    // Ciphertext only: neither the CLI's JSON shorthand nor any base64 shows the marker.
    let raw = history(&stack, &workflow_id, &[]);
    let parsed: Value = serde_json::from_str(&raw).expect("history JSON");
    assert!(!raw.contains(MARKER), "the marker in plain in the history");
    for encoded in marker_in_base64() {
        assert!(
            !raw.contains(&encoded),
            "the marker's base64 `{encoded}` in the history"
        );
    }
    assert!(
        !decoded_payloads(&parsed).contains(MARKER),
        "the marker in a payload's decoded data"
    );
    let mut payloads = Vec::new();
    encrypted_payloads(&parsed, &mut payloads);
    assert!(
        payloads.len() >= 3,
        "input, activity inputs and results: {payloads:?}"
    );
    for p in &payloads {
        assert_eq!(
            p["metadata"]["encryption-key-id"],
            b64(b"2026-02"),
            "the first key encrypts: {p}"
        );
    }
    let body = json!({ "payloads": payloads });

    // Decoded for the read scope: the marker is back, with each payload's own encoding.
    let reader = stack.client("acme", &["factory.provisioning.read"]);
    let res = reader
        .send(
            Method::POST,
            "/codec/decode",
            Some(body.clone()),
            &[("Origin", UI_ORIGIN)],
        )
        .await;
    assert_eq!(
        res.headers
            .get("access-control-allow-origin")
            .map(|v| v.to_str().unwrap_or_default()),
        Some("*"),
        "the UI's page may read the answer: {:?}",
        res.headers
    );
    let decoded = res.expect(200);
    let decoded_payloads_list = decoded["payloads"].as_array().expect("payloads");
    assert_eq!(decoded_payloads_list.len(), payloads.len());
    assert!(
        decoded_payloads(&decoded).contains(MARKER),
        "the marker decoded: {decoded}"
    );
    assert!(
        decoded_payloads_list
            .iter()
            .all(|p| p["metadata"]["encoding"].is_string()
                && p["metadata"]["encoding"] != b64(b"binary/encrypted")),
        "each payload has its own encoding again: {decoded}"
    );

    // Other scopes: 403; no token: 401; both problem JSON.
    stack
        .client(
            "acme",
            &["factory.runtime.read", "factory.provisioning.apply"],
        )
        .post("/codec/decode", body.clone())
        .await
        .expect_problem(403);
    stack
        .anonymous()
        .post("/codec/decode", body.clone())
        .await
        .expect_problem(401);

    // Encode then decode is the identity, and encode uses the first key.
    let plain = json!({ "payloads": [{ "metadata": { "encoding": b64(b"json/plain") },
                                       "data": b64(b"\"hello\"") }] });
    let encoded = reader
        .post("/codec/encode", plain.clone())
        .await
        .expect(200);
    assert_eq!(
        encoded["payloads"][0]["metadata"]["encryption-key-id"],
        b64(b"2026-02")
    );
    let back = reader.post("/codec/decode", encoded).await.expect(200);
    assert_eq!(back, plain);

    // The browser's preflight, as the Temporal UI sends it: any origin, the three headers,
    // and never credentials.
    let preflight = stack
        .anonymous()
        .send(
            Method::OPTIONS,
            "/codec/decode",
            None,
            &[
                ("Origin", UI_ORIGIN),
                ("Access-Control-Request-Method", "POST"),
                (
                    "Access-Control-Request-Headers",
                    "authorization,content-type,x-namespace",
                ),
            ],
        )
        .await;
    assert!(preflight.status.is_success(), "{preflight:?}");
    let header = |name: &str| {
        preflight
            .headers
            .get(name)
            .map(|v| v.to_str().unwrap_or_default().to_lowercase())
            .unwrap_or_default()
    };
    assert_eq!(header("access-control-allow-origin"), "*");
    assert!(header("access-control-allow-methods").contains("post"));
    for h in ["authorization", "content-type", "x-namespace"] {
        assert!(header("access-control-allow-headers").contains(h), "{h}");
    }
    assert_eq!(header("access-control-allow-credentials"), "");

    // The Temporal CLI as a codec client: it shows the history decoded through the endpoint.
    let token = format!(
        "Bearer {}",
        stack.token("acme", &["factory.provisioning.read"])
    );
    let endpoint = format!("{}/codec", stack.base_url);
    let shown = history(
        &stack,
        &workflow_id,
        &["--codec-endpoint", &endpoint, "--codec-auth", &token],
    );
    let shown: Value = serde_json::from_str(&shown).expect("history JSON");
    let mut still_encrypted = Vec::new();
    encrypted_payloads(&shown, &mut still_encrypted);
    assert_eq!(
        still_encrypted,
        Vec::<Value>::new(),
        "the CLI decoded every payload"
    );
    assert!(
        decoded_payloads(&shown).contains(MARKER),
        "the CLI shows the marker, decoded through the endpoint"
    );
}

/// Without keys the same run's history carries the marker in plain (so the check above can
/// fail), and the codec endpoint answers 404.
#[tokio::test]
async fn without_keys_payloads_reach_temporal_in_plain() {
    let stack = Stack::start().await;
    let api = stack.operator("acme");
    let workflow_id = applied_run(&api).await;
    let raw = history(&stack, &workflow_id, &[]);
    let parsed: Value = serde_json::from_str(&raw).expect("history JSON");
    assert!(
        raw.contains(MARKER) || decoded_payloads(&parsed).contains(MARKER),
        "the marker in plain"
    );
    let mut encrypted = Vec::new();
    encrypted_payloads(&parsed, &mut encrypted);
    assert_eq!(encrypted, Vec::<Value>::new());
    stack
        .client("acme", &["factory.provisioning.read"])
        .post("/codec/decode", json!({ "payloads": [] }))
        .await
        .expect_problem(404);
}
