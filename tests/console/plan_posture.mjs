// An operator opens a run a policy denied for the posture rules its plan would newly break,
// and reads each rule on its resource with the plan.
//
// RC_TOKEN: an Operator's token; RC_RUN: the run; RC_RULES: the rules, comma-separated, sorted.

import { scenario, need, signInWithToken, text, check } from './lib.mjs';

const token = need('RC_TOKEN');
const runId = need('RC_RUN');
const rules = need('RC_RULES');

await scenario('plan_posture', async (t) => {
  const page = await t.open();
  await signInWithToken(t, token);

  await page.goto(`${t.api}/console/#/runs/${runId}`);
  await t.until(page.locator('#plan-posture li').first(), 30_000);
  const shown = (await page.locator('#plan-posture code.posture-rule').allTextContents()).sort();
  check(shown.join(',') === rules, `the plan's new posture rules: ${shown}`);
  const privileged = await text(page.locator('#plan-posture li[data-rule="privileged-container"]'));
  check(
    privileged === 'privileged-container on deployment/api: container `api` is privileged',
    `the privileged container, on its resource: ${privileged}`,
  );
  await t.shoot('run-plan-posture');
});
