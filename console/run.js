// #/runs/{id}: one provisioning run — its plan as a diff (adds, changes with the fields that
// differ, deletes), the approval form that sends the plan's inputs hash, the approvals the
// run refused, its receipts and outputs, and its logs; polled every second while it moves.

import { get, post, withQuery, seg, lacks, Problem, DECIDERS } from './api.js';
import { h, fill, link, time, badge, table, facts, json, action, perform, poll, region, runMoving, policy } from './ui.js';

/** The inventory's name for a plan field, where it differs. */
const OBSERVED_FIELD = { replicas: 'replicasDesired' };

const valueText = (v) => (v === undefined || v === null ? '—' : typeof v === 'object' ? JSON.stringify(v) : String(v));

/** `version 1.0.0 · replicas 2` of a declared or observed workload. */
function workloadText(w) {
  if (!w) return '';
  const replicas = w.replicas !== undefined ? w.replicas : w.replicasDesired;
  return `version ${w.version} · replicas ${replicas}`;
}

/**
 * The plan receipt as diff lines. The receipt names the changed fields; their values come
 * from the specification the run planned (declared) and, while the run has not applied, the
 * inventory (observed now, what the plan was made against unless the target moved since).
 */
function diff(plan, declared, observed) {
  const line = (sign, cls, c, detail) =>
    h('li', { class: `diff-${cls}`, 'data-change': cls, 'data-name': c.name },
      h('span', { class: 'sign' }, sign), ' ', h('code', null, `${c.kind}/${c.name}`), detail ? [' ', h('span', { class: 'detail' }, detail)] : null);
  const lines = [
    ...plan.adds.map((c) => line('+', 'add', c, workloadText(declared[c.name]))),
    ...plan.changes.map((c) =>
      line('~', 'change', c, h('ul', { class: 'fields' }, (c.fields || []).map((f) => {
        const want = declared[c.name] ? declared[c.name][f] : undefined;
        const have = observed && observed[c.name] ? observed[c.name][OBSERVED_FIELD[f] || f] : undefined;
        return h('li', { 'data-field': f }, h('strong', null, f), ': ',
          observed ? [h('span', { class: 'from' }, valueText(have)), ' → '] : null,
          h('span', { class: 'to' }, valueText(want)));
      })))),
    ...plan.deletes.map((c) => line('−', 'delete', c, observed && observed[c.name] ? `running ${workloadText(observed[c.name])}` : '')),
  ];
  return [
    h('p', null, h('span', { class: 'add' }, `${plan.adds.length} to add`), ', ',
      h('span', { class: 'change' }, `${plan.changes.length} to change`), ', ',
      h('span', { class: 'delete' }, `${plan.deletes.length} to delete`),
      observed ? h('span', { class: 'muted' }, ' (from: observed now → to: declared)') : null),
    lines.length ? h('ul', { class: 'diff', id: 'plan-diff' }, lines) : h('p', { class: 'muted' }, 'No changes.'),
    facts([
      ['Inputs hash', h('code', { id: 'inputs-hash' }, plan.inputsHash)],
      ['Program version', h('code', null, plan.programVersion)],
      ['Cost an hour', costText(plan.cost)],
      ['Posture', postureText(plan.posture)],
    ]),
  ];
}

/** The posture rules the plan would newly break, each on its resource, or that it breaks none. */
function postureText(posture) {
  if (!posture || !posture.length) return h('span', { class: 'muted' }, 'breaks no posture rule it does not break already');
  return h('ul', { id: 'plan-posture', class: 'warn' }, posture.map((v) =>
    h('li', { 'data-rule': v.rule }, h('code', { class: 'posture-rule' }, v.rule), ' on ', h('code', null, v.resource), ': ', v.detail)));
}

/** `0.0675 → 0.135 EUR an hour (+100 %)`, or why there is no estimate. */
function costText(cost) {
  if (!cost) return h('span', { class: 'muted' }, 'no estimate (the tenant has no price table)');
  const pct = cost.deltaPercent === undefined ? '' : ` (${cost.deltaPercent >= 0 ? '+' : ''}${cost.deltaPercent} %)`;
  return h('span', { id: 'plan-cost', class: cost.deltaHourly > 0 ? 'warn' : '' },
    `${cost.beforeHourly} → ${cost.afterHourly} ${cost.currency} an hour${pct}`,
    cost.unpriced && cost.unpriced.length ? h('span', { class: 'muted' }, `; not priced: ${cost.unpriced.join(', ')}`) : null);
}

