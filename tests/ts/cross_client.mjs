#!/usr/bin/env node
// Cross-check of gdal-mcp's result contract with the official TypeScript MCP SDK 1.x client
// (@modelcontextprotocol/sdk, pinned in package.json / package-lock.json).
//
// Why this client: SDK 1.x `Client.callTool` validates `structuredContent` against the tool's
// `outputSchema` (compiled with Ajv when `listTools` runs) even for `isError` results, and throws
// -32602 "Structured content does not match the tool's output schema" when it does not match. So
// the server's error and refusal results must carry no `structuredContent`; their machine-readable
// part is the JSON of the second text block.
//
// The workspace DIR is recreated on every run (a DIR this script did not create is refused unless
// it is empty), so no capsule stored by an earlier run answers the refusal check. The server is
// started as `BIN serve --workspace DIR`, with this process's environment; its stderr is ours.
//
// Usage (Node >= 18, plain ESM, no compile step):
//
//     npm ci --prefix tests/ts
//     node tests/ts/cross_client.mjs --server target/debug/gdal-mcp \
//         --workspace /tmp/ts-xc-ws --data target/testdata [--timeout 120]
//
// One line per check (`PASS name: detail` or `FAIL name: why`), then `N passed, M failed` on its
// own line; the exit code is 1 when any check failed (or none ran).

import fs from "node:fs";
import path from "node:path";
import process from "node:process";
import { isDeepStrictEqual } from "node:util";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";

const MARKER = ".cross_client_ts"; // marks a workspace this script created (safe to delete)
const TOOLS = [
  "raster_info", "raster_reproject", "persist_justification", "provenance_report", "raster_stats",
  "raster_convert",
  "raster_resample", "raster_overviews", "raster_terrain", "vector_info", "vector_reproject",
  "vector_convert", "vector_clip", "zonal_stats", "raster_composite", "raster_aggregate",
  "dem_condition", "dem_flow_direction", "dem_flow_accumulation", "dem_streams", "dem_watershed",
  "raster_calc", "points_from_table", "vector_measure", "vector_buffer", "vector_overlay",
  "vector_join", "raster_sample", "vector_query",
];
const ERROR_KINDS = [
  "invalid_arguments", "path", "gdal", "algorithm", "cancelled", "plugin_failure",
  "invalid_justification", "store", "internal",
];
const FORBIDDEN_KEYWORDS = ["$schema", "$defs", "$ref", "oneOf", "anyOf", "allOf"];
const CHECK_NAMES = [
  "connect", "list_tools", "input_schemas", "raster_info", "missing_file", "wrong_type",
  "refusal", "justified", "provenance", "analysis", "analysis_refusal", "unknown_tool",
  "still_alive",
];

// ------------------------------------------------------------------------------------------------
// arguments

function usage(message) {
  if (message) process.stderr.write(`cross_client.mjs: ${message}\n`);
  process.stderr.write(
    "usage: node tests/ts/cross_client.mjs --server BIN --workspace DIR --data DIR [--timeout SECONDS]\n",
  );
  process.exit(2);
}

function parseArgs(argv) {
  const args = { timeout: 120 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const m = /^--(server|workspace|data|timeout)(?:=(.*))?$/.exec(a);
    if (a === "-h" || a === "--help") usage();
    if (!m) usage(`unknown argument ${JSON.stringify(a)}`);
    let value = m[2];
    if (value === undefined) {
      if (i + 1 >= argv.length) usage(`--${m[1]} needs a value`);
      value = argv[++i];
    }
    args[m[1]] = value;
  }
  for (const k of ["server", "workspace", "data"]) if (!args[k]) usage(`--${k} is required`);
  args.timeout = Number(args.timeout);
  if (!(args.timeout > 0)) usage("--timeout must be a positive number of seconds");
  args.server = path.resolve(args.server);
  try {
    fs.accessSync(args.server, fs.constants.X_OK);
    if (!fs.statSync(args.server).isFile()) throw new Error("not a file");
  } catch {
    usage(`--server ${args.server}: not an executable file`);
  }
  args.workspace = path.resolve(args.workspace);
  args.data = path.resolve(args.data);
  if (!fs.existsSync(path.join(args.data, "dem.tif"))) usage(`--data ${args.data}: no dem.tif there`);
  return args;
}

