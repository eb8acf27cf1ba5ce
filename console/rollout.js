// #/rollouts/{id}: one fleet rollout — its waves and their instances (each with its run and
// whether it converged as observed), the halt and its reason, and the operator's way on from
// a halt: resume, skip an instance, roll back or abort.

import { get, post, seg, lacks } from './api.js';
import { h, fill, link, time, badge, table, facts, json, action, perform, poll, region } from './ui.js';
import { ACTIVE_ROLLOUT } from './rollouts.js';

const OPERATE = { scope: 'factory.fleet.operate' };

function halt(r, send) {
  const x = r.status.halt;
  if (!x) return null;
  const { guard, ...details } = x.guard;
  return h(
    'section',
    { class: 'card halt', id: 'halt' },
    h('h2', null, `Halted in wave ${x.wave + 1}`),
    facts([
      ['Reason', h('strong', { id: 'halt-reason' }, x.reason)],
      ['Guard', [h('code', null, guard), ' ', Object.keys(details).length ? json(details) : null]],
      ['Instances', x.instances.length ? x.instances.join(', ') : null],
      ['Incident', x.incidentId ? h('code', null, x.incidentId) : null],
      ['At', time(x.at)],
    ]),
    r.state === 'Halted'
      ? h('div', { class: 'actions' },
        action('Resume', OPERATE, send('resume'), { id: 'resume', class: 'primary' }), ' ',
        action('Roll back', OPERATE, send('rollback'), { id: 'rollback' }), ' ',
        action('Abort', OPERATE, send('abort'), { id: 'abort' }))
      : null,
  );
}

function waves(r, runs, send) {
  const waveList = r.input.waves || [];
  return waveList.map((w) => {
    const members = r.status.instances.filter((i) => i.wave === w.index);
    const done = w.index < r.status.wavesCompleted;
    const current = !done && w.index === r.status.currentWave;
    return h(
      'article',
      { class: `card wave${current ? ' current' : ''}`, 'data-wave': w.index },
      h('h3', null, `Wave ${w.index + 1}`, w.production ? h('span', { class: 'class-production' }, ' production') : null,
        ' ', h('span', { class: 'muted' }, done ? 'complete' : current ? 'under way' : 'to come')),
      table(
        [
          ['Instance', (i) => link(`/environments/${seg(i.environmentId)}`, i.environmentId)],
          ['Run', (i) => (i.provisioningRunId ? [link(`/runs/${seg(i.provisioningRunId)}`, h('code', null, i.provisioningRunId)), ' ', badge(runs[i.provisioningRunId])] : '—')],
          ['Converged', (i) => (i.converged ? 'yes' : i.skipped ? 'skipped' : 'not yet')],
          ['Rollback run', (i) => (i.rollbackRunId ? link(`/runs/${seg(i.rollbackRunId)}`, h('code', null, i.rollbackRunId)) : '—')],
          ['', (i) => (r.state === 'Halted' && !i.converged && !i.skipped
            ? action('Skip', OPERATE, send('skip', { environmentId: i.environmentId }), { 'data-skip': i.environmentId }) : null)],
        ],
        members,
      ),
    );
  });
}

export async function render(root, [rolloutId]) {
  const id = seg(rolloutId);
  const missing = lacks('factory.meta.read');
  if (missing) {
    fill(root, h('h1', null, 'Rollout'), h('p', { class: 'muted' }, `Not readable with this token: ${missing}.`));
    return;
  }
  const view = region('div');
  fill(root, view);
  const send = (command, body) => (e) =>
    perform(e.currentTarget, async () => {
      await post(`/fleet/rollouts/${id}/${command}`, body);
      refresh();
    });
  const refresh = poll(
    root,
    async () => {
      const r = await get(`/fleet/rollouts/${id}`);
      // Each started instance's run state, which the rollout does not carry.
      const runIds = r.status.instances.map((i) => i.provisioningRunId).filter(Boolean);
      const states = lacks('factory.provisioning.read') ? [] : await Promise.all(
        runIds.map((rid) => get(`/factory/provisioning/runs/${seg(rid)}`).then((x) => x.state, () => null)));
      const runs = Object.fromEntries(runIds.map((rid, n) => [rid, states[n]]));
      view.update({ r, runs }, (d) => [
        h('h1', null, 'Rollout ', h('code', null, d.r.rolloutId), ' ', h('span', { id: 'rollout-state' }, badge(d.r.state))),
        facts([
          ['Versions', Object.entries(d.r.input.versions || {}).map(([w, v]) => `${w} ${v}`).join(', ')],
          ['Release', d.r.input.releaseId || null],
          ['Progress', `${d.r.status.wavesCompleted} of ${(d.r.input.waves || []).length} waves complete`],
          ['Failure budget', String(d.r.input.failureBudget)],
          ['Requested', [d.r.requestedBy, ' ', time(d.r.createdAt)]],
          ['Updated', time(d.r.updatedAt)],
        ]),
        halt(d.r, send),
        h('h2', null, 'Waves'),
        waves(d.r, d.runs, send),
      ]);
      return r;
    },
    (r) => (ACTIVE_ROLLOUT.includes(r.state) ? 2000 : null),
  );
}
