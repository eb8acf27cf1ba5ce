// #/environments/{id}: one environment — what it is, what was last observed to run there
// (workloads, versions, replicas ready/desired, health, bindings by reference), its drift
// findings (open, suppressed, resolved; who made each difference when the observer knows) and
// its reconciliation proposals, with the form that accepts or rejects one.

import { get, post, withQuery, seg, lacks, DECIDERS } from './api.js';
import { h, fill, link, time, badge, table, facts, refs, json, action, perform, poll, region, policy, hourlyCost } from './ui.js';
import { targetText, byKind } from './environments.js';

/** `kubectl-edit (Update) at …, field spec.replicas`: who made a difference. */
export function changedBy(by) {
  if (!by) return h('span', { class: 'muted', title: 'this target does not record who writes what' }, 'not recorded');
  return h(
    'span',
    { class: 'changed-by', title: by.field },
    h('strong', null, by.manager),
    ` (${by.operation}${by.subresource ? `, ${by.subresource}` : ''})`,
    by.time ? [' ', time(by.time)] : null,
    h('br'),
    h('code', null, by.field),
  );
}

const show = (v) => (v === null || v === undefined ? h('span', { class: 'muted' }, '—') : typeof v === 'object' ? json(v) : String(v));

function findingStatus(f) {
  if (f.resolvedAt) return 'resolved';
  if (f.suppressedBy) return 'suppressed';
  return 'open';
}

function header(env, refresh) {
  const id = seg(env.environmentId);
  const kind = h('select', { id: 'run-kind', 'aria-label': 'Run kind' }, ['baseline', 'reconciliation', 'promotion', 'decommission'].map((k) => h('option', { value: k }, k)));
  const observe = action('Observe now', { scope: 'factory.runtime.operate' }, (e) =>
    perform(e.currentTarget, async () => {
      await post(`/factory/environments/${id}/observe`);
      refresh();
    }), { id: 'observe' });
  const plan = action('Plan a run', { scope: 'factory.provisioning.apply' }, (e) =>
    perform(e.currentTarget, async () => {
      const run = await post('/factory/provisioning/runs', { environmentId: env.environmentId, kind: kind.value });
      location.hash = `#/runs/${seg(run.provisioningRunId)}`;
    }), { id: 'plan-run' });
  return h(
    'div',
    null,
    h('h1', null, env.environmentId, ' ', h('span', { class: `class-${env.class}` }, env.class),
      env.state !== 'active' ? [' ', h('span', { class: 'badge retired', id: 'env-state' }, env.state)] : null),
    facts([
      ['Project', env.projectId],
      ['State', h('span', { id: 'state' }, env.state)],
      ['Expires', env.expiresAt ? h('span', { id: 'expires-at' }, time(env.expiresAt)) : null],
      ['Retired', env.retiredAt ? time(env.retiredAt) : null],
      ['Mode', env.mode],
      ['Target', h('span', { title: JSON.stringify(env.target) }, targetText(env.target))],
      ['Labels', Object.keys(env.labels || {}).length ? refs(env.labels) : null],
      ['Worker pool', env.poolId || null],
      ['Registered', time(env.createdAt)],
      ['Runs', link(withQuery('/runs', { environmentId: env.environmentId }), 'every run of this environment')],
    ]),
    env.state !== 'active' ? null : h('div', { class: 'actions' }, observe, ' ', kind, ' ', plan),
    env.state !== 'active' ? null : lifetime(env, refresh),
  );
}

/** Extend an ephemeral environment's expiry; decommission any environment now (Operator). */
function lifetime(env, refresh) {
  const id = seg(env.environmentId);
  const parts = [];
  if (env.expiresAt) {
    const ttl = h('input', { id: 'extend-ttl', class: 'reason-input', 'aria-label': 'New time to live', placeholder: 'New time to live from now (2h, 7d)' });
    parts.push(ttl, action('Extend', { scope: 'factory.provisioning.apply' }, (e) =>
      perform(e.currentTarget, async () => {
        await post(`/factory/environments/${id}/extend`, { ttl: ttl.value });
        refresh();
      }), { id: 'extend' }), ' ');
  }
  const reason = h('input', { id: 'decommission-reason', class: 'reason-input', 'aria-label': 'Decommission reason', placeholder: 'Why it is decommissioned' });
  parts.push(reason, action('Decommission now', { scope: 'factory.provisioning.apply', roles: DECIDERS }, (e) =>
    perform(e.currentTarget, async () => {
      await post(`/factory/environments/${id}/decommission`, { reason: reason.value });
      refresh();
    }), { id: 'decommission' }));
  return h('div', { class: 'actions' }, parts);
}