function prepareWorkspace(ws, data) {
  if (fs.existsSync(ws)) {
    const entries = fs.readdirSync(ws);
    if (entries.length && !entries.includes(MARKER)) {
      throw new Error(`refusing to reuse ${ws}: it is not empty and was not made by this script`);
    }
    fs.rmSync(ws, { recursive: true, force: true });
  }
  fs.mkdirSync(ws, { recursive: true });
  fs.writeFileSync(path.join(ws, MARKER), "created by tests/ts/cross_client.mjs\n");
  fs.copyFileSync(path.join(data, "dem.tif"), path.join(ws, "dem.tif"));
}

// ------------------------------------------------------------------------------------------------
// reporting

class CheckFailed extends Error {}

function expect(cond, message) {
  if (!cond) throw new CheckFailed(message);
}

const report = { passed: 0, failed: 0 };

function line(ok, name, detail) {
  if (ok) report.passed++;
  else report.failed++;
  let d = String(detail ?? "").split(/\s+/).join(" ").trim(); // one line per check
  if (d.length > 500) d = d.slice(0, 497) + "...";
  console.log(`${ok ? "PASS" : "FAIL"} ${name}${d ? ": " + d : ""}`);
}

function describe(e) {
  if (e instanceof McpError) return `McpError ${e.code}: ${e.message}`;
  if (e instanceof Error) return `${e.name}: ${e.message}`;
  return String(e);
}

const done = new Set();

async function check(name, body) {
  done.add(name);
  try {
    line(true, name, await body());
    return true;
  } catch (e) {
    line(false, name, e instanceof CheckFailed ? e.message : `threw ${describe(e)}`);
    if (process.env.CROSS_CLIENT_VERBOSE && !(e instanceof CheckFailed)) console.error(e);
    return false;
  }
}

// ------------------------------------------------------------------------------------------------
// result helpers

function texts(result) {
  return (result?.content ?? []).filter((c) => c && c.type === "text").map((c) => c.text);
}

/** JSON.stringify that never returns undefined. */
function js(x) {
  return JSON.stringify(x) ?? String(x);
}

function short(result) {
  const t = texts(result).join(" | ");
  return (t || js(result)).slice(0, 300);
}

/** The contract for every error or refusal result; returns {human, payload}. */
function errorShape(result, what) {
  expect(result.isError === true, `${what}: isError is ${JSON.stringify(result.isError)}, want true (${short(result)})`);
  expect(
    !("structuredContent" in result) || result.structuredContent === undefined,
    `${what}: an error result carries structuredContent ${js(result.structuredContent).slice(0, 200)}`,
  );
  const content = result.content ?? [];
  expect(
    content.length === 2 && content.every((c) => c.type === "text" && typeof c.text === "string"),
    `${what}: content is ${JSON.stringify(content.map((c) => c.type))}, want two text blocks (${short(result)})`,
  );
  let payload;
  try {
    payload = JSON.parse(content[1].text);
  } catch (e) {
    throw new CheckFailed(`${what}: block 1 is not JSON (${e.message}): ${content[1].text.slice(0, 200)}`);
  }
  expect(payload && typeof payload === "object" && !Array.isArray(payload), `${what}: block 1 is not a JSON object`);
  return { human: content[0].text, payload };
}

function errorPayload(shape, what) {
  const err = shape.payload.error;
  expect(err && typeof err === "object", `${what}: block 1 has no "error" object: ${js(shape.payload).slice(0, 200)}`);
  expect(ERROR_KINDS.includes(err.kind), `${what}: error.kind ${JSON.stringify(err.kind)} is not one of ${ERROR_KINDS.join(", ")}`);
  expect(typeof err.message === "string" && err.message.trim(), `${what}: error.message is not a non-empty string`);
  if ("errors" in err) expect(Array.isArray(err.errors), `${what}: error.errors is not an array`);
  return err;
}

