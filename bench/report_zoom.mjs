// SPDX-License-Identifier: MIT
// How a `rlmem report` page behaves in headless Chromium: time to the first paint and to the end
// of the page script, and the long tasks (PerformanceObserver 'longtask', over 50 ms) while the
// timeline is zoomed by dragging, five times, then reset by a double-click. For docs/benchmarks.md:
//
//   node --experimental-websocket bench/report_zoom.mjs PAGE.html
import { boxOf, findChromium, mouse, openPage, sleep, startBrowser } from '../tests/browser/chromium.mjs';

const file = process.argv[2];
const chromium = findChromium();
if (!file || !chromium) {
  console.error(file ? 'report_zoom: chromium not found' : 'usage: report_zoom.mjs PAGE.html');
  process.exit(2);
}
const observe = `window.rlmemLongTasks = [];
new PerformanceObserver((list) => { for (const task of list.getEntries()) window.rlmemLongTasks.push(Math.round(task.duration)); })
  .observe({ type: 'longtask', buffered: true });`;
const browser = await startBrowser(chromium);
try {
  const page = await openPage(browser, file, { beforeLoad: observe });
  const paint = await page.evaluate("(performance.getEntriesByName('first-contentful-paint')[0] || {}).startTime");
  const loading = await page.evaluate('window.rlmemLongTasks.slice()');
  await page.evaluate('document.getElementById("timeline").scrollIntoView()');
  await sleep(200);
  const over = await boxOf(page, '#timeline-chart .u-over');
  const y = over.y + over.height / 2;
  const zooms = [];
  for (const [from, to] of [[0.2, 0.8], [0.3, 0.7], [0.1, 0.5], [0.5, 0.9], [0.4, 0.6]]) {
    const before = await page.evaluate('window.rlmemLongTasks.length');
    const started = Date.now();
    await mouse(page, 'mouseMoved', over.x + over.width * from, y);
    await mouse(page, 'mousePressed', over.x + over.width * from, y, 1);
    for (let k = 1; k <= 8; k++) await mouse(page, 'mouseMoved', over.x + over.width * (from + (to - from) * k / 8), y, 1);
    await mouse(page, 'mouseReleased', over.x + over.width * to, y, 1);
    await page.evaluate('new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))');
    const range = [await page.evaluate('document.body.dataset.rangeMin'), await page.evaluate('document.body.dataset.rangeMax')];
    zooms.push({ ms: Date.now() - started, range, long_tasks: (await page.evaluate('window.rlmemLongTasks.slice()')).slice(before) });
    await page.send('Input.dispatchMouseEvent', { type: 'mousePressed', x: over.x + over.width / 2, y, button: 'left', buttons: 1, clickCount: 2 });
    await page.send('Input.dispatchMouseEvent', { type: 'mouseReleased', x: over.x + over.width / 2, y, button: 'left', buttons: 0, clickCount: 2 });
    await sleep(300);
  }
  const all = await page.evaluate('window.rlmemLongTasks.slice()');
  const whileZooming = all.slice(loading.length);
  console.log(JSON.stringify({
    file, first_contentful_paint_ms: Math.round(paint), ready_ms: page.readyMs, long_tasks_loading_ms: loading,
    long_tasks_zooming_ms: whileZooming, longest_while_zooming_ms: Math.max(0, ...whileZooming), zooms,
    errors: page.seen.errors, requests: page.seen.requests.filter((url) => url !== page.url),
  }, null, 1));
} finally {
  await browser.close();
}
