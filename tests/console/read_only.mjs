// A user whose token carries only the read scopes sees every action disabled with the scope
// it needs, and a request forged from the page with that token (the approval, the decision,
// and a disabled button forced back on) is refused by the API with 403 problem JSON.
//
// RC_TOKEN: the reader's token; RC_ENV: an environment with a proposal RC_PROPOSAL_ID;
// RC_RUN_ID: a production run awaiting approval.

import { scenario, need, signInWithToken, text, check } from './lib.mjs';

const token = need('RC_TOKEN');
const env = need('RC_ENV');
const proposalId = need('RC_PROPOSAL_ID');
const runId = need('RC_RUN_ID');

/** `locator` is a disabled button whose reason says `reason`, beside it and as its tooltip. */
async function disabledFor(locator, reason) {
  await locator.waitFor();
  check(await locator.isDisabled(), `${await locator.textContent()} is disabled`);
  check((await locator.getAttribute('title')) === reason, `its tooltip says ${reason}: ${await locator.getAttribute('title')}`);
  const shown = await locator.locator('xpath=..').locator('.reason').textContent();
  check(shown === reason, `the reason beside it says ${reason}: ${shown}`);
}

/** A request sent from the page with the signed-in token, as a forged one would be. */
function forge(page, path, body) {
  return page.evaluate(async ([p, b]) => {
    const res = await fetch(p, {
      method: 'POST',
      headers: { Authorization: `Bearer ${sessionStorage.getItem('runtime-cloud.token')}`, 'Content-Type': 'application/json' },
      body: JSON.stringify(b),
    });
    return { status: res.status, type: res.headers.get('content-type'), body: await res.json() };
  }, [path, body]);
}

function refused(res, scope) {
  check(res.status === 403, `403, not ${res.status}: ${JSON.stringify(res.body)}`);
  check(res.type === 'application/problem+json', `problem JSON: ${res.type}`);
  check(res.body.detail.includes(scope), `the problem names ${scope}: ${res.body.detail}`);
}

await scenario('read-only', async (t) => {
  const page = await t.open();
  await signInWithToken(t, token);
  await t.shoot('environments');

  await page.goto(`${t.api}/console/#/environments/${env}`);
  const proposal = page.locator(`[data-proposal="${proposalId}"]`);
  await disabledFor(proposal.locator('[data-action="accept"]'), 'needs scope factory.runtime.operate');
  await disabledFor(proposal.locator('[data-action="reject"]'), 'needs scope factory.runtime.operate');
  await disabledFor(page.locator('#observe'), 'needs scope factory.runtime.operate');
  await disabledFor(page.locator('#plan-run'), 'needs scope factory.provisioning.apply');
  await t.shoot('environment');
  refused(await forge(page, `/factory/reconciliation/proposals/${proposalId}/decide`, { decision: 'accept', reason: 'forged' }),
    'factory.runtime.operate');

  await page.goto(`${t.api}/console/#/runs/${runId}`);
  await page.locator('#run-state [data-state="AwaitingApproval"]').waitFor();
  await disabledFor(page.locator('#approve'), 'needs scope factory.provisioning.apply');
  await disabledFor(page.locator('#reject'), 'needs scope factory.provisioning.apply');
  await disabledFor(page.locator('#cancel'), 'needs scope factory.provisioning.apply');
  await t.shoot('run');
  const hash = await text(page.locator('#inputs-hash'));
  refused(await forge(page, `/factory/provisioning/runs/${runId}/approval`, { decision: 'approve', reason: 'forged', inputsHash: hash }),
    'factory.provisioning.apply');

  // The disabled button forced back on: the console sends the request, the API refuses it,
  // and the console shows the refusal.
  await page.locator('#approve').evaluate((b) => {
    b.disabled = false;
  });
  await page.click('#approve');
  const banner = page.locator('#problem');
  await banner.getByText('403 Forbidden').waitFor();
  check((await text(banner)).includes('factory.provisioning.apply'), `the banner names the scope: ${await text(banner)}`);
  await t.shoot('run-forced-approval-refused');
});
