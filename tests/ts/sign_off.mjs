#!/usr/bin/env node
// A person's sign-off through the host (issue 20) with the official TypeScript MCP SDK 1.x
// client (2025-11-25, `elicitation/create`): the client declares form elicitation and its
// handler plays the person. The operator's policy says every crs_datum decision needs a
// person; `vector_reproject` of a GeoJSON to UTM meets it.
//
// Checks: accept (the call runs; its receipt names this client and the note; the ledger has
// the approval between the proposal and the execution) and decline (refused, saying so, the
// note quoted, nothing written).
//
// Usage:
//
//     npm ci --prefix tests/ts
//     node tests/ts/sign_off.mjs --server target/debug/gdal-mcp --workspace /tmp/ts-so-ws
//
// One line per check, then `N passed, M failed`; exit code 1 when any failed.

import fs from "node:fs";
import path from "node:path";
import process from "node:process";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const MARKER = ".sign_off_ts";
const CLIENT_NAME = "sign-off-check-ts";
const POLICY = `
[[rule]]
id = "people sign datum changes"
domain = "crs_datum"
outcome = "human"
`;

function parseArgs(argv) {
  const args = { timeout: 120 };
  for (let i = 0; i < argv.length; i++) {
    const m = /^--(server|workspace|timeout)$/.exec(argv[i]);
    if (!m || i + 1 >= argv.length) {
      process.stderr.write("usage: node tests/ts/sign_off.mjs --server BIN --workspace DIR\n");
      process.exit(2);
    }
    args[m[1]] = argv[++i];
  }
  if (!args.server || !args.workspace) process.exit(2);
  args.timeout = Number(args.timeout);
  return args;
}

function square(file, x) {
  const ring = [[x, 10], [x + 1, 10], [x + 1, 11], [x, 11], [x, 10]];
  fs.writeFileSync(file, JSON.stringify({
    type: "FeatureCollection",
    features: [{ type: "Feature", properties: { id: 1 }, geometry: { type: "Polygon", coordinates: [ring] } }],
  }));
}

function textOf(result) {
  return (result.content || []).map((c) => c.text || "").join("\n");
}

function expect(cond, message) {
  if (!cond) throw new Error(message);
}

const args = parseArgs(process.argv.slice(2));
const root = path.resolve(args.workspace);
if (fs.existsSync(root)) {
  if (!fs.existsSync(path.join(root, MARKER)) && fs.readdirSync(root).length > 0) {
    process.stderr.write(`refusing to reuse ${root}: not made by this script\n`);
    process.exit(2);
  }
  fs.rmSync(root, { recursive: true, force: true });
}
const ws = path.join(root, "ws");
const keys = path.join(root, "keys");
fs.mkdirSync(ws, { recursive: true });
fs.mkdirSync(keys, { recursive: true });
fs.writeFileSync(path.join(root, MARKER), "created by tests/ts/sign_off.mjs\n");
fs.writeFileSync(path.join(keys, "policy.toml"), POLICY);
square(path.join(ws, "cell.geojson"), 0);

async function withClient(answer, body) {
  const transport = new StdioClientTransport({
    command: args.server,
    args: ["serve", "--workspace", ws, "--store", path.join(ws, ".preflight"),
      "--key-file", path.join(keys, "a.key"), "--policy", path.join(keys, "policy.toml")],
    env: process.env,
    stderr: "inherit",
  });
  const client = new Client({ name: CLIENT_NAME, version: "1.0.0" },
    { capabilities: { elicitation: { form: {} } } });
  const messages = [];
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    messages.push(request.params.message || "");
    return typeof answer === "function" ? await answer(request) : answer;
  });
  await client.connect(transport);
  try {
    return await body(client, messages);
  } finally {
    await client.close();
  }
}

const call = {
  input: path.join(ws, "cell.geojson"), output: path.join(ws, "utm.gpkg"),
  dst_crs: "EPSG:32631", overwrite: true,
};
const output = path.join(ws, "utm.gpkg");
let passed = 0;
let failed = 0;

async function check(name, body) {
  try {
    const detail = await body();
    passed++;
    console.log(`PASS ${name}: ${detail}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${String(e && e.message || e).replace(/\s+/g, " ").slice(0, 400)}`);
  }
}

await check("accept", () => withClient(
  { action: "accept", content: { decision: "approve", note: "zone checked" } },
  async (client, messages) => {
    await client.listTools();
    const result = await client.callTool({ name: "vector_reproject", arguments: call },
      undefined, { timeout: args.timeout * 1000 });
    expect(!result.isError, `refused: ${textOf(result).slice(0, 400)}`);
    expect(fs.existsSync(output), "no output");
    expect(messages.length === 1 && messages[0].includes("vector_reproject")
      && messages[0].includes("crs_change"), `the form: ${messages[0]}`);
    const crs = result.structuredContent.reflection.find((r) => r.domain === "crs_datum");
    const approval = (crs.policy || {}).approval || "";
    expect(approval.includes(CLIENT_NAME) && approval.includes("zone checked"), `receipt: ${JSON.stringify(crs)}`);
    const kinds = fs.readFileSync(path.join(ws, ".preflight", "ledger.jsonl"), "utf8")
      .trim().split("\n").map((l) => JSON.parse(l).kind);
    const at = kinds.indexOf("approval");
    expect(at > kinds.indexOf("gate") && kinds.slice(at + 1).includes("gate"), `ledger ${kinds}`);
    fs.unlinkSync(output);
    return `approved by "${approval}"`;
  }));

await check("decline", () => withClient(
  { action: "accept", content: { decision: "decline", note: "wrong zone" } },
  async (client) => {
    await client.listTools();
    const result = await client.callTool({ name: "vector_reproject", arguments: call },
      undefined, { timeout: args.timeout * 1000 });
    const text = textOf(result);
    expect(result.isError, `not refused: ${text.slice(0, 300)}`);
    expect(result.structuredContent === undefined, "a refusal carries structuredContent");
    expect(text.includes("declined") && text.includes("wrong zone"), `refusal: ${text.slice(0, 500)}`);
    expect(!fs.existsSync(output), "written");
    return "refused: declined, with the note; nothing written";
  }));

// Attack round 22, R22-C5: a host that keeps a request alive on progress (the SDK's
// `resetTimeoutOnProgress`) timed out while the person read the form: no progress was sent
// while it was open. The person here answers after 3.5 s; the request's timeout is 2 s.
await check("slow person, progress keeps the call alive", () => withClient(
  async () => {
    await new Promise((resolve) => setTimeout(resolve, 3500));
    return { action: "accept", content: { decision: "approve", note: "read it slowly" } };
  },
  async (client) => {
    await client.listTools();
    const progress = [];
    const result = await client.callTool({ name: "vector_reproject", arguments: call },
      undefined, {
        timeout: 2000, resetTimeoutOnProgress: true, maxTotalTimeout: args.timeout * 1000,
        onprogress: (p) => progress.push(p),
      });
    expect(!result.isError, `refused: ${textOf(result).slice(0, 400)}`);
    const waiting = progress.filter((p) => String(p.message || "").includes("sign-off"));
    expect(waiting.length >= 3, `progress while the form was open: ${JSON.stringify(progress)}`);
    const values = progress.map((p) => p.progress);
    expect(values.every((v, i) => i === 0 || v > values[i - 1]), `progress does not grow: ${values}`);
    fs.unlinkSync(output);
    return `${waiting.length} progress notification(s) while the form was open`;
  }));

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 && passed > 0 ? 0 : 1);
