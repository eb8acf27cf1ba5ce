// An operator opens an environment whose namespace breaks posture rules and reads each open
// finding with its rule beside its kind and what breaks it, as a list.
//
// RC_TOKEN: an Operator's token; RC_ENV: the environment.

import { scenario, need, signInWithToken, text, check } from './lib.mjs';

const token = need('RC_TOKEN');
const env = need('RC_ENV');

await scenario('posture', async (t) => {
  const page = await t.open();
  await signInWithToken(t, token);

  await page.locator('#environments').getByRole('link', { name: env, exact: true }).click();
  const open = page.locator('#drift-open');
  await t.until(open.locator('code.posture-rule', { hasText: 'privileged-container' }), 30_000);
  const rules = (await open.locator('code.posture-rule').allTextContents()).sort();
  check(
    JSON.stringify(rules) === JSON.stringify(['mutable-image-tag', 'privileged-container', 'public-endpoint']),
    `the open findings' rules: ${rules}`,
  );
  const row = open.locator('tr', { has: page.locator('code.posture-rule', { hasText: 'privileged-container' }) });
  const detail = await text(row.locator('ul.refs li').first());
  check(detail === 'container `agent` is privileged', `what breaks it: ${detail}`);
  await t.shoot('environment-posture');
});
