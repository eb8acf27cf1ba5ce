// #/quarantines: workload versions refused fleet-wide for the tenant — placed by a rollout's
// rollback or an Operator, lifted by an Operator with a reason. Nothing automatic applies a
// version in force; an Operator's explicit run with a reason does (the run shows it).

import { get, post, seg, lacks, DECIDERS } from './api.js';
import { h, fill, link, time, badge, table, action, perform, poll, region } from './ui.js';

export async function render(root) {
  // Rebuilt only when the quarantines change: a poll keeps a lift reason being typed.
  const list = region('div', { id: 'quarantines' });
  let refresh = () => {};
  const form = h('div', { class: 'actions' }, placeForm(() => refresh()));
  fill(root, h('h1', null, 'Quarantined versions'), form, list);
  const missing = lacks('factory.provisioning.read');
  if (missing) {
    fill(list, h('p', { class: 'muted' }, `Quarantines are not readable with this token: ${missing}.`));
    return;
  }
  refresh = poll(
    root,
    async () => {
      const page = await get('/factory/quarantines?limit=100');
      list.update(page.items, (items) =>
        table(
          [
            ['Workload', (q) => h('strong', null, q.workload)],
            ['Version', (q) => h('code', null, q.version)],
            ['State', (q) => h('span', { 'data-quarantine': q.quarantineId, class: 'quarantine-state' }, badge(q.state))],
            ['Why', (q) => q.reason],
            ['Placed', (q) => [source(q), ' ', q.quarantinedBy, ' ', time(q.quarantinedAt)]],
            ['Lifted', (q) => (q.liftedAt ? [q.liftedBy, ' ', time(q.liftedAt), ': ', q.liftReason] : liftForm(q, () => refresh()))],
          ],
          items,
          'No version is quarantined.',
        ),
      );
      return page.items;
    },
    () => 10000,
  );
}

function source(q) {
  if (q.source === 'rollback' && q.rolloutId) {
    return h('span', null, 'rollback of ', link(`/rollouts/${seg(q.rolloutId)}`, h('code', null, q.rolloutId)), ' by');
  }
  return h('span', null, 'by');
}

/** Quarantine a version with a reason (Operator). */
function placeForm(refresh) {
  const workload = h('input', { id: 'quarantine-workload', 'aria-label': 'Workload', placeholder: 'Workload' });
  const version = h('input', { id: 'quarantine-version', 'aria-label': 'Version', placeholder: 'Version' });
  const reason = h('input', { id: 'quarantine-reason', class: 'reason-input', 'aria-label': 'Why it must not run', placeholder: 'Why it must not run' });
  return [workload, ' ', version, ' ', reason, ' ', action('Quarantine', { scope: 'factory.provisioning.apply', roles: DECIDERS }, (e) =>
    perform(e.currentTarget, async () => {
      await post('/factory/quarantines', { workload: workload.value, version: version.value, reason: reason.value });
      reason.value = '';
      refresh();
    }), { id: 'quarantine' })];
}

/** Lift a quarantine in force, with a reason (Operator). */
function liftForm(q, refresh) {
  const id = seg(q.quarantineId);
  const reason = h('input', { class: 'reason-input lift-reason', 'aria-label': `Why ${q.workload} ${q.version} may run again`, placeholder: 'Why it may run again' });
  return h('span', null, reason, ' ', action('Lift', { scope: 'factory.provisioning.apply', roles: DECIDERS }, (e) =>
    perform(e.currentTarget, async () => {
      await post(`/factory/quarantines/${id}/lift`, { reason: reason.value });
      refresh();
    }), { class: 'lift', 'data-lift': q.quarantineId }));
}
