// SPDX-License-Identifier: MIT
// `rlmem report` pages in a real browser: headless Chromium driven over the DevTools protocol
// with node's built-ins only. Each page must render every view with no console error, no
// network request and no dialog; its screenshot must not be blank; hovering the timeline shows
// a stack; dragging zooms every chart; a hostile snapshot's markup shows as text.
//
//   node --experimental-websocket report_test.mjs RLMEM TESTDATA WORKDIR [--screenshots DIR]
// Exits 77 (ctest's skip) with one line when Chromium is not installed.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { inflateSync } from 'node:zlib';
import { tmpdir } from 'node:os';

const [rlmem, testdata, workdirArgument, ...rest] = process.argv.slice(2);
const screenshotsAt = rest[0] === '--screenshots' ? resolve(rest[1]) : null;
const workdir = resolve(workdirArgument);
mkdirSync(workdir, { recursive: true });

function findChromium() {
  for (const name of [process.env.CHROMIUM, 'chromium', 'chromium-browser', 'google-chrome']) {
    if (!name) continue;
    const found = spawnSync('sh', ['-c', `command -v "${name}"`], { encoding: 'utf8' });
    if (found.status === 0) return found.stdout.trim();
  }
  return null;
}
const chromium = findChromium();
if (!chromium) {
  console.log('SKIP: chromium not found (apt-get install chromium, or set CHROMIUM): the browser tests did not run');
  process.exit(77);
}
if (typeof WebSocket === 'undefined') {
  console.log('SKIP: this node has no WebSocket (run with --experimental-websocket, node 20.10 or later)');
  process.exit(77);
}

const failures = [];
function check(condition, what) {
  if (!condition) failures.push(what);
  console.log(`${condition ? 'ok  ' : 'FAIL'} ${what}`);
}

function makeReport(snapshotPath, name) {
  const out = join(workdir, `${name}.html`);
  const run = spawnSync(rlmem, ['report', snapshotPath, '-o', out, '--quiet'], { encoding: 'utf8' });
  if (run.status !== 0) throw new Error(`rlmem report ${snapshotPath} exited ${run.status}: ${run.stderr.trim()}`);
  return out;
}

// The browser, its DevTools socket and one page session.
async function startBrowser() {
  const profile = mkdtempSync(join(tmpdir(), 'rlmem-chromium-'));
  const args = ['--headless=new', '--remote-debugging-port=0', `--user-data-dir=${profile}`, '--no-first-run',
    '--no-default-browser-check', '--disable-gpu', '--disable-extensions', '--disable-background-networking',
    '--hide-scrollbars', '--window-size=1400,1000', 'about:blank'];
  if (process.getuid && process.getuid() === 0) args.unshift('--no-sandbox');
  const browser = spawn(chromium, args, { stdio: ['ignore', 'ignore', 'pipe'] });
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
      browser.kill();
      await exited;
      rmSync(profile, { recursive: true, force: true, maxRetries: 5 });
    },
  };
}

const sleep = (ms) => new Promise((done) => setTimeout(done, ms));

// Decodes an 8-bit RGB(A) PNG (what Chromium writes) and counts its distinct colours.
function distinctColours(png) {
  let at = 8, width = 0, height = 0, channels = 0;
  const data = [];
  while (at < png.length) {
    const length = png.readUInt32BE(at);
    const type = png.toString('ascii', at + 4, at + 8);
    const body = png.subarray(at + 8, at + 8 + length);
    if (type === 'IHDR') {
      width = body.readUInt32BE(0); height = body.readUInt32BE(4);
      channels = body[9] === 6 ? 4 : 3;
    } else if (type === 'IDAT') data.push(body);
    at += 12 + length;
  }
  const raw = inflateSync(Buffer.concat(data));
  const stride = width * channels;
  const previous = Buffer.alloc(stride), current = Buffer.alloc(stride);
  const colours = new Set();
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)];
    const line = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    for (let x = 0; x < stride; x++) {
      const left = x >= channels ? current[x - channels] : 0;
      const up = previous[x];
      const upLeft = x >= channels ? previous[x - channels] : 0;
      let value = line[x];
      if (filter === 1) value += left;
      else if (filter === 2) value += up;
      else if (filter === 3) value += (left + up) >> 1;
      else if (filter === 4) {
        const p = left + up - upLeft, pa = Math.abs(p - left), pb = Math.abs(p - up), pc = Math.abs(p - upLeft);
        value += pa <= pb && pa <= pc ? left : pb <= pc ? up : upLeft;
      }
      current[x] = value & 255;
    }
    if (y % 4 === 0) {
      for (let x = 0; x < stride; x += channels * 4) colours.add(current.readUIntBE(x, 3));
    }
    current.copy(previous);
  }
  return colours.size;
}

