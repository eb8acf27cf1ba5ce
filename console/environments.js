// #/environments: the tenant's environments, a page at a time (more on request), with their
// class, target, whether the inventory is fresh, open drift by kind, mode and last run;
// filtered by class and state, searched by id, project or label among those shown.
//
// The environments list carries none of the observed state, so each row also reads the
// environment's inventory (its cost an hour too), open drift and newest run (three small reads
// per environment), each only when the token has the scope; the cell says which scope is
// missing otherwise. Above the list, what the tenant's fleet costs an hour (`factory.meta.read`).

import { get, withQuery, seg, lacks } from './api.js';
import { h, fill, link, time, badge, table, poll, runMoving, hourlyCost } from './ui.js';

/** `sandbox`, `pulumi org/project/stack` …: the runner, and the observer when it differs. */
export function targetText(target) {
  const runner = (target && target.runner) || { kind: 'sandbox' };
  const observer = (target && target.observer) || { kind: 'sandbox' };
  let text = runner.kind + (runner.stack ? ` ${runner.stack}` : '');
  if (observer.kind !== runner.kind) {
    text += ` · observed by ${observer.kind}${observer.namespace ? ` ${observer.namespace}` : ''}`;
  }
  return text;
}

/** `replica 1, version 2` from open findings. */
export function byKind(findings) {
  const counts = {};
  for (const f of findings) counts[f.kind] = (counts[f.kind] || 0) + 1;
  return Object.entries(counts).map(([k, n]) => `${k} ${n}`).join(', ');
}

/** The observed state of one environment, or why it cannot be read with this token. */
async function details(env) {
  const id = seg(env.environmentId);
  const runtime = lacks('factory.runtime.read');
  const [inventory, openDrift, runs] = await Promise.all([
    runtime ? null : get(`/factory/environments/${id}/inventory`),
    runtime ? null : get(`/factory/environments/${id}/drift?state=open&limit=200`),
    get(withQuery('/factory/provisioning/runs', { environmentId: env.environmentId, limit: 1 })),
  ]);
  return { env, runtime, inventory, open: openDrift ? openDrift.items : null, lastRun: runs.items[0] || null };
}

function freshness(row) {
  if (row.runtime) return h('span', { class: 'muted', title: row.runtime }, row.runtime);
  const inv = row.inventory;
  return h(
    'span',
    { class: inv.stale ? 'stale' : 'fresh', 'data-stale': String(inv.stale), title: inv.lastError || undefined },
    inv.stale ? 'stale' : 'fresh',
    ' · ',
    inv.observedAt ? time(inv.observedAt) : 'never observed',
  );
}

function drift(row) {
  if (row.runtime) return h('span', { class: 'muted' }, '—');
  if (!row.open.length) return h('span', { class: 'muted' }, 'none');
  return h('span', { class: 'drift' }, byKind(row.open));
}

function lastRun(row) {
  const r = row.lastRun;
  if (!r) return h('span', { class: 'muted' }, 'none');
  return h('span', null, link(`/runs/${seg(r.provisioningRunId)}`, r.kind), ' ', badge(r.state), ' ', time(r.startedAt));
}

function matches(row, filter) {
  const e = row.env;
  if (filter.class && e.class !== filter.class) return false;
  if (filter.only === 'stale' && !(row.inventory && row.inventory.stale)) return false;
  if (filter.only === 'drift' && !(row.open && row.open.length)) return false;
  if (filter.only === 'moving' && !(row.lastRun && runMoving(row.lastRun))) return false;
  const q = filter.q.trim().toLowerCase();
  if (!q) return true;
  const labels = Object.entries(e.labels || {}).map(([k, v]) => `${k}=${v}`);
  return [e.environmentId, e.projectId, ...labels].some((s) => s.toLowerCase().includes(q));
}