function inventory(inv, envState) {
  if (!inv) return h('p', { class: 'muted' }, lacks('factory.runtime.read'));
  // A retired or off-boarded environment is observed no more: what it shows is what it ran
  // before its decommission destroyed it.
  const retired = envState && envState !== 'active';
  return [
    retired ? h('p', { class: 'muted', id: 'inventory-retired' },
      `The environment is ${envState}: this is what it ran when it was last observed, before its decommission.`) : null,
    facts([
      ['Observed', h('span', { class: inv.stale ? 'stale' : 'fresh', id: 'freshness' }, inv.stale ? 'stale' : 'fresh', ' · ',
        inv.observedAt ? time(inv.observedAt) : 'never observed')],
      ['Last error', inv.lastError || null],
      ['Release', inv.currentReleaseId || null],
      ['Specification', inv.specificationVersion ? `version ${inv.specificationVersion}` : null],
      ['Cost', hourlyCost(inv.cost, { id: 'inventory-cost' })],
    ]),
    table(
      [
        ['Workload', (w) => h('strong', null, w.name)],
        ['Kind', (w) => w.kind],
        ['Version', (w) => h('code', null, w.version)],
        ['Replicas ready / desired', (w) => h('span', { class: w.replicasReady < w.replicasDesired ? 'warn' : '' }, `${w.replicasReady} / ${w.replicasDesired}`)],
        ['Health', (w) => h('span', { class: `health health-${w.health}` }, retired ? `${w.health} (then)` : w.health)],
        ['Managed by', (w) => (w.managedBy ? h('code', null, w.managedBy) : '—')],
        ['Endpoints', (w) => (w.endpoints.length ? h('ul', { class: 'refs' }, w.endpoints.map((e) => h('li', null, h('code', null, e)))) : '—')],
        ['Config bindings', (w) => refs(w.configRefs)],
        ['Secret bindings', (w) => refs(w.secretRefs)],
      ],
      inv.workloads,
      'No workloads observed.',
    ),
  ];
}

function findingsTable(findings, status) {
  const columns = [
    ['Kind', (f) => [h('span', { class: `kind kind-${f.kind}` }, f.kind), f.rule ? [' ', h('code', { class: 'posture-rule' }, f.rule)] : null]],
    ['Resource', (f) => h('code', null, f.resource)],
    ['Declared', (f) => show(f.declared)],
    // A posture finding's observation is what breaks its rule, in words.
    ['Observed', (f) => (f.kind === 'posture' && f.observed?.details ? h('ul', { class: 'refs' }, f.observed.details.map((d) => h('li', null, d))) : show(f.observed))],
    ['Changed by', (f) => changedBy(f.changedBy)],
    ['Detected', (f) => time(f.detectedAt)],
  ];
  if (status === 'suppressed') columns.push(['Suppressed by rule', (f) => h('code', null, f.suppressedBy)]);
  if (status === 'resolved') columns.push(['Resolved', (f) => time(f.resolvedAt)]);
  columns.push(['Proposal', (f) => (f.proposalId ? h('code', null, f.proposalId) : '—')]);
  return table(columns, findings, `No ${status} findings.`);
}

function drift(findings) {
  if (!findings) return h('p', { class: 'muted' }, lacks('factory.runtime.read'));
  const groups = { open: [], suppressed: [], resolved: [] };
  for (const f of findings) groups[findingStatus(f)].push(f);
  return ['open', 'suppressed', 'resolved'].map((status) =>
    h(
      'div',
      { id: `drift-${status}`, 'data-count': groups[status].length },
      h('h3', null, `${status[0].toUpperCase()}${status.slice(1)} (${groups[status].length})`,
        status === 'open' && groups.open.length ? h('span', { class: 'muted' }, ` — ${byKind(groups.open)}`) : null),
      findingsTable(groups[status].slice(0, status === 'resolved' ? 20 : undefined), status),
    ),
  );
}

/** `1 change, 2 adds …` of a proposal's plan summary. */
function summary(plan) {
  const parts = ['add', 'change', 'delete', 'adopt']
    .filter((k) => plan[`${k}s`] !== undefined)
    .map((k) => h('span', { class: `count count-${k}s` }, `${plan[`${k}s`]} ${k}${plan[`${k}s`] === 1 ? '' : 's'}`));
  return h('span', { class: 'plan-summary' }, parts.flatMap((p, i) => (i ? [', ', p] : [p])));
}

