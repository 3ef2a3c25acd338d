/* charts.js - the run charts of chaosloco, drawn with uPlot (embedded from
 * npm at build time; global `uPlot`).
 *
 *   const run = ChaoslocoCharts.renderRun(element, blob);
 *   run.update(blob);   // redraw from a newer blob
 *
 * blob is a dashboard snapshot (GET /api/state) or anything shaped like it:
 *   { t0_mono_ms, now_mono_ms?,
 *     series: { loss:   [[t_mono_ms, loss|null, merges, tokens], ...],
 *               merges: [[t_mono_ms, fragment, version, participants], ...],
 *               rates:  [[t_mono_ms, merges/s, bytes_in/s, bytes_out/s], ...] },
 *     faults: [{agent, id, type, start_mono_ms, end_mono_ms|null, state}, ...] }
 * The x axis is seconds since t0_mono_ms. Fault windows are shaded on every
 * chart (an active window runs to now_mono_ms); merges are ticks under the
 * loss curve. The harness's report.html renders its journal the same way.
 * No network, no globals besides ChaoslocoCharts.
 */
(function (global) {
  'use strict';

  const FAULT_FILL = 'rgba(220, 60, 60, 0.16)';
  const FAULT_EDGE = 'rgba(200, 40, 40, 0.55)';

  function toSec(t, t0) { return (t - t0) / 1000; }

  /* Fault windows in chart seconds: [{x0, x1, label, active}] */
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
                 label: `${f.type || 'fault'}@${f.agent || '?'}`, active });
    }
    return out;
  }

  /* uPlot plugin: shade fault windows under the series; count what it drew
   * into the root element's data-fault-windows attribute. */
  function shadePlugin(state) {
    return {
      hooks: {
        drawAxes: [u => {
          const ctx = u.ctx;
          const { left, top, width, height } = u.bbox;
          let drawn = 0;
          ctx.save();
          for (const w of state.windows) {
            let a = u.valToPos(w.x0, 'x', true), b = u.valToPos(w.x1, 'x', true);
            if (!isFinite(a) || !isFinite(b)) continue;
            a = Math.max(a, left); b = Math.min(b, left + width);
            if (b < a) continue;
            if (b - a < 2) b = a + 2; /* a short fault stays visible */
            ctx.fillStyle = FAULT_FILL;
            ctx.fillRect(a, top, b - a, height);
            ctx.fillStyle = FAULT_EDGE;
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

  function lossData(blob) {
    const t0 = blob.t0_mono_ms || 0;
    const xs = [], ys = [];
    for (const p of (blob.series && blob.series.loss) || []) {
      xs.push(toSec(p[0], t0));
      ys.push(typeof p[1] === 'number' ? p[1] : null);
    }
    return [xs, ys];
  }

  function rateData(blob, cols) {
    const t0 = blob.t0_mono_ms || 0;
    const out = [[]].concat(cols.map(() => []));
    for (const p of (blob.series && blob.series.rates) || []) {
      out[0].push(toSec(p[0], t0));
      cols.forEach((c, i) => out[i + 1].push(typeof p[c] === 'number' ? p[c] : null));
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
  function xRange(blob, datas) {
    let max = 1;
    for (const d of datas) if (d[0].length) max = Math.max(max, d[0][d[0].length - 1]);
    for (const w of faultWindows(blob)) max = Math.max(max, w.x1);
    if (blob.now_mono_ms && blob.t0_mono_ms) max = Math.max(max, toSec(blob.now_mono_ms, blob.t0_mono_ms));
    return [0, max];
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

  /* Render the three charts into el (emptied first). */
  function renderRun(el, blob) {
    el.textContent = '';
    const state = { windows: faultWindows(blob), mergeXs: [], xrange: [0, 1] };
    const t0 = blob.t0_mono_ms || 0;
    state.mergeXs = ((blob.series && blob.series.merges) || []).map(m => toSec(m[0], t0));
    let ld = lossData(blob), md = rateData(blob, [1]), bd = rateData(blob, [2, 3]);
    state.xrange = xRange(blob, [ld, md, bd]);
    const charts = {
      loss: makeChart(el, 'global eval loss (nats) — red: fault windows, blue ticks: merges',
                      [{ label: 'eval loss', stroke: '#1b6ac9', width: 2, points: { show: true, size: 4 } }],
                      ld, state, true),
      merges: makeChart(el, 'merges/s', [{ label: 'merges/s', stroke: '#2a9d4b', width: 1.5 }], md, state, false),
      bytes: makeChart(el, 'syncer bytes/s',
                       [{ label: 'in', stroke: '#8a4fc9', width: 1.5, value: (u, v) => fmtBytes(v) + '/s' },
                        { label: 'out', stroke: '#d08a1c', width: 1.5, value: (u, v) => fmtBytes(v) + '/s' }],
                       bd, state, false, fmtBytes),
    };
    charts.loss.root.dataset.points = String(ld[0].length);
    const api = {
      charts,
      update(b) {
        state.windows = faultWindows(b);
        state.mergeXs = ((b.series && b.series.merges) || []).map(m => toSec(m[0], b.t0_mono_ms || 0));
        ld = lossData(b); md = rateData(b, [1]); bd = rateData(b, [2, 3]);
        state.xrange = xRange(b, [ld, md, bd]);
        charts.loss.setData(ld);
        charts.merges.setData(md);
        charts.bytes.setData(bd);
        charts.loss.root.dataset.points = String(ld[0].length);
      },
      resize() {
        const w = Math.max(300, (el.clientWidth || 640) - 8);
        for (const c of Object.values(charts)) c.setSize({ width: w, height: 200 });
      },
    };
    return api;
  }

  global.ChaoslocoCharts = { renderRun, faultWindows, fmtBytes };
})(typeof window !== 'undefined' ? window : globalThis);
