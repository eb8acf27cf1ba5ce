// The console's one way to the API: fetch with the operator's bearer token, and API errors
// (RFC 7807 problem JSON) turned into a `Problem` the page shows as it came.
//
// The token lives in sessionStorage: it goes when the tab closes, and no other tab or site
// inherits it. The console reads the token's claims only to know what to offer (tenant,
// scopes, roles); it never verifies them. The API verifies every request and refuses what the
// token does not allow, whatever the page shows.

const TOKEN_KEY = 'runtime-cloud.token';

/** The bearer token, or null when signed out. */
export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

/** Keeps `value` as the bearer token of every request from now on. */
export function signIn(value) {
  sessionStorage.setItem(TOKEN_KEY, value.trim());
}

export function signOut() {
  sessionStorage.removeItem(TOKEN_KEY);
}

/** The payload of a JWT, decoded but not verified; null for anything that is not one. */
export function decodeJwt(jwt) {
  const part = (jwt || '').split('.')[1];
  if (!part) return null;
  try {
    const b64 = part.replace(/-/g, '+').replace(/_/g, '/');
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    return JSON.parse(new TextDecoder().decode(bytes));
  } catch {
    return null;
  }
}

/**
 * Who the token says the caller is: `{sub, tenant, scopes, roles, exp}`, or null. Scopes come
 * from `scope` (space separated) or `scp` (a list), as OAuth2 providers write either.
 */
export function identity() {
  const c = decodeJwt(token());
  if (!c) return null;
  const scopes = Array.isArray(c.scp) ? c.scp : String(c.scope || c.scp || '').split(/\s+/);
  return {
    sub: c.sub || '',
    tenant: c.tenant_id || '',
    scopes: scopes.filter(Boolean),
    roles: Array.isArray(c.roles) ? c.roles : [],
    exp: typeof c.exp === 'number' ? c.exp : null,
  };
}

/** The roles that grant production approvals and accept production proposals. */
export const DECIDERS = ['Operator', 'PlatformAdmin'];

/**
 * Why the caller cannot do something that needs `scope` (and one of `roles`, when given), in
 * the words the page shows next to the disabled control; null when the token allows it.
 */
export function lacks(scope, roles) {
  const me = identity();
  if (!me) return 'sign in first';
  if (scope && !me.scopes.includes(scope)) return `needs scope ${scope}`;
  if (roles && !roles.some((r) => me.roles.includes(r))) return `needs role ${roles.join(' or ')}`;
  return null;
}

/** An error answer of the API: its status and problem document. */
export class Problem extends Error {
  constructor(status, body) {
    const detail = body && typeof body === 'object' ? body.detail || body.title : String(body || '');
    super(detail || `HTTP ${status}`);
    this.status = status;
    this.title = (body && body.title) || `HTTP ${status}`;
    this.detail = detail || '';
  }
}

/** Listeners told when the API answers 401: the token is missing, expired or refused. */
const unauthorised = new Set();
export function onUnauthorised(fn) {
  unauthorised.add(fn);
}

/**
 * One API call. JSON bodies are sent as JSON; the answer is parsed as JSON, or returned as
 * text for `text/plain` (run logs). Throws a `Problem` for any non-2xx answer.
 */
export async function request(method, path, body) {
  const headers = { Accept: 'application/json, application/problem+json, text/plain' };
  const t = token();
  if (t) headers.Authorization = `Bearer ${t}`;
  const init = { method, headers };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, init);
  } catch (e) {
    throw new Problem(0, { title: 'API unreachable', detail: `${method} ${path}: ${e.message}` });
  }
  const type = res.headers.get('content-type') || '';
  const text = await res.text();
  const parsed = type.includes('json') && text ? JSON.parse(text) : text;
  if (!res.ok) {
    if (res.status === 401) unauthorised.forEach((fn) => fn());
    throw new Problem(res.status, parsed);
  }
  return parsed;
}

export const get = (path) => request('GET', path);
export const post = (path, body) => request('POST', path, body === undefined ? {} : body);
export const put = (path, body) => request('PUT', path, body);

/** `path` with the non-empty entries of `params` as its query string. */
export function withQuery(path, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '') q.set(k, v);
  }
  const s = q.toString();
  return s ? `${path}?${s}` : path;
}

/** An id as one path segment. */
export const seg = (id) => encodeURIComponent(id);
