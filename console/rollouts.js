// #/rollouts: fleet rollouts, newest first — state, progress through the waves, why a halted
// one halted.

import { get, seg, lacks } from './api.js';
import { h, fill, link, time, badge, table, poll } from './ui.js';

/** The rollout states in which it still moves (or waits for an operator). */
export const ACTIVE_ROLLOUT = ['Running', 'Halted', 'RollingBack'];

export async function render(root) {
  const list = h('div', { id: 'rollouts' });
  fill(root, h('h1', null, 'Fleet rollouts'), list);
  const missing = lacks('factory.meta.read');
  if (missing) {
    fill(list, h('p', { class: 'muted' }, `Rollouts are not readable with this token: ${missing}.`));
    return;
  }
  poll(
    root,
    async () => {
      const page = await get('/fleet/rollouts?limit=100');
      fill(
        list,
        table(
          [
            ['Rollout', (r) => link(`/rollouts/${seg(r.rolloutId)}`, h('code', null, r.rolloutId))],
            ['State', (r) => badge(r.state)],
            ['Release', (r) => r.input.releaseId || Object.entries(r.input.versions || {}).map(([w, v]) => `${w} ${v}`).join(', ')],
            ['Waves', (r) => `${r.status.wavesCompleted} of ${(r.input.waves || []).length} complete`],
            ['Instances converged', (r) => `${r.status.instances.filter((i) => i.converged).length} of ${r.status.instances.length}`],
            ['Halted because', (r) => (r.status.halt ? h('span', { class: 'warn' }, r.status.halt.reason) : '—')],
            ['Requested', (r) => [r.requestedBy, ' ', time(r.createdAt)]],
          ],
          page.items,
          'No rollouts yet.',
        ),
      );
      return page.items;
    },
    (items) => (items.some((r) => ACTIVE_ROLLOUT.includes(r.state)) ? 2000 : 10000),
  );
}
