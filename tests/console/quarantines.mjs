// An Operator quarantines a version on the Quarantines page, sees it in force, then lifts it
// there with a reason and sees it lifted without a reload.
//
// RC_TOKEN: an Operator's token.

import { scenario, need, signInWithToken, text, check } from './lib.mjs';

const token = need('RC_TOKEN');

await scenario('quarantines', async (t) => {
  const page = await t.open();
  await signInWithToken(t, token);

  await page.getByRole('link', { name: 'Quarantines', exact: true }).click();
  await page.locator('#quarantine-workload').waitFor();
  await t.markDocument();
  await page.fill('#quarantine-workload', 'api');
  await page.fill('#quarantine-version', '2.0.0');
  await page.fill('#quarantine-reason', 'leaks memory, from the console');
  await page.click('#quarantine');
  const state = page.locator('.quarantine-state').first();
  await t.until(state.filter({ hasText: 'in-force' }), 30_000);
  check((await text(page.locator('#quarantines'))).includes('leaks memory, from the console'), 'the reason is shown');
  await t.shoot('quarantine-in-force');

  await page.locator('.lift-reason').first().fill('fixed in 2.0.1');
  await page.locator('button.lift').first().click();
  await t.until(state.filter({ hasText: 'lifted' }), 30_000);
  check(!(await page.locator('button.lift').count()), 'a lifted quarantine offers no lift');
  await t.noReload('the quarantine was placed and lifted');
  await t.shoot('quarantine-lifted');
});
