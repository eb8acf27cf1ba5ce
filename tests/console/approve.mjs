// An operator signs in with a pasted token, finds the production run that waits for its
// approval, reads its plan, approves it on its page, and watches it reach Applied without a
// reload. Screenshots of the environments list, the environment, the runs list and the run.
//
// RC_TOKEN: an Operator's token; RC_ENV: the production environment; RC_RUN_ID: its run.

import { scenario, need, signInWithToken, text, check } from './lib.mjs';

const token = need('RC_TOKEN');
const env = need('RC_ENV');
const runId = need('RC_RUN_ID');

await scenario('approve', async (t) => {
  const page = await t.open();
  await signInWithToken(t, token);

  const row = page.locator('#environments tr', { has: page.getByRole('link', { name: env, exact: true }) });
  await row.locator('[data-state="AwaitingApproval"]').waitFor();
  check((await text(row)).includes('production'), `the list shows ${env}'s class: ${await text(row)}`);
  await t.shoot('environments');

  await row.getByRole('link', { name: env, exact: true }).click();
  await page.locator('#inventory').waitFor();
  await page.locator('#plan-run').waitFor();
  await t.shoot('environment');

  await page.click('[data-nav="runs"]');
  const runLink = page.locator(`#runs a[href="#/runs/${runId}"]`);
  await runLink.waitFor();
  await t.shoot('runs');

  await runLink.click();
  await page.locator('#run-state [data-state="AwaitingApproval"]').waitFor();
  // The plan as a diff: the declared workload is an add, with its declared version.
  const add = page.locator('#plan-diff [data-change="add"][data-name="api"]');
  check((await text(add)).includes('version 1.0.0'), `the add names the declared version: ${await text(add)}`);
  const hash = await text(page.locator('#inputs-hash'));
  check(hash.startsWith('sha256:'), `the plan's inputs hash is shown: ${hash}`);
  check((await text(page.locator('#approval-form'))).includes(hash), 'the approval form names the plan it approves');
  await t.shoot('run-awaiting-approval');

  await t.markDocument();
  await page.fill('#approval-reason', 'CAB-1234 from the console');
  await page.click('#approve');
  // Polled, not reloaded: the state moves on the same document.
  await t.until(page.locator('#run-state [data-state="Applied"]'), 120_000);
  await page.locator('#apply-result', { hasText: 'succeeded' }).waitFor();
  check((await text(page.locator('#approval-decision'))).includes('CAB-1234 from the console'), 'the decision is shown with its reason');
  await page.locator('#log-text', { hasText: '=== apply' }).waitFor();
  await t.noReload('the run moved to Applied');
  await t.shoot('run-applied');
});