function decideForm(proposal, env, refresh) {
  const reason = h('input', { id: `reason-${proposal.proposalId}`, class: 'reason-input', 'aria-label': 'Reason', placeholder: 'Reason (a ticket, an incident …)' });
  const decide = (decision) => (e) =>
    perform(e.currentTarget, async () => {
      await post(`/factory/reconciliation/proposals/${seg(proposal.proposalId)}/decide`, { decision, reason: reason.value });
      refresh();
    });
  // Accepting a production proposal is a production change: Operators only (the API checks).
  const acceptNeed = { scope: 'factory.runtime.operate', roles: env.class === 'production' ? DECIDERS : undefined };
  return h(
    'form',
    { class: 'decide', onsubmit: (e) => e.preventDefault() },
    reason,
    action('Accept', acceptNeed, decide('accept'), { class: 'primary', 'data-action': 'accept' }),
    action('Reject', { scope: 'factory.runtime.operate' }, decide('reject'), { 'data-action': 'reject' }),
  );
}

/** A proposal's adoption into its Pulumi program: its branch, commit and diff (or why it
 * failed), and the action that asks for one (Operator) on a Pulumi stack observed in a
 * Kubernetes namespace. */
function adoption(p, env, refresh) {
  const a = p.adoption;
  const pulumiOnKubernetes = env.target && env.target.runner.kind === 'pulumi' && env.target.observer.kind === 'kubernetes';
  const unmanaged = p.planSummary && (p.planSummary.adopts || p.planSummary.deletes);
  const ask = () => action(a ? 'Adopt into the program again' : 'Adopt into the program', { scope: 'factory.runtime.operate', roles: DECIDERS }, (e) =>
    perform(e.currentTarget, async () => {
      await post(`/factory/reconciliation/proposals/${seg(p.proposalId)}/adoption`, {});
      refresh();
    }), { 'data-action': 'adopt' });
  const canAsk = p.state === 'Proposed' && pulumiOnKubernetes && unmanaged && (!a || a.state === 'failed');
  if (!a) return canAsk ? ask() : null;
  return h('div', { class: 'adoption', 'data-adoption': a.state },
    badge(a.state), ' ',
    a.branch ? [h('code', { class: 'branch' }, a.branch), ' at ', h('code', { class: 'commit' }, a.commit.slice(0, 12)), ' '] : null,
    a.reason ? h('span', { class: 'reason' }, a.reason) : null,
    a.diff ? h('details', { class: 'diff' }, h('summary', null, 'Generated change'), h('pre', null, a.diff)) : null,
    canAsk ? [' ', ask()] : null);
}

function proposals(items, findings, env, refresh) {
  if (!items) return h('p', { class: 'muted' }, lacks('factory.runtime.read'));
  if (!items.length) return h('p', { class: 'muted' }, 'No proposals.');
  const byId = Object.fromEntries((findings || []).map((f) => [f.findingId, f]));
  return items.map((p) =>
    h(
      'article',
      { class: 'card proposal', 'data-proposal': p.proposalId, 'data-state': p.state },
      h('h3', null, badge(p.state), ' ', p.direction, p.destructive ? h('span', { class: 'destructive' }, ' destructive') : null,
        ' ', h('span', { class: 'muted' }, 'raised ', time(p.raisedAt))),
      facts([
        ['Plan', summary(p.planSummary || {})],
        ['Covers', h('ul', { class: 'refs' }, p.findingIds.map((id) => {
          const f = byId[id];
          return h('li', null, f ? [h('span', { class: `kind kind-${f.kind}` }, f.kind), ' ', h('code', null, f.resource)] : h('code', null, id));
        }))],
        ['Changed by', (p.planSummary && p.planSummary.changedBy) ? h('ul', { class: 'refs' }, p.planSummary.changedBy.map((c) =>
          h('li', null, h('code', null, c.resource), ': ', changedBy(c)))) : null],
        ['Decided', p.decidedBy ? [h('strong', null, p.decidedBy), p.decisionReason ? ` — ${p.decisionReason}` : '', ' ', time(p.decidedAt)] : null],
        ['Run', p.provisioningRunId ? link(`/runs/${seg(p.provisioningRunId)}`, p.provisioningRunId) : null],
        ['Policy', p.policy ? policy(p.policy) : null],
        ['Generated', (p.generated || []).length ? p.generated.map((g) =>
          h('details', { class: 'generated', 'data-workload': g.workload },
            h('summary', null, `${g.format === 'kubernetes' ? 'Manifest' : 'Specification entry'} for `, h('code', null, g.workload)),
            json(g.manifest))) : null],
        ['Adoption', adoption(p, env, refresh)],
      ]),
      p.state === 'Proposed' ? decideForm(p, env, refresh) : null,
    ),
  );
}

