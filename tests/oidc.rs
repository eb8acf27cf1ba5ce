//! Production sign-in: the API accepts an OpenID Connect provider's RS256 and ES256 tokens,
//! keys from its JWKS found through discovery, and refuses every other token with 401 problem
//! JSON, logging why but never the token. The provider is the stand-in under `tests/common`
//! (real HTTP on loopback, a real Keycloak discovery document, real RSA and EC keys).

use crate::common::oidc_provider_stand_in::{AUDIENCE, OidcProviderStandIn, now};
use crate::common::{Api, Stack, StackOptions};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

const READ: &str = "factory.provisioning.read";

/// A stack whose API trusts `provider`: tenant from `org.tenant`, scopes from `scp`, roles
/// from `groups` through a map.
async fn stack_trusting(provider: &OidcProviderStandIn) -> Stack {
    let env = |k: &str, v: &str| (k.to_owned(), v.to_owned());
    Stack::with(StackOptions {
        env: vec![
            env("RUNTIME_CLOUD_OIDC_ISSUER", &provider.issuer),
            env("RUNTIME_CLOUD_OIDC_AUDIENCE", AUDIENCE),
            env("RUNTIME_CLOUD_OIDC_TENANT_CLAIM", "org.tenant"),
            env("RUNTIME_CLOUD_OIDC_SCOPE_CLAIM", "scp"),
            env("RUNTIME_CLOUD_OIDC_ROLES_CLAIM", "groups"),
            env(
                "RUNTIME_CLOUD_OIDC_ROLE_MAP",
                "platform-admins=PlatformAdmin,ops=Operator",
            ),
            env("RUNTIME_CLOUD_OIDC_CLOCK_SKEW_SECONDS", "60"),
        ],
        ..Default::default()
    })
    .await
}

fn bearer(stack: &Stack, token: &str) -> Api {
    Api::with_token(&stack.base_url, token)
}

/// `alg: none`: the claims and no signature.
fn unsigned(claims: &Value) -> String {
    let part = |v: &Value| URL_SAFE_NO_PAD.encode(v.to_string());
    format!(
        "{}.{}.",
        part(&json!({"alg": "none", "typ": "JWT"})),
        part(claims)
    )
}

