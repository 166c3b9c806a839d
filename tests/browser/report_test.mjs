// SPDX-License-Identifier: MIT
// `rlmem report` pages in a real browser: headless Chromium driven over the DevTools protocol
// with node's built-ins only. Each page must render every view with no console error, no
// network request and no dialog; its screenshot must not be blank; hovering the timeline shows
// a stack; dragging zooms every chart; a hostile snapshot's markup shows as text. The page leads
// with its verdict (before the segment map, which stays folded until opened), and every axis
// ticks at round steps: bytes at powers of two in the unit printed, events and steps whole.
//
// Each view's box is compared with tests/browser/layout_reference.json (layout drift).
//
//   node --experimental-websocket report_test.mjs RLMEM TESTDATA WORKDIR [--screenshots DIR] [--update-layout]
// Exits 77 (ctest's skip) with one line when Chromium is not installed.
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { inflateSync } from 'node:zlib';

import { boxOf, findChromium, framesDrawn, mouse, openPage, startBrowser, waitFor } from './chromium.mjs';

const [rlmem, testdata, workdirArgument, ...rest] = process.argv.slice(2);
const screenshotsAt = rest.includes('--screenshots') ? resolve(rest[rest.indexOf('--screenshots') + 1]) : null;
// The boxes of each view on the fixtures' pages, 1400 px wide: what layout drift is measured against.
const layoutReference = join(import.meta.dirname ?? new URL('.', import.meta.url).pathname, 'layout_reference.json');
const updateLayout = rest.includes('--update-layout');
const storedLayout = updateLayout ? {} : JSON.parse(readFileSync(layoutReference, 'utf8'));
const VIEWS = ['verdict', 'summary', 'oom', 'leaks', 'timeline', 'active', 'peak', 'fragmentation'];
const workdir = resolve(workdirArgument);
mkdirSync(workdir, { recursive: true });

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

// Layout drift, coarse enough to forgive fonts: every view is where the reference has it, in the
// same order, as wide (to 2 px), and as tall to within a quarter or 48 px.
function compareLayout(name, boxes) {
  if (updateLayout) { storedLayout[name] = boxes; return; }
  const reference = storedLayout[name];
  if (!reference) { check(false, `${name}: a layout reference exists (run with --update-layout)`); return; }
  const drift = [];
  const order = (layout) => VIEWS.slice().sort((a, b) => layout[a].y - layout[b].y).join(',');
  if (order(boxes) !== order(reference)) drift.push(`order ${order(boxes)} (reference ${order(reference)})`);
  for (const view of VIEWS) {
    const now = boxes[view], then = reference[view];
    if (Math.abs(now.x - then.x) > 2 || Math.abs(now.width - then.width) > 2) drift.push(`${view} x/width ${now.x}/${now.width} (reference ${then.x}/${then.width})`);
    if (Math.abs(now.height - then.height) > Math.max(48, then.height / 4)) drift.push(`${view} height ${now.height} (reference ${then.height})`);
  }
  check(drift.length === 0, `${name}: the layout matches tests/browser/layout_reference.json ${drift.length ? JSON.stringify(drift) : ''}`);
}

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

// The verdict leads: its first card comes before the segment map and the timeline in document
// order, and says OOM or LEAK where the trace has them.
async function checkVerdictFirst(page, name, expect) {
  const order = await page.evaluate(`(() => {
    const card = document.querySelector('#verdict .verdict-card');
    if (!card) return 'no verdict card';
    for (const id of ['peak-segments-details', 'timeline', 'oom-list', 'leak-list']) {
      if (!(card.compareDocumentPosition(document.getElementById(id)) & Node.DOCUMENT_POSITION_FOLLOWING)) return 'after #' + id;
    }
    return 'first';
  })()`);
  check(order === 'first', `${name}: the verdict card comes before the OOM and leak cards, the timeline and the segment map (${order})`);
  const verdict = await page.evaluate('document.getElementById("verdict").innerText');
  if (expect.ooms) check(/OOM 1 at event [\d,]+: /.test(verdict), `${name}: the verdict names the OOM (${JSON.stringify(verdict.slice(0, 80))})`);
  if (expect.leaks) check(/LEAK 1: /.test(verdict), `${name}: the verdict names the leak (${JSON.stringify(verdict.slice(0, 80))})`);
}

