// Under `runtime-cloud dev` the sign-in page offers a one-click sign-in: an Operator of the
// tenant first; then (signed out and in again) a read-only user, who sees the environment's
// actions disabled; then a user with every scope but no role, who may not approve a
// production run (and whose forged approval the API refuses).
//
// RC_ENV: an environment of tenant `dev`; RC_RUN_ID: a production run awaiting approval.

import { scenario, need, text, check } from './lib.mjs';

const env = need('RC_ENV');
const runId = need('RC_RUN_ID');

await scenario('dev-sign-in', async (t) => {
  const page = await t.open();
  await page.goto(`${t.api}/console`);
  await page.locator('#dev-form').waitFor();
  check(await page.locator('#oidc').count() === 0, 'no OpenID provider is offered when none is configured');
  await t.shoot('sign-in');

  await page.click('#dev-sign-in');
  await page.getByRole('link', { name: env, exact: true }).waitFor();
  const who = await text(page.locator('#who'));
  check(who.includes('dev-operator') && who.includes('dev'), `the header shows who signed in: ${who}`);
  await t.shoot('environments');

  await page.click('#sign-out');
  await page.locator('#dev-form').waitFor();
  await page.check('#dev-read-only');
  await page.click('#dev-sign-in');
  await page.getByRole('link', { name: env, exact: true }).click();
  const observe = page.locator('#observe');
  await observe.waitFor();
  check(await observe.isDisabled(), 'a read-only user cannot observe');
  check((await text(page.locator('#who'))).includes('dev-reader'), 'signed in as the reader');
  await t.shoot('environment-read-only');

  await page.goto(`${t.api}/console/#/sign-in`);
  const scopes = await text(page.locator('#signed-in'));
  check(scopes.includes('factory.provisioning.read') && !scopes.includes('factory.provisioning.apply'),
    `the reader's token carries only read scopes: ${scopes}`);
  await t.shoot('signed-in-read-only');

  await page.click('#sign-out');
  await page.locator('#dev-form').waitFor();
  await page.selectOption('#dev-role', '');
  await page.click('#dev-sign-in');
  await page.locator('#environments > *').first().waitFor();
  await page.goto(`${t.api}/console/#/runs/${runId}`);
  const approve = page.locator('#approve');
  await approve.waitFor();
  const reason = 'needs role Operator or PlatformAdmin';
  check(await approve.isDisabled() && (await approve.getAttribute('title')) === reason, `Approve is disabled: ${reason}`);
  check(!(await page.locator('#cancel').isDisabled()), 'Cancel needs no role, only the scope it has');
  const forged = await page.evaluate(async (id) => {
    const res = await fetch(`/factory/provisioning/runs/${id}/approval`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${sessionStorage.getItem('runtime-cloud.token')}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ decision: 'approve', reason: 'forged', inputsHash: document.getElementById('inputs-hash').textContent }),
    });
    return { status: res.status, body: await res.json() };
  }, runId);
  check(forged.status === 403 && forged.body.detail.includes('role Operator or PlatformAdmin'),
    `a forged approval without the role is refused: ${JSON.stringify(forged)}`);
  await t.shoot('run-without-role');
});
