// Small DOM helpers every page uses. Values from the API (and so from targets and from other
// operators) are only ever set as text, never as HTML: nothing an environment reports can
// become markup or script here.

import { Problem, lacks } from './api.js';

/**
 * `h('a', {href, class, onclick, title, …}, child…)`: an element with attributes, listeners
 * (`on…` functions) and children (nodes, strings, numbers; null and false are skipped; arrays
 * are flattened).
 */
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'value') el.value = v;
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** Replaces the children of `el`. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** A link inside the console. */
export const link = (hash, ...children) => h('a', { href: `#${hash}` }, ...children);

/** A timestamp: how long ago, with the exact time as its tooltip and `datetime`. */
export function time(iso) {
  if (!iso) return h('span', { class: 'muted' }, '—');
  const at = new Date(iso);
  return h('time', { datetime: iso, title: at.toISOString() }, ago(at));
}

/**
 * Brings every "… ago" on the page up to date: a region keeps its elements while its data is
 * unchanged, and "2 s ago" must not stay 2 s ago.
 */
export function retime() {
  for (const el of document.querySelectorAll('time[datetime]')) el.textContent = ago(new Date(el.dateTime));
}

function ago(at) {
  const s = Math.round((Date.now() - at.getTime()) / 1000);
  if (Math.abs(s) < 60) return s >= 0 ? `${s} s ago` : `in ${-s} s`;
  const m = Math.round(s / 60);
  if (Math.abs(m) < 60) return m >= 0 ? `${m} min ago` : `in ${-m} min`;
  const hours = Math.round(m / 60);
  if (Math.abs(hours) < 48) return hours >= 0 ? `${hours} h ago` : `in ${-hours} h`;
  return at.toISOString().slice(0, 16).replace('T', ' ');
}

/** A run, proposal or rollout state as a coloured badge (`state-Applied` …). */
export function badge(state) {
  const text = state || 'Pending';
  return h('span', { class: `badge state-${text}`, 'data-state': text }, text);
}

/** The run states after which nothing changes. */
export const TERMINAL_RUN = ['Applied', 'Failed', 'Rejected', 'Cancelled'];
export const runMoving = (run) => !TERMINAL_RUN.includes(run && run.state);

/** A table of `rows` with `columns` `[heading, row => cell]`; `empty` when there are none. */
export function table(columns, rows, empty = 'None.') {
  if (!rows.length) return h('p', { class: 'muted' }, empty);
  return h(
    'table',
    null,
    h('thead', null, h('tr', null, columns.map(([head]) => h('th', null, head)))),
    h('tbody', null, rows.map((r) => h('tr', null, columns.map(([, cell]) => h('td', null, cell(r)))))),
  );
}

/** A definition list of `[term, value]` pairs; pairs whose value is null are left out. */
export function facts(pairs) {
  return h(
    'dl',
    { class: 'facts' },
    pairs.filter(([, v]) => v !== null && v !== undefined).map(([k, v]) => [h('dt', null, k), h('dd', null, v)]),
  );
}

/** `{key: ref}` as one line per binding: bindings are references, shown as such. */
export function refs(map) {
  const entries = Object.entries(map || {});
  if (!entries.length) return h('span', { class: 'muted' }, '—');
  return h('ul', { class: 'refs' }, entries.map(([k, v]) => h('li', null, h('code', null, k), ' → ', h('code', null, v))));
}

/** What the policies answered: allowed or not, the denials, and which bundle decided. */
export function policy(p) {
  return facts([
    ['Allows without an approval', p.allow ? 'yes' : 'no'],
    ['Denied because', p.deny && p.deny.length ? h('ul', { class: 'refs' }, p.deny.map((d) => h('li', null, d))) : null],
    ['Policy', h('span', null, h('code', null, p.policyId), ' ', h('code', { class: 'muted' }, p.version))],
    ['Decided', time(p.decidedAt)],
  ]);
}

/** A JSON value, pretty-printed. */
export const json = (value) => h('pre', { class: 'json' }, JSON.stringify(value, null, 2));

/**
 * A button for an action that needs `scope` (and one of `roles`, when given): disabled, with
 * the reason beside it and as its tooltip, when the token does not allow it. The API refuses
 * it anyway; this only saves the operator a 403.
 */
/**
 * `0.135 EUR an hour` of an observed cost (`models::cost::Cost`), with what could not be priced;
 * or that there is none (no price table, or not observed yet): never a made-up number.
 */
export function hourlyCost(cost, props = {}) {
  if (!cost) return h('span', { class: 'muted', ...props }, 'not priced');
  return h('span', props, `${cost.hourly} ${cost.currency} an hour`,
    cost.unpriced && cost.unpriced.length ? h('span', { class: 'muted' }, ` (not priced: ${cost.unpriced.join(', ')})`) : null);
}

export function action(label, need, onclick, extra = {}) {
  const why = lacks(need.scope, need.roles);
  const button = h('button', { type: 'button', onclick, disabled: !!why, title: why, ...extra }, label);
  if (!why) return button;
  return h('span', { class: 'guarded' }, button, h('span', { class: 'reason' }, why));
}

/** Shows an error of the API (or of the console) in the banner; null hides it. */
export function showProblem(err) {
  const el = document.getElementById('problem');
  if (!err) {
    el.hidden = true;
    el.replaceChildren();
    return;
  }
  const title = err instanceof Problem ? `${err.status ? `${err.status} ` : ''}${err.title}` : 'Error';
  fill(el, h('strong', null, title), ' ', h('span', { class: 'detail' }, err.message || String(err)),
    h('button', { type: 'button', class: 'close', title: 'Dismiss', onclick: () => showProblem(null) }, '×'));
  el.hidden = false;
}

/**
 * Runs `fn` (an async action of a button), showing any problem and disabling `button` until
 * it settles, so a double click sends one request.
 */
export async function perform(button, fn) {
  showProblem(null);
  if (button) button.disabled = true;
  try {
    await fn();
  } catch (e) {
    showProblem(e);
  } finally {
    if (button) button.disabled = false;
  }
}

/**
 * Calls `load` now and again after each call settles, every `every(result)` milliseconds
 * (null stops), for as long as `el` is on the page: navigating away drops the element and so
 * ends the polling. A failed load shows its problem and is retried at the slow pace. Returns
 * a function that asks for a look now (after an action) rather than at the next tick.
 */
export function poll(el, load, every) {
  let timer = null;
  let running = false;
  let again = false;
  const tick = async () => {
    timer = null;
    if (!el.isConnected) return;
    running = true;
    let next = 5000;
    try {
      next = every(await load());
    } catch (e) {
      if (el.isConnected) showProblem(e);
    }
    running = false;
    if (!el.isConnected) return;
    if (again) {
      again = false;
      next = 0;
    }
    if (next !== null) timer = setTimeout(tick, next);
  };
  tick();
  return () => {
    // One load at a time: a look asked for mid-load follows it at once.
    if (running) {
      again = true;
      return;
    }
    if (timer !== null) clearTimeout(timer);
    tick();
  };
}

/**
 * A region rebuilt only when its data changes, so a poll that brings nothing new keeps what
 * the operator is typing into a form in it.
 */
export function region(tag = 'section', props = {}) {
  const el = h(tag, props);
  let last;
  el.update = (data, build) => {
    const sig = JSON.stringify(data);
    if (sig === last) return;
    last = sig;
    fill(el, build(data));
  };
  return el;
}
