// run.test.mjs - browser test of the dashboard over a REAL run:
// `chaosloco run kill-restart.json --dashboard 127.0.0.1:0` (a syncer, three
// agents each supervising a learner; the harness SIGKILLs learner 1 fifteen
// seconds into the method, its agent restarts it 3 s later), watched in the
// system Chromium through playwright-core.
//
// Checks, each against the real processes:
//  * a card per learner appears, every one "running", the stream is live;
//  * after the harness's kill, learner 1's card shows it down (killed /
//    exited / restarting), then running again with incarnation 2, and the
//    syncer lists learner 1 with that incarnation (it rejoined);
//  * the loss chart has points and the kill's window is shaded (canvas pixels);
//  * "pause 10 s" on learner 2's card pauses that learner: its agent's
//    GET /v1/status says "paused" and GET /v1/faults holds the active pause;
//    the other agents got nothing;
//  * HALT ALL: every agent's status says halted, the pause is reverted with
//    revert_reason "halt", the unit runs again;
//  * no request leaves the dashboard's origin, no page error;
//  * SIGTERM to the harness: it exits, every process it recorded is gone,
//    and its report.html (opened from disk) draws the same charts with the
//    same code: points and shaded fault windows, one colour per fault with
//    a legend, and the "what each fault cost" table in those colours with
//    summary.json's figures; `chaosloco report RUN_DIR` renders the same
//    document again.
// Screenshots: dashboard-run-e2e.png and report-e2e.png in E2E_OUT_DIR.
//
// env: CHAOSLOCO_BIN, E2E_OUT_DIR, CHROMIUM (default /usr/bin/chromium),
//      E2E_KEEP_RUN=1 keeps the run directory. Exit 0 pass, 1 fail, 77 skip.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { e2eSetup, sleep } from './e2e.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const EXPERIMENT = path.join(HERE, 'kill-restart.json');
const DEADLINE_MS = 175000;
const { BIN, OUT, CHROMIUM, chromium, cleanups, finish, check, until } = await e2eSetup(DEADLINE_MS);

async function getJson(url, token) {
  const headers = token ? { Authorization: 'Bearer ' + token } : {};
  const r = await fetch(url, { headers, signal: AbortSignal.timeout(5000) });
  if (!r.ok) throw new Error(`${url} -> ${r.status}`);
  return r.json();
}
// every agent read needs that agent's own token (RUN/tokens/agent-N)
const agentToken = {};
async function agentGet(l, p) {
  return getJson(agentUrl[l] + p, agentToken[l]);
}
// learner l's agent's fault records (GET /v1/faults answers {faults: [...]})
async function faultsOf(l) {
  const r = await agentGet(l, '/v1/faults');
  if (!Array.isArray(r.faults)) throw new Error(`${agentUrl[l]}/v1/faults: no "faults" array`);
  return r.faults;
}

function alive(pid) {
  try { process.kill(pid, 0); return true; } catch (e) { return e.code === 'EPERM'; }
}

const agentUrl = {};

// ---- the run ----
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'chaosloco-e2e-run-'));
// cleanups run last-pushed first: the run directory goes after everything else
cleanups.push(() => { if (!process.env.E2E_KEEP_RUN) fs.rmSync(tmp, { recursive: true, force: true }); });
const runDir = path.join(tmp, 'run');
const launchBrowser = async () => {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'chaosloco-e2e-chromium-'));
  // playwright passes --user-data-dir itself for a persistent context: a fresh dir
  const ctx = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM, headless: true, viewport: { width: 1280, height: 1250 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  cleanups.push(() => fs.rmSync(profile, { recursive: true, force: true }));
  cleanups.push(() => ctx.close());
  return ctx;
};

