// An Operator orders an instance off-boarded on its page and sees the order move to
// `completed` with its archive, and the instance `offboarded`, without a reload.
//
// RC_TOKEN: an Operator's token; RC_ENV: the instance.

import { scenario, need, signInWithToken, text, check } from './lib.mjs';

const token = need('RC_TOKEN');
const env = need('RC_ENV');

await scenario('offboard', async (t) => {
  const page = await t.open();
  await signInWithToken(t, token);

  await page.locator('#environments').getByRole('link', { name: env, exact: true }).click();
  await page.locator('#offboard-reason').waitFor();
  await t.markDocument();
  await page.fill('#offboard-reason', 'contract ended, from the console');
  await page.click('#offboard');
  await t.until(page.locator('#offboarding-state', { hasText: 'completed' }), 120_000);
  await t.until(page.locator('#env-state', { hasText: 'offboarded' }), 30_000);
  await t.until(page.locator('#inventory-retired', { hasText: 'offboarded' }), 30_000);
  check((await text(page.locator('#offboarding-archive'))).includes('sha256:'), 'the archive is shown');
  check(!(await page.locator('#offboard').count()), 'an off-boarded instance offers no off-boarding');
  await t.noReload('the instance was off-boarded');
  await t.shoot('environment-offboarded');
});
