// An operator reads what the fleet costs an hour above the environments list, each
// environment's cost in its row (with what could not be priced) and on its page.
//
// RC_TOKEN: an Operator's token; RC_ENV: a priced environment with an unpriced workload;
// RC_ENV_COST: its cost as shown (`0.0675 EUR an hour`); RC_FLEET_COST: the fleet's.

import { scenario, need, signInWithToken, text, check } from './lib.mjs';

const token = need('RC_TOKEN');
const env = need('RC_ENV');
const envCost = need('RC_ENV_COST');
const fleetCost = need('RC_FLEET_COST');

await scenario('costs', async (t) => {
  const page = await t.open();
  await signInWithToken(t, token);

  await t.until(page.locator('#fleet-cost', { hasText: fleetCost }), 30_000);
  const row = page.locator('#environments tr', { has: page.getByRole('link', { name: env, exact: true }) });
  const cell = await text(row.locator('.cost'));
  check(cell === `${envCost} (not priced: workload/batch)`, `the row's cost: ${cell}`);
  await t.shoot('environments-costs');

  await row.getByRole('link', { name: env, exact: true }).click();
  await t.until(page.locator('#inventory-cost'), 30_000);
  const shown = await text(page.locator('#inventory-cost'));
  check(shown.startsWith(envCost), `the environment's cost: ${shown}`);
  await t.shoot('environment-cost');
});
