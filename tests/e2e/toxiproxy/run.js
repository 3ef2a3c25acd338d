// run.js - the stock Toxiproxy Node client (toxiproxy-node-client, pinned in
// package-lock.json) drives the whole Toxiproxy API of a real
// `chaosloco agent --toxiproxy-compat` (given the agent's token, see
// withToken), with a TCP echo server upstream:
// it reads the version (SemVer), lists the agent's --proxy proxy, adds a
// latency toxic and the test observes the delay through the proxy, updates
// and removes the toxic, disables the proxy and resets it; then it creates
// a proxy, re-binds it and changes its upstream, adds a toxic with an
// attribute Toxiproxy would ignore, populates two more, deletes them, and
// is refused deleting the --proxy one. Every toxic and proxy made must show
// up as a registered fault in the agent's own API, reverted when deleted.
// Then what a Toxiproxy client can tell apart, each as Toxiproxy does it:
// stacked toxics (two latencies add up, two bandwidths run at the slower
// rate), a refused upstream closed with FIN (the socket reads EOF, never a
// reset), a proxy created disabled echoing its listen as given, an
// X-Toxiproxy-Request-Id on every answer, and proxies and toxics that
// outlive the agent's --max-duration-ms (2 s here) until deleted.
//
// Run from the build tree (tests/e2e/CMakeLists.txt copies this file and the
// lockfile there and runs `npm ci --ignore-scripts`). Env: CHAOSLOCO_BIN.
// Exit 0 pass, 1 fail, 77 skipped (npm missing).
"use strict";

const fs = require("fs");
const net = require("net");
const os = require("os");
const path = require("path");
const { spawn, spawnSync } = require("child_process");

const here = __dirname;
const bin = process.env.CHAOSLOCO_BIN;
const TOKEN = "e2e-toxiproxy-token-5c1d";
const MAX_DURATION_MS = 2000; // the agent's cap on v1 faults; Toxiproxy-made things outlive it

function fail(msg) {
  console.error("FAIL: " + msg);
  process.exitCode = 1;
  throw new Error(msg);
}

function ensureClient() {
  const mod = path.join(here, "node_modules", "toxiproxy-node-client");
  if (!fs.existsSync(mod)) {
    const npm = spawnSync("npm", ["ci", "--ignore-scripts", "--no-audit", "--no-fund"], {
      cwd: here, stdio: "inherit", timeout: 240000,
    });
    if (npm.error && npm.error.code === "ENOENT") {
      console.log("SKIPPED: npm not found, cannot install toxiproxy-node-client");
      process.exit(77);
    }
    if (npm.status !== 0) fail("npm ci --ignore-scripts failed (status " + npm.status + ")");
  }
  return require(mod);
}

function echoServer() {
  return new Promise((resolve) => {
    const srv = net.createServer((s) => s.pipe(s));
    srv.listen(0, "127.0.0.1", () => resolve(srv));
  });
}

// Round trip of n bytes through port, ms; rejects on error/timeout/mismatch.
function rtt(port, n, timeoutMs) {
  return new Promise((resolve, reject) => {
    const payload = Buffer.alloc(n, 0x61);
    const got = [];
    let len = 0;
    const t0 = process.hrtime.bigint();
    const sock = net.connect(port, "127.0.0.1");
    sock.setNoDelay(true);
    const timer = setTimeout(() => { sock.destroy(); reject(new Error("timeout")); }, timeoutMs);
    sock.on("connect", () => sock.write(payload));
    sock.on("data", (d) => {
      got.push(d);
      len += d.length;
      if (len >= n) {
        clearTimeout(timer);
        sock.destroy();
        const ok = Buffer.concat(got).subarray(0, n).equals(payload);
        if (!ok) return reject(new Error("payload mismatch"));
        resolve(Number(process.hrtime.bigint() - t0) / 1e6);
      }
    });
    sock.on("error", (e) => { clearTimeout(timer); reject(e); });
    sock.on("close", () => { clearTimeout(timer); if (len < n) reject(new Error("closed early")); });
  });
}

// Connect to port, send a few bytes, and report how the proxy ended the
// connection: "eof" (FIN), "reset" (RST), "data" or "timeout".
function probeEnd(port, timeoutMs) {
  return new Promise((resolve) => {
    const sock = net.connect(port, "127.0.0.1");
    let done = false;
    const finish = (how) => { if (!done) { done = true; clearTimeout(timer); sock.destroy(); resolve(how); } };
    const timer = setTimeout(() => finish("timeout"), timeoutMs);
    sock.on("connect", () => sock.write("ping"));
    sock.on("data", () => finish("data"));
    sock.on("end", () => finish("eof"));
    sock.on("error", (e) => finish(e.code === "ECONNRESET" ? "reset" : "error " + e.code));
  });
}