// Multi-threaded: the provider must answer while the API starts (the harness waits for it
// on this thread).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_tokens_are_accepted_and_every_other_token_is_refused() {
    let provider = OidcProviderStandIn::start(&["rsa-2026-a", "ec-2026-a"]).await;
    let stack = stack_trusting(&provider).await;
    let tenant = stack.tenant("acme");

    // RS256 and ES256 tokens of the provider's keys; the tenant and scopes come from the
    // configured claims.
    for kid in ["rsa-2026-a", "ec-2026-a"] {
        let token = provider.sign(kid, &provider.claims(&tenant, &[READ], &[]));
        let page = bearer(&stack, &token)
            .get("/factory/provisioning/runs")
            .await
            .expect(200);
        assert!(page["items"].is_array(), "{kid}: {page}");
    }
    // The scopes are the token's: without the scope, 403.
    let token = provider.sign(
        "rsa-2026-a",
        &provider.claims(&tenant, &["factory.meta.read"], &[]),
    );
    bearer(&stack, &token)
        .get("/factory/provisioning/runs")
        .await
        .expect_problem(403);

    // Roles come from the groups claim through the map: `platform-admins` sets quotas,
    // another group (even one named like the role) does not.
    let limits = json!({ "concurrentRuns": 3, "concurrentSandboxes": 1, "cpuPerAttempt": 1,
                         "memoryGbPerAttempt": 1, "executionMinutesPerDay": 60 });
    let manage = ["factory.capacity.read", "factory.capacity.manage"];
    let admin = provider.sign(
        "ec-2026-a",
        &provider.claims(&tenant, &manage, &["platform-admins"]),
    );
    let set = bearer(&stack, &admin)
        .put("/factory/capacity/quotas/shop", limits.clone())
        .await
        .expect(200);
    assert_eq!(set["setBy"], "ana@example.com", "{set}");
    let not_admin = provider.sign(
        "ec-2026-a",
        &provider.claims(&tenant, &manage, &["PlatformAdmin", "ops"]),
    );
    bearer(&stack, &not_admin)
        .put("/factory/capacity/quotas/shop", limits)
        .await
        .expect_problem(403);

    // Within the clock skew tolerated, an expired token still passes; beyond it, not.
    let mut claims = provider.claims(&tenant, &[READ], &[]);
    claims["exp"] = json!(now() - 20);
    bearer(&stack, &provider.sign("rsa-2026-a", &claims))
        .get("/factory/provisioning/runs")
        .await
        .expect(200);

    let valid = provider.claims(&tenant, &[READ], &[]);
    let with = |key: &str, value: Value| {
        let mut c = valid.clone();
        c[key] = value;
        c
    };
    let mut no_tenant = valid.clone();
    no_tenant["org"] = json!({});
    let good = provider.sign("rsa-2026-a", &valid);
    let mut tampered = good.clone();
    tampered.replace_range(tampered.len() - 6.., "AAAAAA");
    let refused = [
        (
            "expired",
            provider.sign("rsa-2026-a", &with("exp", json!(now() - 300))),
        ),
        (
            "not valid yet",
            provider.sign("rsa-2026-a", &with("nbf", json!(now() + 600))),
        ),
        (
            "wrong issuer",
            provider.sign("rsa-2026-a", &with("iss", json!("https://evil.example"))),
        ),
        (
            "wrong audience",
            provider.sign("rsa-2026-a", &with("aud", json!("another-api"))),
        ),
        ("alg none", unsigned(&valid)),
        (
            "HS256 when OIDC is configured",
            stack.token("acme", &[READ]),
        ),
        (
            "a key the provider never published",
            provider.sign("rsa-not-published", &valid),
        ),
        ("a tampered signature", tampered),
        ("no tenant claim", provider.sign("rsa-2026-a", &no_tenant)),
        ("not a JWT", "not-a-token".to_owned()),
    ];
    for (what, token) in &refused {
        let problem = bearer(&stack, token)
            .get("/factory/provisioning/runs")
            .await
            .expect_problem(401);
        assert_eq!(problem["status"], 401, "{what}: {problem}");
    }
    // Refusals are logged with their reason, never with the token.
    let logs = stack.logs();
    assert!(logs.contains("bearer token refused"), "no refusal logged");
    for (what, token) in &refused {
        assert!(
            !logs.contains(token.as_str()),
            "the {what} token was logged"
        );
    }
    assert!(!logs.contains(&good), "a token was logged");
}

// Multi-threaded: the provider must answer while the API starts (the harness waits for it
// on this thread).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_key_is_honoured_without_a_restart() {
    let provider = OidcProviderStandIn::start(&["rsa-2026-a"]).await;
    let stack = stack_trusting(&provider).await;
    let tenant = stack.tenant("acme");
    let claims = provider.claims(&tenant, &[READ], &[]);
    let old = provider.sign("rsa-2026-a", &claims);
    let new = provider.sign("rsa-2026-b", &claims);
    bearer(&stack, &old)
        .get("/factory/provisioning/runs")
        .await
        .expect(200);
    // The new key is not published yet: refused after fetching the keys again.
    let fetches = provider.jwks_fetches();
    bearer(&stack, &new)
        .get("/factory/provisioning/runs")
        .await
        .expect_problem(401);
    assert!(
        provider.jwks_fetches() > fetches,
        "an unknown key makes the API fetch the provider's keys"
    );

    // The provider rotates: the new key is honoured by the same API process, the withdrawn
    // one no longer.
    provider.publish(&["rsa-2026-b"]);
    bearer(&stack, &new)
        .get("/factory/provisioning/runs")
        .await
        .expect(200);
    bearer(&stack, &old)
        .get("/factory/provisioning/runs")
        .await
        .expect_problem(401);
}

/// A provider whose discovery document names another issuer stops the API at start, with
/// the reason; so does an issuer without an audience.
// Multi-threaded: the provider must answer while the API starts (the harness waits for it
// on this thread).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_misconfigured_provider_stops_the_api_at_start_with_the_reason() {
    let provider = OidcProviderStandIn::start(&["rsa-2026-a"]).await;
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_runtime-cloud"))
        .args(["api"])
        .env(
            "RUNTIME_CLOUD_OIDC_ISSUER",
            format!("{}/other", provider.issuer),
        )
        .env("RUNTIME_CLOUD_OIDC_AUDIENCE", AUDIENCE)
        .env(
            "RUNTIME_CLOUD_DATA_DIR",
            tempfile::tempdir().unwrap().path(),
        )
        .output()
        .expect("run the API");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("discovering the OIDC provider"), "{stderr}");
}
