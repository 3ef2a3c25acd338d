/* charts.js - the run charts of chaosloco, drawn with uPlot (embedded from
 * npm at build time; global `uPlot`).
 *
 *   const run = ChaoslocoCharts.renderRun(element, blob);
 *   run.update(blob);   // redraw from a newer blob
 *
 * blob is a dashboard snapshot (GET /api/state) or anything shaped like it:
 *   { t0_mono_ms, now_mono_ms?,
 *     series: { loss:   [[t_mono_ms, loss|null, merges, tokens, bpb?], ...],
 *               merges: [[t_mono_ms, fragment, version, participants], ...],
 *               rates:  [[t_mono_ms, merges/s, bytes_in/s, bytes_out/s], ...] },
 *     faults: [{agent, id, type, start_mono_ms, end_mono_ms|null, state}, ...] }
 * The x axis is seconds since t0_mono_ms. Every fault has its own colour,
 * kept for the page's life, and a legend above the charts names it: its
 * window is a light tint over the whole plot plus a bar in its own lane
 * along the top (overlapping faults get separate lanes), so a fault that
 * lasts the whole run does not drown the others. The loss is drawn in bits
 * per byte when the points carry it (the model is byte-level), else in
 * nats; merges are ticks under the loss curve. merges/s is counted from
 * the merge events in bins wide enough to hold several merges each, and
 * bytes/s is averaged over the same bins, so neither zig-zags between 0, 1
 * and 2. The harness's report.html renders its run the same way. No
 * network, no globals besides ChaoslocoCharts.
 */
