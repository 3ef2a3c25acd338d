// validate.mjs - the ctest case deploy/k8s-schema: every Kubernetes manifest
// validates against the API schema of its apiVersion and kind, as the
// kubernetes-models package (pinned in package-lock.json) carries it, and
// each deliberately broken manifest is refused for the reason it was
// broken for.
//
//   node validate.mjs --valid FILE... [--invalid FILE EXPECT]...
//
// --valid: each FILE must validate. --invalid FILE EXPECT: FILE must be
// refused with an error that contains EXPECT (a JSON path such as
// "spec/replicas"), so that a schema that refuses everything, or refuses
// for another reason, does not pass. Exit 0 all as expected, 1 otherwise,
// 77 (ctest's skip) when kubernetes-models is not installed, 64 bad usage.
// What the schemas do not catch: unknown keys (they allow additional
// properties, as `kubectl apply` without --validate=strict does).
import { readFileSync } from "node:fs";
import { basename } from "node:path";

// "apps/v1" -> "kubernetes-models/apps/v1/Kind", "v1" -> "kubernetes-models/v1/Kind"
async function modelFor(apiVersion, kind) {
  if (typeof apiVersion !== "string" || typeof kind !== "string" || !/^[A-Za-z0-9]+$/.test(kind))
    throw new Error("needs string apiVersion and kind");
  const mod = await import(`kubernetes-models/${apiVersion}/${kind}`);
  const model = mod[kind];
  if (typeof model !== "function") throw new Error(`kubernetes-models has no ${apiVersion} ${kind}`);
  return model;
}

// null when file validates, else the error text
async function check(file) {
  let obj;
  try {
    obj = JSON.parse(readFileSync(file, "utf8"));
  } catch (e) {
    return `not JSON: ${e.message}`;
  }
  try {
    const Model = await modelFor(obj.apiVersion, obj.kind);
    new Model(obj).validate();
    return null;
  } catch (e) {
    return e.message;
  }
}

function parseArgs(argv) {
  const valid = [], invalid = [];
  let mode = null;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--valid" || a === "--invalid") mode = a;
    else if (mode === "--valid") valid.push(a);
    else if (mode === "--invalid" && i + 1 < argv.length) invalid.push([a, argv[++i]]);
    else return null;
  }
  return valid.length || invalid.length ? { valid, invalid } : null;
}

const args = parseArgs(process.argv.slice(2));
if (!args) {
  console.error("usage: node validate.mjs --valid FILE... [--invalid FILE EXPECT]...");
  process.exit(64);
}
try {
  await import("kubernetes-models/v1/ConfigMap");
} catch (e) {
  console.log(`SKIP: kubernetes-models is not installed here (${e.code ?? e.message}); cmake runs npm ci`);
  process.exit(77);
}
let failures = 0;
for (const f of args.valid) {
  const err = await check(f);
  if (err) {
    console.log(`FAIL ${f}: ${err}`);
    failures++;
  } else {
    console.log(`ok   ${basename(f)}`);
  }
}
for (const [f, expect] of args.invalid) {
  const err = await check(f);
  if (!err) {
    console.log(`FAIL ${f}: accepted, but it is broken (${expect})`);
    failures++;
  } else if (!err.includes(expect)) {
    console.log(`FAIL ${f}: refused for another reason than ${expect}: ${err}`);
    failures++;
  } else {
    console.log(`ok   ${basename(f)} refused: ${err}`);
  }
}
if (args.valid.length < 1) {
  console.log("FAIL: no manifest to validate");
  failures++;
}
console.log(`${args.valid.length} valid, ${args.invalid.length} broken checked, ${failures} failure(s)`);
process.exit(failures ? 1 : 0);
