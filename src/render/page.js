/* page.js - the script of memdiag's HTML pages (memdiag flamegraph, memdiag
 * report), embedded into the library at build time: a page holds its data
 * and this script and loads nothing, so it works offline and can be mailed.
 * Plain canvas drawing, no library: a timeline is at most ~1000 columns
 * (the C side reduces a trace of any length to min/max per column) and a
 * flame graph one box per distinct stack frame, so pages stay small and
 * quick at millions of events. */
'use strict';

const MD_COLORS = ['#4e79a7', '#f28e2b', '#b07aa1', '#59a14f', '#9c9c9c', '#76b7b2',
                   '#edc948', '#d3d3d3'];
const MD_MIB = 1048576;

function mdEl(parent, tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  parent.appendChild(e);
  return e;
}

function mdMib(bytes) { return (bytes / MD_MIB).toFixed(1) + ' MiB'; }

function mdTip(parent) {
  const tip = mdEl(parent, 'div', 'md-tip');
  return {
    show: function (ev, text) {
      tip.textContent = text;
      tip.style.display = 'block';
      tip.style.left = Math.max(0, Math.min(ev.clientX + 12, window.innerWidth - tip.offsetWidth - 8)) + 'px';
      tip.style.top = (ev.clientY + 14) + 'px';
    },
    hide: function () { tip.style.display = 'none'; },
  };
}

function mdCanvas(parent, height) {
  const canvas = mdEl(parent, 'canvas', 'md-canvas');
  const ctx = canvas.getContext('2d');
  return {
    canvas: canvas, ctx: ctx,
    // sizes the canvas to its box and the screen's pixels; returns the width
    fit: function (h) {
      const ratio = window.devicePixelRatio || 1, w = canvas.clientWidth;
      canvas.style.height = (h || height) + 'px';
      canvas.width = Math.round(w * ratio);
      canvas.height = Math.round((h || height) * ratio);
      ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
      ctx.clearRect(0, 0, w, h || height);
      return w;
    },
    point: function (ev) {
      const r = canvas.getBoundingClientRect();
      return [ev.clientX - r.left, ev.clientY - r.top];
    },
  };
}

function mdLegend(parent, cats) {
  const legend = mdEl(parent, 'span', 'md-legend');
  cats.forEach(function (c, i) {
    const s = mdEl(legend, 'span');
    mdEl(s, 'i').style.background = MD_COLORS[i % MD_COLORS.length];
    s.appendChild(document.createTextNode(c));
  });
}

/* A flame graph (an icicle: the root on top) of F = {cats, strs, nonframe, nodes}: one
 * node [parent, bytes, self bytes, allocations, category, name, file, line]
 * per frame, parents first, node 0 the root. Click zooms, hover tells,
 * search measures. Returns handles for the page's tests. */
