// Runs the script of a `memdiag flamegraph` page under node with a stand-in
// DOM and checks what it draws: the root spans the canvas, every frame lies
// within its parent, a click zooms a frame to the full width, a search
// counts matched bytes once. Prints one line of facts; exits 1 on a failure.
//   node tests/cli/check_flame_html.js PAGE.html
'use strict';
const fs = require('fs');
const html = fs.readFileSync(process.argv[2], 'utf8');
const m = html.match(/<script>\n([\s\S]*?)<\/script>/);
if (!m) { console.log('no script in the page'); process.exit(1); }
if (/<(script|link|img)[^>]+(src|href)=/i.test(html)) { console.log('the page loads something'); process.exit(1); }

const W = 1000, rects = [], texts = [];
const listeners = {};
function element(id) {
  return {
    id, style: {}, textContent: '', value: '', clientWidth: W, offsetWidth: 100,
    children: [],
    appendChild(c) { this.children.push(c); },
    addEventListener(ev, f) { listeners[id + ':' + ev] = f; },
    getBoundingClientRect() { return { left: 0, top: 0 }; },
    getContext() {
      return {
        setTransform() {}, clearRect() { rects.length = 0; texts.length = 0; },
        fillRect(x, y, w, h) { rects.push([x, y, w, h, this.fillStyle]); },
        fillText(t, x, y) { texts.push([t, x, y]); },
        measureText(t) { return { width: t.length * 7 }; },
        set font(v) {}, set textBaseline(v) {}, set globalAlpha(v) {},
      };
    },
  };
}
const els = {};
global.document = {
  title: '',
  getElementById(id) { return els[id] || (els[id] = element(id)); },
  createElement(t) { return element(t); },
  createTextNode(t) { return { t }; },
};
global.window = { devicePixelRatio: 1, innerWidth: 1200, addEventListener(ev, f) { listeners['window:' + ev] = f; } };
eval(m[1] + '\nglobalThis.D = D;');

const fail = (why) => { console.log('FAIL: ' + why); process.exit(1); };
const N = D.nodes, ROW = 18;
if (!rects.length) fail('nothing drawn');
const root = rects.find((r) => r[1] === 0);
if (!root || root[0] !== 0 || Math.abs(root[2] - (W - 1)) > 0.01) fail('the root does not span the canvas');
// every drawn box (x, y, w) lies within a box of the row above
for (const r of rects) {
  if (r[1] === 0) continue;
  const above = rects.filter((p) => p[1] === r[1] - ROW);
  if (!above.some((p) => r[0] >= p[0] - 0.01 && r[0] + r[2] <= p[0] + p[2] + 1.01)) fail('a frame outside its parent at y=' + r[1]);
}
// bytes: each node's children hold no more than it
const kidsum = new Array(N.length).fill(0);
for (let i = 1; i < N.length; i++) kidsum[N[i][0]] += N[i][1];
for (let i = 0; i < N.length; i++) if (kidsum[i] + N[i][2] !== N[i][1]) fail('node ' + i + ': children + self != bytes');
// click the widest box two rows down: it fills the width
const deep = rects.filter((r) => r[1] === 2 * ROW).sort((a, b) => b[2] - a[2])[0];
let zoomed = 'none';
if (deep && deep[2] < W - 2) {
  listeners['c:click']({ clientX: deep[0] + 1, clientY: deep[1] + 1 });
  const now = rects.filter((r) => r[1] === 2 * ROW).sort((a, b) => b[2] - a[2])[0];
  if (Math.abs(now[2] - (W - 1)) > 0.01) fail('a clicked frame does not fill the width');
  zoomed = 'ok';
  listeners['reset:click']();
}
// search a name that appears at several depths: matched bytes counted once
document.getElementById('q').value = process.argv[3] || 'forward';
listeners['q:input']({ target: { value: process.argv[3] || 'forward' } });
const found = document.getElementById('found').textContent;
const mm = found.match(/matched ([0-9.]+) MiB \(([0-9.]+)%\)/);
if (!mm || +mm[2] > 100.05) fail('search: ' + found);
console.log(`nodes ${N.length} drawn ${rects.length} total_mib ${(N[0][1] / 1048576).toFixed(1)} zoom ${zoomed} search "${found}"`);