(function (global) {
  'use strict';

  /* One colour per fault, in the order the faults appear (then again). */
  const PALETTE = ['#d62728', '#ff7f0e', '#9467bd', '#2ca02c', '#8c564b', '#e377c2', '#17becf', '#bcbd22'];
  const TINT_ALPHA = 0.10; /* the window over the whole plot */
  const LANE_PX = 5;       /* the window's bar along the top, per lane */
  const BINS_MAX = 150;    /* rate bins across the x range, at most */
  const MERGES_PER_BIN = 6; /* merges a rate bin holds on average, at least */

  function toSec(t, t0) { return (t - t0) / 1000; }

  function hexRgba(hex, a) {
    const n = parseInt(hex.slice(1), 16);
    return `rgba(${(n >> 16) & 255}, ${(n >> 8) & 255}, ${n & 255}, ${a})`;
  }

  function faultKey(f) { return `${f.agent || '?'}/${f.id}`; }

  /* Fault windows in chart seconds: [{x0, x1, label, active, key}] */
  function faultWindows(blob) {
    const t0 = blob.t0_mono_ms || 0;
    const now = blob.now_mono_ms || null;
    const out = [];
    for (const f of blob.faults || []) {
      /* a fault that failed to apply never took effect: nothing to shade */
      if (typeof f.start_mono_ms !== 'number' || f.state === 'failed') continue;
      let end = f.end_mono_ms;
      const active = end === null || end === undefined;
      if (active) end = now !== null ? now : f.start_mono_ms + (f.duration_ms || 0);
      out.push({ x0: toSec(f.start_mono_ms, t0), x1: toSec(Math.max(end, f.start_mono_ms), t0),
                 label: `${f.type || 'fault'}@${f.agent || '?'}`, active, key: faultKey(f), type: f.type || 'fault',
                 agent: f.agent || '?' });
    }
    out.sort((a, b) => a.x0 - b.x0 || (a.key < b.key ? -1 : 1));
    return out;
  }

  /* Colours (kept in state.colours across updates) and lanes: each window
   * takes the first lane free at its start. */
  function layoutWindows(state, windows) {
    const laneEnd = [];
    for (const w of windows) {
      if (!state.colours.has(w.key)) state.colours.set(w.key, PALETTE[state.colours.size % PALETTE.length]);
      w.colour = state.colours.get(w.key);
      let lane = laneEnd.findIndex(e => e <= w.x0);
      if (lane < 0) { lane = laneEnd.length; laneEnd.push(0); }
      laneEnd[lane] = w.x1;
      w.lane = lane;
    }
    return windows;
  }

  /* uPlot plugin: shade fault windows under the series (tint, lane bar,
   * start edge); count what it drew into the root element's
   * data-fault-windows attribute. */
  function shadePlugin(state) {
    return {
      hooks: {
        drawAxes: [u => {
          const ctx = u.ctx;
          const { left, top, width, height } = u.bbox;
          const pr = global.devicePixelRatio || 1;
          let drawn = 0;
          ctx.save();
          for (const w of state.windows) {
            let a = u.valToPos(w.x0, 'x', true), b = u.valToPos(w.x1, 'x', true);
            if (!isFinite(a) || !isFinite(b)) continue;
            a = Math.max(a, left); b = Math.min(b, left + width);
            if (b < a) continue;
            if (b - a < 2) b = a + 2; /* a short fault stays visible */
            ctx.fillStyle = hexRgba(w.colour, TINT_ALPHA);
            ctx.fillRect(a, top, b - a, height);
            ctx.fillStyle = hexRgba(w.colour, 0.9);
            ctx.fillRect(a, top + w.lane * LANE_PX * pr, b - a, (LANE_PX - 1) * pr);
            ctx.fillStyle = hexRgba(w.colour, 0.6);
            ctx.fillRect(a, top, 1, height);
            drawn++;
          }
          ctx.restore();
          u.root.dataset.faultWindows = String(drawn);
        }],
      },
    };
  }

  /* uPlot plugin: merge markers as ticks along the bottom of the plot. */
  function mergePlugin(state) {
    return {
      hooks: {
        draw: [u => {
          const ctx = u.ctx;
          const { left, top, width, height } = u.bbox;
          const pr = global.devicePixelRatio || 1;
          ctx.save();
          ctx.fillStyle = 'rgba(40, 110, 200, 0.7)';
          let n = 0;
          for (const x of state.mergeXs) {
            const p = u.valToPos(x, 'x', true);
            if (!isFinite(p) || p < left || p > left + width) continue;
            ctx.fillRect(p, top + height - 6 * pr, Math.max(1, pr), 6 * pr);
            n++;
          }
          ctx.restore();
          u.root.dataset.mergeMarkers = String(n);
        }],
      },
    };
  }

  /* The loss points in bits/byte when every finite point carries it. */
  function lossUnit(blob) {
    const pts = (blob.series && blob.series.loss) || [];
    const finite = pts.filter(p => typeof p[1] === 'number');
    return finite.length && finite.every(p => typeof p[4] === 'number') ? 'bits/byte' : 'nats';
  }

  function lossData(blob, unit) {
    const t0 = blob.t0_mono_ms || 0;
    const col = unit === 'bits/byte' ? 4 : 1;
    const xs = [], ys = [];
    for (const p of (blob.series && blob.series.loss) || []) {
      xs.push(toSec(p[0], t0));
      ys.push(typeof p[col] === 'number' ? p[col] : null);
    }
    return [xs, ys];
  }

  /* A readable bin width (s) for rates over [0, span]: several merges per
   * bin on average, at most BINS_MAX bins, a round number. */
  function binWidth(span, nmerges) {
    let w = Math.max(1, span / BINS_MAX);
    if (nmerges > 0) w = Math.max(w, MERGES_PER_BIN * span / nmerges);
    const nice = [1, 2, 5, 10, 15, 20, 30, 60, 120, 300, 600, 1200, 3600];
    return nice.find(n => n >= w) || w;
  }

  /* merges/s counted from the merge events, per bin of width w (s); the
   * last bin is divided by the part of it that has passed. */
  function mergeRate(blob, w, xmax) {
    const t0 = blob.t0_mono_ms || 0;
    const nb = Math.max(1, Math.ceil(xmax / w));
    const count = new Array(nb).fill(0);
    for (const m of (blob.series && blob.series.merges) || []) {
      const x = toSec(m[0], t0);
      if (x >= 0) count[Math.min(nb - 1, Math.floor(x / w))]++;
    }
    const xs = [], ys = [];
    for (let k = 0; k < nb; k++) {
      const len = Math.min(w, xmax - k * w);
      if (len <= 0) break;
      xs.push(k * w + len / 2);
      ys.push(count[k] / len);
    }
    return [xs, ys];
  }

  /* The blob's rate columns averaged over bins of width w, weighed by the
   * time each sample covers. */
  function binnedRates(blob, cols, w, xmax) {
    const t0 = blob.t0_mono_ms || 0;
    const nb = Math.max(1, Math.ceil(xmax / w));
    const sum = cols.map(() => new Array(nb).fill(0)), dur = cols.map(() => new Array(nb).fill(0));
    let prev = 0;
    for (const p of (blob.series && blob.series.rates) || []) {
      const x = toSec(p[0], t0), dt = Math.max(0, x - prev);
      const k = Math.min(nb - 1, Math.max(0, Math.floor((x - dt / 2) / w)));
      cols.forEach((c, i) => { if (typeof p[c] === 'number') { sum[i][k] += p[c] * dt; dur[i][k] += dt; } });
      prev = x;
    }
    const out = [[]].concat(cols.map(() => []));
    for (let k = 0; k < nb; k++) {
      const len = Math.min(w, xmax - k * w);
      if (len <= 0) break;
      out[0].push(k * w + len / 2);
      cols.forEach((c, i) => out[i + 1].push(dur[i][k] > 0 ? sum[i][k] / dur[i][k] : null));
    }
    return out;
  }

  function fmtBytes(v) {
    if (v === null || v === undefined) return '';
    const units = ['B', 'kB', 'MB', 'GB'];
    let i = 0;
    while (Math.abs(v) >= 1000 && i < units.length - 1) { v /= 1000; i++; }
    return `${v.toFixed(v < 10 && i ? 1 : 0)} ${units[i]}`;
  }

  /* A shared x range so that the three charts line up: 0 .. latest time. */
  function xMax(blob, windows) {
    const t0 = blob.t0_mono_ms || 0;
    let max = 1;
    for (const k of ['loss', 'merges', 'rates']) {
      const s = (blob.series && blob.series[k]) || [];
      if (s.length) max = Math.max(max, toSec(s[s.length - 1][0], t0));
    }
    for (const w of windows) max = Math.max(max, w.x1);
    if (blob.now_mono_ms && blob.t0_mono_ms) max = Math.max(max, toSec(blob.now_mono_ms, blob.t0_mono_ms));
    return max;
  }

  function fmtS(x) { return x < 100 ? x.toFixed(1) : x.toFixed(0); }

  /* The legend: one entry per fault window, in its colour. */
  function renderLegend(box, windows) {
    box.textContent = '';
    box.dataset.faults = String(windows.length);
    box.style.cssText = 'display:flex;flex-wrap:wrap;gap:4px 14px;font-size:12px;margin:2px 4px 6px';
    if (!windows.length) {
      const none = document.createElement('span');
      none.textContent = 'no fault windows';
      none.style.color = '#6b7385';
      box.appendChild(none);
      return;
    }
    for (const w of windows) {
      const key = document.createElement('span');
      key.className = 'cl-key';
      key.dataset.fault = w.key;
      key.dataset.colour = w.colour;
      key.style.cssText = 'display:inline-flex;align-items:center;gap:5px;white-space:nowrap';
      const sw = document.createElement('span');
      sw.className = 'cl-swatch';
      sw.style.cssText = `display:inline-block;width:14px;height:10px;border-radius:2px;background:${w.colour}`;
      key.appendChild(sw);
      key.appendChild(document.createTextNode(
        `${w.type} @ ${w.agent}  ${fmtS(w.x0)}–${w.active ? 'now' : fmtS(w.x1) + ' s'}`));
      box.appendChild(key);
    }
  }

  function makeChart(parent, title, series, data, state, withMerges, axisFmt) {
    const box = document.createElement('div');
    box.className = 'cl-chart';
    parent.appendChild(box);
    const width = Math.max(300, (parent.clientWidth || 640) - 8);
    const plugins = [shadePlugin(state)];
    if (withMerges) plugins.push(mergePlugin(state));
    const opts = {
      title, width, height: 200, plugins,
      scales: { x: { time: false, range: () => state.xrange } },
      /* a fixed y-axis width keeps the three charts' x axes aligned */
      axes: [{ label: 'seconds since start' },
             axisFmt ? { values: (u, v) => v.map(axisFmt), size: 64 } : { size: 64 }],
      series: [{ label: 't (s)' }].concat(series),
      legend: { live: true },
      cursor: { drag: { x: false, y: false } },
    };
    return new global.uPlot(opts, data, box);
  }

  /* Everything the charts draw, from a blob. */
  function derive(state, blob) {
    const t0 = blob.t0_mono_ms || 0;
    state.windows = layoutWindows(state, faultWindows(blob));
    state.mergeXs = ((blob.series && blob.series.merges) || []).map(m => toSec(m[0], t0));
    const xmax = xMax(blob, state.windows);
    state.xrange = [0, xmax];
    state.unit = lossUnit(blob);
    state.bin_s = binWidth(xmax, state.mergeXs.length);
    return { ld: lossData(blob, state.unit), md: mergeRate(blob, state.bin_s, xmax),
             bd: binnedRates(blob, [2, 3], state.bin_s, xmax) };
  }

  function lossTitle(state) {
    return `global eval loss (${state.unit}) — shaded: fault windows (legend above), blue ticks: merges`;
  }

  /* Render the legend and the three charts into el (emptied first). */
  function renderRun(el, blob) {
    el.textContent = '';
    const state = { windows: [], mergeXs: [], xrange: [0, 1], colours: new Map(), unit: 'nats', bin_s: 1 };
    const legend = document.createElement('div');
    legend.className = 'cl-legend';
    el.appendChild(legend);
    let d = derive(state, blob);
    renderLegend(legend, state.windows);
    const charts = {
      loss: makeChart(el, lossTitle(state),
                      [{ label: `eval loss (${state.unit})`, stroke: '#1b6ac9', width: 2, points: { show: true, size: 4 } }],
                      d.ld, state, true),
      merges: makeChart(el, `merges/s (bins of ${state.bin_s} s)`,
                        [{ label: 'merges/s', stroke: '#2a9d4b', width: 1.5 }], d.md, state, false),
      bytes: makeChart(el, `syncer bytes/s (bins of ${state.bin_s} s)`,
                       [{ label: 'in', stroke: '#8a4fc9', width: 1.5, value: (u, v) => fmtBytes(v) + '/s' },
                        { label: 'out', stroke: '#d08a1c', width: 1.5, value: (u, v) => fmtBytes(v) + '/s' }],
                       d.bd, state, false, fmtBytes),
    };
    const mark = () => {
      charts.loss.root.dataset.points = String(d.ld[0].length);
      charts.loss.root.dataset.unit = state.unit;
      charts.merges.root.dataset.binS = String(state.bin_s);
    };
    mark();
    const api = {
      charts,
      state,
      update(b) {
        const unit = state.unit, bin = state.bin_s;
        d = derive(state, b);
        renderLegend(legend, state.windows);
        charts.loss.setData(d.ld);
        charts.merges.setData(d.md);
        charts.bytes.setData(d.bd);
        if (unit !== state.unit) {
          charts.loss.root.querySelector('.u-title').textContent = lossTitle(state);
          charts.loss.setSeries(1, {}); /* redraw; the series label is in the live legend */
        }
        if (bin !== state.bin_s) {
          charts.merges.root.querySelector('.u-title').textContent = `merges/s (bins of ${state.bin_s} s)`;
          charts.bytes.root.querySelector('.u-title').textContent = `syncer bytes/s (bins of ${state.bin_s} s)`;
        }
        mark();
      },
      resize() {
        const w = Math.max(300, (el.clientWidth || 640) - 8);
        for (const c of Object.values(charts)) c.setSize({ width: w, height: 200 });
      },
    };
    return api;
  }

  global.ChaoslocoCharts = { renderRun, faultWindows, fmtBytes, binWidth, PALETTE };
})(typeof window !== 'undefined' ? window : globalThis);