function mdFlame(root, F) {
  const N = F.nodes, n = N.length, ROW = 18;
  // a frame's strings are F.strs[k]; the labels of other nodes (the root, ...)
  // follow them: name -2 - kind
  const name = function (i) { const k = N[i][5]; return F.strs[k >= 0 ? k : F.nonframe - 2 - k]; };
  const where = function (i) { return N[i][6] < 0 ? '' : F.strs[N[i][6]] + ':' + N[i][7]; };
  const bar = mdEl(root, 'div', 'md-bar');
  const input = mdEl(bar, 'input', 'md-search');
  input.placeholder = 'search functions and files (regex)';
  const found = mdEl(bar, 'span', 'md-found');
  const reset = mdEl(bar, 'button', null, 'reset zoom');
  mdLegend(bar, F.cats);
  const cv = mdCanvas(root, ROW), tip = mdTip(root);
  // children, the most bytes first; x and width as fractions of the root
  const kids = [], depth = new Int32Array(n), x = new Float64Array(n);
  const tin = new Int32Array(n), tout = new Int32Array(n);
  for (let i = 0; i < n; i++) kids.push([]);
  for (let i = 1; i < n; i++) kids[N[i][0]].push(i);
  for (let i = 0; i < n; i++) kids[i].sort(function (a, b) { return N[b][1] - N[a][1] || a - b; });
  const total = N[0][1] || 1;
  let maxDepth = 0, clock = 0;
  const stack = [[0, 0]];
  while (stack.length) {  // preorder, without recursion: stacks run hundreds deep
    const top = stack[stack.length - 1], i = top[0];
    if (top[1] === 0) {
      tin[i] = clock++;
      let at = x[i];
      for (const k of kids[i]) { x[k] = at; at += N[k][1] / total; depth[k] = depth[i] + 1; }
      if (depth[i] > maxDepth) maxDepth = depth[i];
    }
    if (top[1] < kids[i].length) stack.push([kids[i][top[1]++], 0]);
    else { tout[i] = clock; stack.pop(); }
  }
  const inside = function (i, f) { return tin[f] <= tin[i] && tin[i] < tout[f]; };
  let focus = 0, match = null, boxes = [];
  function draw() {
    const ctx = cv.ctx, W = cv.fit((maxDepth + 1) * ROW);
    ctx.font = '12px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    const x0 = x[focus], w0 = (N[focus][1] / total) || 1;
    boxes = [];
    for (let i = 0; i < n; i++) {
      let px, pw;
      if (inside(i, focus)) { px = (x[i] - x0) / w0 * W; pw = N[i][1] / total / w0 * W; }
      else if (inside(focus, i)) { px = 0; pw = W; }  // an ancestor of the zoomed frame
      else continue;
      if (pw < 0.5) continue;
      const py = depth[i] * ROW;
      ctx.fillStyle = match && match[i] ? '#e040fb' : MD_COLORS[N[i][4] % MD_COLORS.length];
      ctx.globalAlpha = inside(i, focus) ? 1 : 0.55;
      ctx.fillRect(px, py, Math.max(pw - 1, 0.5), ROW - 1);
      ctx.globalAlpha = 1;
      boxes.push([i, px, py, pw]);
      if (pw > 36) {
        let t = name(i) + ' ' + mdMib(N[i][1]);
        const room = pw - 6;
        if (ctx.measureText(t).width > room) {
          t = name(i);
          while (t.length > 1 && ctx.measureText(t + '..').width > room) t = t.slice(0, -1);
          if (t !== name(i)) t += '..';
        }
        ctx.fillStyle = '#111';
        ctx.fillText(t, px + 3, py + ROW / 2);
      }
    }
  }
  function at(ev) {
    const p = cv.point(ev);
    for (const b of boxes)
      if (p[1] >= b[2] && p[1] < b[2] + ROW && p[0] >= b[1] && p[0] < b[1] + b[3]) return b[0];
    return -1;
  }
  cv.canvas.addEventListener('mousemove', function (ev) {
    const i = at(ev);
    if (i < 0) { tip.hide(); return; }
    const d = N[i];
    tip.show(ev, name(i) + (where(i) ? '\n' + where(i) : '') + '\n' + mdMib(d[1]) + ' live, ' +
      (100 * d[1] / total).toFixed(1) + '% of all; ' + mdMib(d[2]) + ' allocated right here\n' +
      d[3] + ' allocation' + (d[3] === 1 ? '' : 's') + ', mostly ' + F.cats[d[4]]);
  });
  cv.canvas.addEventListener('mouseleave', tip.hide);
  cv.canvas.addEventListener('click', function (ev) {
    const i = at(ev);
    if (i >= 0) { focus = i === focus ? Math.max(N[i][0], 0) : i; draw(); }
  });
  reset.addEventListener('click', function () { focus = 0; draw(); });
  input.addEventListener('input', function () {
    let re = null;
    try { re = input.value ? new RegExp(input.value, 'i') : null; } catch (e) { re = null; }
    if (!re) { match = null; found.textContent = ''; draw(); return; }
    match = new Uint8Array(n);
    let bytes = 0;
    for (let i = 1; i < n; i++) {
      if (!re.test(name(i) + ' ' + where(i))) continue;
      match[i] = 1;
      let p = N[i][0], counted = false;  // under a matching frame: counted there
      while (p > 0 && !counted) { counted = match[p] === 1; p = N[p][0]; }
      if (!counted) bytes += N[i][1];
    }
    found.textContent = 'matched ' + mdMib(bytes) + ' (' + (100 * bytes / total).toFixed(1) + '%)';
    draw();
  });
  window.addEventListener('resize', draw);
  draw();
  return { canvas: cv.canvas, search: input, found: found, reset: reset, draw: draw, data: F,
           boxes: function () { return boxes; } };
}

/* A timeline of T = {unit, xs, amin, amax, rmax, used, steps, peak, names}:
 * per column its x (seconds, or a sample's or event's number), allocated
 * at least/at most and reserved at most in it (MiB), the process's use of
 * the GPU where known; steps [start, end, number, after forward, after
 * backward, after the optimizer] in x; peak [x, MiB]. */