/** The instance's off-boarding order (its state, archive, decommission run), or the form that
 * orders one (`factory.fleet.operate`; Operator). */
function offboarding(env, order, refresh) {
  if (lacks('factory.meta.read')) return h('p', { class: 'muted' }, lacks('factory.meta.read'));
  const form = () => {
    const reason = h('input', { id: 'offboard-reason', class: 'reason-input', 'aria-label': 'Off-boarding reason', placeholder: 'Why it leaves operation' });
    return h('div', { class: 'actions' }, reason, ' ', action('Off-board', { scope: 'factory.fleet.operate', roles: DECIDERS }, (e) =>
      perform(e.currentTarget, async () => {
        await post('/fleet/offboarding-orders', { environmentId: env.environmentId, reason: reason.value });
        refresh();
      }), { id: 'offboard' }));
  };
  if (!order) return env.state === 'active' ? form() : h('p', { class: 'muted' }, 'No off-boarding order.');
  return [
    facts([
      ['Order', h('code', null, order.orderId)],
      ['State', h('span', { id: 'offboarding-state' }, badge(order.state))],
      ['Why', [`${order.reason} (${order.requestedBy}, `, time(order.createdAt), ')']],
      ['Archive', order.archiveSha256
        ? h('span', { id: 'offboarding-archive' }, h('code', null, order.archiveSha256), ` · ${order.archiveBytes} bytes · ${order.manifest.files.length} files, exported `, time(order.exportedAt))
        : null],
      ['Decommission', order.provisioningRunId ? link(`/runs/${seg(order.provisioningRunId)}`, h('code', null, order.provisioningRunId)) : null],
      ['Failed because', order.failure || null],
    ]),
    order.state === 'failed' && env.state === 'active' ? form() : null,
  ];
}

export async function render(root, [environmentId]) {
  const id = seg(environmentId);
  const head = region('div');
  const inv = region('section', { id: 'inventory' });
  const findings = region('section', { id: 'drift' });
  const props = region('section', { id: 'proposals' });
  const leaving = region('section', { id: 'offboarding' });
  fill(root, head, h('h2', null, 'Inventory'), inv, h('h2', null, 'Drift findings'), findings, h('h2', null, 'Proposals'), props,
    h('h2', null, 'Off-boarding'), leaving);

  let busyUntil = 0;
  const refresh = poll(
    root,
    async () => {
      const runtime = !lacks('factory.runtime.read');
      const fleet = !lacks('factory.meta.read');
      const [env, inventoryView, drifts, page, orders] = await Promise.all([
        get(`/factory/environments/${id}`),
        runtime ? get(`/factory/environments/${id}/inventory`) : null,
        runtime ? get(`/factory/environments/${id}/drift?limit=200`) : null,
        runtime ? get(withQuery('/factory/reconciliation/proposals', { environmentId, limit: 10 })) : null,
        fleet ? get(withQuery('/fleet/offboarding-orders', { environmentId, limit: 1 })) : null,
      ]);
      const items = page ? page.items : null;
      head.update(env, (e) => header(e, wake));
      inv.update({ view: inventoryView, state: env.state }, (d) => inventory(d.view, d.state));
      findings.update(drifts && drifts.items, drift);
      props.update({ items, findings: drifts && drifts.items, env }, (d) => proposals(d.items, d.findings, d.env, wake));
      const order = orders && orders.items[0];
      leaving.update({ order, state: env.state }, (d) => offboarding(env, d.order, wake));
      if (order && !['completed', 'failed'].includes(order.state)) busyUntil = Math.max(busyUntil, Date.now() + 5000);
      return items || [];
    },
    // Quickly while an accepted proposal's run moves, an adoption is generated, or just after an action (its observation
    // and reconciliation take seconds), slowly otherwise.
    (items) => (items.some((p) => p.state === 'Accepted' || (p.adoption && p.adoption.state === 'generating'))
      || Date.now() < busyUntil ? 1500 : 5000),
  );
  function wake() {
    busyUntil = Date.now() + 60000;
    refresh();
  }
}
