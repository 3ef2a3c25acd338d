// dashboard.test.mjs - browser test of `chaosloco dashboard` against a fake
// topology (a syncer and two agents served from this node process with the
// documented shapes, plus one agent URL nobody answers), driven through the
// system Chromium with playwright-core.
//
// Checks: the unit cards appear (the dead agent marked unreachable); the
// loss chart has its points and a shaded fault window (read back from the
// canvas pixels); clicking "pause 10 s" on a card sends the fault to that
// agent with the bearer token (asked once by a prompt); heal sends DELETE;
// the inject form is built from GET /api/fault-kinds (the injector table:
// the kinds of `chaosloco validate --list-faults`, the C code's ranges) and
// sends typed params; every fault has its own colour and a legend entry
// (two overlapping windows: two colours); each card shows the syncer's
// view beside the process state (learner 1 "absent" while its process
// runs; learner 0 "rejoining" after a new incarnation joined, "in sync"
// once a merge took it again); HALT ALL (after its confirmation) calls
// every agent's /v1/halt; the page makes no request outside the
// dashboard's origin. Saves a screenshot.
//
// env: CHAOSLOCO_BIN (the binary), E2E_OUT_DIR (where the screenshot goes),
//      CHROMIUM (default /usr/bin/chromium). Exit 0 pass, 1 fail, 77 skip.
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';

import { e2eSetup, sleep } from './e2e.mjs';

const TOKEN = 'e2e-token-123';
const DEADLINE_MS = 120000;
const monoMs = () => Number(process.hrtime.bigint() / 1000000n); // CLOCK_MONOTONIC, as the dashboard's
const { BIN, OUT, CHROMIUM, chromium, cleanups, finish, check, until } = await e2eSetup(DEADLINE_MS);

function serve(handler) {
  return new Promise(resolve => {
    const srv = http.createServer((req, res) => {
      let body = '';
      req.on('data', c => { body += c; });
      req.on('end', () => handler(req, res, body));
    });
    srv.listen(0, '127.0.0.1', () => {
      cleanups.push(() => new Promise(r => { srv.closeAllConnections(); srv.close(() => r()); }));
      resolve(`http://127.0.0.1:${srv.address().port}`);
    });
  });
}

function json(res, status, obj, type = 'application/json') {
  res.writeHead(status, { 'Content-Type': type });
  res.end(typeof obj === 'string' ? obj : JSON.stringify(obj));
}

// ---- fake syncer: eval points every ~100 ms of real time, merges ----
const events = [];
const t0 = monoMs();
function addEvent(ev) {
  events.push(Object.assign({ seq: events.length + 1, t_real: new Date().toISOString(), t_mono_ms: monoMs() }, ev));
}
addEvent({ type: 'start', mode: 'decoupled', restored: false, merges: 0, versions: [0, 0], learners: 2 });
addEvent({ type: 'join', learner: 0, incarnation: 1, resumed_step: 0 });
addEvent({ type: 'join', learner: 1, incarnation: 1, resumed_step: 0 });
let merges = 0;
let loss = 5.5;
// learner 0 rejoins with incarnation 2 at tick rejoinAt (set by the test
// once the page watches) and is merged again 25 ticks later: "rejoining"
// in between
let rejoinAt = Infinity;
let inc0 = 1;
const ticker = setInterval(() => {
  merges++;
  loss = Math.max(2.0, loss * 0.97);
  if (merges === rejoinAt) { inc0 = 2; addEvent({ type: 'join', learner: 0, incarnation: 2, resumed_step: 100 }); }
  const parts = [{ learner: 1, incarnation: 1, weight: 1, tokens: 640, steps: 10 }];
  if (merges < rejoinAt || merges >= rejoinAt + 25) parts.unshift({ learner: 0, incarnation: inc0, weight: 1, tokens: 640, steps: 10 });
  addEvent({ type: 'merge', fragment: merges % 2, version: merges, grace_ms: 5, update_norm: 0.1, mode: 'decoupled',
             participants: parts, tokens: 640 * parts.length });
  addEvent({ type: 'eval', loss, bpb: loss / Math.LN2, merges, tokens: merges * 1280 });
  for (const l of [0, 1])
    addEvent({ type: 'heartbeat', learner: l, incarnation: 1, step: merges * 10, train_loss: loss + 0.1,
               tokens: merges * 640, step_ms: 20, clock_skew_ms: 0 });
}, 150);
cleanups.push(() => clearInterval(ticker));

