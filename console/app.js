// The console's entry: a hash router over one module per page, the signed-in header, and
// the end of an OpenID sign-in (`/console/callback`, where the provider sends the browser
// back with `?code=…&state=…`; a hash route could not receive that query string).
//
// Each page module exports `render(root, params, query)`; `root` is a fresh element, so a
// page that is navigated away from stops polling (its root is off the page) and can never
// write into the next one.

import * as api from './api.js';
import { h, fill, showProblem, retime } from './ui.js';
import { completeSignIn } from './oidc.js';
import * as signInPage from './sign-in.js';
import * as environments from './environments.js';
import * as environment from './environment.js';
import * as runs from './runs.js';
import * as run from './run.js';
import * as rollouts from './rollouts.js';
import * as rollout from './rollout.js';
import * as quarantines from './quarantines.js';

/** `[pattern, page, nav item]`: the captures of the pattern are the page's params. */
const ROUTES = [
  [/^\/sign-in$/, signInPage, null],
  [/^\/environments$/, environments, 'environments'],
  [/^\/environments\/([^/]+)$/, environment, 'environments'],
  [/^\/runs$/, runs, 'runs'],
  [/^\/runs\/([^/]+)$/, run, 'runs'],
  [/^\/rollouts$/, rollouts, 'rollouts'],
  [/^\/rollouts\/([^/]+)$/, rollout, 'rollouts'],
  [/^\/quarantines$/, quarantines, 'quarantines'],
];

function current() {
  const raw = location.hash.replace(/^#/, '') || '/environments';
  const [path, query] = raw.split('?');
  return { path, query: new URLSearchParams(query || '') };
}

function renderWho() {
  const who = document.getElementById('who');
  const me = api.identity();
  if (!me) {
    fill(who, h('a', { href: '#/sign-in' }, 'Sign in'));
    return;
  }
  const expired = me.exp !== null && me.exp * 1000 < Date.now();
  fill(
    who,
    h('span', { class: 'tenant', title: 'tenant' }, me.tenant),
    ' ',
    h('a', { href: '#/sign-in', class: 'subject', title: me.scopes.join(' ') }, me.sub),
    me.roles.length ? h('span', { class: 'roles' }, ` (${me.roles.join(', ')})`) : null,
    expired ? h('span', { class: 'reason' }, ' token expired') : null,
    ' ',
    h('button', { type: 'button', id: 'sign-out', onclick: signOut }, 'Sign out'),
  );
}

function signOut() {
  api.signOut();
  showProblem(null);
  if (location.hash === '#/sign-in') route();
  else location.hash = '#/sign-in';
}

async function route() {
  const { path, query } = current();
  if (!api.token() && path !== '/sign-in') {
    location.replace('#/sign-in');
    return;
  }
  const match = ROUTES.map(([re, page, nav]) => [re.exec(path), page, nav]).find(([m]) => m);
  const main = document.getElementById('page');
  renderWho();
  if (!match) {
    fill(main, h('section', { class: 'page' }, h('h1', null, 'Not found'), h('p', null, `No page at ${path}.`)));
    return;
  }
  const [m, page, nav] = match;
  for (const a of document.querySelectorAll('[data-nav]')) {
    a.classList.toggle('active', a.dataset.nav === nav);
  }
  const root = h('section', { class: 'page' });
  fill(main, root);
  try {
    await page.render(root, m.slice(1).map(decodeURIComponent), query);
  } catch (e) {
    showProblem(e);
  }
}

// A token the API refuses (expired, revoked, from another issuer) cannot do anything: back to
// the sign-in page, which says why.
api.onUnauthorised(() => {
  api.signOut();
  location.hash = '#/sign-in?refused=1';
  renderWho();
});

async function start() {
  let failed = null;
  if (location.pathname.replace(/\/$/, '').endsWith('/console/callback')) {
    try {
      api.signIn(await completeSignIn(location.search));
      history.replaceState(null, '', '/console/#/environments');
    } catch (e) {
      failed = e;
      history.replaceState(null, '', '/console/#/sign-in');
    }
  }
  window.addEventListener('hashchange', () => {
    showProblem(null);
    route();
  });
  await route();
  if (failed) showProblem(failed);
  setInterval(retime, 5000);
}

start();
