// SPDX-License-Identifier: MIT
// Headless Chromium over the DevTools protocol with node's built-ins only: start it, open a page
// and watch its errors, requests and dialogs, move the mouse. Used by report_test.mjs and by
// bench/report_zoom.mjs.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { tmpdir } from 'node:os';

export function findChromium() {
  for (const name of [process.env.CHROMIUM, 'chromium', 'chromium-browser', 'google-chrome']) {
    if (!name) continue;
    const found = spawnSync('sh', ['-c', `command -v "${name}"`], { encoding: 'utf8' });
    if (found.status === 0) return found.stdout.trim();
  }
  return null;
}
// The browser, its DevTools socket and one page session.
export async function startBrowser(chromium) {
  const profile = mkdtempSync(join(tmpdir(), 'rlmem-chromium-'));
  const args = ['--headless=new', '--remote-debugging-port=0', `--user-data-dir=${profile}`, '--no-first-run',
    '--no-default-browser-check', '--disable-gpu', '--disable-extensions', '--disable-background-networking',
    '--hide-scrollbars', '--window-size=1400,1000', 'about:blank'];
  if (process.getuid && process.getuid() === 0) args.unshift('--no-sandbox');
  // Its own process group, so that closing it ends its helper processes too (they write into
  // the profile after the browser process is gone).
  const browser = spawn(chromium, args, { stdio: ['ignore', 'ignore', 'pipe'], detached: true });
  const url = await new Promise((done, fail) => {
    let text = '';
    const timer = setTimeout(() => fail(new Error('chromium did not print its DevTools address in 30 s')), 30000);
    browser.stderr.on('data', (chunk) => {
      text += chunk;
      const found = text.match(/DevTools listening on (ws:\/\/\S+)/);
      if (found) { clearTimeout(timer); done(found[1]); }
    });
    browser.on('exit', (code) => fail(new Error(`chromium exited ${code}: ${text.slice(-500)}`)));
  });
  const socket = new WebSocket(url);
  await new Promise((done, fail) => { socket.onopen = done; socket.onerror = fail; });
  let nextId = 1;
  const pending = new Map();
  const listeners = [];
  socket.onmessage = (message) => {
    const parsed = JSON.parse(message.data);
    if (parsed.id && pending.has(parsed.id)) {
      const { done, fail } = pending.get(parsed.id);
      pending.delete(parsed.id);
      if (parsed.error) fail(new Error(JSON.stringify(parsed.error))); else done(parsed.result);
    } else if (parsed.method) {
      for (const listener of listeners) listener(parsed);
    }
  };
  const send = (method, params = {}, sessionId = undefined) => new Promise((done, fail) => {
    const id = nextId++;
    pending.set(id, { done, fail });
    socket.send(JSON.stringify({ id, method, params, sessionId }));
  });
  return {
    send, listeners,
    async close() {
      socket.close();
      const exited = new Promise((done) => browser.once('exit', done));
      try {
        process.kill(-browser.pid, 'SIGTERM');
      } catch {
        browser.kill();  // the group is already gone
      }
      await exited;
      // The profile is a scratch folder: a helper process still writing into it is no failure of
      // the page under test, so removal is retried and, at worst, left to the system's /tmp.
      try {
        rmSync(profile, { recursive: true, force: true, maxRetries: 20, retryDelay: 200 });
      } catch (error) {
        console.log(`# note: the browser profile ${profile} was left behind (${error.code})`);
      }
    },
  };
}

export const sleep = (ms) => new Promise((done) => setTimeout(done, ms));

// Polls `expression` in the page until it is truthy or `timeoutMs` has passed; returns its last
// value (falsy on a timeout), so the caller's check says what was expected and what was seen.
export async function waitFor(page, expression, timeoutMs = 5000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await page.evaluate(expression);
    if (value || Date.now() >= deadline) return value;
    await sleep(20);
  }
}

// Resolves once the page has drawn two more frames: whatever an input event scheduled for the
// next animation frame (a chart's cursor, its tooltip) has run by then.
export async function framesDrawn(page) {
  await page.send('Runtime.evaluate', {
    expression: 'new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(() => done(true))))',
    awaitPromise: true, returnByValue: true,
  });
}

// `beforeLoad`: a script run in the page before its own (an observer to install, say).
export async function openPage(browser, file, { beforeLoad } = {}) {
  const { targetId } = await browser.send('Target.createTarget', { url: 'about:blank' });
  const { sessionId } = await browser.send('Target.attachToTarget', { targetId, flatten: true });
  const send = (method, params) => browser.send(method, params, sessionId);
  const seen = { errors: [], requests: [], dialogs: [] };
  browser.listeners.push((message) => {
    if (message.sessionId !== sessionId) return;
    const p = message.params;
    if (message.method === 'Runtime.exceptionThrown') seen.errors.push(p.exceptionDetails.exception?.description || p.exceptionDetails.text);
    if (message.method === 'Runtime.consoleAPICalled' && (p.type === 'error' || p.type === 'assert')) seen.errors.push(p.args.map((a) => a.value ?? a.description).join(' '));
    if (message.method === 'Log.entryAdded' && p.entry.level === 'error') seen.errors.push(p.entry.text);
    if (message.method === 'Network.requestWillBeSent') seen.requests.push(p.request.url);
    if (message.method === 'Page.javascriptDialogOpening') {
      seen.dialogs.push(p.message);
      send('Page.handleJavaScriptDialog', { accept: true });
    }
  });
  for (const domain of ['Runtime', 'Log', 'Network', 'Page']) await send(`${domain}.enable`);
  await send('Emulation.setDeviceMetricsOverride', { width: 1400, height: 1000, deviceScaleFactor: 1, mobile: false });
  if (beforeLoad) await send('Page.addScriptToEvaluateOnNewDocument', { source: beforeLoad });
  const url = 'file://' + resolve(file);
  const started = Date.now();
  await send('Page.navigate', { url });
  const evaluate = async (expression) => (await send('Runtime.evaluate', { expression, returnByValue: true })).result.value;
  while (Date.now() - started < 20000 && (await evaluate('document.body && document.body.dataset.ready')) !== '1') await sleep(50);
  const readyMs = Date.now() - started;
  return { send, evaluate, seen, url, readyMs, close: () => browser.send('Target.closeTarget', { targetId }) };
}

export async function mouse(page, type, x, y, buttons = 0) {
  await page.send('Input.dispatchMouseEvent', { type, x, y, button: buttons ? 'left' : 'none', buttons, clickCount: 1 });
}

export async function boxOf(page, selector) {
  return page.evaluate(`(() => { const b = document.querySelector(${JSON.stringify(selector)}).getBoundingClientRect();
    return { x: b.x, y: b.y, width: b.width, height: b.height }; })()`);
}

