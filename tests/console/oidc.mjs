// Sign-in with the OpenID provider the API is configured with: the console offers it (from
// GET /console/sign-in), sends the browser to its authorization endpoint with a PKCE S256
// challenge, `state` and `nonce`; back at /console/callback it checks `state`, exchanges the
// code with the verifier (allowed by the page's Content-Security-Policy, which names the token
// endpoint's origin), keeps the access token, and the API accepts it. A callback this tab did
// not start is refused, and its code never sent.
//
// RC_OIDC_ISSUER: the stand-in provider (tests/common/oidc_provider_stand_in.rs, served by the
// Rust test) the API is configured with (also in RC_ALSO_ALLOWED); RC_OIDC_CLIENT_ID, RC_OIDC_SCOPE: the console's client and scopes;
// RC_SUBJECT: who the provider's tokens name.

import { scenario, need, text, check } from './lib.mjs';

const issuer = need('RC_OIDC_ISSUER');
const clientId = need('RC_OIDC_CLIENT_ID');
const scope = need('RC_OIDC_SCOPE');
const subject = need('RC_SUBJECT');

/** What the stand-in was asked (read by this script, not the browser). */
const seen = async () => (await fetch(`${issuer}/stand-in/seen`)).json();

await scenario('oidc', async (t) => {
  const page = await t.open();
  await page.goto(`${t.api}/console`);
  const button = page.locator('#oidc-sign-in');
  check((await text(button)) === `Sign in with ${issuer}`, `the provider is offered: ${await text(button)}`);
  check(await page.locator('#dev-form').count() === 0, 'no dev sign-in beside a provider');
  await t.shoot('sign-in');

  await button.click();
  await t.until(page.locator('#environments > *').first());
  check(page.url() === `${t.api}/console/#/environments`, `back on the console, the code out of the URL: ${page.url()}`);
  check((await text(page.locator('#who'))).includes(subject), `signed in as ${subject}, with the provider's token`);
  await t.shoot('signed-in');

  const asked = await seen();
  const [authorization] = asked.authorizations;
  check(asked.authorizations.length === 1, `one authorization request: ${JSON.stringify(asked.authorizations)}`);
  check(authorization.code_challenge_method === 'S256' && authorization.client_id === clientId, 'PKCE S256, for the console client');
  check(authorization.redirect_uri === `${t.api}/console/callback`, `the redirect URI: ${authorization.redirect_uri}`);
  check(authorization.scope === scope, `the configured scope is asked for: ${authorization.scope}`);
  check(asked.exchanges.length === 1 && asked.exchanges[0].grant_type === 'authorization_code', 'one code exchange');
  check(asked.refusals.length === 0, `the provider refused nothing: ${asked.refusals}`);
  check(await page.evaluate(() => sessionStorage.getItem('runtime-cloud.oidc-pending')) === null, 'the verifier is used once and dropped');

  // A callback this tab did not start: refused before any exchange.
  await page.goto(`${t.api}/console/callback?code=stolen&state=forged`);
  await page.locator('#problem', { hasText: 'does not match a sign-in started here' }).waitFor();
  check((await seen()).exchanges.length === 1, 'the forged code was never sent to the provider');
  await t.shoot('forged-callback-refused');
});
