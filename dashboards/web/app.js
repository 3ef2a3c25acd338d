/* app.js - the dashboard page: live state from /api/events (server-sent
 * events: `snapshot`, then `update` and `event`), cards per learner unit,
 * charts (charts.js), hypotheses, event log, and the controls (inject a
 * fault, heal one, HALT ALL) that go through the dashboard to the agents
 * with the bearer token. The token is asked once and kept in
 * sessionStorage only. Every text from the server goes into the DOM as
 * text (never innerHTML).
 */
(function () {
  'use strict';

  /* Fault kinds and their params: GET /api/fault-kinds, which serves the
   * agent's injector table (each kind's params with type, range, unit,
   * default, help, and its traits), so the form never drifts from what the
   * agent checks. Filled by loadFaultKinds(). */
  let FAULT_KINDS = [];

  const TOKEN_KEY = 'chaosloco.token';
  const SERIES_MAX = 4000;
  const EVENTS_MAX = 300;
  let state = null;
  let run = null;
  let es = null;

  const $ = id => document.getElementById(id);

  /* h('div', {class: 'x', onclick: fn}, child, 'text', ...) */
  function h(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else if (k === 'dataset') Object.assign(e.dataset, v);
      else e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const k of kids.flat()) if (k !== null && k !== undefined && k !== false)
      e.appendChild(typeof k === 'string' || typeof k === 'number' ? document.createTextNode(String(k)) : k);
    return e;
  }

  function fmtNum(v, digits) {
    if (typeof v !== 'number' || !isFinite(v)) return '–';
    return digits === undefined ? v.toLocaleString('en-US') : v.toFixed(digits);
  }
  function fmtAge(ms) {
    if (typeof ms !== 'number') return '–';
    return ms < 1000 ? `${ms} ms` : ms < 120000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms / 60000)} min`;
  }
  function notice(msg, bad) {
    const n = $('notice');
    n.textContent = msg;
    n.className = 'notice' + (bad ? ' bad' : '');
    n.hidden = !msg;
  }

  /* ---- token and controls ---- */

  function token(force) {
    let t = sessionStorage.getItem(TOKEN_KEY);
    if (!t || force) {
      t = window.prompt('Bearer token of the agents (kept in this tab\'s sessionStorage only):', '');
      if (!t) return null;
      t = t.trim();
      sessionStorage.setItem(TOKEN_KEY, t);
    }
    return t;
  }

  /* A control call; asks for the token (again after a 401). */
  async function control(method, path, body) {
    for (let attempt = 0; attempt < 2; attempt++) {
      const t = token(attempt > 0);
      if (!t) throw new Error('no token given');
      const r = await fetch(path, {
        method, headers: Object.assign({ Authorization: `Bearer ${t}` }, body ? { 'Content-Type': 'application/json' } : {}),
        body: body ? JSON.stringify(body) : undefined,
      });
      let data = null;
      try { data = await r.json(); } catch (e) { data = null; }
      if (r.status === 401) { sessionStorage.removeItem(TOKEN_KEY); continue; }
      if (!r.ok) {
        const msg = (data && (data.error || (data.results && JSON.stringify(data.results)))) || r.statusText;
        throw new Error(`${r.status}: ${msg}`);
      }
      return data;
    }
    throw new Error('401: the token was refused');
  }

  async function injectFault(agent, fault) {
    try {
      const rec = await control('POST', '/api/faults', { agent, fault });
      notice(`injected ${fault.type} on ${agent}${rec && rec.id !== undefined ? ` (fault ${rec.id})` : ''}`);
      return rec;
    } catch (e) {
      notice(`inject ${fault.type} on ${agent} failed: ${e.message}`, true);
      return null;
    }
  }

  async function healFault(agent, id) {
    try {
      await control('DELETE', `/api/faults/${encodeURIComponent(agent)}/${encodeURIComponent(id)}`);
      notice(`healed fault ${id} on ${agent}`);
    } catch (e) {
      notice(`heal ${id} on ${agent} failed: ${e.message}`, true);
    }
  }

  async function haltAll() {
    if (!window.confirm('HALT ALL: revert every fault on every agent and refuse new ones until resume?')) return;
    try {
      const r = await control('POST', '/api/halt');
      notice(`HALT ALL: ${r.results.map(x => `${x.agent} ${x.ok ? 'ok' : 'FAILED ' + (x.error || x.status)}`).join(', ')}`, !r.ok);
    } catch (e) {
      notice(`HALT ALL failed: ${e.message}`, true);
    }
  }

  async function resumeAll() {
    try {
      const r = await control('POST', '/api/resume');
      notice(`resume: ${r.results.map(x => `${x.agent} ${x.ok ? 'ok' : 'FAILED'}`).join(', ')}`, !r.ok);
    } catch (e) {
      notice(`resume failed: ${e.message}`, true);
    }
  }

  /* ---- the fault form ---- */

  /* A served param's form kind: int|num|str|enum|list (data-kind). */
  function formKind(p) {
    if (p.type === 'array') return 'list';
    if (p.enum) return 'enum';
    return p.type === 'integer' ? 'int' : p.type === 'number' ? 'num' : 'str';
  }

  function paramHint(p) {
    const bits = [];
    if (p.help) bits.push(p.help);
    if (p.unit) bits.push(p.unit);
    if (p.required) bits.push('required');
    else if (p.default !== null && p.default !== undefined) bits.push(`default ${Array.isArray(p.default) ? p.default.join(',') : p.default}`);
    return bits.join('; ');
  }

  function buildParamFields() {
    const kind = FAULT_KINDS.find(k => k.type === $('ff-type').value);
    const box = $('ff-params');
    box.textContent = '';
    $('ff-summary').textContent = kind ? kind.summary : '';
    const toxic = !!(kind && kind.traits.includes('toxicity'));
    $('ff-toxicity-row').hidden = !toxic;
    for (const p of (kind ? kind.params : [])) {
      if (toxic && p.name === 'toxicity') continue; /* the toxicity row sends it */
      const k = formKind(p);
      let input;
      if (k === 'enum') {
        input = h('select', { name: p.name, 'data-kind': k }, h('option', { value: '' }, '(default)'),
                  p.enum.map(v => h('option', { value: v }, v)));
      } else {
        input = h('input', { name: p.name, 'data-kind': k, type: k === 'int' || k === 'num' ? 'number' : 'text',
                             step: k === 'num' ? 'any' : k === 'int' ? '1' : null,
                             min: p.min, max: p.max,
                             placeholder: k === 'list' ? `${p.enum.join(',')} (${paramHint(p)})` : paramHint(p) });
      }
      box.appendChild(h('label', { title: paramHint(p) }, `${p.name} `, input));
    }
  }

  function readForm() {
    const type = $('ff-type').value;
    const params = {};
    for (const el of $('ff-params').querySelectorAll('[name]')) {
      const v = el.value.trim();
      if (v === '') continue;
      const k = el.dataset.kind;
      if (k === 'int') params[el.name] = parseInt(v, 10);
      else if (k === 'num') params[el.name] = parseFloat(v);
      else if (k === 'list') params[el.name] = v.split(',').map(s => s.trim()).filter(Boolean);
      else params[el.name] = v;
    }
    const extra = $('ff-extra').value.trim();
    if (extra) {
      const x = JSON.parse(extra);
      if (typeof x !== 'object' || Array.isArray(x) || x === null) throw new Error('extra params: want a JSON object');
      Object.assign(params, x);
    }
    const fault = { type, params, duration_ms: parseInt($('ff-duration').value, 10) };
    const tox = $('ff-toxicity').value.trim();
    if (tox !== '' && !$('ff-toxicity-row').hidden) fault.toxicity = parseFloat(tox);
    return fault;
  }

  async function loadFaultKinds() {
    try {
      const r = await fetch('/api/fault-kinds', { headers: { Accept: 'application/json' } });
      if (!r.ok) throw new Error(`HTTP ${r.status}`);
      FAULT_KINDS = (await r.json()).kinds || [];
    } catch (e) {
      notice(`cannot load the fault kinds: ${e.message}`, true);
      FAULT_KINDS = [];
    }
    const sel = $('ff-type');
    sel.textContent = '';
    for (const k of FAULT_KINDS) sel.appendChild(h('option', { value: k.type }, k.type));
    buildParamFields();
  }

  function setupForm() {
    $('ff-type').addEventListener('change', buildParamFields);
    loadFaultKinds();
    $('fault-form').addEventListener('submit', async ev => {
      ev.preventDefault();
      let fault;
      try { fault = readForm(); } catch (e) { $('ff-result').textContent = e.message; return; }
      const agent = $('ff-agent').value;
      if (!agent) { $('ff-result').textContent = 'no agent to send it to'; return; }
      const rec = await injectFault(agent, fault);
      $('ff-result').textContent = rec ? `sent (id ${rec.id})` : 'failed (see the notice above)';
    });
    $('halt').addEventListener('click', haltAll);
    $('resume').addEventListener('click', resumeAll);
    $('ev-filter').addEventListener('input', renderEvents);
  }

  /* ---- rendering ---- */

  function unitState(u) {
    if (u.agent && u.reachable === false) return 'unreachable';
    if (u.unit && u.unit.state) {
      /* a learner that ran to its last step is done, not down */
      const le = u.unit.last_exit;
      if (u.unit.state === 'exited' && le && le.code === 0 && !le.signal) return 'finished';
      return u.unit.state;
    }
    if (u.learner && u.learner.state) return u.learner.state;
    return 'unknown';
  }

  /* Cards are keyed and updated in place: buttons stay the same elements
   * between updates, so a click is never lost to a re-render. */
  const cards = new Map();

  function cardFor(u) {
    const key = u.agent ? `a:${u.agent}` : `l:${u.learner_id}`;
    let c = cards.get(key);
    if (c) return c;
    c = { key, faultIds: '' };
    c.badge = h('span', { class: 'badge', title: 'the process, as its agent sees it' });
    c.sync = h('span', { class: 'badge sync', title: 'the learner, as the syncer sees it' });
    c.err = h('div', { class: 'err' });
    c.dl = h('dl');
    c.faults = h('ul', { class: 'faults' });
    c.buttons = [];
    let actions = null;
    if (u.agent) {
      const agent = u.agent;
      const pause = h('button', { type: 'button', class: 'pause', onclick: () =>
        injectFault(agent, { type: 'pause', params: {}, duration_ms: 10000 }) }, 'pause 10 s');
      const kill = h('button', { type: 'button', class: 'kill', onclick: () => {
        if (window.confirm(`kill the unit of ${agent} (SIGKILL, restart after 5 s)?`))
          injectFault(agent, { type: 'kill', params: { signal: 'KILL', restart_after_ms: 5000 }, duration_ms: 5000 });
      } }, 'kill');
      c.buttons = [pause, kill];
      actions = h('div', { class: 'actions' }, pause, kill,
        h('a', { href: `/api/logs/${encodeURIComponent(agent)}?tail=200`, target: '_blank', rel: 'noopener' }, 'log tail'));
    }
    c.el = h('div', { class: 'card', dataset: { agent: u.agent || '', learner: String(u.learner_id) } },
      h('h3', {}, u.agent || `learner ${u.learner_id}`, h('span', { class: 'badges' }, c.badge, c.sync)),
      c.err, c.dl, c.faults, actions);
    cards.set(key, c);
    return c;
  }

  function renderUnits() {
    const box = $('units');
    const seen = new Set();
    const order = [];
    for (const u of state.units || []) {
      const c = cardFor(u);
      seen.add(c.key);
      order.push(c.el);
      const st = unitState(u);
      const l = u.learner || {};
      const lm = l.last_merged;
      const sy = l.sync_state || 'unknown';
      const syClass = sy.replace(/ /g, '-');
      /* a process that runs while the syncer has lost it is not healthy */
      const lost = st === 'running' && ['absent', 'left', 'stale', 'rejoining'].includes(sy);
      c.el.className = `card ${st} sync-${syClass}${lost ? ' lost' : ''}`;
      c.el.dataset.state = st;
      c.el.dataset.sync = sy;
      c.badge.className = `badge ${st}`;
      c.badge.textContent = st;
      c.sync.className = `badge sync sync-${syClass}`;
      c.sync.textContent = `syncer: ${sy}`;
      c.err.textContent = u.error || '';
      c.err.hidden = !u.error;
      c.dl.replaceChildren(
        h('dt', {}, 'learner'), h('dd', {}, u.learner_id !== undefined && u.learner_id !== null ? String(u.learner_id) : '–'),
        h('dt', {}, 'incarnation'), h('dd', {}, fmtNum(u.unit && u.unit.incarnation !== undefined ? u.unit.incarnation : l.incarnation)),
        h('dt', {}, 'step'), h('dd', {}, fmtNum(l.step)),
        h('dt', {}, 'tokens/s'), h('dd', {}, fmtNum(l.tokens_per_s, 0)),
        h('dt', {}, 'train loss'), h('dd', {}, fmtNum(l.train_loss, 3)),
        h('dt', {}, 'last merged'), h('dd', {}, lm ? `frag ${lm.fragment} v${lm.version}, ${fmtAge(lm.age_ms)} ago` : 'never'),
        h('dt', {}, 'contributions'), h('dd', {}, l.contributions ? `${fmtNum(l.contributions.accepted)} ok / ${fmtNum(l.contributions.rejected)} rejected` : '–'),
        ...(u.unit ? [h('dt', {}, 'restarts'), h('dd', {}, fmtNum(u.unit.restarts))] : []),
        ...(u.halted ? [h('dt', {}, 'agent'), h('dd', {}, 'HALTED')] : []));
      /* active faults: rebuilt when the set changes, countdown in place */
      const fl = u.faults_active || [];
      const ids = fl.map(f => String(f.id)).join(',');
      if (ids !== c.faultIds) {
        c.faultIds = ids;
        c.faults.replaceChildren(...fl.map(f => h('li', { dataset: { id: String(f.id) } }, h('span', { class: 'what' }),
          u.agent ? h('button', { type: 'button', class: 'heal', onclick: () => healFault(u.agent, String(f.id)) }, 'heal') : null)));
      }
      fl.forEach((f, i) => {
        c.faults.children[i].querySelector('.what').textContent =
          `${f.type} · ${f.time_left_ms === null || f.time_left_ms === undefined ? 'until deleted' : fmtAge(f.time_left_ms) + ' left'}`;
      });
      c.faults.hidden = fl.length === 0;
      for (const b of c.faults.querySelectorAll('button')) b.hidden = !state.controls;
      for (const b of c.buttons) { b.hidden = !state.controls; b.disabled = u.reachable === false; }
    }
    for (const [k, c] of cards) if (!seen.has(k)) { c.el.remove(); cards.delete(k); }
    order.forEach((el, i) => { if (box.children[i] !== el) box.insertBefore(el, box.children[i] || null); });

    /* the form's agent list, rebuilt only when it changes */
    const sel = $('ff-agent');
    const names = (state.units || []).filter(u => u.agent).map(u => u.agent);
    if (names.join('\n') !== Array.from(sel.options).map(o => o.value).join('\n')) {
      const chosen = sel.value;
      sel.replaceChildren(...names.map(n => h('option', { value: n }, n)));
      if (names.includes(chosen)) sel.value = chosen;
    }
  }

  function renderSyncer() {
    const s = state.syncer;
    const el = $('syncer');
    if (!s) { el.textContent = 'no syncer configured'; return; }
    if (!s.reachable) { el.textContent = `syncer ${s.url}: unreachable${s.error ? ' — ' + s.error : ''}`; return; }
    const st = s.status || {};
    const ev = st.eval || {};
    const b = st.bytes || {};
    el.textContent = `mode ${st.mode || '?'} · merges ${fmtNum(st.merges)} · eval loss ${fmtNum(ev.loss, 4)} nats` +
      (ev.bpb != null ? ` (${fmtNum(ev.bpb, 3)} bits/byte)` : '') +
      ` · bytes in ${ChaoslocoCharts.fmtBytes(b.in)} out ${ChaoslocoCharts.fmtBytes(b.out)} · event #${state.last_seq}`;
  }

  function renderHyps() {
    const tb = $('hyps').querySelector('tbody');
    tb.textContent = '';
    const hs = state.hypotheses || [];
    if (!hs.length) tb.appendChild(h('tr', {}, h('td', { colspan: 6, class: 'muted' }, 'none yet (the harness fills this during an experiment)')));
    for (const x of hs) {
      tb.appendChild(h('tr', {}, h('td', {}, x.name), h('td', {}, x.phase || ''), h('td', { class: x.status }, x.status),
        h('td', {}, x.measured === null || x.measured === undefined ? '–' : `${fmtNum(x.measured, 4)} ${x.unit || ''}`),
        h('td', {}, x.threshold === null || x.threshold === undefined ? '–' : `${x.cmp || ''} ${fmtNum(x.threshold, 4)}`),
        h('td', {}, x.explanation || '')));
    }
  }

  /* The harness's progress: the horizon's real progress (what the run
   * still waits for) and its estimate of the end, never the time bound. */
  function renderProgress() {
    const p = state.progress;
    $('progress').hidden = !p;
    if (!p) return;
    const frac = typeof p.fraction === 'number' ? p.fraction : null;
    $('progress-fill').style.width = frac !== null ? `${Math.min(100, 100 * frac).toFixed(1)}%` : '0';
    let end = 'end: unknown yet';
    if (p.remaining_ms !== null && p.remaining_ms !== undefined)
      end = `${p.lower_bound ? 'at least ' : 'about '}${fmtAge(p.remaining_ms)} left`;
    $('progress-text').textContent = `${p.phase} · ${fmtAge(p.elapsed_ms)} elapsed` +
      (frac !== null ? ` · ${(100 * frac).toFixed(0)}% done` : '') + ` · ${end}` +
      (typeof p.merges === 'number' ? ` · merges ${fmtNum(p.merges)}` : '') + (p.waiting ? ` · waiting for ${p.waiting}` : '');
    $('progress').dataset.fraction = frac !== null ? String(frac) : '';
  }

  function eventLine(e) {
    const skip = new Set(['seq', 't_real', 't_mono_ms', 'type', 'source']);
    const rest = Object.entries(e).filter(([k]) => !skip.has(k))
      .map(([k, v]) => `${k}=${typeof v === 'object' ? JSON.stringify(v) : v}`).join(' ');
    const t = state && state.t0_mono_ms && e.t_mono_ms ? ((e.t_mono_ms - state.t0_mono_ms) / 1000).toFixed(1) + 's' : '';
    return `${t.padStart(8)} ${e.source === 'harness' ? 'H' : '#' + (e.seq || '')} ${e.type} ${rest}`;
  }

  function renderEvents() {
    const box = $('events');
    const atBottom = box.scrollTop + box.clientHeight >= box.scrollHeight - 4;
    const f = $('ev-filter').value.trim().toLowerCase();
    box.textContent = '';
    for (const e of state.events || []) {
      const line = eventLine(e);
      if (f && !line.toLowerCase().includes(f)) continue;
      box.appendChild(h('div', { class: `t-${e.type} src-${e.source || 'syncer'}` }, line));
    }
    if (atBottom) box.scrollTop = box.scrollHeight;
  }

  function renderCharts() {
    if (!window.uPlot) { $('charts').textContent = 'chart library missing'; return; }
    if (!run) run = ChaoslocoCharts.renderRun($('charts'), state);
    else run.update(state);
    window.__chaosloco = { state, run };
  }

  function renderAll() {
    $('title').textContent = state.title || '';
    document.body.classList.toggle('no-controls', !state.controls);
    $('halt').disabled = !state.controls;
    $('resume').disabled = !state.controls;
    renderSyncer();
    renderUnits();
    renderProgress();
    renderHyps();
    renderCharts();
    renderEvents();
  }

  /* ---- live updates ---- */

  function capSeries(a) {
    if (a.length <= SERIES_MAX) return a;
    const half = a.length >> 1;
    return a.filter((_, i) => i >= half || i % 2 === 0);
  }

  function onUpdate(u) {
    if (!state) return;
    for (const k of ['title', 'now_mono_ms', 'now_real', 't0_mono_ms', 'controls', 'last_seq', 'syncer', 'units', 'hypotheses', 'progress'])
      state[k] = u[k];
    for (const k of ['loss', 'merges', 'rates'])
      state.series[k] = capSeries(state.series[k].concat((u.series_new && u.series_new[k]) || []));
    if (u.faults) state.faults = u.faults;
    renderAll();
  }

  function connect() {
    if (es) es.close();
    es = new EventSource('/api/events');
    es.addEventListener('open', () => { $('conn').textContent = 'live'; $('conn').className = 'conn live'; });
    es.addEventListener('snapshot', m => { state = JSON.parse(m.data); renderAll(); });
    es.addEventListener('update', m => onUpdate(JSON.parse(m.data)));
    es.addEventListener('event', m => {
      if (!state) return;
      state.events.push(JSON.parse(m.data));
      if (state.events.length > EVENTS_MAX) state.events.splice(0, state.events.length - EVENTS_MAX);
    });
    es.addEventListener('error', () => {
      $('conn').textContent = 'reconnecting…';
      $('conn').className = 'conn down';
      /* EventSource retries by itself unless the server refused outright */
      if (es.readyState === EventSource.CLOSED) setTimeout(connect, 2000);
    });
  }

  window.addEventListener('resize', () => { if (run) run.resize(); });
  setupForm();
  connect();
})();
