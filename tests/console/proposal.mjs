// An operator opens a drifted environment, reads the open finding and the proposal that
// covers it, accepts the proposal with a reason, and watches the finding move to resolved
// (the reconciliation run applies, and its observation no longer sees the drift), without a
// reload.
//
// RC_TOKEN: an Operator's token; RC_ENV: the environment; RC_PROPOSAL_ID: its proposal;
// RC_RESOURCE: the drifted resource (`deployment/api`).

import { scenario, need, signInWithToken, text, check } from './lib.mjs';

const token = need('RC_TOKEN');
const env = need('RC_ENV');
const proposalId = need('RC_PROPOSAL_ID');
const resource = need('RC_RESOURCE');

await scenario('proposal', async (t) => {
  const page = await t.open();
  await signInWithToken(t, token);
  const row = page.locator('#environments tr', { has: page.getByRole('link', { name: env, exact: true }) });
  check((await text(row.locator('.drift'))).includes('replica 1'), 'the list shows the open drift by kind');
  await row.getByRole('link', { name: env, exact: true }).click();

  const proposal = page.locator(`[data-proposal="${proposalId}"]`);
  await proposal.and(page.locator('[data-state="Proposed"]')).waitFor();
  const open = page.locator('#drift-open');
  check((await text(open)).includes(resource), `the open findings name ${resource}: ${await text(open)}`);
  check((await text(proposal)).includes(resource), 'the proposal lists the finding it covers');
  check((await text(proposal.locator('.plan-summary'))).includes('1 change,'), `the plan summary: ${await text(proposal)}`);
  await t.shoot('environment-drifted');

  await t.markDocument();
  await page.fill(`[id="reason-${proposalId}"]`, 'INC-42 from the console');
  await proposal.locator('[data-action="accept"]').click();
  await t.until(page.locator(`[data-proposal="${proposalId}"][data-state="Applied"]`), 120_000);
  await t.until(page.locator('#drift-open[data-count="0"]'), 120_000);
  check((await text(page.locator('#drift-resolved'))).includes(resource), `${resource} is among the resolved findings`);
  check((await text(page.locator(`[data-proposal="${proposalId}"]`))).includes('INC-42 from the console'), 'the decision is shown with its reason');
  await t.noReload('the proposal was applied');
  await t.shoot('environment-reconciled');
});
