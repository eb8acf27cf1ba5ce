// An Operator adopts an unmanaged workload of a Pulumi environment into its program on the
// environment's page, and sees the branch, the commit and the generated change, without a
// reload.
//
// RC_TOKEN: an Operator's token; RC_ENV: the environment; RC_PROPOSAL_ID: the proposal that
// covers the unmanaged workload.

import { scenario, need, signInWithToken, text, check } from './lib.mjs';

const token = need('RC_TOKEN');
const env = need('RC_ENV');
const proposalId = need('RC_PROPOSAL_ID');

await scenario('adopt', async (t) => {
  const page = await t.open();
  await signInWithToken(t, token);
  await page.locator('#environments').getByRole('link', { name: env, exact: true }).click();

  const proposal = page.locator(`[data-proposal="${proposalId}"]`);
  await proposal.locator('[data-action="adopt"]').waitFor();
  await t.markDocument();
  await proposal.locator('[data-action="adopt"]').click();
  await t.until(proposal.locator('[data-adoption="published"]'), 120_000);
  const shown = await text(proposal.locator('.adoption'));
  check(shown.includes(`runtime-cloud/adopt/${proposalId}`), `the branch is shown: ${shown}`);
  await proposal.locator('.adoption details.diff summary').click();
  const diff = await text(proposal.locator('.adoption details.diff pre'));
  check(diff.includes('import: shop/batch'), `the generated change imports batch: ${diff}`);
  check(!(await proposal.locator('[data-action="adopt"]').count()), 'a published adoption is not asked for again');
  await t.noReload('the adoption was published');
  await t.shoot('proposal-adopted');
});