async function waitFile(file, ms) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (fs.existsSync(file)) return fs.readFileSync(file, "utf8").trim();
    await new Promise((r) => setTimeout(r, 50));
  }
  fail("no " + file + " after " + ms + " ms");
}

// Every call to the agent needs its token (GET /v1/health aside),
// --toxiproxy-compat included (issues 26, 28). toxiproxy-node-client 4.1.0 has no header option:
// all its calls (the proxies and toxics it returns share the client's
// HttpClient) go through api.doFetch, so that one function adds the header.
// This is the recipe docs/api.md gives for this client.
function withToken(client, token) {
  const api = client.getApi();
  const doFetch = api.doFetch.bind(api);
  api.doFetch = (url, init = {}) =>
    doFetch(url, { ...init, headers: { ...(init.headers || {}), Authorization: "Bearer " + token } });
  return client;
}

async function agentJson(base, p) {
  const r = await fetch(base + p, { headers: { Authorization: "Bearer " + TOKEN } });
  if (r.status !== 200) fail("GET " + p + " -> " + r.status);
  return r.json();
}

async function main() {
  if (!bin || !fs.existsSync(bin)) fail("CHAOSLOCO_BIN is not set to the chaosloco binary");
  const { Toxiproxy } = ensureClient();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "chaosloco-e2e-toxiproxy-"));
  fs.writeFileSync(path.join(dir, "token"), TOKEN + "\n", { mode: 0o600 }); // agents refuse others-readable tokens
  const echo = await echoServer();
  const upstream = "127.0.0.1:" + echo.address().port;
  const log = fs.openSync(path.join(dir, "agent.log"), "a");
  const agent = spawn(bin, ["agent", "--listen", "127.0.0.1:0", "--id", "e2e-tp-" + process.pid,
    "--state-dir", path.join(dir, "state"), "--token-file", path.join(dir, "token"),
    "--toxiproxy-compat", "--max-duration-ms", String(MAX_DURATION_MS),
    "--proxy", "e2e=127.0.0.1:0->" + upstream, "--", "sleep", "1000"],
  { stdio: ["ignore", log, log] });
  let exited = false;
  agent.on("exit", () => { exited = true; });
  try {
    const addr = await waitFile(path.join(dir, "state", "listen.addr"), 15000);
    const base = "http://" + addr;
    const client = withToken(new Toxiproxy(base), TOKEN);

    // a read without the token tells nothing (logs and status say a lot)
    for (const p of ["/v1/status", "/v1/logs", "/proxies"]) {
      const r = await fetch(base + p);
      if (r.status !== 401) fail("GET " + p + " without the token -> " + r.status + ", not 401");
    }
    const version = JSON.parse(await client.getVersion()).version;
    if (!/^\d+\.\d+\.\d+$/.test(version)) fail("GET /version is not SemVer: " + version);
    const all = await client.getAll();
    if (!all.e2e) fail("getAll() has no proxy e2e: " + Object.keys(all));
    const proxy = await client.get("e2e");
    const port = Number(proxy.listen.split(":").pop());
    if (proxy.upstream !== upstream) fail("upstream " + proxy.upstream + " != " + upstream);

    const before = await rtt(port, 64, 3000);
    const toxic = await proxy.addToxic({
      name: "e2e_latency", type: "latency", stream: "downstream", toxicity: 1,
      attributes: { latency: 300, jitter: 0 },
    });
    if (toxic.name !== "e2e_latency") fail("toxic name " + toxic.name);
    const during = await rtt(port, 64, 5000);
    if (during < 280) fail("latency toxic not observed: " + during.toFixed(1) + " ms (before " + before.toFixed(1) + ")");

    const faults = (await agentJson(base, "/v1/faults")).faults;
    const f = faults.find((x) => x.origin === "toxiproxy" && x.state === "active");
    if (!f) fail("toxic is not a registered fault: " + JSON.stringify(faults));

    const updated = await toxic.update({ attributes: { latency: 100 } });
    if (updated.attributes.latency !== 100) fail("update: " + JSON.stringify(updated.attributes));
    const lower = await rtt(port, 64, 5000);
    if (lower < 90 || lower > 280) fail("updated latency not observed: " + lower.toFixed(1) + " ms");

    await toxic.remove();
    const after = await rtt(port, 64, 3000);
    if (after > 150) fail("toxic removed but still slow: " + after.toFixed(1) + " ms");
    const ended = await agentJson(base, "/v1/faults/" + f.id);
    if (ended.state !== "reverted" || ended.revert_reason !== "delete") fail("fault after remove: " + JSON.stringify(ended));

    const off = await proxy.update({ enabled: false });
    if (off.enabled !== false) fail("proxy not disabled");
    let refused = false;
    try { await rtt(port, 8, 500); } catch (e) { refused = true; }
    if (!refused) fail("disabled proxy still relays");
    await client.reset();
    await rtt(port, 8, 3000);

    // ---- dynamic proxies: create, re-bind, upstream, toxic, populate, delete ----
    const dyn = await client.createProxy({ name: "e2e_dyn", listen: "127.0.0.1:0", upstream });
    const dport = Number(dyn.listen.split(":").pop());
    await rtt(dport, 32, 3000);
    const moved = await dyn.update({ listen: "127.0.0.1:0", upstream, enabled: true });
    const dport2 = Number(moved.listen.split(":").pop());
    if (dport2 === dport) fail("re-listen kept the port " + dport);
    await rtt(dport2, 32, 3000);
    const away = await moved.update({ listen: moved.listen, upstream: "127.0.0.1:1", enabled: true });
    if (away.upstream !== "127.0.0.1:1") fail("upstream update: " + away.upstream);
    await moved.update({ listen: moved.listen, upstream, enabled: true });
    const lag = await moved.addToxic({
      name: "dyn_lag", type: "latency", stream: "downstream", toxicity: 1,
      attributes: { latency: 200, jitter: 0, not_a_toxiproxy_attribute: 1 },
    });
    if ("not_a_toxiproxy_attribute" in lag.attributes) fail("unknown attribute kept: " + JSON.stringify(lag.attributes));
    const slow = await rtt(dport2, 32, 5000);
    if (slow < 180) fail("toxic on the created proxy not observed: " + slow.toFixed(1) + " ms");
    let fl = (await agentJson(base, "/v1/faults")).faults;
    const pf = fl.find((x) => x.type === "proxy" && x.state === "active" && x.evidence.proxy === "e2e_dyn");
    if (!pf || pf.origin !== "toxiproxy") fail("created proxy is not a registered fault: " + JSON.stringify(fl.slice(0, 4)));

    const pop = await client.populate([
      { name: "e2e_p1", listen: "127.0.0.1:0", upstream, enabled: true },
      { name: "e2e_p2", listen: "127.0.0.1:0", upstream, enabled: true },
    ]);
    for (const n of ["e2e_p1", "e2e_p2"]) {
      if (!pop[n]) fail("populate did not return " + n + ": " + Object.keys(pop));
      await rtt(Number(pop[n].listen.split(":").pop()), 16, 3000);
    }
    const names = Object.keys(await client.getAll()).sort().join(",");
    if (names !== "e2e,e2e_dyn,e2e_p1,e2e_p2") fail("getAll after populate: " + names);

    await moved.remove();
    await pop.e2e_p1.remove();
    await pop.e2e_p2.remove();
    let gone = false;
    try { await client.get("e2e_dyn"); } catch (e) { gone = /404/.test(String(e.message)); }
    if (!gone) fail("a deleted proxy still answers GET");
    let closed = false;
    try { await rtt(dport2, 8, 500); } catch (e) { closed = true; }
    if (!closed) fail("a deleted proxy still relays");
    fl = (await agentJson(base, "/v1/faults")).faults;
    const still = fl.filter((x) => x.state === "active");
    if (still.length) fail("faults left after deleting everything: " + JSON.stringify(still));
    const pfEnd = fl.find((x) => x.id === pf.id);
    if (pfEnd.state !== "reverted" || pfEnd.revert_reason !== "delete") fail("proxy fault after remove: " + JSON.stringify(pfEnd));
    let protectedFixed = false;
    try { await proxy.remove(); } catch (e) { protectedFixed = /409/.test(String(e.message)); }
    if (!protectedFixed) fail("the --proxy proxy could be deleted");

    // ---- what a client can tell apart from Toxiproxy ----
    const st = await client.createProxy({ name: "e2e_stack", listen: "127.0.0.1:0", upstream });
    const sport = Number(st.listen.split(":").pop());
    const l1 = await st.addToxic({ name: "l1", type: "latency", stream: "downstream", toxicity: 1, attributes: { latency: 100, jitter: 0 } });
    const l2 = await st.addToxic({ name: "l2", type: "latency", stream: "downstream", toxicity: 1, attributes: { latency: 100, jitter: 0 } });
    let stacked = Infinity;
    for (let i = 0; i < 3; i++) stacked = Math.min(stacked, await rtt(sport, 16, 5000));
    if (stacked < 198) fail("two stacked 100 ms latency toxics gave " + stacked.toFixed(1) + " ms (Toxiproxy: 200)");
    await l2.remove();
    await l1.remove();
    const bw1 = await st.addToxic({ name: "bw_fast", type: "bandwidth", stream: "downstream", toxicity: 1, attributes: { rate: 2000 } });
    const bw2 = await st.addToxic({ name: "bw_slow", type: "bandwidth", stream: "downstream", toxicity: 1, attributes: { rate: 100 } });
    const bwMs = await rtt(sport, 60000, 20000);
    if (bwMs < 590) fail("60 KB through bandwidth 2000 then 100 KB/s took " + bwMs.toFixed(1) + " ms (the slower rate: 600)");
    await bw1.remove();
    await bw2.remove();

    const dead = await client.createProxy({ name: "e2e_dead", listen: "127.0.0.1:0", upstream: "127.0.0.1:1" });
    const deadPort = Number(dead.listen.split(":").pop());
    const ends = {};
    for (let i = 0; i < 30; i++) {
      const how = await probeEnd(deadPort, 5000);
      ends[how] = (ends[how] || 0) + 1;
    }
    if (ends.eof !== 30) fail("a refused upstream must close with FIN: " + JSON.stringify(ends));
    await dead.remove();

    const offP = await client.createProxy({ name: "e2e_off", listen: "localhost:0", upstream, enabled: false });
    if (offP.listen !== "localhost:0" || offP.enabled !== false) fail("a disabled proxy echoes its listen: " + offP.listen);
    const on = await offP.update({ listen: "localhost:0", upstream, enabled: true });
    if (!/^127\.0\.0\.1:\d+$/.test(on.listen) || on.listen.endsWith(":0")) fail("enabled: the bound address, got " + on.listen);
    await on.remove();

    const ids = new Set();
    for (const [method, p, want] of [["GET", "/version", 200], ["GET", "/proxies/none", 404], ["GET", "/proxies", 200]]) {
      const r = await fetch(base + p, { method, headers: { Authorization: "Bearer " + TOKEN } });
      const id = r.headers.get("x-toxiproxy-request-id");
      if (r.status !== want || !/^[0-9a-v]{20}$/.test(id || "")) fail(method + " " + p + ": status " + r.status + ", X-Toxiproxy-Request-Id " + id);
      ids.add(id);
    }
    if (ids.size !== 3) fail("request ids repeat: " + [...ids]);

    const kept = await st.addToxic({ name: "kept", type: "latency", stream: "downstream", toxicity: 1, attributes: { latency: 50, jitter: 0 } });
    await new Promise((r) => setTimeout(r, MAX_DURATION_MS + 700));
    const stackP = await client.get("e2e_stack");
    const keptToxic = await stackP.getToxic("kept");
    if (keptToxic.attributes.latency !== 50) fail("the toxic did not outlive --max-duration-ms");
    if ((await rtt(sport, 16, 5000)) < 48) fail("the kept toxic no longer delays");
    await kept.remove();
    await stackP.remove();

    console.log(`toxiproxy-node-client ${require("./node_modules/toxiproxy-node-client/package.json").version}: ` +
      `rtt before ${before.toFixed(1)} ms, with latency 300 ms ${during.toFixed(1)} ms, ` +
      `after update to 100 ms ${lower.toFixed(1)} ms, after remove ${after.toFixed(1)} ms; ` +
      `created proxy re-bound ${dport} -> ${dport2}, its toxic ${slow.toFixed(1)} ms, populate + delete ok; ` +
      `stacked latency 100+100 ms ${stacked.toFixed(1)} ms, bandwidth 2000+100 KB/s: 60 KB in ${bwMs.toFixed(0)} ms, ` +
      `refused upstream ${JSON.stringify(ends)}, disabled listen echoed, request ids ok, toxic kept past --max-duration-ms`);
    console.log("e2e toxiproxy: 1 passed, 0 failed");
  } finally {
    if (!exited) agent.kill("SIGTERM");
    await new Promise((r) => (exited ? r() : agent.on("exit", r)));
    echo.close();
    if (process.exitCode === 1) {
      console.error("--- agent log ---\n" + fs.readFileSync(path.join(dir, "agent.log"), "utf8").slice(-4000));
    } else {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }
}

main().catch((e) => {
  if (!process.exitCode) console.error("FAIL: " + (e && e.stack ? e.stack : e));
  process.exitCode = 1;
});