export async function render(root, _params, query) {
  const filter = { class: query.get('class') || '', only: query.get('only') || '', q: query.get('q') || '' };
  let rows = [];
  // Environments shown: a page of the list, and another each time "More" is pressed.
  const PAGE = 50;
  let wanted = PAGE;
  let refresh = () => {};
  const more = h('button', { type: 'button', id: 'more', hidden: true, onclick: () => { wanted += PAGE; refresh(); } }, 'More environments');
  const list = h('div', { id: 'environments' });
  const count = h('span', { class: 'muted' });
  const total = h('p', { id: 'fleet-total' });

  const draw = () => {
    const shown = rows.filter((r) => matches(r, filter));
    fill(count, `${shown.length} of ${rows.length}`);
    fill(
      list,
      table(
        [
          ['Environment', (r) => link(`/environments/${seg(r.env.environmentId)}`, r.env.environmentId)],
          ['Project', (r) => r.env.projectId],
          ['Class', (r) => h('span', { class: `class-${r.env.class}` }, r.env.class)],
          ['Target', (r) => targetText(r.env.target)],
          ['Observed', freshness],
          ['Open drift', drift],
          ['Cost', (r) => (r.runtime ? h('span', { class: 'muted' }, '—') : hourlyCost(r.inventory.cost, { class: 'cost' }))],
          ['Mode', (r) => r.env.mode],
          ['Life', (r) => (r.env.state === 'retired' ? h('span', { class: 'badge' }, 'retired') : r.env.expiresAt ? ['expires ', time(r.env.expiresAt)] : '—')],
          ['Last run', lastRun],
        ],
        shown,
        rows.length ? 'No environment matches.' : 'No environments yet.',
      ),
    );
  };
  // The filter lives in the URL too, so a filtered list can be linked to.
  const changed = (key) => (e) => {
    filter[key] = e.target.value;
    history.replaceState(null, '', `#${withQuery('/environments', filter)}`);
    draw();
  };
  const option = (value, label, selected) => h('option', { value, selected: selected === value }, label);
  fill(
    root,
    h('h1', null, 'Environments ', count),
    total,
    h(
      'div',
      { class: 'filters' },
      h('input', { id: 'search', type: 'search', 'aria-label': 'Search', placeholder: 'Search id, project, label', value: filter.q, oninput: changed('q') }),
      h('select', { id: 'filter-class', 'aria-label': 'Class', onchange: changed('class') },
        option('', 'every class', filter.class), option('production', 'production', filter.class),
        option('non-production', 'non-production', filter.class)),
      h('select', { id: 'filter-only', 'aria-label': 'Show', onchange: changed('only') },
        option('', 'all', filter.only), option('stale', 'stale', filter.only),
        option('drift', 'with open drift', filter.only), option('moving', 'with a run under way', filter.only)),
    ),
    list,
    more,
  );
  refresh = poll(
    root,
    async () => {
      const envs = [];
      let cursor;
      do {
        const page = await get(withQuery('/factory/environments', { cursor, limit: Math.min(200, wanted - envs.length) }));
        envs.push(...page.items);
        cursor = page.nextCursor;
      } while (cursor && envs.length < wanted);
      more.hidden = !cursor;
      const [found, summary] = await Promise.all([
        Promise.all(envs.map(details)),
        lacks('factory.meta.read') ? null : get('/fleet/meta/summary'),
      ]);
      rows = found;
      fill(total, summary && summary.hourlyCost
        ? ['The tenant\'s observed environments cost ', h('strong', { id: 'fleet-cost' }, `${summary.hourlyCost.hourly} ${summary.hourlyCost.currency} an hour`), '.']
        : summary ? h('span', { class: 'muted', id: 'fleet-cost' }, 'No price table: nothing is priced (PUT /factory/prices).') : null);
      draw();
      return rows;
    },
    // Quickly while a run moves somewhere, slowly otherwise.
    (rs) => (rs.some((r) => r.lastRun && runMoving(r.lastRun)) ? 2000 : 10000),
  );
}