async function openPage(browser, file) {
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
  const url = 'file://' + resolve(file);
  const started = Date.now();
  await send('Page.navigate', { url });
  const evaluate = async (expression) => (await send('Runtime.evaluate', { expression, returnByValue: true })).result.value;
  while (Date.now() - started < 20000 && (await evaluate('document.body && document.body.dataset.ready')) !== '1') await sleep(50);
  const readyMs = Date.now() - started;
  return { send, evaluate, seen, url, readyMs, close: () => browser.send('Target.closeTarget', { targetId }) };
}

async function mouse(page, type, x, y, buttons = 0) {
  await page.send('Input.dispatchMouseEvent', { type, x, y, button: buttons ? 'left' : 'none', buttons, clickCount: 1 });
}

async function boxOf(page, selector) {
  return page.evaluate(`(() => { const b = document.querySelector(${JSON.stringify(selector)}).getBoundingClientRect();
    return { x: b.x, y: b.y, width: b.width, height: b.height }; })()`);
}

async function testPage(browser, file, name, expect) {
  console.log(`# ${name}`);
  const page = await openPage(browser, file);
  check((await page.evaluate('document.body.dataset.ready')) === '1', `${name}: the page script finished (${page.readyMs} ms to ready)`);
  for (const [selector, what] of [
    ['#timeline-chart canvas', 'timeline'], ['#categories-chart canvas', 'categories'], ['#active-chart canvas', 'active memory'],
    ['#icicle .node', 'peak icicle'], ['#fragmentation-chart canvas', 'fragmentation'], ['#summary-figures dd', 'summary'],
  ]) check((await page.evaluate(`document.querySelectorAll(${JSON.stringify(selector)}).length`)) > 0, `${name}: ${what} view rendered`);
  if (expect.leaks) check((await page.evaluate('document.querySelectorAll("#leak-list .card").length')) > 0, `${name}: leak cards rendered`);
  if (expect.ooms) check((await page.evaluate('document.querySelectorAll("#oom-list .card").length')) > 0, `${name}: OOM cards rendered`);

  const shot = Buffer.from((await page.send('Page.captureScreenshot', { format: 'png' })).data, 'base64');
  const colours = distinctColours(shot);
  check(colours > 30, `${name}: the screenshot is not blank (${colours} colours)`);
  if (screenshotsAt) {
    // The whole page, for the docs.
    const { cssContentSize } = await page.send('Page.getLayoutMetrics');
    const clip = { x: 0, y: 0, width: 1400, height: Math.min(cssContentSize.height, 6000), scale: 1 };
    const full = (await page.send('Page.captureScreenshot', { format: 'png', clip, captureBeyondViewport: true })).data;
    mkdirSync(screenshotsAt, { recursive: true });
    writeFileSync(join(screenshotsAt, `report-${name}.png`), Buffer.from(full, 'base64'));
  }

  // Hover over the middle of the timeline: the tooltip shows a column and, where one was made, a stack.
  await page.evaluate('document.getElementById("timeline").scrollIntoView()');
  await sleep(100);
  const over = await boxOf(page, '#timeline-chart .u-over');
  let stackShown = '';
  for (const fraction of [0.5, 0.3, 0.7, 0.1, 0.9, ...Array.from({ length: 40 }, (_, k) => (k + 0.5) / 40)]) {
    await mouse(page, 'mouseMoved', over.x + over.width * fraction, over.y + over.height / 2);
    await sleep(60);
    stackShown = await page.evaluate('(() => { const t = document.getElementById("tooltip"); const s = t.querySelector("pre.stack"); return t.hidden || !s ? "" : s.textContent; })()');
    if (stackShown.length > 0 && stackShown !== '(no frames recorded)') break;
  }
  check(stackShown.length > 0, `${name}: hovering the timeline shows a stack (${JSON.stringify(stackShown.split('\n')[0] || '')})`);

  // Drag across the middle: the visible range narrows, and the other charts follow.
  const before = [Number(await page.evaluate('document.body.dataset.rangeMin')), Number(await page.evaluate('document.body.dataset.rangeMax'))];
  await mouse(page, 'mouseMoved', over.x + over.width * 0.4, over.y + over.height / 2);
  await mouse(page, 'mousePressed', over.x + over.width * 0.4, over.y + over.height / 2, 1);
  for (const fraction of [0.45, 0.5, 0.55, 0.6]) await mouse(page, 'mouseMoved', over.x + over.width * fraction, over.y + over.height / 2, 1);
  await mouse(page, 'mouseReleased', over.x + over.width * 0.6, over.y + over.height / 2, 1);
  await sleep(150);
  const after = [Number(await page.evaluate('document.body.dataset.rangeMin')), Number(await page.evaluate('document.body.dataset.rangeMax'))];
  check(after[1] - after[0] < before[1] - before[0] && after[0] > before[0],
    `${name}: dragging zooms the timeline (events ${before[0]}..${before[1]} -> ${after[0]}..${after[1]})`);
  if (expect.hostile) {
    const text = await page.evaluate('document.body.innerText');
    check(text.includes('</script><script>alert(1)</script>'), `${name}: the script-closing frame shows as text`);
    check(text.includes('<img src=x onerror=alert(1)>'), `${name}: the image frame shows as text`);
    check((await page.evaluate('document.images.length')) === 0, `${name}: no image element exists`);
    check((await page.evaluate('document.scripts.length')) === 3, `${name}: only the page's own 3 script elements exist`);
  }
  check(page.seen.dialogs.length === 0, `${name}: no dialog opened ${JSON.stringify(page.seen.dialogs)}`);
  check(page.seen.errors.length === 0, `${name}: no console error ${JSON.stringify(page.seen.errors.slice(0, 3))}`);
  const others = page.seen.requests.filter((url) => url !== page.url);
  check(others.length === 0, `${name}: no network request ${JSON.stringify(others.slice(0, 3))}`);
  await page.close();
}

const hostilePickle = join(workdir, 'hostile.pickle');
const made = spawnSync('python3', [join(import.meta.dirname ?? new URL('.', import.meta.url).pathname, 'hostile_snapshot.py'), hostilePickle]);
if (made.status !== 0) throw new Error('hostile_snapshot.py failed: ' + made.stderr);
const pages = [
  [makeReport(join(testdata, 'snapshots/grpo_leak_logits.pickle.zst'), 'grpo_leak_logits'), 'grpo_leak_logits', { leaks: true }],
  [makeReport(join(testdata, 'snapshots/frag_default_oom.pickle.zst'), 'frag_default_oom'), 'frag_default_oom', { ooms: true }],
  [makeReport(hostilePickle, 'hostile'), 'hostile', { hostile: true, ooms: true }],
];
const browser = await startBrowser();
try {
  for (const [file, name, expect] of pages) await testPage(browser, file, name, expect);
} finally {
  await browser.close();
}
if (failures.length) {
  console.log(`${failures.length} browser check(s) failed`);
  process.exit(1);
}
console.log('all browser checks passed');
process.exit(0);