function approvalForm(run, refresh) {
  const hash = run.planReceipt.inputsHash;
  const reason = h('input', { id: 'approval-reason', class: 'reason-input', 'aria-label': 'Reason', placeholder: 'Reason (change ticket …)' });
  const decide = (decision) => (e) =>
    perform(e.currentTarget, async () => {
      // The hash of the plan shown above: the API refuses (409) an approval of another plan.
      await post(`/factory/provisioning/runs/${seg(run.provisioningRunId)}/approval`, { decision, reason: reason.value, inputsHash: hash });
      refresh();
    });
  const need = { scope: 'factory.provisioning.apply', roles: DECIDERS };
  return h(
    'form',
    { class: 'card approval', id: 'approval-form', onsubmit: (e) => e.preventDefault() },
    h('h3', null, 'Approval'),
    h('p', null, 'This production run waits for an approval of plan ', h('code', null, hash), '.'),
    reason,
    action('Approve', need, decide('approve'), { id: 'approve', class: 'primary' }),
    action('Reject', need, decide('reject'), { id: 'reject' }),
  );
}

function controls(run, refresh) {
  const id = seg(run.provisioningRunId);
  const parts = [];
  // A cancel is valid until the apply starts.
  if ([null, undefined, 'Planned', 'AwaitingApproval'].includes(run.state)) {
    parts.push(action('Cancel run', { scope: 'factory.provisioning.apply' }, (e) =>
      perform(e.currentTarget, async () => {
        await post(`/factory/provisioning/runs/${id}/cancel`, { reason: 'cancelled from the console' });
        refresh();
      }), { id: 'cancel' }));
  }
  if (run.waitingForWindow) {
    const reason = h('input', { id: 'break-glass-reason', class: 'reason-input', 'aria-label': 'Break-glass reason', placeholder: 'Why it cannot wait for the window' });
    parts.push(reason, action('Break glass', { scope: 'factory.provisioning.apply', roles: DECIDERS }, (e) =>
      perform(e.currentTarget, async () => {
        await post(`/factory/provisioning/runs/${id}/break-glass`, { reason: reason.value });
        refresh();
      }), { id: 'break-glass' }));
  }
  return parts.length ? h('div', { class: 'actions' }, parts) : null;
}

function summary(run) {
  return [
    h('h1', null, 'Run ', h('code', null, run.provisioningRunId), ' ', h('span', { id: 'run-state' }, badge(run.state))),
    facts([
      ['Environment', link(`/environments/${seg(run.environmentId)}`, run.environmentId)],
      ['Kind', run.kind],
      ['Specification', `version ${run.specificationVersion}`],
      ['Started', time(run.startedAt)],
      ['Completed', run.completedAt ? time(run.completedAt) : null],
      ['Reason', run.reason || null],
      ['Waiting for', run.waitingForCapacity ? h('span', { class: 'warn' }, `capacity: ${valueText(run.waitingForCapacity)}`)
        : run.waitingForWindow ? h('span', { class: 'warn' }, `change window ${run.waitingForWindow.windowId}, opens `, time(run.waitingForWindow.opensAt))
          : run.state ? null : 'its turn on the environment, or its plan'],
      ['Break-glass', run.breakGlass ? `${run.breakGlass.by}: ${run.breakGlass.reason}` : null],
      ['Quarantine overridden', run.quarantineOverride
        ? h('span', { id: 'quarantine-override', class: 'warn' }, `${run.quarantineOverride.quarantines.map((q) => `${q.workload} ${q.version}`).join(', ')} by ${run.quarantineOverride.by}: ${run.quarantineOverride.reason}`)
        : null],
      ['Promotion', run.promotionId || null],
      ['Workflow', h('code', null, run.workflowId)],
    ]),
  ];
}

