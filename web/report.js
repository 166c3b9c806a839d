// SPDX-License-Identifier: MIT
// The page script of `rlmem report`: reads the JSON blocks the C++ side wrote and draws each
// view with uPlot. An inspection's page carries `rlmem inspect --json`'s document as that command
// prints it (rlmem-document), and beside it only what the views draw that the document does not
// hold (rlmem-data: the timeline per pixel column, the largest allocations, the tree and segment
// maps, and the sites, stacks and frames they refer to). Every string from the snapshot reaches
// the page through textContent (or as chart data), never as markup.
'use strict';
(function () {
  const data = JSON.parse(document.getElementById('rlmem-data').textContent);
  const inspected = JSON.parse(document.getElementById('rlmem-document').textContent);
  const { formatBytes } = rlmemFormat;
  // By category index, as memory_category orders them; the last is before_recording.
  const CATEGORY_COLORS = ['#4c78a8', '#f58518', '#e45756', '#72b7b2', '#54a24b', '#eeca3b', '#b279a2', '#9d9da0', '#5a6475'];
  const charts = [];       // uPlot charts whose x axis is the event index: zoomed together
  let syncing = false;

  const byId = (id) => document.getElementById(id);
  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  const formatCount = (value) => Math.round(value).toLocaleString('en-US');
  // The document writes null, the views -1, for the state before the trace's first event.
  function formatEvent(event) { return event === null || event < 0 ? 'before the trace' : 'event ' + formatCount(event); }
  // The verdict as the text report words it: one over the limit's range may have two parts.
  function verdictWords(oom) {
    if (oom.verdict !== 'depends_on_limit') return oom.verdict;
    return 'fragmentation if the limit was at least ' + formatBytes(oom.fragmentation_from_bytes) + ', capacity below';
  }
  function formatTime(timeUs) {
    if (!inspected.summary.times_known) return '';
    return ((timeUs - inspected.summary.first_time_us) / 1e6).toFixed(3) + ' s';
  }
  // The memory categories, in memory_category order: the columns of the document's category timeline.
  const CATEGORY_NAMES = inspected ? inspected.categories.timeline.columns.slice(1) : [];

  // A stack of the views' tables as its lines (the document's stacks are lines already).
  function stackLines(stackIndex) {
    const frames = data.stacks[stackIndex] || [];
    return frames.map((frame) => data.frames[frame]);
  }

  // Figures, then the stack's lines (if any), into `container`: all as text.
  function fillDetails(container, title, rows, stack) {
    container.replaceChildren();
    container.appendChild(el('strong', null, title));
    const list = el('dl');
    for (const [name, value] of rows) {
      list.appendChild(el('dt', null, name));
      list.appendChild(el('dd', null, value));
    }
    container.appendChild(list);
    if (stack !== undefined && stack !== null) {
      container.appendChild(el('pre', 'stack', stack.length ? stack.join('\n') : '(no frames recorded)'));
    }
  }

  const tooltip = byId('tooltip');
  function showTooltip(x, y, title, rows, stack) {
    fillDetails(tooltip, title, rows, stack);
    tooltip.hidden = false;
    const width = tooltip.offsetWidth, height = tooltip.offsetHeight;
    tooltip.style.left = Math.max(4, Math.min(x + 14, window.innerWidth - width - 8)) + 'px';
    tooltip.style.top = Math.max(4, Math.min(y + 14, window.innerHeight - height - 8)) + 'px';
  }
  const hideTooltip = () => { tooltip.hidden = true; };

  const details = byId('details');
  function pinDetails(title, rows, stack) {
    fillDetails(byId('details-body'), title, rows, stack);
    details.hidden = false;
  }
  byId('details-close').addEventListener('click', () => { details.hidden = true; });

  function chartWidth(container) { return Math.max(320, container.clientWidth || document.body.clientWidth - 40); }

  // Byte ticks at powers of two (1 KiB, 256 MiB, 2 GiB apart: never 953.67 MiB), printed in the
  // unit of the largest tick with the decimals the step needs, or, where that takes more than
  // two, in the step's own unit. The labels drawn are kept on the chart (data-ticks-y) for tests.
  const BINARY_STEPS = Array.from({ length: 63 }, (_, k) => 2 ** k);
  const BYTE_UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'];
  function unitOf(bytes) {
    let unit = 0;
    while (unit < BYTE_UNITS.length - 1 && Math.abs(bytes) >= 1024 ** (unit + 1)) unit++;
    return unit;
  }
  function byteTicks(u, splits, axisIndex, space, step) {
    let unit = unitOf(Math.max(...splits.map(Math.abs), 1));
    let decimals = step >= 1024 ** unit ? 0 : Math.round(Math.log2(1024 ** unit / step));
    if (decimals > 2) { unit = unitOf(step); decimals = 0; }
    const labels = splits.map((v) => v === 0 ? '0' : (v / 1024 ** unit).toFixed(decimals) + ' ' + BYTE_UNITS[unit]);
    u.root.dataset.ticksY = JSON.stringify(labels);
    return labels;
  }
  const bytesAxis = { size: 90, incrs: BINARY_STEPS, values: byteTicks };
  // Whole numbers only: events and steps have no halves.
  const WHOLE_STEPS = [1, 2, 5].flatMap((m) => Array.from({ length: 16 }, (_, k) => m * 10 ** k)).sort((a, b) => a - b);
  function wholeTicks(u, splits) {
    const labels = splits.map((v) => formatCount(v));
    u.root.dataset.ticksX = JSON.stringify(labels);
    return labels;
  }
  const eventAxis = { incrs: WHOLE_STEPS, values: wholeTicks };

  function updateRange(u) {
    const min = Math.max(0, Math.round(u.scales.x.min));
    const max = Math.round(u.scales.x.max);
    const text = 'events ' + formatCount(min) + ' to ' + formatCount(max) + ' of ' + formatCount(inspected.summary.events);
    byId('range').textContent = text;
    document.body.dataset.rangeMin = String(min);
    document.body.dataset.rangeMax = String(max);
  }

  // A chart over event indices, zoomed with all the others.
  function eventChart(container, options, table) {
    options.width = chartWidth(container);
    options.scales = Object.assign({ x: { time: false } }, options.scales || {});
    options.cursor = Object.assign({ drag: { x: true, y: false, setScale: true } }, options.cursor || {});
    options.hooks = options.hooks || {};
    options.hooks.setScale = [(u, key) => {
      if (key !== 'x' || syncing) return;
      syncing = true;
      for (const other of charts) {
        if (other !== u) other.setScale('x', { min: u.scales.x.min, max: u.scales.x.max });
      }
      syncing = false;
      updateRange(u);
    }];
    const chart = new uPlot(options, table, container);
    charts.push(chart);
    return chart;
  }

  // Vertical markers at events: step ends, OOMs.
  function drawEventLines(u, events, color, width) {
    const ctx = u.ctx;
    ctx.save();
    ctx.strokeStyle = color;
    ctx.lineWidth = width * devicePixelRatio;
    ctx.beginPath();
    for (const event of events) {
      if (event < u.scales.x.min || event > u.scales.x.max) continue;
      const x = Math.round(u.valToPos(event, 'x', true));
      ctx.moveTo(x, u.bbox.top);
      ctx.lineTo(x, u.bbox.top + u.bbox.height);
    }
    ctx.stroke();
    ctx.restore();
  }

  function drawDot(u, event, value, color) {
    if (event === null || event < u.scales.x.min || event > u.scales.x.max) return;
    const ctx = u.ctx;
    ctx.save();
    ctx.fillStyle = color;
    ctx.beginPath();
    ctx.arc(u.valToPos(event, 'x', true), u.valToPos(value, 'y', true), 5 * devicePixelRatio, 0, 2 * Math.PI);
    ctx.fill();
    ctx.restore();
  }

  function summaryView() {
    const s = inspected.summary;
    byId('source').textContent = inspected.file + ' · device ' + inspected.device;
    document.title = 'rlmem report: ' + inspected.file;
    const rows = [
      ['events', formatCount(s.events)],
      ['peak allocated', formatBytes(s.peak_allocated_bytes) + ' at ' + formatEvent(s.peak_allocated_event)],
      ['peak reserved', formatBytes(s.peak_reserved_bytes) + ' at ' + formatEvent(s.peak_reserved_event)],
      ['at trace start', formatBytes(s.allocated_at_trace_start_bytes) + ' allocated, ' + formatBytes(s.reserved_at_trace_start_bytes) + ' reserved'],
      ['at dump', formatBytes(s.final_allocated_bytes) + ' allocated, ' + formatBytes(s.final_reserved_bytes) + ' reserved in ' + formatCount(s.segments) + ' segments'],
      ['steps', inspected.steps.count ? formatCount(inspected.steps.count) + ' (' + inspected.steps.method + ')' : 'none found'],
      ['leaks', formatCount(inspected.leaks.length)],
      ['OOM events', formatCount(inspected.oom.length)],
    ];
    if (s.times_known) rows.splice(1, 0, ['duration', ((s.last_time_us - s.first_time_us) / 1e6).toFixed(3) + ' s']);
    const list = byId('summary-figures');
    for (const [name, value] of rows) {
      list.appendChild(el('dt', null, name));
      list.appendChild(el('dd', null, value));
    }
    for (const note of inspected.notes) byId('notes').appendChild(el('li', null, note));
  }

  function columnDetails(index) {
    const t = data.timeline;
    const rows = [
      ['events', formatCount(t.first_event[index]) + ' to ' + formatCount(t.last_event[index])],
      ['allocated', formatBytes(t.allocated_min[index]) + ' to ' + formatBytes(t.allocated_max[index])],
      ['reserved', formatBytes(t.reserved_min[index]) + ' to ' + formatBytes(t.reserved_max[index])],
    ];
    if (inspected.summary.times_known) rows.push(['time', formatTime(t.first_time_us[index])]);
    inspected.oom.forEach((oom, k) => {
      if (oom.event_index >= t.first_event[index] && oom.event_index <= t.last_event[index]) {
        rows.push(['OOM ' + (k + 1), formatEvent(oom.event_index) + ': ' + verdictWords(oom) + ' (see OOM below)']);
      }
    });
    if (t.largest_alloc_event[index] < 0) return { title: 'No allocation in this column', rows, stack: null };
    const site = data.sites[t.largest_alloc_site[index]];
    rows.push(['largest allocation', formatBytes(t.largest_alloc_bytes[index]) + ' at ' + formatEvent(t.largest_alloc_event[index])]);
    if (site.user_frame) rows.push(['your code', site.user_frame]);
    return { title: site.label, rows, stack: stackLines(site.stack) };
  }

  function timelineView() {
    const t = data.timeline;
    const container = byId('timeline-chart');
    if (!t.first_event.length) { container.appendChild(el('p', 'empty', 'No trace events for this device.')); return; }
    const chart = eventChart(container, {
      height: 320,
      series: [
        { label: 'event', value: (u, v) => v === null ? '' : formatCount(v) },
        { label: 'reserved (most)', stroke: '#9d6b00', width: 1.5, value: (u, v) => formatBytes(v) },
        { label: 'reserved (least)', stroke: '#d9b45a', width: 1, value: (u, v) => formatBytes(v) },
        { label: 'allocated (most)', stroke: '#1f5fbf', width: 1.5, value: (u, v) => formatBytes(v) },
        { label: 'allocated (least)', stroke: '#7ea7e0', width: 1, value: (u, v) => formatBytes(v) },
      ],
      bands: [{ series: [1, 2], fill: 'rgba(217,180,90,0.25)' }, { series: [3, 4], fill: 'rgba(31,95,191,0.2)' }],
      axes: [eventAxis, bytesAxis],
      hooks: {
        draw: [(u) => {
          drawEventLines(u, inspected.steps.ends.map((end) => end.event), 'rgba(90,100,117,0.45)', 1);
          drawEventLines(u, inspected.oom.map((o) => o.event_index), '#d62728', 2);
          drawDot(u, inspected.summary.peak_allocated_event, inspected.summary.peak_allocated_bytes, '#1f5fbf');
          drawDot(u, inspected.summary.peak_reserved_event, inspected.summary.peak_reserved_bytes, '#9d6b00');
        }],
        setCursor: [(u) => {
          const index = u.cursor.idx;
          if (index === null || index === undefined || u.cursor.left < 0) { hideTooltip(); return; }
          const shown = columnDetails(index);
          const box = u.over.getBoundingClientRect();
          showTooltip(box.left + u.cursor.left, box.top + u.cursor.top, shown.title, shown.rows, shown.stack);
        }],
      },
    }, [t.first_event, t.reserved_max, t.reserved_min, t.allocated_max, t.allocated_min]);
    chart.over.addEventListener('mouseleave', hideTooltip);
    chart.over.addEventListener('click', () => {
      if (chart.cursor.idx === null || chart.cursor.idx === undefined) return;
      const shown = columnDetails(chart.cursor.idx);
      pinDetails(shown.title, shown.rows, shown.stack);
    });
    updateRange(chart);
  }

  function categoriesView() {
    // The document's timeline of categories: rows of [event, bytes of each category].
    const points = inspected.categories.timeline.points;
    const c = { names: CATEGORY_NAMES, events: points.map((row) => row[0]), bytes: CATEGORY_NAMES.map((_, k) => points.map((row) => row[k + 1])) };
    const container = byId('categories-chart');
    if (!c.events.length) return;
    // A stacked area: series k is the sum of categories 0..k, drawn from the top down so each
    // fill covers the one above only where it belongs.
    const sums = [];
    let running = c.events.map(() => 0);
    for (let k = 0; k < c.names.length; k++) {
      running = running.map((value, i) => value + c.bytes[k][i]);
      sums.push(running);
    }
    const order = c.names.map((_, k) => c.names.length - 1 - k);
    const series = [{ label: 'event', value: (u, v) => v === null ? '' : formatCount(v) }];
    const table = [c.events];
    for (const k of order) {
      series.push({
        label: c.names[k], stroke: CATEGORY_COLORS[k], fill: CATEGORY_COLORS[k], width: 0.5,
        value: (u, v, s, i) => i === null || i === undefined ? '' : formatBytes(c.bytes[k][i]),
      });
      table.push(sums[k]);
    }
    eventChart(container, { height: 240, series, axes: [eventAxis, bytesAxis] }, table);
  }

  function bandAt(u, left, top) {
    const b = data.bands;
    const x = u.posToVal(left, 'x'), y = u.posToVal(top, 'y');
    for (let i = 0; i < b.bytes.length; i++) {
      const start = b.alloc_event[i] < 0 ? -Infinity : b.alloc_event[i];
      const end = b.free_event[i] < 0 ? Infinity : b.free_event[i];
      if (x >= start && x < end && y >= b.offset_bytes[i] && y < b.offset_bytes[i] + b.bytes[i]) return i;
    }
    return -1;
  }

  function bandDetails(i) {
    const b = data.bands;
    const site = data.sites[b.site[i]];
    const rows = [
      ['size', formatBytes(b.bytes[i])],
      ['category', CATEGORY_NAMES[b.category[i]]],
      ['allocated', formatEvent(b.alloc_event[i])],
      ['freed', b.free_event[i] < 0 ? 'still live at the end' : formatEvent(b.free_event[i])],
    ];
    if (site.user_frame) rows.push(['your code', site.user_frame]);
    return { title: site.label, rows, stack: stackLines(site.stack) };
  }

  function activeView() {
    const b = data.bands;
    const t = data.timeline;
    byId('active-help').textContent = 'The ' + formatCount(b.bytes.length) + ' largest of ' + formatCount(b.allocations) +
      ' allocations, each a band from its allocation to its free, coloured by category, laid out so none covers another; ' +
      'the line is all allocated memory. Hover for size and stack, click to pin.';
    const container = byId('active-chart');
    if (!t.first_event.length) return;
    let top = 0;
    for (let i = 0; i < b.bytes.length; i++) top = Math.max(top, b.offset_bytes[i] + b.bytes[i]);
    for (const value of t.allocated_max) top = Math.max(top, value);
    let hovered = -1;
    const chart = eventChart(container, {
      height: 360,
      scales: { y: { range: [0, Math.max(top, 1)] } },
      series: [
        { label: 'event', value: (u, v) => v === null ? '' : formatCount(v) },
        { label: 'allocated (most)', stroke: '#1d2430', width: 1, value: (u, v) => formatBytes(v) },
      ],
      axes: [eventAxis, bytesAxis],
      hooks: {
        draw: [(u) => {
          const ctx = u.ctx;
          ctx.save();
          ctx.beginPath();
          ctx.rect(u.bbox.left, u.bbox.top, u.bbox.width, u.bbox.height);
          ctx.clip();
          const lastEvent = inspected.summary.events;
          for (let i = 0; i < b.bytes.length; i++) {
            const start = b.alloc_event[i] < 0 ? u.scales.x.min : b.alloc_event[i];
            const end = b.free_event[i] < 0 ? lastEvent : b.free_event[i];
            if (end < u.scales.x.min || start > u.scales.x.max) continue;
            const x0 = u.valToPos(start, 'x', true), x1 = u.valToPos(end, 'x', true);
            const y0 = u.valToPos(b.offset_bytes[i], 'y', true), y1 = u.valToPos(b.offset_bytes[i] + b.bytes[i], 'y', true);
            ctx.fillStyle = CATEGORY_COLORS[b.category[i]];
            ctx.globalAlpha = i === hovered ? 1 : 0.75;
            ctx.fillRect(x0, y1, Math.max(1, x1 - x0), Math.max(1, y0 - y1));
          }
          ctx.restore();
        }],
        setCursor: [(u) => {
          if (u.cursor.left === undefined || u.cursor.left < 0) { hideTooltip(); return; }
          const found = bandAt(u, u.cursor.left, u.cursor.top);
          if (found !== hovered) { hovered = found; u.redraw(false); }
          if (found < 0) { hideTooltip(); return; }
          const shown = bandDetails(found);
          const box = u.over.getBoundingClientRect();
          showTooltip(box.left + u.cursor.left, box.top + u.cursor.top, shown.title, shown.rows, shown.stack);
        }],
      },
    }, [t.first_event, t.allocated_max]);
    chart.over.addEventListener('mouseleave', hideTooltip);
    chart.over.addEventListener('click', () => {
      if (hovered < 0) return;
      const shown = bandDetails(hovered);
      pinDetails(shown.title, shown.rows, shown.stack);
    });
  }

  function treeLabel(frame, inside) {
    if (frame === -1) return 'all live memory';
    if (frame === -2) return '<allocated before recording began>';
    if (frame === -3) return '<no Python stack: autograd backward or a C++ thread>';
    return inside ? '\u2026 ' + data.frames[frame] : data.frames[frame];
  }

  function peakView() {
    const tree = data.peak_tree;
    const count = tree.parent.length;
    byId('peak-help').textContent = 'What was live after ' + formatEvent(tree.event) + ' (' + formatBytes(inspected.summary.peak_allocated_bytes) +
      '), by stack: your own frames first, outermost down, leaving out the torch and library wrappers between them; ' +
      'the row under your nearest frame, in italics after \u2026, folds every torch and library frame inside it and names the one ' +
      'that allocated. ' +
      'Width is bytes, colour the category holding most of them. ' +
      (tree.nodes_before_cut > count ? 'The ' + formatCount(count) + ' largest of ' + formatCount(tree.nodes_before_cut) + ' nodes are drawn. ' : '') +
      'Click a node to zoom into it, the top row to zoom out.';
    const children = Array.from({ length: count }, () => []);
    for (let i = 1; i < count; i++) children[tree.parent[i]].push(i);
    for (const list of children) list.sort((a, b) => tree.bytes[b] - tree.bytes[a]);
    const container = byId('icicle');
    const rowHeight = 17;

    function path(node) {
      const nodes = [];
      for (let at = node; at !== 0; at = tree.parent[at]) nodes.push(at);
      return nodes.map((n) => treeLabel(tree.frame[n], tree.inside[n]));
    }
    function nodeDetails(node) {
      return {
        title: treeLabel(tree.frame[node], tree.inside[node]),
        rows: [['bytes', formatBytes(tree.bytes[node])], ['blocks', formatCount(tree.count[node])],
               ['share of the peak', (100 * tree.bytes[node] / Math.max(1, tree.bytes[0])).toFixed(1) + '%'],
               ['category (most bytes)', CATEGORY_NAMES[tree.category[node]]]].concat(tree.inside[node]
          ? [['folds', 'every torch and library frame inside your code, named by the one that allocated']] : []),
      };
    }

    function render(rootNode) {
      container.replaceChildren();
      const width = container.clientWidth || 1000;
      let deepest = 0;
      const place = (node, left, span, depth) => {
        if (span * width < 2) return;
        deepest = Math.max(deepest, depth);
        const box = el('div', tree.inside[node] ? 'node inside' : 'node', treeLabel(tree.frame[node], tree.inside[node]));
        box.style.left = (left * 100) + '%';
        box.style.width = (span * 100) + '%';
        box.style.top = (depth * rowHeight) + 'px';
        box.style.background = CATEGORY_COLORS[tree.category[node]] + (node === rootNode ? '88' : '55');
        box.addEventListener('mousemove', (e) => {
          const shown = nodeDetails(node);
          fillDetails(tooltip, shown.title, shown.rows);
          tooltip.appendChild(el('pre', 'stack', path(node).join('\n')));
          tooltip.hidden = false;
          tooltip.style.left = Math.min(e.clientX + 14, window.innerWidth - tooltip.offsetWidth - 8) + 'px';
          tooltip.style.top = Math.min(e.clientY + 14, window.innerHeight - tooltip.offsetHeight - 8) + 'px';
        });
        box.addEventListener('mouseleave', hideTooltip);
        box.addEventListener('click', () => render(node === rootNode ? tree.parent[node] : node));
        container.appendChild(box);
        let offset = left;
        for (const child of children[node]) {
          const childSpan = span * tree.bytes[child] / Math.max(1, tree.bytes[node]);
          place(child, offset, childSpan, depth + 1);
          offset += childSpan;
        }
      };
      place(rootNode, 0, 1, 0);
      container.style.height = Math.min(560, (deepest + 1) * rowHeight + 2) + 'px';
      const filler = el('div');
      filler.style.height = ((deepest + 1) * rowHeight) + 'px';
      container.appendChild(filler);
    }
    if (count > 0 && tree.bytes[0] > 0) render(0);
    else container.appendChild(el('p', 'empty', 'Nothing was live at the peak.'));

    const table = byId('peak-sites');
    const head = el('tr');
    for (const name of ['site', 'bytes', 'blocks', 'your code']) head.appendChild(el('th', name === 'bytes' || name === 'blocks' ? 'num' : null, name));
    table.appendChild(head);
    for (const usage of inspected.peak.by_site) {
      const row = el('tr');
      row.appendChild(el('td', null, usage.site));
      row.appendChild(el('td', 'num', formatBytes(usage.bytes)));
      row.appendChild(el('td', 'num', formatCount(usage.count)));
      row.appendChild(el('td', null, usage.user_frame));
      row.addEventListener('click', () => pinDetails(usage.site, [['bytes at the peak', formatBytes(usage.bytes)]], usage.stack));
      table.appendChild(row);
    }
  }

  function smallChart(container, title, steps, seriesList) {
    const options = {
      width: Math.min(720, chartWidth(container)), height: 180, title,
      scales: { x: { time: false } },
      series: [{ label: 'step', value: (u, v) => v === null ? '' : String(v) }].concat(seriesList.map((s) => ({
        label: s.label, stroke: s.color, width: 1.5, points: { show: true, size: 4 }, value: (u, v) => formatBytes(v),
      }))),
      axes: [{ incrs: WHOLE_STEPS, values: wholeTicks }, bytesAxis],
    };
    return new uPlot(options, [steps].concat(seriesList.map((s) => s.values)), container);
  }

  function leaksView() {
    const summary = inspected.leak_summary;
    const text = summary === null
      ? 'Fewer than 3 step ends were found, so growth per step is not measured.'
      : 'From step ' + summary.from_step + ' to step ' + summary.to_step + ', allocated memory at step ends grew ' +
        formatBytes(summary.growth_per_step_bytes) + ' per step (' + summary.step_ends_grown + ' step ends grew); the leaks below explain ' +
        formatBytes(summary.explained_per_step_bytes) + ' per step' +
        (summary.explained_fraction === null ? '.' : ' (' + (100 * summary.explained_fraction).toFixed(1) + '%).') +
        (summary.growth_without_named_leak ? ' Memory grew without a named leak.' : '');
    byId('leak-summary').textContent = text;
    const ends = inspected.steps.ends;
    if (ends.length) {
      smallChart(byId('step-chart'), 'At each step end', ends.map((end) => end.step), [
        { label: 'allocated', color: '#1f5fbf', values: ends.map((end) => end.allocated_bytes) },
        { label: 'reserved', color: '#9d6b00', values: ends.map((end) => end.reserved_bytes) },
      ]);
    }
    const list = byId('leak-list');
    if (!inspected.leaks.length) list.appendChild(el('p', 'empty', 'No leaks found.'));
    inspected.leaks.forEach((found, index) => {
      const card = el('div', 'card leak');
      card.id = 'leak-' + (index + 1);
      card.appendChild(el('div', 'verdict', 'LEAK ' + (index + 1) + ': ' + found.site));
      const share = summary && summary.growth_per_step_bytes > 0
        ? (100 * found.bytes_per_step / summary.growth_per_step_bytes).toFixed(1) + '% of the step-end growth' : 'not measured';
      const figures = el('dl');
      for (const [name, value] of [
        ['growth', formatBytes(found.bytes_per_step) + ' per step over ' + found.steps + ' steps, from step ' + found.first_step],
        ['share', share],
        ['live at the end', formatBytes(found.live_bytes_at_end) + ' in ' + formatCount(found.live_count_at_end) + ' blocks'],
        ['your code', found.user_frame || '(none)'],
      ]) { figures.appendChild(el('dt', null, name)); figures.appendChild(el('dd', null, value)); }
      card.appendChild(figures);
      const chartBox = el('div');
      card.appendChild(chartBox);
      const lines = el('table');
      const head = el('tr');
      for (const name of ['line', 'site', 'per step', 'live at the end']) head.appendChild(el('th', null, name));
      lines.appendChild(head);
      for (const one of found.lines) {
        const row = el('tr');
        row.appendChild(el('td', 'num', one.line || ''));
        row.appendChild(el('td', null, one.site));
        row.appendChild(el('td', 'num', formatBytes(one.bytes_per_step)));
        row.appendChild(el('td', 'num', formatBytes(one.live_bytes_at_end)));
        lines.appendChild(row);
      }
      card.appendChild(lines);
      card.appendChild(el('pre', 'stack', found.stack.join('\n')));
      list.appendChild(card);
      smallChart(chartBox, 'Live bytes of this leak at each step end (0: trace start)',
        found.bytes_at_step_end.map((_, i) => i), [{ label: 'live', color: '#e45756', values: found.bytes_at_step_end }]);
    });
  }

  function fragmentationView() {
    const t = data.timeline;
    const f = inspected.fragmentation;
    const container = byId('fragmentation-chart');
    if (t.first_event.length) {
      const samples = data.free_blocks;
      const table = uPlot.join([
        [t.first_event, t.unallocated_max],
        [samples.event.map((e) => Math.max(0, e)), samples.largest_free_bytes],
      ]);
      eventChart(container, {
        height: 240,
        series: [
          { label: 'event', value: (u, v) => v === null ? '' : formatCount(v) },
          { label: 'reserved - allocated (most)', stroke: '#b4530b', fill: 'rgba(180,83,11,0.15)', width: 1, spanGaps: true, value: (u, v) => formatBytes(v) },
          { label: 'largest free block', stroke: '#54a24b', width: 1.5, spanGaps: true, points: { show: true, size: 3 }, value: (u, v) => formatBytes(v) },
        ],
        axes: [eventAxis, bytesAxis],
      }, table);
    }
    const figures = byId('fragmentation-figures');
    for (const [name, value] of [
      ['most reserved but unallocated', formatBytes(f.max_unallocated_bytes) + ' at ' + formatEvent(f.max_unallocated_event)],
      ['at the peak of reserved', formatBytes(f.unallocated_at_peak_reserved_bytes) + ' unallocated, largest free block ' + formatBytes(f.largest_free_block_at_peak_reserved_bytes)],
      ['at the end', formatBytes(f.unallocated_at_end_bytes) + ' unallocated, largest free block ' + formatBytes(f.largest_free_block_at_end_bytes)],
      ['mostly empty segments at dump', formatCount(f.mostly_empty_segments) + ' (' + formatBytes(f.mostly_empty_segment_bytes) + ')'],
    ]) { figures.appendChild(el('dt', null, name)); figures.appendChild(el('dd', null, value)); }
    byId('peak-segments-title').textContent = 'Segments at the peak of reserved (' + formatEvent(data.peak_segments.event) + ', ' +
      formatBytes(inspected.summary.peak_reserved_bytes) + ', ' + formatCount(data.peak_segments.segments.length +
      data.peak_segments.segments_left_out) + ' segments): open to draw each one';
    // Folded, and drawn when first opened: a map holds up to thousands of pieces, and the
    // verdict, not the map, is what a reader comes for.
    const fold = byId('peak-segments-details');
    fold.addEventListener('toggle', () => {
      if (fold.open && !byId('peak-segments').childNodes.length) segmentMapView(byId('peak-segments'), data.peak_segments);
    });
  }

  // The page's first card: each OOM's verdict and each leak, with links to their cards, or the
  // word that there are none.
  function verdictView() {
    const cards = byId('verdict-cards');
    const most = 3;
    inspected.oom.slice(0, most).forEach((oom, index) => {
      const card = el('div', 'card verdict-card oom');
      card.appendChild(el('div', 'verdict ' + oom.verdict, 'OOM ' + (index + 1) + ' at ' + formatEvent(oom.event_index) + ': ' +
        verdictWords(oom) + (oom.proven ? ', proven by simulation' : ', not proven by simulation')));
      card.appendChild(el('p', 'proof', oom.proof));
      card.appendChild(el('p', 'advice', 'Advice: ' + oom.advice));
      const link = el('a', null, 'the OOM, its replay and its segments');
      link.href = '#oom-' + (index + 1);
      card.appendChild(link);
      cards.appendChild(card);
    });
    if (inspected.oom.length > most) cards.appendChild(el('p', 'help', formatCount(inspected.oom.length - most) + ' more OOMs below.'));
    const summary = inspected.leak_summary;
    inspected.leaks.slice(0, most).forEach((found, index) => {
      const card = el('div', 'card verdict-card leak');
      card.appendChild(el('div', 'verdict leak', 'LEAK ' + (index + 1) + ': ' + found.site + ' grows ' +
        formatBytes(found.bytes_per_step) + ' per step over ' + found.steps + ' steps' +
        (summary && summary.growth_per_step_bytes > 0
          ? ' (' + (100 * found.bytes_per_step / summary.growth_per_step_bytes).toFixed(0) + '% of the step-end growth)' : '')));
      if (found.user_frame) card.appendChild(el('p', null, 'Your code: ' + found.user_frame));
      const link = el('a', null, 'the leak, its lines and its stack');
      link.href = '#leak-' + (index + 1);
      card.appendChild(link);
      cards.appendChild(card);
    });
    if (inspected.leaks.length > most) cards.appendChild(el('p', 'help', formatCount(inspected.leaks.length - most) + ' more leaks below.'));
    if (!inspected.leaks.length && summary && summary.growth_without_named_leak) {
      cards.appendChild(el('div', 'card verdict-card growth', 'Allocated memory at step ends grew ' + formatBytes(summary.growth_per_step_bytes) +
        ' per step without a site that grew at every step end: check the step boundaries (--step-marker).'));
    }
    if (!inspected.oom.length && !inspected.leaks.length && !(summary && summary.growth_without_named_leak)) {
      const card = el('div', 'card verdict-card clean');
      card.appendChild(el('div', 'verdict', 'No OOM and no leak' + (summary === null ? ' (fewer than 3 step ends: growth per step not measured)' : '')));
      card.appendChild(el('p', null, 'Peak allocated ' + formatBytes(inspected.summary.peak_allocated_bytes) + ', peak reserved ' +
        formatBytes(inspected.summary.peak_reserved_bytes) + '; ' + formatBytes(inspected.fragmentation.max_unallocated_bytes) +
        ' at most reserved but unallocated.'));
      cards.appendChild(card);
    }
  }

  function zoomTo(event) {
    if (!charts.length) return;
    const half = Math.max(50, Math.round(inspected.summary.events / 200));
    charts[0].setScale('x', { min: Math.max(0, event - half), max: event + half });
    byId('timeline').scrollIntoView();
  }

  // A figure list into `parent`: [name, value] rows, all as text.
  function figureList(parent, rows) {
    const list = el('dl');
    for (const [name, value] of rows) { list.appendChild(el('dt', null, name)); list.appendChild(el('dd', null, value)); }
    parent.appendChild(list);
    return list;
  }

  function tableOf(parent, headings, rows, numeric) {
    const table = el('table');
    const head = el('tr');
    headings.forEach((name, k) => head.appendChild(el('th', numeric[k] ? 'num' : null, name)));
    table.appendChild(head);
    for (const cells of rows) {
      const row = el('tr');
      cells.forEach((cell, k) => row.appendChild(cell instanceof Node ? wrapCell(cell) : el('td', numeric[k] ? 'num' : null, cell)));
      table.appendChild(row);
    }
    parent.appendChild(table);
    return table;
  }
  function wrapCell(node) { const cell = el('td'); cell.appendChild(node); return cell; }

  // A link that zooms the timeline to an event.
  function eventLink(event, text) {
    const link = el('a', 'event-link', text || formatEvent(event));
    link.href = '#timeline';
    link.addEventListener('click', (e) => { e.preventDefault(); zoomTo(event); });
    return link;
  }

  function categoryLegend() {
    const legend = el('p', 'legend');
    CATEGORY_NAMES.forEach((name, k) => {
      const swatch = el('span', 'legend-swatch');
      swatch.style.background = CATEGORY_COLORS[k];
      legend.appendChild(swatch);
      legend.appendChild(el('span', 'legend-name', name));
    });
    return legend;
  }

  // Segments after one event: per pool, then each kept segment as a bar of its blocks and gaps.
  function segmentMapView(container, map) {
    container.replaceChildren();
    if (!map.pools.length) { container.appendChild(el('p', 'empty', 'Nothing was reserved.')); return; }
    const largestFree = Math.max(map.largest_free_left_out, ...map.pools.map((pool) => pool.largest_free_bytes));
    tableOf(container, ['pool', 'stream', 'segments', 'reserved', 'in blocks', 'free', 'largest free'],
      map.pools.map((p) => [p.pool, String(p.stream), formatCount(p.segments), formatBytes(p.bytes), formatBytes(p.block_bytes),
        formatBytes(p.free_bytes), formatBytes(p.largest_free_bytes)]),
      [false, false, true, true, true, true, true]);
    const shown = map.segments.length;
    const total = shown + map.segments_left_out;
    container.appendChild(el('p', 'help', (map.segments_left_out
      ? 'The ' + formatCount(shown) + ' largest of ' + formatCount(total) + ' segments, by address; the other ' + formatCount(map.segments_left_out) +
        ' hold ' + formatBytes(map.bytes_left_out) + ' (' + formatBytes(map.free_bytes_left_out) + ' free, largest free gap ' + formatBytes(map.largest_free_left_out) + '). '
      : 'All ' + formatCount(total) + ' segments, by address. ') +
      'Each bar is one segment at full width: blocks coloured by category, hatched where freed but not yet reusable, free gaps white, the largest of all (' + formatBytes(largestFree) + ') outlined. Hover for a block\'s stack.'));
    container.appendChild(categoryLegend());
    const rows = el('div', 'segment-map');
    for (const seg of map.segments) {
      const row = el('div', 'segment-row');
      row.appendChild(el('div', 'segment-label', formatBytes(seg.bytes) + ' ' + seg.pool + (seg.stream ? ' s' + seg.stream : '') +
        ' · ' + formatBytes(seg.free_bytes) + ' free'));
      const bar = el('div', 'segment-bar' + (seg.pieces_left_out ? ' cut' : ''));
      const p = seg.pieces;
      for (let i = 0; i < p.bytes.length; i++) {
        const kind = p.kind[i];
        const piece = el('div', 'piece ' + (kind === 2 ? 'gap' + (p.bytes[i] === largestFree ? ' largest' : '') : kind === 1 ? 'pending' : 'block'));
        piece.style.left = (100 * p.offset_bytes[i] / seg.bytes) + '%';
        piece.style.width = (100 * p.bytes[i] / seg.bytes) + '%';
        if (kind !== 2) piece.style.background = CATEGORY_COLORS[p.category[i]];
        piece.addEventListener('mousemove', (e) => {
          const rows = [['size', formatBytes(p.bytes[i])], ['offset', formatBytes(p.offset_bytes[i]) + ' into the segment at ' + seg.address]];
          let title = 'free gap', stack = null;
          if (kind !== 2) {
            const site = data.sites[p.site[i]];
            title = site.label;
            stack = stackLines(site.stack);
            rows.push(['category', CATEGORY_NAMES[p.category[i]]]);
            if (kind === 1) rows.push(['state', 'freed, waiting on another stream']);
          }
          showTooltip(e.clientX, e.clientY, title, rows, stack);
        });
        piece.addEventListener('mouseleave', hideTooltip);
        bar.appendChild(piece);
      }
      bar.title = seg.pieces_left_out ? formatCount(seg.pieces_left_out) + ' smaller blocks and gaps (' + formatBytes(seg.bytes_left_out) + ') are not drawn' : '';
      row.appendChild(bar);
      rows.appendChild(row);
    }
    container.appendChild(rows);
  }

  function oomView() {
    const list = byId('oom-list');
    const links = byId('oom-links');
    if (!inspected.oom.length) { list.appendChild(el('p', 'empty', 'No OOM events in the trace.')); return; }
    const limit = inspected.oom_limit;
    byId('oom-help').textContent = (limit.given ? 'Judged under the given limit of ' + formatBytes(limit.judged_bytes) + '. '
      : 'The trace proves the memory limit was between ' + formatBytes(limit.proven_low_bytes) + ' (the most it reserved) and ' +
        formatBytes(limit.proven_high_bytes) + ' (set by the OOM at ' + formatEvent(limit.proven_high_event) + '); verdicts are judged at ' +
        formatBytes(limit.judged_bytes) + '. ') +
      'Each verdict is proven by replaying the whole trace under that limit with each remedy: a remedy that serves the request makes it fragmentation.';
    links.appendChild(el('span', null, 'OOMs: '));
    inspected.oom.forEach((oom, index) => {
      const anchor = 'oom-' + (index + 1);
      const link = el('a', 'oom-link ' + oom.verdict, formatEvent(oom.event_index) + ' (' + verdictWords(oom) + ')');
      link.href = '#' + anchor;
      links.appendChild(link);
      const card = el('div', 'card oom');
      card.id = anchor;
      const when = inspected.summary.times_known && oom.time_us !== null ? ', ' + formatTime(oom.time_us) : '';
      card.appendChild(el('div', 'verdict ' + oom.verdict, 'OOM ' + (index + 1) + ' at ' + formatEvent(oom.event_index) + when + ': ' +
        verdictWords(oom) + (oom.request_larger_than_any_gpu ? ' (a request larger than any GPU)' : '') +
        (oom.proven ? ', proven by simulation' : ', not proven by simulation')));
      card.appendChild(el('p', 'proof', oom.proof));
      card.appendChild(el('p', null, oom.explanation));
      card.appendChild(el('p', 'advice', 'Advice: ' + oom.advice));
      const bound = oom.limit_given ? formatBytes(oom.limit_low_bytes) + ' (given)'
        : 'between ' + formatBytes(oom.limit_low_bytes) + ' and ' + formatBytes(oom.limit_high_bytes);
      const rows = [
        ['requested (rounded)', formatBytes(oom.requested_bytes)],
        ['segment it needed', formatBytes(oom.segment_bytes)],
        ['allocated', formatBytes(oom.allocated_bytes)],
        ['reserved', formatBytes(oom.reserved_bytes)],
        ['reserved but unallocated', formatBytes(oom.reserved_unallocated_bytes)],
        ['largest free block', formatBytes(oom.largest_free_block_bytes)],
        ['CUDA reported free', formatBytes(oom.device_free_bytes)],
        ['memory limit', bound],
      ];
      if (oom.verdict !== 'fragmentation') rows.push(['short by', formatBytes(oom.short_by_bytes)]);
      rows.push(['request made at', oom.request_site || '(no stack recorded)']);
      rows.push(['largest site', oom.largest_site.site + ' (' + formatBytes(oom.largest_site.bytes) + ')']);
      figureList(card, rows);

      card.appendChild(el('h3', null, 'The replay that proves it'));
      const proofRows = oom.proofs.map((proof) => {
        let outcome;
        if (!proof.tried) outcome = el('span', 'not-tried', 'not tried: ' + proof.not_tried);
        else if (proof.served) outcome = el('span', 'served', 'served, and the run after it');
        else {
          outcome = el('span', 'failed');
          outcome.appendChild(document.createTextNode(proof.failed_event_index === oom.event_index ? 'fails at this request ('
            : proof.failed_event_index < oom.event_index ? 'an earlier request fails (' : 'a later request fails ('));
          outcome.appendChild(eventLink(proof.failed_event_index));
          outcome.appendChild(document.createTextNode(', ' + formatBytes(proof.failed_requested_bytes) + ')'));
        }
        return [proof.setting, outcome, proof.tried ? formatBytes(proof.reserved_reached_bytes) : '',
          proof.reserved_needed_bytes === null ? '' : formatBytes(proof.reserved_needed_bytes), formatBytes(proof.limit_bytes)];
      });
      tableOf(card, ['setting', 'outcome', 'reserved reached', 'reserved needed', 'limit'], proofRows, [false, false, true, true, true])
        .className = 'proofs';
      const lines = el('ul', 'proof-lines');
      for (const proof of oom.proofs) lines.appendChild(el('li', null, proof.summary));
      card.appendChild(lines);

      if (oom.free_by_pool.length) {
        card.appendChild(el('h3', null, 'Free blocks by pool'));
        tableOf(card, ['pool', 'stream', 'largest free', 'free'],
          oom.free_by_pool.map((pool) => [pool.pool, String(pool.stream), formatBytes(pool.largest_free_bytes), formatBytes(pool.free_bytes)]),
          [false, false, true, true]);
      }
      const button = el('button', null, 'show on the timeline');
      button.type = 'button';
      button.addEventListener('click', () => zoomTo(oom.event_index));
      card.appendChild(button);
      card.appendChild(el('h3', null, 'Stack of the request'));
      const requestStack = stackLines(data.oom_request_stacks[index]);
      card.appendChild(el('pre', 'stack', requestStack.length ? requestStack.join('\n') : '(no frames recorded)'));
      if (index < data.oom_segments.length) {
        const map = el('details', 'segments-at-oom');
        map.appendChild(el('summary', null, 'Segments at this OOM'));
        const body = el('div');
        map.appendChild(body);
        // Drawn when opened: an OOM map holds up to thousands of pieces.
        map.addEventListener('toggle', () => { if (map.open && !body.childNodes.length) segmentMapView(body, data.oom_segments[index]); });
        card.appendChild(map);
      } else {
        card.appendChild(el('p', 'empty', 'No segment map for this OOM: maps are kept for the first ' + formatCount(data.oom_segments.length) + ' OOMs.'));
      }
      list.appendChild(card);
    });
  }

  // `rlmem report A B`: the totals, then each table of changes as bars growing right (B holds
  // more) or left (less).
  function diffView(body) {
    byId('comparison-title').textContent = 'What changed from A to B';
    figureList(body, [['A', data.a], ['B', data.b]]);
    const totals = data.totals;
    tableOf(body, ['', 'A', 'B', 'change'], [
      ['peak allocated', ...totals.peak_allocated_bytes.map(formatBytes), signedBytes(totals.peak_allocated_bytes[1] - totals.peak_allocated_bytes[0])],
      ['peak reserved', ...totals.peak_reserved_bytes.map(formatBytes), signedBytes(totals.peak_reserved_bytes[1] - totals.peak_reserved_bytes[0])],
      ['allocated at the end', ...totals.end_allocated_bytes.map(formatBytes), signedBytes(totals.end_allocated_bytes[1] - totals.end_allocated_bytes[0])],
      ['reserved at the end', ...totals.end_reserved_bytes.map(formatBytes), signedBytes(totals.end_reserved_bytes[1] - totals.end_reserved_bytes[0])],
    ], [false, true, true, true]);
    for (const [moment, title] of [['at_peak', 'at the peak'], ['at_end', 'at the end']]) {
      for (const [table, what] of [['categories', 'Categories'], ['sites', 'Sites']]) {
        const rows = data[moment][table];
        body.appendChild(el('h3', null, what + ' live ' + title + ' that changed'));
        if (!rows.length) { body.appendChild(el('p', 'empty', 'No change.')); continue; }
        const most = Math.max(...rows.map((row) => Math.abs(row.delta_bytes)), 1);
        const list = tableOf(body, ['change', '', 'A', 'B', what === 'Sites' ? 'site' : 'category'],
          rows.map((row) => {
            const bar = el('div', 'delta-bar ' + (row.delta_bytes > 0 ? 'grew' : 'shrank'));
            bar.style.width = (50 * Math.abs(row.delta_bytes) / most) + '%';
            const cell = el('div', 'delta-cell');
            cell.appendChild(bar);
            return [signedBytes(row.delta_bytes), cell, formatBytes(row.a_bytes), formatBytes(row.b_bytes), row.key];
          }), [true, false, true, true, false]);
        list.className = 'diff-table';
        const leftOut = data[moment][table + '_left_out'];
        if (leftOut) body.appendChild(el('p', 'help', formatCount(leftOut) + ' smaller changes are not listed (rlmem diff --json lists every one).'));
      }
    }
  }

  function signedBytes(value) { return (value > 0 ? '+' : '') + formatBytes(value); }

  // `rlmem report DIR`: one row per rank, then every rank's timeline on one chart.
  function ranksView(body) {
    byId('comparison-title').textContent = 'Ranks of ' + data.directory;
    const imbalance = data.imbalance;
    if (imbalance.max_rank >= 0) {
      body.appendChild(el('p', null, 'Peak allocated from ' + formatBytes(imbalance.min_peak_allocated_bytes) + ' (rank ' + imbalance.min_rank +
        ') to ' + formatBytes(imbalance.max_peak_allocated_bytes) + ' (rank ' + imbalance.max_rank + ')' +
        (imbalance.max_over_min === null ? '' : ', ' + imbalance.max_over_min.toFixed(2) + 'x') +
        '; peak reserved from ' + formatBytes(imbalance.min_peak_reserved_bytes) + ' to ' + formatBytes(imbalance.max_peak_reserved_bytes) + '.'));
    }
    const most = Math.max(1, ...data.ranks.filter((r) => r.ok).map((r) => r.peak_reserved_bytes));
    tableOf(body, ['rank', 'peak allocated', 'peak reserved', '', 'events', 'steps', 'leaks', 'OOMs', 'file'], data.ranks.map((r) => {
      if (!r.ok) return [String(r.rank), 'not read', '', '', '', '', '', '', r.file + ': ' + r.error];
      const bars = el('div', 'rank-bars');
      for (const [value, kind] of [[r.peak_reserved_bytes, 'reserved'], [r.peak_allocated_bytes, 'allocated']]) {
        const bar = el('div', 'rank-bar ' + kind);
        bar.style.width = (100 * value / most) + '%';
        bars.appendChild(bar);
      }
      const ooms = r.oom.length ? formatCount(r.oom.length) + ' (' + r.oom.map((o) => o.verdict).join(', ') + ')' : '-';
      return [String(r.rank), formatBytes(r.peak_allocated_bytes), formatBytes(r.peak_reserved_bytes), bars, formatCount(r.events),
        formatCount(r.steps), formatCount(r.leaks.length), ooms, r.file];
    }), [true, true, true, false, true, true, true, false, false]).className = 'ranks-table';
    for (const r of data.ranks) {
      for (const found of (r.ok ? r.leaks : [])) body.appendChild(el('p', 'leak-line', 'rank ' + r.rank + ': LEAK ' + found.site + ' ' + signedBytes(found.bytes_per_step) + ' per step'));
    }
    const read = data.ranks.filter((r) => r.ok && r.timeline.allocated_max.length);
    if (!read.length) return;
    body.appendChild(el('h3', null, 'Allocated over each rank\'s trace (the most in each of ' + formatCount(read[0].timeline.allocated_max.length) + ' slices)'));
    const container = el('div', 'chart');
    body.appendChild(container);
    const slices = Math.max(...read.map((r) => r.timeline.allocated_max.length));
    const x = Array.from({ length: slices }, (_, i) => 100 * i / slices);
    const series = [{ label: '% of trace', value: (u, v) => v === null ? '' : v.toFixed(1) + '%' }];
    const table = [x];
    read.forEach((r, k) => {
      series.push({ label: 'rank ' + r.rank, stroke: RANK_COLORS[k % RANK_COLORS.length], width: 1.5, value: (u, v) => formatBytes(v) });
      table.push(x.map((_, i) => i < r.timeline.allocated_max.length ? r.timeline.allocated_max[i] : null));
    });
    new uPlot({ width: chartWidth(container), height: 320, scales: { x: { time: false } }, series,
      axes: [{ values: (u, values) => values.map((v) => v + '%') }, bytesAxis] }, table, container);
  }
  // `rlmem replay --html`: the run under one setting, then (--compare) each setting's peak
  // reserved and smallest capacity as bars, the floor (peak allocated) marked.
  function replayView(body) {
    byId('comparison-title').textContent = 'Replay of ' + data.file + ', device ' + data.device;
    const result = data.oom === null ? 'completed, ' + formatCount(data.events_replayed) + ' events'
      : 'OOM at ' + formatEvent(data.oom.event_index) + ' asking for ' + formatBytes(data.oom.requested_bytes) +
        (data.oom.recorded ? ', as the recording did' : '');
    const rows = [
      ['settings', data.allocator === 'rlmem' ? 'the rlmem policy, free pages ' + (data.release_free_pages ? 'released at once' : 'cached') + ' (what-if)'
        : (data.alloc_conf || 'defaults') + (data.settings_recorded ? ' (as recorded)' : ' (what-if)')],
      ['capacity', data.capacity_bytes ? formatBytes(data.capacity_bytes) : 'no limit'],
      ['result', result],
      ['peak allocated', formatBytes(data.peak_allocated_bytes) + (data.oom !== null && !data.oom.recorded ? ' (up to its OOM)' : '')],
      ['peak reserved', formatBytes(data.peak_reserved_bytes)],
      ['segments at the end', formatCount(data.segments)],
      ['alloc retries', formatCount(data.num_alloc_retries)],
    ];
    if (data.fidelity !== null) {
      rows.push(['fidelity', formatCount(data.fidelity.segment_events_matched) + ' of ' + formatCount(data.fidelity.segment_events_expected) +
        ' recorded segment events reproduced' + (data.fidelity.first_mismatch ? '; first divergence: ' + data.fidelity.first_mismatch : '')]);
    }
    if (data.min_capacity_bytes !== undefined) {
      rows.push(['min capacity', data.min_capacity_bytes === 0 ? 'does not complete at any capacity' : formatBytes(data.min_capacity_bytes)]);
    }
    figureList(body, rows);
    for (const note of data.notes) body.appendChild(el('p', 'help', note));
    if (!data.compare) return;
    body.appendChild(el('h3', null, 'Settings compared'));
    const modelled = data.compare.filter((row) => row.unsupported === undefined);
    const most = Math.max(1, data.floor_bytes, ...modelled.map((row) => Math.max(row.peak_reserved_bytes, row.min_capacity_bytes)));
    body.appendChild(el('p', 'help', 'Bars: peak reserved (gold) and the smallest capacity under which the run completes (blue, to 2 MiB); ' +
      'the line is the floor, the requests live at once at the trace\'s peak, rounded to 512 B (' + formatBytes(data.floor_bytes) +
      '), which no setting can go under.' + (data.torch_peak_allocated_bytes > data.floor_bytes
        ? ' Torch\'s peak allocated, ' + formatBytes(data.torch_peak_allocated_bytes) + ', also counts the remainders of blocks it ' +
          'served whole, so a policy can reserve less than that.' : '')));
    tableOf(body, ['settings', 'peak reserved', 'min capacity', data.capacity_bytes ? 'at ' + formatBytes(data.capacity_bytes) : '', ''],
      data.compare.map((row) => {
        const label = row.label === 'recorded' ? 'recorded: ' + (row.alloc_conf || 'defaults') : row.label;
        if (row.unsupported !== undefined) return [label, 'not modelled yet', '', '', row.unsupported];
        const bars = el('div', 'setting-bars');
        for (const [value, kind] of [[row.peak_reserved_bytes, 'reserved'], [row.min_capacity_bytes, 'capacity']]) {
          const bar = el('div', 'setting-bar ' + kind);
          bar.style.width = (100 * value / most) + '%';
          bars.appendChild(bar);
        }
        const floor = el('div', 'setting-floor');
        floor.style.left = (100 * data.floor_bytes / most) + '%';
        bars.appendChild(floor);
        return [label, formatBytes(row.peak_reserved_bytes), formatBytes(row.min_capacity_bytes),
          data.capacity_bytes ? (row.completed ? 'completes' : 'OOM') : '', bars];
      }), [false, true, true, false, false]).className = 'settings-table';
  }

  // `rlmem plan --html`: each phase's peak as a bar of its parts, then (--fit) your config, each
  // knob changed alone and the combinations that fit.
  function planView(body) {
    const knobs = data.knobs;
    byId('comparison-title').textContent = 'Plan of ' + data.model.name + ', ' + knobs.phase;
    const rows = [
      ['model', data.model.name + ' (' + formatCount(data.model.parameters) + ' parameters)'],
      ['peak', formatBytes(data.peak_bytes) + ' in ' + data.peak_phase],
      ['outside the allocator', formatBytes(data.outside_allocator.cuda_context_bytes + data.outside_allocator.cublas_workspace_bytes) +
        ' (CUDA context and cuBLAS workspace)'],
    ];
    if (data.handoff) {
      const h = data.handoff;
      rows.push(['hand-off', h.mode + ', wake order ' + h.wake_order + ': ' + h.transitions.join(' \u2192 ')]);
      rows.push(['wake-up order', 'staged (weights, sync, then KV): step peak ' + formatBytes(h.staged.step_peak_bytes) + ' in ' +
        h.staged.peak_phase + '; together: ' + formatBytes(h.together.step_peak_bytes) + ' in ' + h.together.peak_phase]);
    }
    if (data.host) {
      rows.push(['host memory', formatBytes(data.host.per_gpu_bytes) + ' per GPU, ' + formatBytes(data.host.per_node_bytes) + ' per node of ' +
        data.host.gpus_per_node + ' GPU' + (data.host.gpus_per_node === 1 ? '' : 's') + (data.host.host_memory_bytes === undefined ? ''
          : (data.host.fits ? ': fits ' : ': does not fit ') + formatBytes(data.host.host_memory_bytes) + ' (--host-memory)')]);
    }
    if (data.fit) {
      rows.push(['card', data.fit.card + ': ' + formatBytes(data.fit.usable_bytes) + ' usable']);
      rows.push(['your config', formatBytes(data.fit.yours.peak_bytes) + (data.fit.yours.fits ? ': fits' : ': does not fit') +
        (data.fit.yours.host && data.fit.yours.host.limit !== 'none' ? ' (limit: ' + data.fit.yours.host.limit + ')' : '')]);
    }
    figureList(body, rows);
    if (data.host && Object.keys(data.host.parts).length) {
      body.appendChild(el('h3', null, 'Host memory per GPU, by part'));
      tableOf(body, ['part', 'bytes'], Object.entries(data.host.parts).map(([name, bytes]) => [name, formatBytes(bytes)]),
        [false, true]).className = 'host-table';
    }
    body.appendChild(el('h3', null, 'Peak of each phase, by part'));
    const parts = [];
    for (const phase of data.phases) for (const name of Object.keys(phase.components)) if (!parts.includes(name)) parts.push(name);
    const most = Math.max(1, ...data.phases.map((phase) => phase.peak_bytes), data.fit ? data.fit.usable_bytes : 0);
    const legend = el('p', 'help');
    parts.forEach((name, k) => {
      const swatch = el('span', 'part-swatch');
      swatch.style.background = partColor(k);
      legend.appendChild(swatch);
      legend.appendChild(document.createTextNode(name + '  '));
    });
    body.appendChild(legend);
    tableOf(body, ['phase', 'peak', 'at', ''], data.phases.map((phase) => {
      const bar = el('div', 'part-bars');
      let left = 0;
      for (const [name, bytes] of Object.entries(phase.components)) {
        const piece = el('div', 'part-bar');
        piece.style.left = (100 * left / most) + '%';
        piece.style.width = (100 * bytes / most) + '%';
        piece.style.background = partColor(parts.indexOf(name));
        piece.title = name + ': ' + formatBytes(bytes);
        bar.appendChild(piece);
        left += bytes;
      }
      if (data.fit) {
        const line = el('div', 'setting-floor');
        line.style.left = (100 * data.fit.usable_bytes / most) + '%';
        bar.appendChild(line);
      }
      return [phase.name, formatBytes(phase.peak_bytes), phase.peak_at, bar];
    }), [false, true, false, false]).className = 'plan-table';
    if (data.response_lengths) responseLengthsView(body, data.response_lengths);
    if (!data.fit) return;
    body.appendChild(el('h3', null, 'Each knob changed alone from your config'));
    body.appendChild(el('p', 'help', 'Peak and saving of each change; * marks the least change that fits (or the most that still fits).'));
    tableOf(body, ['knob', 'from', 'to', 'peak', 'saved', 'fits'], data.fit.what_if.map((row) =>
      [row.knob, row.from, row.to + (row.limit ? ' *' : ''), formatBytes(row.peak_bytes), formatBytes(row.saved_bytes), row.fits ? 'yes' : 'no']),
    [false, false, false, true, true, false]).className = 'what-if-table';
    body.appendChild(el('h3', null, 'Combinations that fit'));
    if (!data.fit.found) { body.appendChild(el('p', 'empty', 'None: ' + data.fit.reason)); return; }
    const fitting = data.fit.every_fitting.length + data.fit.every_fitting_left_out;
    body.appendChild(el('p', 'help', data.fit.ranking + ' Shown: ' + formatCount(data.fit.combinations.length) + ' of ' +
      formatCount(fitting) + ', the best for each set of knobs changed, leaving out any that changes more knobs for no gain.'));
    tableOf(body, ['', 'peak', 'tokens per step', 'changes'], data.fit.combinations.map((row, k) => [String(k + 1), formatBytes(row.peak_bytes),
      formatCount(row.work_per_step), row.changes.length
        ? row.changes.map((change) => change.knob + ' ' + change.from + ' \u2192 ' + change.to).join(', ') : 'your config as it is']),
    [true, true, true, false]).className = 'combinations-table';
    body.appendChild(el('h3', null, 'Best: its options'));
    body.appendChild(el('pre', 'command best-command', data.fit.best.command_line));
    const every = el('details', 'every-fitting');
    every.appendChild(el('summary', null, 'Every configuration that fits (' + formatCount(fitting) + ')' +
      (data.fit.every_fitting_left_out ? ': the first ' + formatCount(data.fit.every_fitting.length) + ' here, all of them in rlmem plan --json' : '')));
    // Drawn when opened: a search with --vary can fit thousands.
    every.addEventListener('toggle', () => {
      if (!every.open || every.querySelector('table')) return;
      tableOf(every, ['', 'peak', 'tokens per step', 'options'], data.fit.every_fitting.map((row, k) => [String(k + 1),
        formatBytes(row.peak_bytes), formatCount(row.work_per_step), row.command_line]), [true, true, true, false]);
    });
    body.appendChild(every);
  }

  // --response-len-*: the step's peak at each percentile's length, the longest response that fits
  // the card and the chance per step of drawing a longer one.
  function responseLengthsView(body, lengths) {
    body.appendChild(el('h3', null, 'Response lengths'));
    body.appendChild(el('p', 'help', 'A padded pass is as long as its longest sample, so the step\'s peak follows the longest response ' +
      'a step draws, up to ' + formatCount(lengths.max_length) + ' tokens (the phases above are planned at ' +
      formatCount(lengths.planned_new_tokens) + ').'));
    const hasCard = lengths.fitting_length !== undefined;
    const hasChance = lengths.assumption !== undefined;
    const percent = (p) => (100 * p).toFixed(1) + '%';
    tableOf(body, ['response', 'tokens', 'peak', 'phase'].concat(hasCard ? ['fits'] : [], hasChance ? ['P(a step draws longer)'] : []),
      lengths.points.map((point) => [point.label, formatCount(point.length), formatBytes(point.peak_bytes), point.peak_phase]
        .concat(hasCard ? [point.fits ? 'yes' : 'no'] : [], hasChance ? [percent(point.step_draws_longer)] : [])),
      [false, true, true, false].concat(hasCard ? [false] : [], hasChance ? [true] : [])).className = 'lengths-table';
    if (!hasCard) {
      body.appendChild(el('p', 'help', 'Give --fit CARD (or --card with an engine) for the length at which the step stops fitting.'));
      return;
    }
    let verdict;
    if (lengths.fits_at_max) {
      verdict = 'Every response up to ' + formatCount(lengths.max_length) + ' tokens fits the ' + formatBytes(lengths.usable_bytes) +
        ' usable on ' + lengths.card + '.';
    } else if (lengths.fitting_length === 0) {
      verdict = 'Even 1-token responses do not fit the ' + formatBytes(lengths.usable_bytes) + ' usable on ' + lengths.card + '.';
    } else {
      verdict = 'The step fits up to ' + formatCount(lengths.fitting_length) + ' tokens of response (at ' +
        formatCount(lengths.fitting_length + 1) + ' it needs ' + formatBytes(lengths.peak_after_fitting_bytes) + ', over the ' +
        formatBytes(lengths.usable_bytes) + ' usable on ' + lengths.card + '): the run overflows the card in the first step that ' +
        'draws a longer response.';
      if (hasChance) {
        verdict += ' P(a step draws one) = ' + percent(lengths.step_draws_longer_than_fitting) + ' (' + lengths.assumption + ').';
      }
    }
    body.appendChild(el('p', 'lengths-verdict', verdict));
  }

  // A colour of its own for each part of a phase: Kelly's 20 colours of maximum contrast, then
  // hues a golden angle apart.
  const PART_COLORS = ['#0067a5', '#f3c300', '#be0032', '#008856', '#875692', '#f38400', '#a1caf1', '#c2b280', '#848482', '#e68fac',
    '#604e97', '#f6a600', '#b3446c', '#dcd300', '#882d17', '#8db600', '#654522', '#e25822', '#2b3d26', '#f99379'];
  function partColor(k) { return k < PART_COLORS.length ? PART_COLORS[k] : 'hsl(' + Math.round((k * 137.508) % 360) + ', 60%, 45%)'; }
  const RANK_COLORS = ['#1f5fbf', '#e45756', '#54a24b', '#b279a2', '#f58518', '#72b7b2', '#9d6b00', '#5a6475'];

  if (data.kind === 'diff' || data.kind === 'ranks' || data.kind === 'replay' || data.kind === 'plan') {
    byId('inspection').hidden = true;
    byId('inspection-nav').hidden = true;
    byId('comparison').hidden = false;
    const label = data.kind === 'diff' ? data.a + ' vs ' + data.b : data.kind === 'ranks' ? data.directory
      : data.kind === 'plan' ? data.model.name : data.file;
    byId('source').textContent = label;
    document.title = 'rlmem report: ' + label;
    ({ diff: diffView, ranks: ranksView, replay: replayView, plan: planView })[data.kind](byId('comparison-body'));
  } else {
    summaryView();
    verdictView();
    timelineView();
    categoriesView();
    activeView();
    peakView();
    leaksView();
    fragmentationView();
    oomView();
  }
  window.addEventListener('resize', () => {
    for (const chart of charts) chart.setSize({ width: chartWidth(chart.root.parentElement), height: chart.height });
  });
  document.body.dataset.ready = '1';
})();