const syncerUrl = await serve((req, res) => {
  const u = new URL(req.url, 'http://x');
  if (u.pathname === '/v1/status')
    return json(res, 200, { mode: 'decoupled', eval: { loss, bpb: loss / Math.LN2, step: merges }, merges,
      fragments: [{ id: 0, version: merges }, { id: 1, version: merges }],
      // the syncer lost learner 1 (absent) although its process runs
      learners: [0, 1].map(id => ({ id, state: id === 1 ? 'absent' : 'active', incarnation: id === 0 ? inc0 : 1,
                                   step: merges * 10, tokens: merges * 640,
                                   contributions: { accepted: merges, rejected: 0 } })),
      bytes: { in: merges * 4096, out: merges * 8192 } });
  if (u.pathname === '/v1/events') {
    const since = Number(u.searchParams.get('since') || 0);
    return json(res, 200, events.filter(e => e.seq > since).map(e => JSON.stringify(e) + '\n').join(''),
                'application/x-ndjson');
  }
  json(res, 404, { error: 'no such endpoint', status: 404 });
});

// ---- fake agents ----
function fakeAgent(n) {
  const a = { n, faults: [], halts: [], posts: [], deletes: [] };
  // an ended fault early in the run: the window to shade (the two agents'
  // overlap: two colours)
  a.faults.push({ id: `f${n}-0`, type: n ? 'pause' : 'latency', target: 'unit', params: {}, duration_ms: 600,
                  toxicity: null, seed: 1, state: 'reverted', created_real: new Date().toISOString(),
                  started_mono_ms: t0 + 300 + 200 * n, ended_mono_ms: t0 + 900 + 200 * n, evidence: { proc_state: 'T' },
                  revert_reason: 'expiry', error: null });
  a.handler = (req, res, body) => {
    const u = new URL(req.url, 'http://x');
    const authed = req.headers.authorization === `Bearer ${TOKEN}`;
    if (req.method === 'GET' && u.pathname === '/v1/status')
      return json(res, 200, { id: `learner-${n}`, unit: { state: 'running', pid: 1000 + n, incarnation: 1, restarts: 0,
        last_exit: null }, halted: a.halts.length > 0, lease: null,
        faults_active: a.faults.filter(f => f.state === 'active').length, proxies: [] });
    if (req.method === 'GET' && u.pathname === '/v1/faults') return json(res, 200, a.faults);
    if (req.method === 'GET' && u.pathname === '/v1/logs') return json(res, 200, `log of learner-${n}\n`, 'text/plain');
    if (!authed) return json(res, 401, { error: 'missing or wrong token', status: 401 });
    if (req.method === 'POST' && u.pathname === '/v1/faults') {
      const f = JSON.parse(body);
      a.posts.push(f);
      const rec = { id: `f${n}-${a.faults.length}`, type: f.type, target: 'unit', params: f.params || {},
                    duration_ms: f.duration_ms, toxicity: null, seed: 1, state: 'active',
                    created_real: new Date().toISOString(), started_mono_ms: monoMs(), ended_mono_ms: null,
                    evidence: {}, revert_reason: null, error: null };
      a.faults.push(rec);
      return json(res, 201, rec);
    }
    const m = u.pathname.match(/^\/v1\/faults\/([^/]+)$/);
    if (req.method === 'DELETE' && m) {
      const f = a.faults.find(x => x.id === m[1]);
      if (!f) return json(res, 404, { error: 'no such fault', status: 404 });
      a.deletes.push(m[1]);
      Object.assign(f, { state: 'reverted', ended_mono_ms: monoMs(), revert_reason: 'delete' });
      return json(res, 200, f);
    }
    if (req.method === 'POST' && u.pathname === '/v1/halt') {
      a.halts.push(monoMs());
      for (const f of a.faults) if (f.state === 'active') Object.assign(f, { state: 'reverted', ended_mono_ms: monoMs(), revert_reason: 'halt' });
      return json(res, 200, { halted: true });
    }
    json(res, 404, { error: 'no such endpoint', status: 404 });
  };
  return a;
}
const agents = [fakeAgent(0), fakeAgent(1)];
for (const a of agents) a.url = await serve(a.handler);

