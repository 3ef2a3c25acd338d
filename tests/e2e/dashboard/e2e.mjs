// e2e.mjs - what both browser tests of the dashboard start with: the
// binary and Chromium checked (exit 1 when CHAOSLOCO_BIN is missing, 77 =
// skip when Chromium or playwright-core is), a watchdog that fails the test
// at its deadline, cleanups run in reverse on finish, and the check/until
// helpers that print TAP-like "ok - ..." lines with the elapsed time.
//
//   const t = await e2eSetup(DEADLINE_MS);
//   t.cleanups.push(async () => ...);   t.check(cond, msg);
//   await t.until(what, fn, timeoutMs, everyMs);   await t.finish(code);
import fs from 'node:fs';

export const sleep = ms => new Promise(r => setTimeout(r, ms));

export async function e2eSetup(deadlineMs) {
  const BIN = process.env.CHAOSLOCO_BIN;
  const OUT = process.env.E2E_OUT_DIR || process.cwd();
  const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
  if (!BIN || !fs.existsSync(BIN)) {
    console.error(`FAIL: CHAOSLOCO_BIN=${BIN} does not exist`);
    process.exit(1);
  }
  if (!fs.existsSync(CHROMIUM)) {
    console.error(`SKIP: ${CHROMIUM} is not installed (apt-get install -y chromium)`);
    process.exit(77);
  }
  let chromium;
  try {
    ({ chromium } = await import('playwright-core'));
  } catch (e) {
    console.error(`SKIP: playwright-core is not installed next to this script (npm ci --ignore-scripts): ${e.message}`);
    process.exit(77);
  }

  const cleanups = [];
  const t0 = Date.now();
  const elapsed = () => `${((Date.now() - t0) / 1000).toFixed(1)} s`;
  let finishing = false;
  const finish = async code => {
    if (finishing) return;
    finishing = true;
    clearTimeout(watchdog);
    for (const c of cleanups.reverse()) { try { await c(); } catch (e) { /* best effort */ } }
    console.log(`# ${elapsed()}`);
    process.exit(code);
  };
  const watchdog = setTimeout(() => { console.error('FAIL: test deadline passed'); finish(1); }, deadlineMs);

  const check = (cond, msg) => {
    if (!cond) throw new Error(msg);
    console.log(`ok - ${msg}  [${elapsed()}]`);
  };
  const until = async (what, fn, timeoutMs = 15000, everyMs = 100) => {
    const end = Date.now() + timeoutMs;
    let last;
    while (Date.now() < end) {
      try { last = await fn(); if (last) return last; } catch (e) { last = e; }
      await sleep(everyMs);
    }
    throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last: ${last instanceof Error ? last.message : JSON.stringify(last)})`);
  };
  return { BIN, OUT, CHROMIUM, chromium, cleanups, finish, check, until };
}