/** Every place in a JSON Schema that breaks the "plain schema" rule, as JSON-pointer-ish paths. */
function schemaProblems(schema, where = "") {
  const problems = [];
  const walk = (node, at) => {
    if (Array.isArray(node)) {
      node.forEach((n, i) => walk(n, `${at}/${i}`));
      return;
    }
    if (!node || typeof node !== "object") return;
    for (const k of FORBIDDEN_KEYWORDS) if (k in node) problems.push(`${at}/${k}`);
    if (Array.isArray(node.type)) problems.push(`${at}/type=${JSON.stringify(node.type)}`);
    for (const [k, v] of Object.entries(node)) {
      if (["properties", "patternProperties", "$defs", "definitions", "dependentSchemas"].includes(k)) {
        if (v && typeof v === "object") for (const [name, sub] of Object.entries(v)) walk(sub, `${at}/${k}/${name}`);
      } else if (["enum", "const", "default", "examples", "description", "title", "required"].includes(k)) {
        // data, not subschemas
      } else if (v && typeof v === "object") {
        walk(v, `${at}/${k}`); // items, prefixItems, additionalProperties, not, if/then/else, oneOf ...
      }
    }
  };
  walk(schema, where);
  return problems;
}

/** The decision's values as words (recursively, nulls skipped), e.g. "reproject EPSG:31985 ... EPSG:4326". */
function decisionWords(decision) {
  const words = [];
  const walk = (v) => {
    if (Array.isArray(v)) v.forEach(walk);
    else if (v && typeof v === "object") Object.values(v).forEach(walk);
    else if (v !== null && v !== undefined) words.push(String(v));
  };
  walk(decision);
  return words.join(" ");
}

// Since issue 18 every domain checks what each finding's answer contains (a tolerance no smaller
// than the measured error, the alternatives considered by id, the offered safe alternative
// rejected with a reason); an acknowledgement is refused. Each finding is answered by id with its
// own content, as tests/python/careful.py and tests/src/lib.rs do.
const ANSWERS = {
  crs_change:
    "positions, areas and distances must survive for the regional map; we accept up to 1000 m of positional error there",
  ballpark_operation: "we accept up to 1000 m of positional error: the output is a regional preview at 1 km cells",
  unknown_accuracy: "we accept up to 1000 m of positional error: the output is a regional preview at 1 km cells",
  outside_area_of_use: "we accept up to 1000 m of positional error: the output is a regional preview at 1 km cells",
  continuous_input: "the surface is smooth, so the method keeps it continuous for the preview",
};
const CONSIDERED = {
  crs_datum: [["EPSG:3857 (Web Mercator)", "the basemap tiles reproject on their own"]],
  resampling: [
    ["nearest", "nearest makes steps in a smooth surface"],
    ["cubic", "cubic overshoots next to sharp edges"],
  ],
};

function justificationFor(entry) {
  const domain = entry.domain;
  const method = decisionWords(entry.decision) || String(domain);
  const evidence = {};
  const alternatives = [{ method: "keep the source CRS", why_not: "the other layers are geographic" }];
  for (const item of entry.evidence || []) {
    if (typeof item.id !== "string") continue;
    evidence[item.id] = `${ANSWERS[item.id] || "a regional preview whose figures are never used as measurements"} (${item.id})`;
    if (item.alternative && typeof item.alternative === "object") {
      alternatives.push({
        method: decisionWords(item.alternative),
        why_not: `the preview keeps the call's own setting to compare with the earlier runs (${item.id})`,
      });
    }
  }
  for (const [m, w] of CONSIDERED[domain] || []) alternatives.push({ method: m, why_not: w });
  return {
    intent: `TypeScript cross-client check: exercise the ${domain} justification path end to end.`,
    alternatives,
    choice: {
      method,
      rationale: `${method} suits a regional preview at 1 km cells: positions within 1000 m and smooth surfaces are what the map needs`,
      tradeoffs: "we accept up to 1000 m of positional error and 10 % of value error, since the figures are never used as measurements",
    },
    evidence,
    confidence: "medium",
    assumptions: ["The input is a small real DEM used only for protocol testing."],
  };
}