// The page prints byte sizes as the text report does: its formatBytes, run in the browser, gives
// every case of testdata/format/bytes_cases.json, and the summary's peak is the document's peak
// in those words (the page printed 46.88 MiB where the text said 46.9 MiB).
async function checkByteSizes(page, name) {
  const { cases } = JSON.parse(readFileSync(join(testdata, 'format/bytes_cases.json'), 'utf8'));
  const wrong = JSON.parse(await page.evaluate(`JSON.stringify(${JSON.stringify(cases)}
    .filter((c) => rlmemFormat.formatBytes(c.bytes) !== c.text).map((c) => [c.bytes, c.text, rlmemFormat.formatBytes(c.bytes)]))`));
  check(wrong.length === 0, `${name}: the page prints the ${cases.length} shared byte cases as format_bytes does ${JSON.stringify(wrong.slice(0, 3))}`);
  const peak = await page.evaluate(`(() => {
    const inspected = JSON.parse(document.getElementById('rlmem-document').textContent);
    const shown = [...document.querySelectorAll('#summary-figures dt')].find((dt) => dt.textContent === 'peak allocated');
    return JSON.stringify([shown ? shown.nextElementSibling.textContent : '', rlmemFormat.formatBytes(inspected.summary.peak_allocated_bytes)]);
  })()`);
  const [shown, expected] = JSON.parse(peak);
  check(shown.startsWith(expected + ' at '), `${name}: the summary's peak allocated reads ${JSON.stringify(shown)} (expected ${expected} first)`);
}

// Every chart's tick labels as drawn (the page keeps them on each chart's root): bytes are a
// whole number of quarters of the unit printed, never 953.67 MiB; events and steps are whole.
async function checkTicks(page, name) {
  const ticks = JSON.parse(await page.evaluate(`JSON.stringify([...document.querySelectorAll('.uplot')].map((chart) => ({
    where: chart.parentElement.id || chart.parentElement.parentElement.id || chart.parentElement.parentElement.parentElement.id,
    y: JSON.parse(chart.dataset.ticksY || '[]'), x: JSON.parse(chart.dataset.ticksX || '[]') })))`));
  const bytes = ticks.flatMap((chart) => chart.y.map((label) => [chart.where, label]));
  const notRound = bytes.filter(([, label]) => {
    if (label === '0') return false;
    const match = /^-?(\d+(?:\.\d{1,2})?) (B|KiB|MiB|GiB|TiB|PiB)$/.exec(label);
    return !match || !Number.isInteger(Number(match[1]) * 4);
  });
  check(bytes.length > 0 && notRound.length === 0,
    `${name}: ${bytes.length} byte ticks are round in the unit printed ${notRound.length ? JSON.stringify(notRound.slice(0, 4)) : ''}`);
  const whole = ticks.flatMap((chart) => chart.x.map((label) => [chart.where, label]));
  const fractional = whole.filter(([, label]) => !/^-?[\d,]+$/.test(label));
  check(whole.length > 0 && fractional.length === 0,
    `${name}: ${whole.length} event and step ticks are whole numbers ${fractional.length ? JSON.stringify(fractional.slice(0, 4)) : ''}`);
  const stepCharts = ticks.filter((chart) => chart.where === 'step-chart' || chart.where.startsWith('leak-'));
  if (stepCharts.length) {
    check(stepCharts.every((chart) => chart.x.length > 0 && chart.x.every((label) => /^\d+$/.test(label))),
      `${name}: the leak charts' step axes tick at whole steps ${JSON.stringify(stepCharts.map((chart) => chart.x))}`);
  }
}

