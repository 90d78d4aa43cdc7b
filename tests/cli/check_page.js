// Runs the scripts of a memdiag HTML page (flamegraph, report) under node
// with a stand-in DOM and checks what they draw. Flame graphs: the root
// spans the canvas, every frame lies within its parent, children and self
// bytes add up, a click zooms a frame to the full width, a search counts
// matched bytes once. Timelines: columns in order, each column's lowest
// allocated at most its highest, hover names the step and phase. Prints one line
// of facts per drawing; exits 1 on a failure.
//   node tests/cli/check_page.js PAGE.html [SEARCH]
'use strict';
const fs = require('fs');
const html = fs.readFileSync(process.argv[2], 'utf8');
const search = process.argv[3] || 'forward';
const fail = (why) => { console.log('FAIL: ' + why); process.exit(1); };
if (/<(script|link|img|iframe)[^>]+(src|href)=/i.test(html)) fail('the page loads something');
const scripts = [...html.matchAll(/<script>\n([\s\S]*?)<\/script>/g)].map((m) => m[1]);
if (!scripts.length) fail('no script in the page');

const W = 1000;
let drawn = null; // the rects and texts of the canvas drawn last
function element(tag) {
  const e = {
    tag, style: {}, textContent: '', value: '', className: '', clientWidth: W, offsetWidth: 100,
    children: [], listeners: {},
    appendChild(c) { this.children.push(c); return c; },
    addEventListener(ev, f) { this.listeners[ev] = f; },
    getBoundingClientRect() { return { left: 0, top: 0 }; },
    getContext() {
      const rects = [], texts = [];
      e.rects = rects; e.texts = texts;
      return {
        setTransform() {}, clearRect() { rects.length = 0; texts.length = 0; drawn = e; },
        fillRect(x, y, w, h) { rects.push([x, y, w, h, this.fillStyle]); },
        fillText(t, x, y) { texts.push([t, x, y]); },
        measureText(t) { return { width: t.length * 7 }; },
        beginPath() {}, moveTo() {}, lineTo() {}, stroke() {}, fill() {}, arc() {},
      };
    },
  };
  return e;
}
const ids = {};
global.document = {
  title: '',
  getElementById(id) { return ids[id] || (ids[id] = element('div')); },
  createElement(t) { return element(t); },
  createTextNode(t) { return { t }; },
};
global.window = { devicePixelRatio: 1, innerWidth: 1200, addEventListener() {} };
try { (0, eval)(scripts.join('\n')); } catch (e) { fail('the script threw: ' + e.stack); }
const apis = global.window.memdiag;
if (!apis || !apis.length) fail('the page made no drawing (window.memdiag)');

function checkFlame(api, F) {
  const ROW = 18, rects = api.canvas.rects, N = F.nodes;
  if (!rects.length) fail('flame: nothing drawn');
  const root = rects.find((r) => r[1] === 0);
  if (!root || root[0] !== 0 || Math.abs(root[2] - (W - 1)) > 0.01) fail('flame: the root does not span the canvas');
  for (const r of rects) {
    if (r[1] === 0) continue;
    const above = rects.filter((p) => p[1] === r[1] - ROW);
    if (!above.some((p) => r[0] >= p[0] - 0.01 && r[0] + r[2] <= p[0] + p[2] + 1.01)) fail('flame: a frame outside its parent at y=' + r[1]);
  }
  const sum = new Array(N.length).fill(0);
  for (let i = 1; i < N.length; i++) sum[N[i][0]] += N[i][1];
  for (let i = 0; i < N.length; i++) if (sum[i] + N[i][2] !== N[i][1]) fail('flame: node ' + i + ': children + self != bytes');
  const deep = rects.filter((r) => r[1] === 2 * ROW).sort((a, b) => b[2] - a[2])[0];
  let zoom = 'none';
  if (deep && deep[2] < W - 2) {
    api.canvas.listeners.click({ clientX: deep[0] + 1, clientY: deep[1] + 1 });
    const now = api.canvas.rects.filter((r) => r[1] === 2 * ROW).sort((a, b) => b[2] - a[2])[0];
    if (Math.abs(now[2] - (W - 1)) > 0.01) fail('flame: a clicked frame does not fill the width');
    zoom = 'ok';
    api.reset.listeners.click();
  }
  api.search.value = search;
  api.search.listeners.input();
  const mm = api.found.textContent.match(/matched ([0-9.]+) MiB \(([0-9.]+)%\)/);
  if (!mm || +mm[2] > 100.05) fail('flame: search: ' + api.found.textContent);
  return `flame nodes ${N.length} total_mib ${(N[0][1] / 1048576).toFixed(1)} zoom ${zoom} search "${api.found.textContent}"`;
}

function checkTimeline(api, T) {
  const n = T.xs.length;
  for (let i = 1; i < n; i++) if (T.xs[i] < T.xs[i - 1]) fail('timeline: columns out of order');
  for (let i = 0; i < n; i++) {
    if (!(T.amin[i] <= T.amax[i] + 1e-9)) fail('timeline: min above max at ' + i);
  }
  let inStep = 0;
  for (let i = 0; i < n; i++) if (/step \d+, /.test(api.describe(i))) inStep++;
  const colWidth = n > 1 ? (T.xs[n - 1] - T.xs[0]) / (n - 1) : 0;
  const wide = (T.steps || []).some((s) => s[1] - s[0] > colWidth);  // must hold a column
  if (wide && !inStep) fail('timeline: no column falls in a step');
  const peak = T.peak ? T.peak[1].toFixed(1) : '-';
  let drv = '';
  if (T.drv) {  // the driver-level series: as long as the columns, in the tooltip
    if (T.drv.length !== n) fail('timeline: driver series of another length');
    if (n && !/through the driver [0-9.]+ MiB/.test(api.describe(n - 1))) fail('timeline: no driver in the tooltip');
    drv = ` driver ${n ? T.drv[n - 1].toFixed(1) : '-'}`;
  }
  return `timeline columns ${n} steps ${(T.steps || []).length} in_steps ${inStep} peak ${peak}${drv}`;
}

const facts = [];
apis.forEach(function (a, k) {
  const data = a.data;
  if (!data) fail('drawing ' + k + ' has no data handle');
  facts.push(a.boxes ? checkFlame(a, data) : checkTimeline(a, data));
});
console.log(facts.join('; '));