// ------------------------------------------------------------------------------------------------
// the run

async function main() {
  const args = parseArgs(process.argv.slice(2));
  console.log(
    `# node ${process.version}; reproduce: node tests/ts/cross_client.mjs --server ${args.server} ` +
      `--workspace ${args.workspace} --data ${args.data}`,
  );
  prepareWorkspace(args.workspace, args.data);
  const ws = args.workspace;
  const opts = { timeout: args.timeout * 1000 };

  const transport = new StdioClientTransport({
    command: args.server,
    args: ["serve", "--workspace", ws],
    env: process.env,
    stderr: "inherit",
  });
  let negotiated = "?";
  // The stdio transport has no setProtocolVersion; Client.connect calls it when present.
  transport.setProtocolVersion = (v) => {
    negotiated = v;
  };
  const client = new Client({ name: "gdal-mcp-ts-cross-client", version: "0.0.0" });
  let tools = [];
  let refusal = [];

  const connected = await check("connect", async () => {
    await client.connect(transport, opts);
    const info = client.getServerVersion();
    const caps = client.getServerCapabilities() ?? {};
    expect(caps.tools, `the server declares no tools capability: ${JSON.stringify(caps)}`);
    return `${info?.name ?? "anonymous"} ${info?.version ?? ""}, protocol ${negotiated}`;
  });

  if (connected) {
    await check("list_tools", async () => {
      const pages = [];
      let cursor;
      for (let i = 0; i < 50; i++) {
        // listTools also compiles every outputSchema with Ajv for callTool's validation.
        const page = await client.listTools(cursor ? { cursor } : undefined, opts);
        pages.push(page);
        tools.push(...page.tools);
        cursor = page.nextCursor;
        if (!cursor) break;
      }
      expect(pages.length === 1, `tools/list is paginated (${pages.length} pages): callTool would validate only the last page's tools`);
      const bad = [];
      for (const t of tools) {
        if (typeof t.name !== "string" || !t.name) bad.push(`a tool without a name: ${js(t).slice(0, 80)}`);
        if (typeof t.description !== "string" || !t.description.trim()) bad.push(`${t.name}: no description`);
        if (!t.inputSchema || typeof t.inputSchema !== "object") bad.push(`${t.name}: no inputSchema`);
      }
      expect(!bad.length, bad.join("; "));
      const names = tools.map((t) => t.name);
      const missing = TOOLS.filter((n) => !names.includes(n));
      const extra = names.filter((n) => !TOOLS.includes(n));
      expect(!missing.length, `missing tools: ${missing.join(", ")} (have ${names.join(", ")})`);
      const withOutput = tools.filter((t) => t.outputSchema).length;
      return `${tools.length} tools${extra.length ? ` (also ${extra.join(", ")})` : ""}, ${withOutput} with an outputSchema`;
    });

    await check("input_schemas", async () => {
      expect(tools.length, "no tools listed");
      const problems = [];
      for (const t of tools) {
        const s = t.inputSchema;
        if (s.type !== "object") problems.push(`${t.name}: top-level type ${JSON.stringify(s.type)}`);
        for (const p of schemaProblems(s)) problems.push(`${t.name}: ${p || "/"}`);
      }
      expect(!problems.length, `${problems.length} problem(s): ${problems.slice(0, 12).join("; ")}`);
      return `${tools.length} input schemas: top-level objects without ${FORBIDDEN_KEYWORDS.join(", ")} or type arrays`;
    });

    await check("raster_info", async () => {
      const result = await client.callTool({ name: "raster_info", arguments: { input: "dem.tif" } }, undefined, opts);
      expect(!result.isError, `isError: ${short(result)}`);
      const sc = result.structuredContent;
      expect(sc && typeof sc === "object", `no structuredContent (${short(result)})`);
      expect(sc.facts && typeof sc.facts === "object", `structuredContent has no facts (keys ${Object.keys(sc)})`);
      expect(sc.gdalinfo && typeof sc.gdalinfo === "object", `structuredContent has no gdalinfo (keys ${Object.keys(sc)})`);
      const t = texts(result);
      expect(t.length === 1 && (result.content ?? []).length === 1, `content is ${(result.content ?? []).length} block(s) (${t.length} text), want one text block`);
      let same = false;
      try {
        same = isDeepStrictEqual(JSON.parse(t[0]), sc);
      } catch {
        /* not JSON */
      }
      expect(same, "the text block is not the JSON of structuredContent");
      return `facts.crs ${JSON.stringify(sc.facts.crs?.id ?? null)}, gdalinfo size ${JSON.stringify(sc.gdalinfo.size ?? null)}; validated by the SDK against the outputSchema; text block = structuredContent`;
    });

    await check("missing_file", async () => {
      const result = await client.callTool({ name: "raster_info", arguments: { input: "nope.tif" } }, undefined, opts);
      const shape = errorShape(result, "raster_info nope.tif");
      expect(shape.human.includes("nope.tif"), `the message does not mention nope.tif: ${shape.human.slice(0, 200)}`);
      const err = errorPayload(shape, "raster_info nope.tif");
      return `isError, no structuredContent, kind ${err.kind}: ${shape.human}`;
    });

    await check("wrong_type", async () => {
      const result = await client.callTool({ name: "raster_info", arguments: { input: 123 } }, undefined, opts);
      const shape = errorShape(result, "raster_info input=123");
      expect(/\binput\b/.test(shape.human), `the message does not mention input: ${shape.human.slice(0, 200)}`);
      const err = errorPayload(shape, "raster_info input=123");
      return `isError, no structuredContent, kind ${err.kind}: ${shape.human}`;
    });

    const reprojectArgs = {
      input: "dem.tif",
      output: "out.tif",
      dst_crs: "EPSG:4326",
      resampling: "bilinear",
    };

    await check("refusal", async () => {
      const result = await client.callTool({ name: "raster_reproject", arguments: reprojectArgs }, undefined, opts);
      const shape = errorShape(result, "raster_reproject without justification");
      const { human, payload } = shape;
      expect(human.includes("crs_datum"), `the message does not name crs_datum: ${human.slice(0, 200)}`);
      expect(human.includes("sha256:"), `the message holds no sha256: key: ${human.slice(0, 200)}`);
      expect(Array.isArray(payload.refusal) && payload.refusal.length, `block 1 has no non-empty refusal array: ${js(payload).slice(0, 200)}`);
      expect(Array.isArray(payload.reflection), `block 1 has no reflection array (keys ${Object.keys(payload)})`);
      payload.refusal.forEach((e, i) => {
        expect(e && typeof e === "object", `refusal[${i}] is not an object`);
        expect(typeof e.key === "string" && e.key.startsWith("sha256:"), `refusal[${i}].key ${JSON.stringify(e.key)}`);
        expect(typeof e.domain === "string" && e.domain, `refusal[${i}] has no domain`);
        for (const f of ["severity", "reason", "decision", "prompt", "schema", "how_to_supply", "errors"]) {
          expect(f in e, `refusal[${i}] (${e.domain}) has no ${f}`);
        }
        expect(human.includes(e.domain), `the message does not name ${e.domain}`);
        expect(human.includes(e.key), `the message does not hold ${e.domain}'s key ${e.key}`);
        expect(human.includes(e.reason), `the message does not hold ${e.domain}'s reason ${JSON.stringify(e.reason)}`);
      });
      const domains = payload.refusal.map((e) => e.domain);
      expect(domains.includes("crs_datum"), `crs_datum not refused (refused: ${domains.join(", ")})`);
      expect(!fs.existsSync(path.join(ws, "out.tif")), "out.tif was written although the call was refused");
      refusal = payload.refusal;
      return `refused by ${payload.refusal.map((e) => `${e.domain} (${e.severity}, ${e.key.slice(0, 15)}...)`).join(", ")}`;
    });

    await check("justified", async () => {
      expect(refusal.length, "no refusal to answer (the refusal check failed)");
      const justification = Object.fromEntries(refusal.map((e) => [e.domain, justificationFor(e)]));
      const result = await client.callTool(
        { name: "raster_reproject", arguments: { ...reprojectArgs, justification } },
        undefined,
        opts,
      );
      expect(!result.isError, `isError after justifying ${Object.keys(justification).join(", ")}: ${short(result)}`);
      const sc = result.structuredContent;
      expect(sc && typeof sc === "object", `no structuredContent (${short(result)})`);
      const reflection = sc.reflection;
      expect(Array.isArray(reflection) && reflection.length, `reflection is not a non-empty list: ${JSON.stringify(reflection)}`);
      for (const e of refusal) {
        const r = reflection.find((x) => x && x.domain === e.domain);
        expect(r, `no receipt for ${e.domain} in ${js(reflection).slice(0, 200)}`);
        expect(r.decision === "proceed", `receipt for ${e.domain}: decision ${JSON.stringify(r.decision)}, want proceed`);
        expect(r.key === e.key, `receipt for ${e.domain}: key ${r.key}, refused with ${e.key}`);
      }
      const out = path.join(ws, "out.tif");
      expect(fs.existsSync(out), `${out} was not written`);
      return `receipts ${reflection.map((r) => `${r.domain}=${r.decision}${r.stored_now ? " (stored now)" : ""}`).join(", ")}; wrote out.tif (${fs.statSync(out).size} B)`;
    });

    await check("provenance", async () => {
      // The SDK validates structuredContent against provenance_report's outputSchema (and the
      // gated result's `lineage` field against raster_reproject's) and throws on a mismatch.
      const result = await client.callTool(
        { name: "provenance_report", arguments: { input: "out.tif", format: "prov_json" } },
        undefined,
        opts,
      );
      expect(!result.isError, `isError: ${short(result)}`);
      const sc = result.structuredContent;
      expect(sc && sc.steps === 1, `want 1 step for out.tif, got ${JSON.stringify(sc && sc.steps)}`);
      const doc = JSON.parse(sc.report);
      expect(doc.activity && Object.keys(doc.activity).length === 1, `want one activity: ${sc.report.slice(0, 200)}`);
      return `out.tif: ${sc.steps} step, PROV-JSON with ${Object.keys(doc.entity || {}).length} entities`;
    });

    await check("analysis", async () => {
      // Every analysis tool once (zones near 50° N, in UTM 33N), each result validated by the SDK against its outputSchema
      // (callTool throws on a mismatch): nullable kinds, flattened totals, NaN nodata as null.
      const square = (x, y, s) => [[[x, y], [x + s, y], [x + s, y + s], [x, y + s], [x, y]]];
      const crs = { type: "name", properties: { name: "urn:ogc:def:crs:EPSG::32633" } };
      const fc = (features) => JSON.stringify({ type: "FeatureCollection", crs, features });
      fs.writeFileSync(path.join(ws, "zones.geojson"), fc([
        { type: "Feature", properties: { zone: "A" }, geometry: { type: "Polygon", coordinates: square(500000, 5500000, 100) } },
        { type: "Feature", properties: { zone: "B" }, geometry: { type: "Polygon", coordinates: square(500200, 5500000, 100) } },
      ]));
      fs.writeFileSync(path.join(ws, "sites.csv"), "id,x,y,pop\n001,500050,5500050,10\n002,500250,5500050,20\n");
      const done = [];
      const call = async (name, args) => {
        const result = await client.callTool({ name, arguments: args }, undefined, opts);
        expect(!result.isError, `${name} isError: ${short(result)}`);
        done.push(name);
        return result.structuredContent;
      };
      const measured = await call("vector_measure", { input: "zones.geojson", method: "planar" });
      expect(Math.abs(measured.polygons.area - 20000) < 1e-6, `area ${measured.polygons.area}, want 20000`);
      expect(measured.lines === null && measured.points === null, "absent kinds are not null");
      const points = await call("points_from_table", { input: "sites.csv", output: "sites.gpkg", x: "x", y: "y", crs: "EPSG:32633" });
      expect(points.features === 2, `points_from_table wrote ${points.features} features`);
      const joined = await call("vector_join", {
        input: "zones.geojson", join: "sites.gpkg", predicate: "contains", fields: ["pop"], stats: ["sum"], output: "joined.gpkg",
      });
      expect(joined.matched === 2, `vector_join matched ${joined.matched}`);
      await call("vector_buffer", { input: "sites.gpkg", output: "sites_10m.gpkg", distance: 10, unit: "m" });
      const overlay = await call("vector_overlay", { input: "zones.geojson", overlay: "sites_10m.gpkg", operation: "difference", output: "rest.gpkg" });
      expect(overlay.features === 2 && overlay.empty_reason === null, `vector_overlay: ${js(overlay).slice(0, 200)}`);
      const calc = await call("raster_calc", { inputs: { dem: "dem.tif" }, expression: "dem * 2", output: "twice.tif", data_type: "Float32" });
      expect(calc.nodata_is_nan === true || typeof calc.nodata === "number", `raster_calc nodata: ${js(calc).slice(0, 200)}`);
      return `${done.join(", ")}: schemas hold (area ${measured.polygons.area} m2, ${joined.matched} zones matched)`;
    });

    await check("analysis_refusal", async () => {
      const result = await client.callTool(
        { name: "vector_measure", arguments: { input: "zones.geojson", method: "planar", crs: "EPSG:3857" } },
        undefined,
        opts,
      );
      const { human, payload } = errorShape(result, "vector_measure in EPSG:3857");
      expect(human.includes("measurement"), `the message does not name measurement: ${human.slice(0, 200)}`);
      const entry = (payload.refusal || []).find((e) => e.domain === "measurement");
      expect(entry && entry.evidence.some((e) => e.id === "planar_distortion"), `no planar_distortion evidence: ${js(payload).slice(0, 300)}`);
      return `refused by measurement (${entry.severity})`;
    });

    await check("unknown_tool", async () => {
      let result;
      try {
        result = await client.callTool({ name: "no_such_tool_xyz", arguments: { x: 1 } }, undefined, opts);
      } catch (e) {
        expect(e instanceof McpError, `threw something other than an McpError: ${describe(e)}`);
        return `thrown McpError ${e.code}: ${e.message}`;
      }
      expect(result.isError === true, `an unknown tool returned a non-error result: ${short(result)}`);
      const sc = "structuredContent" in result ? " (with structuredContent)" : " (no structuredContent)";
      return `isError result${sc}: ${short(result)}`;
    });

    await check("still_alive", async () => {
      const page = await client.listTools(undefined, opts);
      return `tools/list answered after the unknown tool (${page.tools.length} tools)`;
    });
  }

  for (const name of CHECK_NAMES) if (!done.has(name)) line(false, name, "not run: no connection");
  try {
    await client.close();
  } catch (e) {
    line(false, "shutdown", describe(e));
  }
}

const guard = setTimeout(() => {
  line(false, "overall", "the run took longer than 20 minutes");
  console.log(`${report.passed} passed, ${report.failed} failed`);
  process.exit(1);
}, 20 * 60 * 1000);
guard.unref();

try {
  await main();
} catch (e) {
  line(false, "setup", describe(e));
}
console.log(`${report.passed} passed, ${report.failed} failed`);
process.exit(report.failed === 0 && report.passed > 0 ? 0 : 1);