// Pixels of a fault window on a uPlot chart: one inside (near the top of
// the plot, above the curve) and one to the right of every window.
const WINDOW_PIXELS = `(u, wins) => {
  const w = wins.find(x => !x.active) || wins[0];
  const at = (xs, y) => Array.from(u.ctx.getImageData(Math.round(u.valToPos(xs, 'x', true)), Math.round(y), 1, 1).data);
  const yTop = u.bbox.top + 3;
  const right = Math.max(...wins.map(x => x.x1));
  const xsOut = right + (u.scales.x.max - right) / 2;
  return { inside: at((w.x0 + w.x1) / 2, yTop), outside: at(xsOut, yTop), w, right, xmax: u.scales.x.max,
           points: u.data[0].length };
}`;
const isRed = px => px[3] > 0 && px[0] > px[1] + 40 && px[0] > px[2] + 40;

// The browser starts first: on a loaded box Chromium can take seconds to
// come up, and it must be watching before the harness's kill (15 s into the
// method) happens.
let context;
let page;
let code = 1;
try {
  context = await launchBrowser();
} catch (e) {
  console.error(`FAIL: Chromium did not start: ${e.stack || e}`);
  await finish(1);
}
const harnessLog = path.join(OUT, 'dashboard-run-e2e.log');
const logFd = fs.openSync(harnessLog, 'w');
const harness = spawn(BIN, ['run', EXPERIMENT, '--out', runDir, '--dashboard', '127.0.0.1:0', '--time-limit', '150'],
  { stdio: ['ignore', logFd, logFd] });
let harnessExit = null;
const harnessExited = new Promise(r => harness.once('exit', (c, sig) => { harnessExit = { c, sig }; r(harnessExit); }));

// Whatever happens: stop the harness (it reverts and stops its topology),
// then SIGKILL every pid it ever recorded, with its process group.
cleanups.push(async () => {
  if (!harnessExit) {
    harness.kill('SIGTERM');
    await Promise.race([harnessExited, sleep(30000)]);
    if (!harnessExit) { harness.kill('SIGKILL'); await Promise.race([harnessExited, sleep(5000)]); }
  }
  let all = [];
  try { all = JSON.parse(fs.readFileSync(path.join(runDir, 'pids.json'), 'utf8')).all || []; } catch (e) { /* none */ }
  for (const p of all) {
    if (p > 1 && alive(p)) {
      try { process.kill(-p, 'SIGKILL'); } catch (e) { /* not a group leader */ }
      try { process.kill(p, 'SIGKILL'); } catch (e) { /* gone */ }
    }
  }
});

