// What every console scenario shares: Debian's chromium driven headless by playwright-core,
// screenshots saved where the Rust test says, a guard that no request leaves the API (and the
// stand-ins a scenario names), and a failure that exits non-zero with the reason.
//
// A scenario is `scenario('name', async (t) => { … })`; the Rust test (tests/console.rs) sets
// it up through the API, runs it with `node`, and checks the result through the API again.
//
// Environment: RC_API (the API's base URL), RC_SCREENSHOTS (a directory), RC_ALSO_ALLOWED
// (more origins requests may go to, comma separated), and the scenario's own RC_* values.

import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

/** How long a step may wait for the page by default; a run's apply waits longer. */
export const STEP_MS = 30_000;

/** The value of environment variable `name`, or a failure naming it. */
export function need(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set (the Rust test sets it)`);
  return value;
}

export async function scenario(name, body) {
  const api = need('RC_API').replace(/\/$/, '');
  const shots = join(need('RC_SCREENSHOTS'), name);
  mkdirSync(shots, { recursive: true });
  const allowed = [api, ...(process.env.RC_ALSO_ALLOWED || '').split(',').filter(Boolean)];
  const browser = await chromium.launch({
    executablePath: process.env.RC_CHROMIUM || '/usr/bin/chromium',
    // No sandbox: the tests run as root. No background networking: Chromium would otherwise
    // call home, and this guard (rightly) fails any request that leaves the machine.
    args: ['--no-sandbox', '--disable-background-networking', '--disable-component-update', '--disable-sync',
      '--no-first-run', '--disable-gpu'],
  });
  const outside = [];
  const errors = [];
  const t = {
    api,
    browser,
    context: null,
    page: null,
    /** Opens the browser context; `options` go to `browser.newContext`. */
    async open(options = {}) {
      t.context = await browser.newContext({ viewport: { width: 1400, height: 900 }, ...options });
      t.context.setDefaultTimeout(STEP_MS);
      t.context.on('request', (r) => {
        const url = r.url();
        if (!allowed.some((origin) => url === origin || url.startsWith(`${origin}/`))) outside.push(url);
      });
      t.page = await t.context.newPage();
      t.page.on('pageerror', (e) => errors.push(`uncaught: ${e.message}`));
      t.page.on('console', (m) => {
        // A policy violation means an asset or a call the console should not make.
        if (m.type() === 'error' && /Content Security Policy/i.test(m.text())) errors.push(`CSP: ${m.text()}`);
      });
      return t.page;
    },
    /** Saves a full-page screenshot as `{n}-{label}.png` and prints its path. */
    shots: 0,
    async shoot(label) {
      t.shots += 1;
      const path = join(shots, `${String(t.shots).padStart(2, '0')}-${label}.png`);
      await t.page.screenshot({ path, fullPage: true });
      console.log(`screenshot: ${path}`);
    },
    /** Marks the document, so `noReload` can tell whether it was ever loaded again. */
    async markDocument() {
      await t.page.evaluate(() => {
        window.rcConsoleTestMark = true;
      });
    },
    /**
     * Waits for `locator` (up to `timeout`), failing at once instead when the console shows a
     * problem: an action the API refused never gets there.
     */
    async until(locator, timeout = STEP_MS) {
      const problem = t.page.locator('#problem:not([hidden])');
      const first = await Promise.race([
        locator.waitFor({ timeout }).then(() => 'there'),
        // Should the banner never show, this wait just ends with the page.
        problem.waitFor({ timeout }).then(() => 'problem', () => new Promise(() => {})),
      ]);
      if (first === 'problem') throw new Error(`the console shows a problem: ${await problem.textContent()}`);
    },
    async noReload(what) {
      const same = await t.page.evaluate(() => window.rcConsoleTestMark === true);
      if (!same) throw new Error(`the page reloaded while ${what}`);
    },
  };
  try {
    await body(t);
    if (outside.length) throw new Error(`requests left the API's origin: ${[...new Set(outside)].join(', ')}`);
    if (errors.length) throw new Error(`the page reported errors:\n  ${errors.join('\n  ')}`);
    console.log(`scenario ${name}: passed`);
  } catch (e) {
    if (t.page) {
      const path = join(shots, 'failure.png');
      await t.page.screenshot({ path, fullPage: true }).catch(() => {});
      console.error(`screenshot of the failure: ${path}`);
      const banner = await t.page.locator('#problem').textContent().catch(() => null);
      if (banner) console.error(`the console's problem banner: ${banner}`);
    }
    console.error(`scenario ${name} failed: ${e.stack || e}`);
    process.exitCode = 1;
  } finally {
    await browser.close();
  }
}

/** Signs in on the sign-in page by pasting `token`; waits for the environments page. */
export async function signInWithToken(t, token) {
  const page = t.page;
  await page.goto(`${t.api}/console`);
  // Signed out, every route leads to the sign-in page.
  await page.locator('#paste-token').waitFor();
  await page.fill('#token', token);
  await page.click('#use-token');
  await page.locator('#environments > *').first().waitFor();
  await page.locator('#sign-out').waitFor();
}

/** The element's text once `locator` is on the page. */
export async function text(locator) {
  await locator.waitFor();
  return (await locator.textContent()).trim();
}

/** Fails unless `condition`, saying what was `expected`. */
export function check(condition, message) {
  if (!condition) throw new Error(`expected: ${message}`);
}
