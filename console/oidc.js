// Sign-in with an OpenID Connect provider: the authorization-code flow with PKCE, as a
// public client (no secret in a browser). The console only obtains the access token; the API
// verifies it on every request (issuer, audience, signature from the provider's keys).
//
// What the browser keeps between leaving for the provider and coming back (the PKCE verifier,
// `state`, `nonce`) is in sessionStorage, used once: it never leaves this tab except as the
// verifier sent to the token endpoint.

import { get, decodeJwt } from './api.js';

const PENDING_KEY = 'runtime-cloud.oidc-pending';

/** Where the provider sends the browser back; the API serves the console there too. */
export const redirectUri = () => `${location.origin}/console/callback`;

function base64url(bytes) {
  let s = '';
  for (const b of new Uint8Array(bytes)) s += String.fromCharCode(b);
  return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

const random = (n) => base64url(crypto.getRandomValues(new Uint8Array(n)));

/** The S256 code challenge of `verifier` (RFC 7636). */
export async function challengeOf(verifier) {
  return base64url(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier)));
}

/** Leaves for the provider's authorization endpoint. */
export async function beginSignIn(oidc) {
  // 32 random bytes: a 43-character verifier, within RFC 7636's 43–128.
  const pending = { verifier: random(32), state: random(16), nonce: random(16) };
  sessionStorage.setItem(PENDING_KEY, JSON.stringify(pending));
  const url = new URL(oidc.authorizationEndpoint);
  const params = {
    response_type: 'code',
    client_id: oidc.clientId,
    redirect_uri: redirectUri(),
    scope: oidc.scope,
    state: pending.state,
    nonce: pending.nonce,
    code_challenge: await challengeOf(pending.verifier),
    code_challenge_method: 'S256',
  };
  for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
  location.assign(url.toString());
}

/**
 * Back from the provider with `search` (`?code=…&state=…`, or `?error=…`): checks `state`,
 * exchanges the code at the token endpoint with the verifier, checks the ID token's `nonce`
 * when one came, and returns the access token.
 */
export async function completeSignIn(search) {
  const params = new URLSearchParams(search);
  const pending = JSON.parse(sessionStorage.getItem(PENDING_KEY) || 'null');
  sessionStorage.removeItem(PENDING_KEY);
  if (params.get('error')) {
    throw new Error(`the provider refused the sign-in: ${params.get('error_description') || params.get('error')}`);
  }
  if (!pending || !params.get('state') || params.get('state') !== pending.state) {
    // Not the answer to a sign-in this tab started: a forged or replayed callback.
    throw new Error('the sign-in answer does not match a sign-in started here; sign in again');
  }
  // The endpoint comes from the API again, not from what this tab stored.
  const { oidc } = await get('/console/sign-in');
  if (!oidc) throw new Error('the API no longer names an OpenID provider');
  const res = await fetch(oidc.tokenEndpoint, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded', Accept: 'application/json' },
    body: new URLSearchParams({
      grant_type: 'authorization_code',
      code: params.get('code') || '',
      redirect_uri: redirectUri(),
      client_id: oidc.clientId,
      code_verifier: pending.verifier,
    }),
  });
  const body = await res.json().catch(() => ({}));
  if (!res.ok || !body.access_token) {
    throw new Error(`the token endpoint answered ${res.status}: ${body.error_description || body.error || 'no access_token'}`);
  }
  if (body.id_token) {
    const claims = decodeJwt(body.id_token);
    if (!claims || claims.nonce !== pending.nonce) {
      throw new Error('the ID token does not carry the nonce this sign-in sent');
    }
  }
  return body.access_token;
}