// ---- the dashboard under test ----
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'chaosloco-e2e-dash-'));
fs.writeFileSync(path.join(tmp, 'token'), TOKEN + '\n', { mode: 0o600 }); // the dashboard refuses a token others can read
const log = fs.openSync(path.join(OUT, 'dashboard-e2e.log'), 'w');
const dash = spawn(BIN, ['dashboard', '--syncer', syncerUrl,
  '--agents', `${agents[0].url},${agents[1].url},http://127.0.0.1:1`, '--token-file', path.join(tmp, 'token'),
  '--state-dir', path.join(tmp, 'state'), '--poll-ms', '200', '--title', 'e2e fake topology'],
  { stdio: ['ignore', log, log] });
cleanups.push(() => { dash.kill('SIGKILL'); });
cleanups.push(() => fs.rmSync(tmp, { recursive: true, force: true }));

let context;
let code = 1;
try {
  const addr = await until('listen.addr', () => {
    try { return fs.readFileSync(path.join(tmp, 'state', 'listen.addr'), 'utf8').trim(); } catch (e) { return null; }
  }, 20000);
  const origin = `http://${addr}`;
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'chaosloco-e2e-chromium-'));
  cleanups.push(() => fs.rmSync(profile, { recursive: true, force: true }));
  // playwright passes --user-data-dir itself for a persistent context: a fresh dir
  context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM, headless: true, viewport: { width: 1280, height: 1100 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  cleanups.push(() => context.close());
  const page = context.pages()[0] || await context.newPage();
  const foreign = [];
  page.on('request', r => { if (!r.url().startsWith(origin) && !r.url().startsWith('data:')) foreign.push(r.url()); });
  const pageErrors = [];
  page.on('pageerror', e => pageErrors.push(String(e)));
  const dialogs = [];
  page.on('dialog', d => { dialogs.push(d.type()); d.type() === 'prompt' ? d.accept(TOKEN) : d.accept(); });

  await page.goto(origin + '/');
  // cards
  await page.waitForSelector('.card[data-agent="learner-0"]', { timeout: 15000 });
  await page.waitForSelector('.card[data-agent="learner-1"]', { timeout: 15000 });
  await page.waitForSelector('.card.unreachable', { timeout: 15000 });
  check(true, 'unit cards appear, the dead agent is marked unreachable');
  await until('a running badge', () => page.locator('.card[data-agent="learner-1"] .badge.running').count());
  check(await page.locator('#conn.live').count() === 1, 'the event stream is live');

  // the syncer line shows the eval loss in nats and in bits per byte
  await until('the syncer line', async () => /bits\/byte/.test(await page.textContent('#syncer')));
  const syncerText = await page.textContent('#syncer');
  check(/eval loss [0-9.]+ nats \([0-9.]+ bits\/byte\)/.test(syncerText), `eval loss in nats and bits/byte ("${syncerText.trim().slice(0, 80)}")`);

  // loss chart: points and a shaded window
  const lossRoot = page.locator('#charts .uplot').first();
  await until('≥ 5 loss points', async () => Number(await lossRoot.getAttribute('data-points')) >= 5);
  await until('a fault window drawn', async () => Number(await lossRoot.getAttribute('data-fault-windows')) >= 1);
  const px = await page.evaluate(() => {
    const { run, state } = window.__chaosloco;
    const u = run.charts.loss;
    const w = ChaoslocoCharts.faultWindows(state).find(x => !x.active);
    const at = (xs, y) => Array.from(u.ctx.getImageData(Math.round(u.valToPos(xs, 'x', true)), Math.round(y), 1, 1).data);
    const yTop = u.bbox.top + 3;
    const xsOut = u.scales.x.max - (u.scales.x.max - w.x1) / 4; // right of every window
    return { inside: at((w.x0 + w.x1) / 2, yTop), outside: at(xsOut, yTop), w, points: u.data[0].length };
  });
  console.log(`  loss chart: ${px.points} points, window ${px.w.x0.toFixed(2)}..${px.w.x1.toFixed(2)} s, pixel inside ${px.inside} outside ${px.outside}`);
  check(px.inside[3] > 0 && px.inside[0] > px.inside[1] + 40 && px.inside[0] > px.inside[2] + 40,
        'the fault window is shaded red on the loss chart');
  check(px.outside[3] === 0 || !(px.outside[0] > px.outside[1] + 40), 'no shading outside the window');

  // one colour per fault, and a legend naming each
  await until('a legend of 2 faults', async () => Number(await page.getAttribute('#charts .cl-legend', 'data-faults')) >= 2);
  const legend = await page.$$eval('#charts .cl-legend .cl-key', ks => ks.map(k => ({ fault: k.dataset.fault, colour: k.dataset.colour, text: k.textContent })));
  console.log(`  legend: ${legend.map(k => `${k.text} ${k.colour}`).join(' | ')}`);
  check(legend.length === 2 && legend[0].colour !== legend[1].colour, 'two faults, two colours in the legend');
  check(legend.some(k => /latency @ learner-0/.test(k.text)) && legend.some(k => /pause @ learner-1/.test(k.text)),
        'the legend names each fault and its learner');
  const lanes = await page.evaluate(() => window.__chaosloco.run.state.windows.map(w => [w.colour, w.lane]));
  check(lanes.length === 2 && lanes[0][1] !== lanes[1][1], `overlapping windows get separate lanes (${JSON.stringify(lanes)})`);
  const lossUnit = await lossRoot.getAttribute('data-unit');
  check(lossUnit === 'bits/byte', `the loss chart is in bits/byte for a byte-level model (${lossUnit})`);

  // the syncer's view beside the process state on each card
  await until('learner-1: running, syncer absent', async () =>
    (await page.getAttribute('.card[data-agent="learner-1"]', 'data-sync')) === 'absent');
  const c1 = await page.textContent('.card[data-agent="learner-1"] h3');
  check(/running/.test(c1) && /syncer: absent/.test(c1) &&
        /\blost\b/.test(await page.getAttribute('.card[data-agent="learner-1"]', 'class')),
        `learner-1's card shows "running" and "syncer: absent", marked lost ("${c1.trim()}")`);
  check(await page.getAttribute('.card[data-agent="learner-0"]', 'data-sync') === 'in sync', 'learner-0 is in sync');
  rejoinAt = merges + 2;
  await until('learner-0 rejoining', async () =>
    (await page.getAttribute('.card[data-agent="learner-0"]', 'data-sync')) === 'rejoining', 20000);
  check(true, 'learner-0 shows "syncer: rejoining" after its new incarnation joined');
  await until('learner-0 in sync again', async () =>
    (await page.getAttribute('.card[data-agent="learner-0"]', 'data-sync')) === 'in sync', 20000);
  check(true, 'learner-0 shows "syncer: in sync" once a merge took it again');

  // pause on learner-1's card → that agent gets the fault, with the token
  await page.click('.card[data-agent="learner-1"] button.pause');
  await until('the pause to reach agent 1', () => agents[1].posts.length === 1);
  check(agents[1].posts[0].type === 'pause' && agents[1].posts[0].duration_ms === 10000, 'pause 10 s sent to learner-1');
  check(agents[0].posts.length === 0, 'learner-0 got no fault');
  check(dialogs.includes('prompt'), 'the token was asked for');
  const tokenStored = await page.evaluate(() => sessionStorage.getItem('chaosloco.token'));
  check(tokenStored === TOKEN, 'the token is kept in sessionStorage');
  // the active fault shows with time left, and heal sends DELETE
  await page.waitForSelector('.card[data-agent="learner-1"] .faults li', { timeout: 10000 });
  const faultText = await page.textContent('.card[data-agent="learner-1"] .faults li');
  check(/pause .* left/.test(faultText), `active fault listed with time left ("${faultText.trim()}")`);
  await page.click('.card[data-agent="learner-1"] .faults button.heal');
  await until('the heal to reach agent 1', () => agents[1].deletes.length === 1);
  check(agents[1].deletes[0] === 'f1-1', 'heal sent DELETE for that fault');

  // the inject form is built from GET /api/fault-kinds, which serves the
  // injector table: the same kinds as `chaosloco validate --list-faults`,
  // with the C code's ranges
  const served = await (await fetch(origin + '/api/fault-kinds')).json();
  const servedTypes = served.kinds.map(k => k.type);
  const listed = execFileSync(BIN, ['validate', '--list-faults'], { encoding: 'utf8' })
    .split('\n').filter(l => /^  [a-z_]+$/.test(l)).map(l => l.trim());
  check(servedTypes.length >= 17 && servedTypes.join() === listed.join(),
    `/api/fault-kinds serves the injector table (${servedTypes.length} kinds, --list-faults has ${listed.length})`);
  const formTypes = await page.$$eval('#ff-type option', os => os.map(o => o.value));
  check(formTypes.join() === servedTypes.join(), `the form offers exactly the served kinds (${formTypes.join(',')})`);
  const kind = t => served.kinds.find(k => k.type === t);
  const param = (t, n) => kind(t).params.find(p => p.name === n);
  check(param('straggle', 'period_ms').min === 50 && param('straggle', 'period_ms').max === 600000 &&
        param('straggle', 'jitter').max === 0.5 && param('cpu', 'period_ms').min === 20,
        'served ranges are the C tables\' (straggle period_ms 50..600000, jitter ..0.5; cpu period_ms 20..)');
  await page.selectOption('#ff-type', 'straggle');
  const field = n => page.locator(`#ff-params [name="${n}"]`);
  check(await field('period_ms').getAttribute('min') === '50' && await field('period_ms').getAttribute('max') === '600000',
    'the straggle form field has the served range');
  check(await page.locator('#ff-toxicity-row').isHidden(), 'no toxicity row for straggle');
  await page.selectOption('#ff-type', 'latency');
  check(!(await page.locator('#ff-toxicity-row').isHidden()) && await field('direction').count() === 1 &&
        await field('toxicity').count() === 0, 'latency: toxicity row, a direction select, no duplicate toxicity field');
  // a fault sent through the form reaches its agent with typed params
  await page.selectOption('#ff-agent', 'learner-0');
  await page.selectOption('#ff-type', 'straggle');
  await field('period_ms').fill('500');
  await field('slowdown').fill('2');
  await page.fill('#ff-duration', '3000');
  await page.click('#fault-form button[type="submit"]');
  await until('the form fault to reach agent 0', () => agents[0].posts.length === 1);
  const sent = agents[0].posts[0];
  check(sent.type === 'straggle' && sent.duration_ms === 3000 && sent.params.period_ms === 500 &&
        sent.params.slowdown === 2 && Object.keys(sent.params).length === 2,
        `the form sent straggle with typed params (${JSON.stringify(sent)})`);

  // screenshot while the run is live (before HALT)
  await sleep(500);
  const shot = path.join(OUT, 'dashboard-e2e.png');
  await page.screenshot({ path: shot, fullPage: true });
  check(fs.statSync(shot).size > 10000, `screenshot saved: ${shot}`);

  // HALT ALL, confirmed
  const nConfirm = dialogs.filter(d => d === 'confirm').length;
  await page.click('#halt');
  await until('both agents halted', () => agents.every(a => a.halts.length === 1));
  check(dialogs.filter(d => d === 'confirm').length === nConfirm + 1, 'HALT ALL asked for confirmation');
  check(true, 'HALT ALL called /v1/halt on every agent');
  await until('the halt notice', async () => /HALT ALL/.test(await page.textContent('#notice')));

  check(foreign.length === 0, `no request outside the dashboard (${foreign.join(', ') || 'none'})`);
  check(pageErrors.length === 0, `no page errors (${pageErrors.join('; ') || 'none'})`);

  // SIGTERM: a clean exit (0) with the page's event stream still open
  const exited = new Promise(r => dash.once('exit', (c, sig) => r({ c, sig })));
  dash.kill('SIGTERM');
  const ex = await Promise.race([exited, sleep(10000).then(() => null)]);
  check(ex && ex.c === 0, `the dashboard exits 0 on SIGTERM (${ex ? `code ${ex.c} signal ${ex.sig}` : 'still running'})`);
  code = 0;
} catch (e) {
  console.error(`FAIL: ${e.stack || e}`);
  try {
    const page = context && context.pages()[0];
    if (page) await page.screenshot({ path: path.join(OUT, 'dashboard-e2e-failure.png'), fullPage: true });
  } catch (e2) { /* no screenshot */ }
  console.error(`dashboard log: ${path.join(OUT, 'dashboard-e2e.log')}`);
}
await finish(code);
