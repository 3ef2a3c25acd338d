// run.js - the stock Toxiproxy Node client (toxiproxy-node-client, pinned in
// package-lock.json) drives a real `chaosloco agent --toxiproxy-compat`:
// it lists the agent's proxy, adds a latency toxic and the test observes the
// delay through the proxy with a TCP echo server behind it, updates and
// removes the toxic, disables the proxy and resets it. The toxic must also
// show up as a registered fault in the agent's own API.
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

async function waitFile(file, ms) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (fs.existsSync(file)) return fs.readFileSync(file, "utf8").trim();
    await new Promise((r) => setTimeout(r, 50));
  }
  fail("no " + file + " after " + ms + " ms");
}

async function agentJson(base, p) {
  const r = await fetch(base + p);
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
    "--toxiproxy-compat", "--max-duration-ms", "60000",
    "--proxy", "e2e=127.0.0.1:0->" + upstream, "--", "sleep", "1000"],
  { stdio: ["ignore", log, log] });
  let exited = false;
  agent.on("exit", () => { exited = true; });
  try {
    const addr = await waitFile(path.join(dir, "state", "listen.addr"), 15000);
    const base = "http://" + addr;
    const client = new Toxiproxy(base);

    const version = await client.getVersion();
    if (!version.includes("chaosloco")) fail("GET /version: " + version);
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

    console.log(`toxiproxy-node-client ${require("./node_modules/toxiproxy-node-client/package.json").version}: ` +
      `rtt before ${before.toFixed(1)} ms, with latency 300 ms ${during.toFixed(1)} ms, ` +
      `after update to 100 ms ${lower.toFixed(1)} ms, after remove ${after.toFixed(1)} ms`);
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
