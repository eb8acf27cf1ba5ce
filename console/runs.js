// #/runs?environmentId=&kind=&state=: provisioning runs, newest first, filtered as the API
// filters them (the filters are the list route's own query parameters).

import { get, withQuery, seg } from './api.js';
import { h, fill, link, time, badge, table, poll, runMoving } from './ui.js';

const KINDS = ['baseline', 'promotion', 'reconciliation', 'decommission'];
const STATES = ['Planned', 'AwaitingApproval', 'Applying', 'Applied', 'Failed', 'Rejected', 'Cancelled'];
const PAGE = 50;

export async function render(root, _params, query) {
  const filter = { environmentId: query.get('environmentId') || '', kind: query.get('kind') || '', state: query.get('state') || '' };
  // The list shows `shown` runs; "Older runs" asks for more in the same (polled) request.
  let shown = PAGE;
  const list = h('div', { id: 'runs' });
  const more = h('button', { type: 'button', id: 'more', hidden: true, onclick: () => { shown = Math.min(200, shown + PAGE); refresh(); } }, 'Older runs');

  const select = (key, values, all) =>
    h('select', { id: `filter-${key}`, 'aria-label': all, onchange: (e) => { location.hash = `#${withQuery('/runs', { ...filter, [key]: e.target.value })}`; } },
      h('option', { value: '' }, all),
      values.map((v) => h('option', { value: v, selected: filter[key] === v }, v)));
  const envSelect = select('environmentId', filter.environmentId ? [filter.environmentId] : [], 'every environment');
  fill(root, h('h1', null, 'Runs'), h('div', { class: 'filters' }, envSelect, select('kind', KINDS, 'every kind'), select('state', STATES, 'every state')), list, more);

  // The environment filter offers the tenant's environments, once.
  get('/factory/environments?limit=200').then((envs) => {
    for (const e of envs.items) {
      if (e.environmentId !== filter.environmentId) envSelect.append(h('option', { value: e.environmentId }, e.environmentId));
    }
  }).catch(() => {});

  const refresh = poll(
    root,
    async () => {
      const page = await get(withQuery('/factory/provisioning/runs', { ...filter, limit: shown }));
      more.hidden = !page.nextCursor || shown >= 200;
      fill(
        list,
        table(
          [
            ['Run', (r) => link(`/runs/${seg(r.provisioningRunId)}`, h('code', null, r.provisioningRunId))],
            ['Environment', (r) => link(`/environments/${seg(r.environmentId)}`, r.environmentId)],
            ['Kind', (r) => r.kind],
            ['State', (r) => badge(r.state)],
            ['Plan', (r) => planCounts(r.planReceipt)],
            ['Specification', (r) => `v${r.specificationVersion}`],
            ['Started', (r) => time(r.startedAt)],
            ['Completed', (r) => time(r.completedAt)],
          ],
          page.items,
          'No runs match.',
        ),
      );
      return page.items;
    },
    (items) => (items.some(runMoving) ? 2000 : 10000),
  );
}

/** `+1 ~2 −0` of a plan receipt. */
export function planCounts(plan) {
  if (!plan) return h('span', { class: 'muted' }, '—');
  return h('span', { class: 'plan-counts' },
    h('span', { class: 'add' }, `+${plan.adds.length}`), ' ',
    h('span', { class: 'change' }, `~${plan.changes.length}`), ' ',
    h('span', { class: 'delete' }, `−${plan.deletes.length}`));
}