function decisions(run) {
  const a = run.approval;
  const refused = run.refusedApprovals || [];
  return [
    a ? facts([
      ['Decision', a.decision ? h('span', { id: 'approval-decision' }, h('strong', null, a.decision.decision), ' by ', h('strong', null, a.decision.approver),
        a.decision.reason ? ` — ${a.decision.reason}` : '') : null],
      ['Approval', a.approvalId ? h('code', null, a.approvalId) : null],
      ['Expired', a.expired ? 'no decision came before the approval expired' : null],
      ['Policy', a.policy ? policy(a.policy) : null],
    ]) : h('p', { class: 'muted' }, 'No decision recorded.'),
    h('h3', null, `Refused approvals (${refused.length})`),
    table(
      [
        ['Approver', (r) => r.approver],
        ['Decision', (r) => r.decision],
        ['Why refused', (r) => h('strong', null, r.why)],
        ['Inputs hash', (r) => h('code', null, r.inputsHash)],
        ['Reason', (r) => r.reason || '—'],
        ['Received', (r) => time(r.receivedAt)],
      ],
      refused,
      'None.',
    ),
    run.policy ? [h('h3', null, 'Policy'), policy(run.policy)] : null,
  ];
}

function receipt(r) {
  if (!r) return h('p', { class: 'muted' }, 'Not applied yet.');
  const outputs = r.outputs && typeof r.outputs === 'object' ? Object.entries(r.outputs) : [];
  return [
    facts([
      ['Result', h('strong', { id: 'apply-result', class: r.result === 'succeeded' ? 'fresh' : 'stale' }, r.result)],
      ['Duration', `${r.durationMs} ms`],
      ['Runner', r.runnerVersion],
      ['Reason', r.reason || null],
    ]),
    h('h3', null, 'Outputs'),
    table([['Output', ([k]) => h('code', null, k)], ['Value', ([, v]) => (typeof v === 'object' ? json(v) : String(v))]], outputs, 'No outputs.'),
  ];
}

/** The run's logs as text; null before the runner wrote any. */
async function logs(id) {
  try {
    return await get(`/factory/provisioning/runs/${id}/logs`);
  } catch (e) {
    if (e instanceof Problem && e.status === 404) return null;
    throw e;
  }
}

/** Workloads by name. */
const byName = (ws) => Object.fromEntries((ws || []).map((w) => [w.name, w]));

export async function render(root, [runId]) {
  const id = seg(runId);
  const head = region('div', { id: 'summary' });
  const plan = region('section', { id: 'plan' });
  const gate = region('div', { id: 'gate' });
  const decided = region('section', { id: 'decisions' });
  const applied = region('section', { id: 'receipt' });
  const log = region('section', { id: 'logs' });
  fill(root, head, h('h2', null, 'Plan'), plan, gate, h('h2', null, 'Approval'), decided,
    h('h2', null, 'Apply receipt'), applied, h('h2', null, 'Logs'), log);

  // What the diff needs besides the receipt, read once: the declared workloads of the
  // specification the run planned, and the inventory the plan was made against.
  let declared = null;
  let observed;
  const context = async (run) => {
    if (declared === null) {
      const specs = await get(withQuery('/factory/provisioning/specifications', { environmentId: run.environmentId, limit: 200 }));
      const spec = specs.items.find((s) => s.specificationId === run.specificationId);
      declared = byName(spec && spec.workloads);
    }
    if (observed === undefined) {
      observed = runMoving(run) && !lacks('factory.runtime.read')
        ? byName((await get(`/factory/environments/${seg(run.environmentId)}/inventory`)).workloads)
        : null;
    }
  };

  const refresh = poll(
    root,
    async () => {
      const [run, text] = await Promise.all([get(`/factory/provisioning/runs/${id}`), logs(id)]);
      if (run.planReceipt) await context(run);
      head.update(run, summary);
      plan.update({ p: run.planReceipt, declared, observed },
        (d) => (d.p ? diff(d.p, d.declared, d.observed) : h('p', { class: 'muted' }, 'Not planned yet.')));
      gate.update({ state: run.state, plan: run.planReceipt, window: run.waitingForWindow, id: run.provisioningRunId },
        () => [run.state === 'AwaitingApproval' && run.planReceipt ? approvalForm(run, refresh) : null, controls(run, refresh)]);
      decided.update({ a: run.approval, r: run.refusedApprovals, p: run.policy }, () => decisions(run));
      applied.update(run.applyReceipt, receipt);
      log.update(text, (t) => (t ? h('pre', { class: 'log', id: 'log-text' }, t) : h('p', { class: 'muted' }, 'No log yet.')));
      return run;
    },
    // Every second while the run moves; once it has ended nothing changes.
    (run) => (runMoving(run) ? 1000 : null),
  );
}