function mdTimeline(root, T) {
  const H = 220, L = 56, B = 22, n = T.xs.length;
  const cv = mdCanvas(root, H), tip = mdTip(root);
  const x0 = n ? T.xs[0] : 0, x1 = n ? Math.max(T.xs[n - 1], x0 + 1e-9) : 1;
  let ymax = 1;
  for (let i = 0; i < n; i++) {
    ymax = Math.max(ymax, T.amax[i], T.rmax[i], T.used ? T.used[i] : 0, T.drv ? T.drv[i] : 0);
  }
  ymax *= 1.08;
  let W = 0;
  const px = function (v) { return L + (v - x0) / (x1 - x0) * (W - L - 8); };
  const py = function (v) { return 6 + (1 - v / ymax) * (H - B - 6); };
  function line(ctx, ys, color, width) {
    ctx.strokeStyle = color; ctx.lineWidth = width; ctx.beginPath();
    for (let i = 0; i < n; i++) {
      if (i) ctx.lineTo(px(T.xs[i]), py(ys[i])); else ctx.moveTo(px(T.xs[i]), py(ys[i]));
    }
    ctx.stroke();
  }
  function draw() {
    const ctx = cv.ctx;
    W = cv.fit(H);
    ctx.font = '11px system-ui, sans-serif';
    (T.steps || []).forEach(function (s, k) {  // a band per step, a line per phase end
      ctx.fillStyle = k % 2 ? '#f4f4f4' : '#e9eef5';
      ctx.fillRect(px(s[0]), 6, Math.max(px(s[1]) - px(s[0]), 1), H - B - 6);
      ctx.strokeStyle = '#bbb'; ctx.lineWidth = 1;
      for (let j = 3; j < 6; j++) {
        if (s[j] === null) continue;
        ctx.beginPath(); ctx.moveTo(px(s[j]), 6); ctx.lineTo(px(s[j]), H - B); ctx.stroke();
      }
    });
    ctx.fillStyle = 'rgba(78,121,167,0.25)';  // allocated: the range within each column
    ctx.beginPath();
    for (let i = 0; i < n; i++) ctx.lineTo(px(T.xs[i]), py(T.amax[i]));
    for (let i = n - 1; i >= 0; i--) ctx.lineTo(px(T.xs[i]), py(T.amin[i]));
    ctx.fill();
    line(ctx, T.amax, '#4e79a7', 1.5);
    line(ctx, T.rmax, '#f28e2b', 1.5);
    if (T.used) line(ctx, T.used, '#777', 1);
    if (T.drv) line(ctx, T.drv, '#9467bd', 1.5);  // through the CUDA driver, all libraries
    if (T.peak) {
      ctx.fillStyle = '#d62728';
      ctx.beginPath(); ctx.arc(px(T.peak[0]), py(T.peak[1]), 4, 0, 7); ctx.fill();
    }
    ctx.fillStyle = '#333'; ctx.strokeStyle = '#333'; ctx.lineWidth = 1;
    for (let k = 0; k <= 4; k++) {  // MiB on the left, x below
      const v = ymax / 1.08 * k / 4;
      ctx.fillText(v.toFixed(0), 2, py(v) + 4);
      const xv = x0 + (x1 - x0) * k / 4;
      ctx.fillText(T.unit === 's' ? '+' + xv.toFixed(2) + ' s' : xv.toFixed(0),
                   Math.min(px(xv), W - 60), H - 6);
    }
    ctx.beginPath(); ctx.moveTo(L, H - B); ctx.lineTo(W - 8, H - B); ctx.stroke();
  }
  function column(ev) {
    const p = cv.point(ev);
    let best = -1, dist = Infinity;
    for (let i = 0; i < n; i++) {
      const d = Math.abs(px(T.xs[i]) - p[0]);
      if (d < dist) { dist = d; best = i; }
    }
    return best;
  }
  function stepAt(v) {
    for (const s of T.steps || []) if (v >= s[0] && v <= s[1]) return s;
    return null;
  }
  function describe(i) {
    const v = T.xs[i], s = stepAt(v);
    let t = (T.unit === 's' ? '+' + v.toFixed(3) + ' s' : T.unit + ' ' + v) +
      (T.names ? '  ' + T.names[i] : '') + '\nallocated ' +
      (T.amin[i] === T.amax[i] ? T.amax[i].toFixed(1) : T.amin[i].toFixed(1) + ' to ' + T.amax[i].toFixed(1)) +
      ' MiB, reserved ' + T.rmax[i].toFixed(1) + ' MiB';
    if (T.used) t += ', process on the GPU ' + T.used[i].toFixed(1) + ' MiB';
    if (T.drv) t += ', through the driver ' + T.drv[i].toFixed(1) + ' MiB';
    if (s) {
      const phase = v <= s[3] ? 'forward' : v <= s[4] ? 'backward' : v <= s[5] ? 'optimizer step' : 'zero_grad';
      t += '\nstep ' + s[2] + ', ' + (s[3] === null ? 'in the step' : phase);
    }
    return t;
  }
  cv.canvas.addEventListener('mousemove', function (ev) {
    const i = column(ev);
    if (i < 0) tip.hide(); else tip.show(ev, describe(i));
  });
  cv.canvas.addEventListener('mouseleave', tip.hide);
  window.addEventListener('resize', draw);
  draw();
  return { canvas: cv.canvas, draw: draw, describe: describe, column: column, data: T };
}
