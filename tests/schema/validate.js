// validate.js - check chaosloco journals against docs/journal.schema.json
// (which holds the embedded Chaos Toolkit experiment to
// docs/ctk-experiment.schema.json), with ajv (pinned in package-lock.json,
// installed into the build tree by tests/CMakeLists.txt).
//
//   node validate.js [--schemas DIR] JOURNAL.json...   every file must validate
//   node validate.js [--schemas DIR] --experiments EXPERIMENT.json...
//       every file must validate against experiment.schema.json
//   node validate.js [--schemas DIR] --self-test       the schemas accept a good
//       journal and refuse each of the defects Chaos Toolkit's tools choke on
//
// DIR defaults to $CHAOSLOCO_SRC/docs. Exit 0 all valid, 1 something invalid,
// 2 the validator itself could not run (no ajv, unreadable schema).
"use strict";

const fs = require("fs");
const path = require("path");

function die(msg) {
  console.error("validate.js: " + msg);
  process.exit(2);
}

let Ajv2020;
try {
  Ajv2020 = require(path.join(__dirname, "node_modules", "ajv", "dist", "2020")).default;
} catch (e) {
  die("ajv is not installed next to this script (npm ci --ignore-scripts in " + __dirname + "): " + e.message);
}

const args = process.argv.slice(2);
let dir = process.env.CHAOSLOCO_SRC ? path.join(process.env.CHAOSLOCO_SRC, "docs") : null;
let selfTest = false;
let experiments = false;
const files = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--schemas") dir = args[++i];
  else if (args[i] === "--self-test") selfTest = true;
  else if (args[i] === "--experiments") experiments = true;
  else files.push(args[i]);
}
if (!dir) die("no schema directory: give --schemas DIR or set CHAOSLOCO_SRC");

function load(name) {
  try {
    return JSON.parse(fs.readFileSync(path.join(dir, name), "utf8"));
  } catch (e) {
    die("cannot read " + path.join(dir, name) + ": " + e.message);
  }
}

// strict: unknown keywords in the schemas are errors; union types and
// if/then without a "type" are how these schemas are written.
const ajv = new Ajv2020({ allErrors: true, strict: true, strictTypes: false, strictRequired: false,
  allowUnionTypes: true });
let validate;
const schemaName = experiments ? "experiment.schema.json" : "journal.schema.json";
try {
  if (!experiments) ajv.addSchema(load("ctk-experiment.schema.json"));
  validate = ajv.compile(load(schemaName));
} catch (e) {
  die("the schemas do not compile: " + e.message);
}

function problems(doc) {
  if (validate(doc)) return [];
  return validate.errors.map((e) => (e.instancePath || "/") + ": " + e.message +
    (e.params && Object.keys(e.params).length ? " " + JSON.stringify(e.params) : ""));
}