async function testPage(browser, file, name, expect) {
  console.log(`# ${name}`);
  const page = await openPage(browser, file);
  check((await page.evaluate('document.body.dataset.ready')) === '1', `${name}: the page script finished (${page.readyMs} ms to ready)`);
  for (const [selector, what] of [
    ['#timeline-chart canvas', 'timeline'], ['#categories-chart canvas', 'categories'], ['#active-chart canvas', 'active memory'],
    ['#icicle .node', 'peak icicle'], ['#fragmentation-chart canvas', 'fragmentation'], ['#summary-figures dd', 'summary'],
  ]) check((await page.evaluate(`document.querySelectorAll(${JSON.stringify(selector)}).length`)) > 0, `${name}: ${what} view rendered`);
  if (expect.layout) {
    compareLayout(name, await page.evaluate(`Object.fromEntries(${JSON.stringify(VIEWS)}.map((id) => {
      const b = document.getElementById(id).getBoundingClientRect();
      return [id, { x: Math.round(b.x), y: Math.round(b.y + scrollY), width: Math.round(b.width), height: Math.round(b.height) }];
    }))`));
  }
  if (expect.leaks) check((await page.evaluate('document.querySelectorAll("#leak-list .card").length')) > 0, `${name}: leak cards rendered`);
  if (expect.ooms) {
    check((await page.evaluate('document.querySelectorAll("#oom-list .card").length')) > 0, `${name}: OOM cards rendered`);
    check((await page.evaluate('document.querySelectorAll("#oom-list table.proofs tr").length')) > 1, `${name}: the OOM's proofs are listed`);
    check((await page.evaluate('document.querySelectorAll("#oom-links a").length')) > 0, `${name}: the timeline links to its OOMs`);
    await page.evaluate('document.querySelector("#oom-list details").open = true');
    const bars = await waitFor(page, 'document.querySelectorAll("#oom-list .segment-bar").length');
    check(bars > 0, `${name}: the segment map at the OOM opens (expected segment bars within 5 s, saw ${bars})`);
  }
  await checkVerdictFirst(page, name, expect);
  await checkByteSizes(page, name);
  await checkTicks(page, name);
  check((await page.evaluate('document.getElementById("peak-segments-details").open')) === false &&
    (await page.evaluate('document.querySelectorAll("#peak-segments .segment-bar").length')) === 0,
  `${name}: the segment map at the peak is folded (closed, nothing drawn) until opened`);
  await page.evaluate('document.getElementById("peak-segments-details").open = true');
  const peakBars = await waitFor(page, 'document.querySelectorAll("#peak-segments .segment-bar").length');
  check(peakBars > 0, `${name}: the segment map at the peak opens (expected segment bars within 5 s, saw ${peakBars})`);

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
  const inView = await waitFor(page, `(() => { const b = document.querySelector('#timeline-chart .u-over').getBoundingClientRect();
    return b.height > 0 && b.top >= 0 && b.bottom <= innerHeight; })()`);
  check(inView, `${name}: the timeline scrolled into view (expected its plot inside the viewport within 5 s)`);
  const over = await boxOf(page, '#timeline-chart .u-over');
  let stackShown = '';
  for (const fraction of [0.5, 0.3, 0.7, 0.1, 0.9, ...Array.from({ length: 40 }, (_, k) => (k + 0.5) / 40)]) {
    await mouse(page, 'mouseMoved', over.x + over.width * fraction, over.y + over.height / 2);
    await framesDrawn(page);
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
  await waitFor(page, `document.body.dataset.rangeMin !== ${JSON.stringify(String(before[0]))} ||
    document.body.dataset.rangeMax !== ${JSON.stringify(String(before[1]))}`);
  const after = [Number(await page.evaluate('document.body.dataset.rangeMin')), Number(await page.evaluate('document.body.dataset.rangeMax'))];
  check(after[1] - after[0] < before[1] - before[0] && after[0] > before[0],
    `${name}: dragging zooms the timeline (events ${before[0]}..${before[1]} -> ${after[0]}..${after[1]})`);
  if (expect.hostile) {
    const text = await page.evaluate('document.body.innerText');
    check(text.includes('</script><script>alert(1)</script>'), `${name}: the script-closing frame shows as text`);
    check(text.includes('<img src=x onerror=alert(1)>'), `${name}: the image frame shows as text`);
    check((await page.evaluate('document.images.length')) === 0, `${name}: no image element exists`);
    check((await page.evaluate('document.scripts.length')) === 5, `${name}: only the page's own 5 script elements (2 data blocks) exist`);
  }
  check(page.seen.dialogs.length === 0, `${name}: no dialog opened ${JSON.stringify(page.seen.dialogs)}`);
  check(page.seen.errors.length === 0, `${name}: no console error ${JSON.stringify(page.seen.errors.slice(0, 3))}`);
  const others = page.seen.requests.filter((url) => url !== page.url);
  check(others.length === 0, `${name}: no network request ${JSON.stringify(others.slice(0, 3))}`);
  await page.close();
}

// The pages of `rlmem report A B`, `rlmem report DIR` and `rlmem replay --compare --html`: their
// tables, bars and chart render, with no error and no request.
async function testComparisonPage(browser, file, name, selectors) {
  console.log(`# ${name}`);
  const page = await openPage(browser, file);
  check((await page.evaluate('document.body.dataset.ready')) === '1', `${name}: the page script finished (${page.readyMs} ms to ready)`);
  check(await page.evaluate('document.getElementById("inspection").hidden'), `${name}: the inspection views are hidden`);
  for (const [selector, what] of selectors) {
    check((await page.evaluate(`document.querySelectorAll(${JSON.stringify(selector)}).length`)) > 0, `${name}: ${what} rendered`);
  }
  if (name === 'plan') {
    // Every part of a phase its own colour: no two swatches of the legend alike.
    const colours = JSON.parse(await page.evaluate('JSON.stringify([...document.querySelectorAll(".part-swatch")].map((s) => getComputedStyle(s).backgroundColor))'));
    check(colours.length >= 10 && new Set(colours).size === colours.length,
      `${name}: each of the ${colours.length} parts has its own colour (${new Set(colours).size} distinct)`);
    await page.evaluate('document.querySelector("details.every-fitting").open = true');
    const rows = await waitFor(page, 'document.querySelectorAll("details.every-fitting tr").length');
    check(rows > 1, `${name}: every fitting configuration opens as a table (${rows} rows)`);
  }
  if (screenshotsAt) {
    const { cssContentSize } = await page.send('Page.getLayoutMetrics');
    const clip = { x: 0, y: 0, width: 1400, height: Math.min(cssContentSize.height, 3000), scale: 1 };
    const full = (await page.send('Page.captureScreenshot', { format: 'png', clip, captureBeyondViewport: true })).data;
    writeFileSync(join(screenshotsAt, `report-${name}.png`), Buffer.from(full, 'base64'));
  }
  check(page.seen.errors.length === 0, `${name}: no console error ${JSON.stringify(page.seen.errors.slice(0, 3))}`);
  const others = page.seen.requests.filter((url) => url !== page.url);
  check(others.length === 0, `${name}: no network request ${JSON.stringify(others.slice(0, 3))}`);
  await page.close();
}

function makeComparison(args, name) {
  const out = join(workdir, `${name}.html`);
  const run = spawnSync(rlmem, ['report', ...args, '-o', out, '--quiet'], { encoding: 'utf8' });
  if (run.status !== 0) throw new Error(`rlmem report ${args.join(' ')} exited ${run.status}: ${run.stderr}`);
  return out;
}

function makeReplayPage(snapshotPath) {
  const out = join(workdir, 'replay.html');
  const run = spawnSync(rlmem, ['replay', snapshotPath, '--compare', '--html', out, '--quiet'], { encoding: 'utf8' });
  if (run.status !== 0) throw new Error(`rlmem replay --html exited ${run.status}: ${run.stderr}`);
  return out;
}

function makePlanPage() {
  const out = join(workdir, 'plan.html');
  const run = spawnSync(rlmem, ['plan', '--model', 'qwen2.5-0.5b', '--phase', 'grpo-step', '--prompts', '8', '--group', '8',
    '--prompt-len', '512', '--new-tokens', '512', '--micro-batch', '16', '--ref-model', '--fit', 'h100-80g',
    '--response-len-percentiles', 'p50=200,p90=400', '--html', out],
  { encoding: 'utf8' });
  if (run.status !== 0) throw new Error(`rlmem plan --html exited ${run.status}: ${run.stderr}`);
  return out;
}

const ranksDir = join(workdir, 'ranks');
rmSync(ranksDir, { recursive: true, force: true });
mkdirSync(ranksDir);
symlinkSync(join(testdata, 'snapshots/grpo_clean.pickle.zst'), join(ranksDir, 'rank0.pickle.zst'));
symlinkSync(join(testdata, 'snapshots/grpo_leak_logits.pickle.zst'), join(ranksDir, 'rank1.pickle.zst'));
const comparisons = [
  [makeComparison([join(testdata, 'snapshots/grpo_clean.pickle.zst'), join(testdata, 'snapshots/grpo_leak_logits.pickle.zst')], 'diff'), 'diff',
    [['table.diff-table .delta-bar', 'change bars'], ['#comparison-body table td', 'totals']]],
  [makeComparison([ranksDir], 'ranks'), 'ranks', [['table.ranks-table .rank-bar', 'rank bars'], ['#comparison-body canvas', 'rank timelines']]],
  [makeReplayPage(join(testdata, 'snapshots/frag_default_oom.pickle.zst')), 'replay',
    [['table.settings-table .setting-bar', 'settings bars'], ['#comparison-body dd', 'replay figures']]],
  [makePlanPage(), 'plan', [['table.plan-table .part-bar', 'phase parts'], ['table.what-if-table td', 'what-ifs'],
    ['table.combinations-table td', 'combinations'], ['pre.best-command', 'the best command line'], ['details.every-fitting', 'every fitting configuration'],
    ['table.lengths-table td', 'response lengths'], ['p.lengths-verdict', 'the longest response that fits']]],
];

const hostilePickle = join(workdir, 'hostile.pickle');
const made = spawnSync('python3', [join(import.meta.dirname ?? new URL('.', import.meta.url).pathname, 'hostile_snapshot.py'), hostilePickle]);
if (made.status !== 0) throw new Error('hostile_snapshot.py failed: ' + made.stderr);
const pages = [
  [makeReport(join(testdata, 'snapshots/grpo_leak_logits.pickle.zst'), 'grpo_leak_logits'), 'grpo_leak_logits', { leaks: true, layout: true }],
  [makeReport(join(testdata, 'snapshots/frag_default_oom.pickle.zst'), 'frag_default_oom'), 'frag_default_oom', { ooms: true, layout: true }],
  [makeReport(hostilePickle, 'hostile'), 'hostile', { hostile: true, ooms: true }],
];
const browser = await startBrowser(chromium);
try {
  for (const [file, name, expect] of pages) await testPage(browser, file, name, expect);
  for (const [file, name, selectors] of comparisons) await testComparisonPage(browser, file, name, selectors);
} finally {
  await browser.close();
}
if (updateLayout) writeFileSync(layoutReference, JSON.stringify(storedLayout, null, 1) + '\n');
if (failures.length) {
  console.log(`${failures.length} browser check(s) failed`);
  process.exit(1);
}
console.log('all browser checks passed');
process.exit(0);