try {
  const addr = await until('the dashboard listen.addr', () => {
    if (harnessExit) throw new Error(`harness exited early: ${JSON.stringify(harnessExit)}`);
    try { return fs.readFileSync(path.join(runDir, 'dashboard', 'listen.addr'), 'utf8').trim(); } catch (e) { return null; }
  }, 60000);
  const origin = `http://${addr}`;
  const token = fs.readFileSync(path.join(runDir, 'token'), 'utf8').trim();
  check(token.length > 0, `the run is up: dashboard ${origin}, token in RUN/token`);

  page = context.pages()[0] || await context.newPage();
  const foreign = [];
  page.on('request', r => { if (!r.url().startsWith(origin) && !r.url().startsWith('data:')) foreign.push(r.url()); });
  const pageErrors = [];
  page.on('pageerror', e => pageErrors.push(String(e)));
  const dialogs = [];
  page.on('dialog', d => { dialogs.push(d.type()); d.type() === 'prompt' ? d.accept(token) : d.accept(); });

  await page.goto(origin + '/');
  // Record every state each card shows, 10 times a second (updates come
  // every 500 ms), so a short "killed" is not missed between our checks.
  await page.evaluate(() => {
    window.__seen = {};
    setInterval(() => {
      for (const c of document.querySelectorAll('.card[data-learner]')) {
        const dds = [...c.querySelectorAll('dt')];
        const inc = dds.find(d => d.textContent === 'incarnation');
        const rec = `${c.querySelector('.badge').textContent}/${inc ? inc.nextSibling.textContent : '?'}`;
        const h = (window.__seen[c.dataset.learner] ||= []);
        if (h[h.length - 1] !== rec) h.push(rec);
      }
    }, 100);
  });

  // every learner's card, running
  await until('three running cards', async () =>
    (await page.locator('.card[data-learner] .badge.running').count()) === 3, 60000);
  check(await page.locator('.card[data-learner]').count() === 3, 'a card per learner (3), all running');
  check(await page.locator('#conn.live').count() === 1, 'the event stream is live');
  const st0 = await getJson(origin + '/api/state');
  for (const u of st0.units) agentUrl[u.learner_id] = u.url;
  for (const l of [0, 1, 2]) agentToken[l] = fs.readFileSync(path.join(runDir, 'tokens', `agent-${l}`), 'utf8').trim();
  check([0, 1, 2].every(l => agentUrl[l]), `the dashboard knows each learner's agent (${Object.values(agentUrl).join(', ')})`);

  // the harness's kill of learner 1: dead, then rejoined
  const card1 = '.card[data-learner="1"]';
  const down = await until('learner 1 shown down', () => page.evaluate(() => {
    const h = window.__seen['1'] || [];
    const d = h.find(s => /^(killed|exited|restarting)\//.test(s));
    if (d) return { d };
    /* already back with a new incarnation and never seen down: the page
     * was not watching in time (a very loaded box) */
    if (h.length && !/\/1$/.test(h[0])) return { missed: h.join(' -> ') };
    return null;
  }), 60000, 200);
  if (down.missed) throw new Error(`the page started watching after the kill (learner 1: ${down.missed})`);
  const seenDown = down.d;
  check(true, `learner 1's card shows it down after the harness's kill ("${seenDown}")`);
  await until('learner 1 running again, incarnation 2', async () =>
    (await page.locator(`${card1} .badge.running`).count()) === 1 &&
    (await page.evaluate(() => (window.__seen['1'] || []).some(s => s === 'running/2'))), 45000, 200);
  const syncerView = await until('the syncer to list learner 1 with incarnation 2', async () => {
    const s = await getJson(origin + '/api/state');
    const u = s.units.find(x => x.learner_id === 1);
    return u && u.learner && u.learner.incarnation >= 2 && u.learner.step > 0 ? u.learner : null;
  }, 45000, 250);
  const seq1 = await page.evaluate(() => window.__seen['1']);
  check(true, `learner 1 rejoined: card states ${seq1.join(' -> ')}; syncer: incarnation ${syncerView.incarnation}, step ${syncerView.step}`);

  // the loss chart: points and the kill's window shaded
  const lossRoot = page.locator('#charts .uplot').first();
  await until('≥ 5 loss points', async () => Number(await lossRoot.getAttribute('data-points')) >= 5);
  await until('a fault window drawn', async () => Number(await lossRoot.getAttribute('data-fault-windows')) >= 1);
  const px = await page.evaluate(`(() => { const { run, state } = window.__chaosloco;
    return (${WINDOW_PIXELS})(run.charts.loss, ChaoslocoCharts.faultWindows(state)); })()`);
  console.log(`  loss chart: ${px.points} points, window ${px.w.x0.toFixed(2)}..${px.w.x1.toFixed(2)} s of ${px.xmax.toFixed(1)}, pixel inside ${px.inside} outside ${px.outside}`);
  check(px.points >= 5, `the loss chart has points (${px.points})`);
  check(isRed(px.inside), 'the kill window is shaded red on the loss chart');
  if (px.xmax - px.right > 1) check(!isRed(px.outside), 'no shading after the window');

  // pause on learner 2's card -> that learner is paused (its agent says so)
  const before = {};
  for (const l of [0, 1]) before[l] = (await faultsOf(l)).length;
  await page.click('.card[data-learner="2"] button.pause');
  check(dialogs.includes('prompt'), 'the token was asked for');
  const pauseRec = await until('agent 2 to hold an active pause', async () =>
    (await faultsOf(2)).find(f => f.type === 'pause' && f.state === 'active'), 15000, 200);
  const ag2st = await until('agent 2 to report its unit paused', async () => {
    const s = await agentGet(2, '/v1/status');
    return s.unit.state === 'paused' ? s : null;
  }, 10000, 200);
  check(pauseRec.duration_ms === 10000, `learner 2 is paused: agent fault ${pauseRec.id} active, unit ${ag2st.unit.state} (pid ${ag2st.unit.pid})`);
  for (const l of [0, 1]) {
    const fl = await faultsOf(l);
    check(fl.length === before[l] && !fl.some(f => f.type === 'pause'), `learner ${l}'s agent got no fault`);
  }
  await page.waitForSelector('.card[data-learner="2"] .badge.paused', { timeout: 10000 });
  await page.waitForSelector('.card[data-learner="2"] .faults li', { timeout: 10000 });
  check(true, "learner 2's card shows paused with its active fault");

  // the screenshot: a live run, a rejoined learner, a paused one
  await sleep(600);
  const shot = path.join(OUT, 'dashboard-run-e2e.png');
  await page.screenshot({ path: shot, fullPage: true });
  check(fs.statSync(shot).size > 10000, `screenshot saved: ${shot}`);

  // HALT ALL (confirmed) -> every agent halted, the pause reverted by halt
  const nConfirm = dialogs.filter(d => d === 'confirm').length;
  await page.click('#halt');
  await until('every agent halted', async () => {
    for (const l of [0, 1, 2]) if (!(await agentGet(l, '/v1/status')).halted) return false;
    return true;
  }, 15000, 200);
  check(dialogs.filter(d => d === 'confirm').length === nConfirm + 1, 'HALT ALL asked for confirmation');
  check(true, 'HALT ALL: every agent reports halted');
  const reverted = await until('the pause reverted by the halt', async () => {
    const f = (await faultsOf(2)).find(x => x.id === pauseRec.id);
    return f && f.state === 'reverted' ? f : null;
  }, 10000, 200);
  check(reverted.revert_reason === 'halt', `agent 2's pause is reverted (revert_reason ${reverted.revert_reason})`);
  for (const l of [0, 1, 2]) {
    const fl = await faultsOf(l);
    check(!fl.some(f => f.state === 'active'), `agent ${l} has no active fault`);
  }
  const unit2 = await until('learner 2 running again', async () => {
    const s = await agentGet(2, '/v1/status');
    return s.unit.state === 'running' ? s.unit : null;
  }, 10000, 200);
  check(unit2.pid === ag2st.unit.pid, `learner 2 runs again, same process (pid ${unit2.pid})`);
  await until('the halt notice', async () => /HALT ALL/.test(await page.textContent('#notice')));

  check(foreign.length === 0, `no request outside the dashboard (${foreign.join(', ') || 'none'})`);
  check(pageErrors.length === 0, `no page errors (${pageErrors.join('; ') || 'none'})`);

  // stop the run: SIGTERM, the harness reverts, stops everything, writes its outputs
  harness.kill('SIGTERM');
  const ex = await Promise.race([harnessExited, sleep(60000).then(() => null)]);
  check(ex && ex.sig === null && typeof ex.c === 'number', `the harness exits on SIGTERM (${ex ? `code ${ex.c}` : 'still running'})`);
  const pids = JSON.parse(fs.readFileSync(path.join(runDir, 'pids.json'), 'utf8')).all || [];
  const left = pids.filter(p => alive(p));
  check(pids.length >= 7 && left.length === 0, `every process the run recorded (${pids.length}) is gone${left.length ? ` (alive: ${left})` : ''}`);

  // report.html, offline, from the run's files: the same chart code
  const report = path.join(runDir, 'report.html');
  const html1 = fs.readFileSync(report, 'utf8');
  check(/ChaoslocoCharts\.renderRun/.test(html1) && /id="run-data"/.test(html1), 'report.html inlines the dashboard chart code and the run data');
  const rpage = await context.newPage();
  const rreq = [];
  const rerr = [];
  rpage.on('request', r => { if (!r.url().startsWith('file://')) rreq.push(r.url()); });
  rpage.on('pageerror', e => rerr.push(String(e)));
  await rpage.goto('file://' + report);
  const rroot = rpage.locator('#charts .uplot').first();
  await rroot.waitFor({ timeout: 10000 });
  check(await rpage.locator('#charts .uplot canvas').count() === 3, 'report.html draws the three charts (canvas)');
  const rp = await rpage.evaluate(`(() => { const r = window.__chaoslocoReport;
    return (${WINDOW_PIXELS})(r.run.charts.loss, ChaoslocoCharts.faultWindows(r.blob)); })()`);
  const rwin = Number(await rroot.getAttribute('data-fault-windows'));
  console.log(`  report chart: ${rp.points} points, ${rwin} windows, pixel inside ${rp.inside}`);
  check(rp.points >= 5, `the report's loss chart has points (${rp.points})`);
  check(rwin >= 2, `the report shades the kill and the pause (${rwin} windows)`);
  check(isRed(rp.inside), "a fault window is shaded red on the report's loss chart");
  // one colour per fault with a legend, and "what each fault cost" in the
  // same colours, with summary.json's figures
  const rlegend = await rpage.$$eval('#charts .cl-legend .cl-key', ks => ks.map(k => ({ fault: k.dataset.fault, colour: k.dataset.colour })));
  check(rlegend.length >= 2 && new Set(rlegend.map(k => k.colour)).size === rlegend.length,
        `the report's legend: one colour per fault (${rlegend.map(k => k.fault + ' ' + k.colour).join(', ')})`);
  const costRows = await rpage.$$eval('#fault-cost tr[data-fault]', rs => rs.map(r => ({
    fault: r.dataset.fault, colour: r.dataset.colour || '', cells: Array.from(r.cells).map(c => c.textContent) })));
  const summary = JSON.parse(fs.readFileSync(path.join(runDir, 'summary.json'), 'utf8'));
  const costs = (summary.fault_cost && summary.fault_cost.faults) || [];
  console.log(`  report cost table: ${costRows.map(r => r.cells.slice(1).join(' | ')).join(' // ')}`);
  check(costRows.length >= 2 && costRows.length === costs.length, `the cost table has a row per fault of summary.json (${costRows.length}, ${costs.length})`);
  check(costRows.every(r => rlegend.some(k => k.fault === r.fault && k.colour === r.colour)),
        'each cost row is in its fault\'s legend colour');
  const killCost = costs.find(c => c.type === 'kill' && c.learner === 1);
  check(killCost && typeof killCost.time_to_rejoin_s === 'number' && killCost.time_to_rejoin_s >= 0 &&
        Number.isInteger(killCost.merges_missed) && typeof killCost.tokens_never_merged === 'number',
        `summary.json: the kill's cost (${JSON.stringify(killCost)})`);
  const killRow = costRows.find(r => r.cells[1] === 'kill');
  // the report prints 0.1 s (C's %.1f, which rounds a tie such as 1.25 to
  // even, where JS toFixed rounds it up): compare the figure, not the rounding
  const rejoinCell = killRow && /^(\d+\.\d) s$/.exec(killRow.cells[6]);
  check(rejoinCell && Math.abs(Number(rejoinCell[1]) - killCost.time_to_rejoin_s) <= 0.05 + 1e-9,
        `the report shows the kill's time to rejoin as summary.json has it (${killRow && killRow.cells[6]}, ${killCost.time_to_rejoin_s} s)`);
  check(rreq.length === 0 && rerr.length === 0, `report: no network request, no page error (${rreq.concat(rerr).join('; ') || 'none'})`);
  await rpage.screenshot({ path: path.join(OUT, 'report-e2e.png'), fullPage: true });
  fs.renameSync(report, report + '.first');
  const again = spawnSync(BIN, ['report', runDir], { encoding: 'utf8', timeout: 30000 });
  check(again.status === 0 && fs.readFileSync(report, 'utf8') === html1,
        `chaosloco report RUN_DIR renders the same document again (exit ${again.status})`);
  code = 0;
} catch (e) {
  console.error(`FAIL: ${e.stack || e}`);
  try { if (page) await page.screenshot({ path: path.join(OUT, 'dashboard-run-e2e-failure.png'), fullPage: true }); } catch (e2) { /* none */ }
  console.error(`harness log: ${harnessLog}`);
}
await finish(code);
