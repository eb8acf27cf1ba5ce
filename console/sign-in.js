// #/sign-in: who is signed in, and the ways to sign in this API offers (GET /console/sign-in):
// a pasted bearer token always; a one-click token under `runtime-cloud dev`; the OpenID
// provider's sign-in when one is configured.

import * as api from './api.js';
import { h, fill, facts, time, perform, showProblem } from './ui.js';
import { beginSignIn } from './oidc.js';

function signedIn(token) {
  api.signIn(token);
  location.hash = '#/environments';
}

function whoAmI() {
  const me = api.identity();
  if (!me) return null;
  return h(
    'section',
    { class: 'card', id: 'signed-in' },
    h('h2', null, 'Signed in'),
    facts([
      ['Subject', me.sub],
      ['Tenant', me.tenant],
      ['Roles', me.roles.length ? me.roles.join(', ') : 'none'],
      ['Scopes', h('ul', { class: 'scopes' }, me.scopes.map((s) => h('li', null, h('code', null, s))))],
      ['Expires', me.exp ? time(new Date(me.exp * 1000).toISOString()) : null],
    ]),
  );
}

function pasteForm() {
  const input = h('textarea', { id: 'token', rows: 3, placeholder: 'eyJ…', spellcheck: 'false', autocomplete: 'off' });
  const submit = h('button', { type: 'submit', id: 'use-token' }, 'Sign in with this token');
  return h(
    'form',
    {
      class: 'card',
      id: 'paste-token',
      onsubmit: (e) => {
        e.preventDefault();
        const value = input.value.trim();
        const claims = api.decodeJwt(value);
        if (!claims) {
          showProblem(new Error('that is not a JWT (three base64url parts separated by dots)'));
          return;
        }
        if (typeof claims.exp === 'number' && claims.exp * 1000 < Date.now()) {
          showProblem(new Error('that token has expired'));
          return;
        }
        signedIn(value);
      },
    },
    h('h2', null, 'Paste a token'),
    h('p', { class: 'muted' }, 'A bearer token from ', h('code', null, 'runtime-cloud token'), ' or your identity provider.'),
    h('label', { for: 'token' }, 'Bearer token'),
    input,
    submit,
  );
}

function devForm() {
  const tenant = h('input', { id: 'dev-tenant', value: 'dev', required: true });
  const role = h(
    'select',
    { id: 'dev-role' },
    ['Operator', 'PlatformAdmin', 'Observer'].map((r) => h('option', { value: r }, r)),
    h('option', { value: '' }, 'no role'),
  );
  const readOnly = h('input', { id: 'dev-read-only', type: 'checkbox' });
  const submit = h('button', { type: 'submit', id: 'dev-sign-in' }, 'Sign in (dev)');
  return h(
    'form',
    {
      class: 'card',
      id: 'dev-form',
      onsubmit: (e) => {
        e.preventDefault();
        perform(submit, async () => {
          const body = { tenantId: tenant.value.trim(), roles: role.value ? [role.value] : [], readOnly: readOnly.checked };
          const minted = await api.post('/console/dev-sign-in', body);
          signedIn(minted.accessToken);
        });
      },
    },
    h('h2', null, 'Development sign-in'),
    h('p', { class: 'muted' }, 'This API runs under ', h('code', null, 'runtime-cloud dev'), ': one click mints a token.'),
    h('div', { class: 'row' }, h('label', { for: 'dev-tenant' }, 'Tenant'), tenant, h('label', { for: 'dev-role' }, 'Role'), role,
      h('label', { class: 'check' }, readOnly, ' read-only (only the *.read scopes)')),
    submit,
  );
}

function oidcForm(oidc) {
  const button = h('button', { type: 'button', id: 'oidc-sign-in', onclick: () => perform(button, () => beginSignIn(oidc)) },
    `Sign in with ${oidc.issuer}`);
  return h('section', { class: 'card', id: 'oidc' }, h('h2', null, 'Single sign-on'), button);
}

export async function render(root, _params, query) {
  fill(root, h('h1', null, 'Sign in'));
  if (query.get('refused')) {
    root.append(h('p', { class: 'notice', id: 'refused' }, 'The API refused the token (expired or not valid here): sign in again.'));
  }
  const who = whoAmI();
  if (who) root.append(who);
  const config = await api.get('/console/sign-in');
  if (config.oidc) root.append(oidcForm(config.oidc));
  if (config.dev) root.append(devForm());
  root.append(pasteForm());
}
