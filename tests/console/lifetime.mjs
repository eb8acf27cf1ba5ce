// An operator opens an ephemeral environment, extends its expiry on its page, then
// decommissions it there and sees it retired without a reload.
//
// RC_TOKEN: an Operator's token; RC_ENV: the ephemeral environment.

import { scenario, need, signInWithToken, text, check } from './lib.mjs';

const token = need('RC_TOKEN');
const env = need('RC_ENV');

await scenario('lifetime', async (t) => {
  const page = await t.open();
  await signInWithToken(t, token);

  await page.locator('#environments').getByRole('link', { name: env, exact: true }).click();
  await page.locator('#expires-at').waitFor();
  check((await text(page.locator('#state'))) === 'active', 'the environment is active');
  const before = await text(page.locator('#expires-at'));
  await t.shoot('environment-ephemeral');

  await t.markDocument();
  await page.fill('#extend-ttl', '3h');
  await page.click('#extend');
  await t.until(page.locator('#expires-at', { hasNotText: before }), 30_000);

  await page.fill('#decommission-reason', 'preview done, from the console');
  await page.click('#decommission');
  await t.until(page.locator('#env-state', { hasText: 'retired' }), 120_000);
  await t.until(page.locator('#inventory-retired', { hasText: 'retired' }), 30_000);
  check(!(await page.locator('#decommission').count()), 'a retired environment offers no decommission');
  await t.noReload('the environment was retired');
  await t.shoot('environment-retired');
});