if (selfTest) {
  // The smallest journal of the shape chaosloco writes; each defect below is
  // one Chaos Toolkit's validation or report tools fail on.
  const activity = {
    type: "action", name: "kill-1",
    provider: { type: "http", url: "${chaosloco_agent_1}/v1/faults", method: "POST",
      headers: { "Content-Type": "application/json" }, arguments: { type: "kill", duration_ms: 100 } },
  };
  const probe = {
    type: "probe", name: "versions_monotonic", tolerance: 200,
    provider: { type: "http", url: "${chaosloco_syncer}/v1/events", method: "GET" },
  };
  const t = "2026-01-01T00:00:00.000Z";
  const good = () => ({
    "chaoslib-version": "1.45.0", platform: "Linux", node: "h",
    experiment: { version: "1.0.0", title: "t", description: "d", tags: ["x"],
      "steady-state-hypothesis": { title: "h", probes: [probe] }, method: [activity], rollbacks: [] },
    start: t, end: t, duration: 1.5, status: "completed", deviated: false,
    steady_states: {
      before: { steady_state_met: true, probes: [{ activity: probe, status: "succeeded", start: t, end: t,
        duration: 0, tolerance_met: true,
        output: { verdict: "pass", measured: 2.0, threshold: 3.0, cmp: "<=", unit: "nats", explanation: "e",
          measured_bpb: 2.885, threshold_bpb: 4.328 } }] },
      after: null, during: [],
    },
    run: [{ activity, status: "succeeded", output: {}, start: t, end: t, duration: 0.1 }], rollbacks: [],
    chaosloco: { version: "0.1.0", experiment: { title: "t" }, final_loss: 2.0, final_bpb: 2.885,
      clocks: [{ process: "syncer", url: "http://127.0.0.1:1", clock: "syncer", samples: 9, unstamped: 0,
        inconsistent: 0, offset_ms: 86400000.25, error_ms: 0.4, rtt_min_ms: 0.8, drift_ppm: 1.5, span_s: 30 }] },
  });
  const defects = {
    "an experiment without a method": (j) => { delete j.experiment.method; },
    "a method activity without a type": (j) => { delete j.experiment.method[0].type; },
    "a provider Chaos Toolkit does not know": (j) => { j.experiment.method[0].provider.type = "chaosloco"; },
    "an http provider without a url": (j) => { delete j.experiment.method[0].provider.url; },
    "an empty description": (j) => { j.experiment.description = ""; },
    "a hypothesis probe without a tolerance": (j) => { delete j.experiment["steady-state-hypothesis"].probes[0].tolerance; },
    "a float tolerance": (j) => { j.experiment["steady-state-hypothesis"].probes[0].tolerance = 0.5; },
    "a hypothesis without a title": (j) => { delete j.experiment["steady-state-hypothesis"].title; },
    "chaoslib-version that is not SemVer": (j) => { j["chaoslib-version"] = "chaosloco 0.1.0"; },
    "a status Chaos Toolkit does not have": (j) => { j.status = "stopped"; },
    "a run record whose activity has no type": (j) => { delete j.run[0].activity.type; },
    "a probe run without tolerance_met": (j) => { delete j.steady_states.before.probes[0].tolerance_met; },
    "during as a list of probes, not of states": (j) => { j.steady_states.during = [j.steady_states.before.probes[0]]; },
    "no chaosloco key": (j) => { delete j.chaosloco; },
    "no final_bpb under chaosloco": (j) => { delete j.chaosloco.final_bpb; },
    "no clocks under chaosloco": (j) => { delete j.chaosloco.clocks; },
    "a clock without its error bound": (j) => { delete j.chaosloco.clocks[0].error_ms; },
    "a probe in nats without measured_bpb": (j) => { delete j.steady_states.before.probes[0].output.measured_bpb; },
  };
  let bad = 0;
  const p0 = problems(good());
  if (p0.length) { console.error("FAIL: the good journal is refused:\n  " + p0.join("\n  ")); bad++; }
  for (const [what, spoil] of Object.entries(defects)) {
    const j = good();
    spoil(j);
    if (problems(j).length === 0) { console.error("FAIL: accepted " + what); bad++; }
  }
  console.log(`schema self-test: ${Object.keys(defects).length + 1 - bad} passed, ${bad} failed`);
  process.exit(bad ? 1 : 0);
}

if (files.length === 0) die("no file given (see the header of this file)");
let invalid = 0;
for (const f of files) {
  let doc;
  try {
    doc = JSON.parse(fs.readFileSync(f, "utf8"));
  } catch (e) {
    console.error(f + ": not JSON: " + e.message);
    invalid++;
    continue;
  }
  const p = problems(doc);
  if (p.length) {
    invalid++;
    console.error(f + ": INVALID against " + schemaName + ":\n  " + p.slice(0, 40).join("\n  "));
  } else if (experiments) {
    console.log(f + ": valid");
  } else {
    console.log(f + ": valid (status " + doc.status + ", " + doc.experiment.method.length + " method activities, " +
      doc.run.length + " run records)");
  }
}
process.exit(invalid ? 1 : 0);
