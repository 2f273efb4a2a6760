#!/usr/bin/env python3
"""Cross-implementation check: drive the gdal-mcp server with the official Python MCP SDK.

Runs the same checks twice, once per connection mode of ``mcp`` 2.3.0's ``Client``:

* ``legacy``: the 2025-11-25 ``initialize`` handshake;
* ``auto``:   probes ``server/discover`` and speaks the 2026-07-28 revision when the server
  answers it (the SDK falls back to ``initialize`` otherwise; that fallback is reported as
  a failed ``0.handshake`` check unless ``--allow-auto-fallback`` is given).

Each mode gets its own workspace ``<WORKSPACE>/<mode>`` (recreated on every run) holding a
copy of ``<DATA>/dem.tif`` and its own capsule store ``<WORKSPACE>/<mode>/.preflight``, so
the refusal of check 3 is not answered by capsules stored by the other mode. The server is
started as::

    SERVER serve --workspace <WORKSPACE>/<mode> --store <WORKSPACE>/<mode>/.preflight

with the full environment of this process. One line is printed per check, and the very
last line is ``N passed, M failed``; the exit code is 0 only when M == 0.

Result contract checked here: a successful result carries ``structuredContent`` (validated by
the SDK against the tool's output schema); an error or a refusal is ``isError`` with **no**
``structuredContent`` and two text blocks, the human-readable message and the JSON
``{"error": {"kind", "message", ...}}`` or ``{"refusal": [...], "reflection": [...]}``. Every
error result met here is checked for that shape.

Usage::

    python tests/python/cross_client.py --server target/debug/gdal-mcp \\
        --workspace /tmp/xc-ws --data target/testdata

Only the standard library and ``mcp`` (see requirements.txt) are used.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import traceback
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, MCPError

import careful  # beside this script
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

MODES = ("legacy", "auto")
REQUIRED_TOOLS = ("raster_info", "raster_reproject", "persist_justification")
REFUSED_DOMAINS = ("crs_datum", "resampling")
ERROR_KINDS = (
    "invalid_arguments",
    "path",
    "gdal",
    "algorithm",
    "cancelled",
    "plugin_failure",
    "invalid_justification",
    "store",
    "memory_budget",
    "internal",
)
DST_CRS = "EPSG:4326"
RESAMPLING = "bilinear"
MARKER = ".cross_client"  # marks a per-mode workspace this script created (safe to delete)
CHECK_NAMES = (
    "0.handshake",
    "1.listings",
    "2.raster_info",
    "2b.error_results",
    "3.refusal",
    "4.justified",
    "5.capsules_apply",
    "6.unknown_tool",
    "6b.still_alive",
)


class CheckFailed(Exception):
    """A check's expectation did not hold."""


def expect(cond: Any, message: str) -> None:
    if not cond:
        raise CheckFailed(message)


class Report:
    def __init__(self) -> None:
        self.passed = 0
        self.failed = 0

    def line(self, ok: bool, mode: str, name: str, detail: str) -> None:
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        detail = " ".join(detail.split())  # one line per check, whatever the message holds
        if len(detail) > 400:
            detail = detail[:397] + "..."
        print(f"{'PASS' if ok else 'FAIL'} [{mode}] {name}: {detail}", flush=True)


def describe(exc: BaseException) -> str:
    if isinstance(exc, MCPError):
        return f"MCPError {exc.code}: {exc.message}"
    if isinstance(exc, TimeoutError):
        return "timed out"
    return f"{type(exc).__name__}: {exc}"


def _leaf(exc: BaseException) -> BaseException:
    """The first real exception inside (nested) task-group exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def error_parts(result: Any, what: str) -> tuple[str, dict[str, Any]]:
    """An error or refusal result: (human message, the JSON object of the second text block).

    Asserts the contract: is_error, no structured_content, two text blocks, block 1 a JSON object.
    """
    expect(result.is_error, f"{what}: is_error is False ({_text(result)})")
    expect(
        result.structured_content is None,
        f"{what}: an error result carries structured_content {result.structured_content!r:.200}",
    )
    content = list(result.content or [])
    kinds = [getattr(c, "type", type(c).__name__) for c in content]
    expect(
        len(content) == 2 and all(isinstance(getattr(c, "text", None), str) for c in content),
        f"{what}: content is {kinds}, want two text blocks ({_text(result)})",
    )
    try:
        payload = json.loads(content[1].text)
    except json.JSONDecodeError as e:
        raise CheckFailed(f"{what}: block 1 is not JSON ({e}): {content[1].text[:200]}") from e
    expect(isinstance(payload, dict), f"{what}: block 1 is not a JSON object: {content[1].text[:200]}")
    return content[0].text, payload


def error_kind(payload: dict[str, Any], what: str) -> str:
    """The kind of an {"error": {...}} payload, checked against the contract's list."""
    err = payload.get("error")
    expect(isinstance(err, dict), f"{what}: block 1 has no 'error' object: {json.dumps(payload)[:200]}")
    expect(err.get("kind") in ERROR_KINDS, f"{what}: error.kind {err.get('kind')!r} not in {ERROR_KINDS}")
    expect(isinstance(err.get("message"), str) and err["message"].strip(), f"{what}: error.message is empty")
    return str(err["kind"])


def justification_for(domain: str, entry: dict[str, Any] | None) -> dict[str, Any]:
    """A careful justification for one refused domain: each finding answered by id with its
    own content (a boilerplate answer is refused since issue 18; see `careful.py`)."""
    if domain == "crs_datum":
        method = DST_CRS
    elif domain == "resampling":
        method = RESAMPLING
    else:
        method = _method_from_schema(entry) or "default"
    return careful.justification(
        dict(entry or {}, domain=domain), method,
        f"Cross-client check: exercise the {domain} justification path end to end.")


def _method_from_schema(entry: dict[str, Any] | None) -> str | None:
    """For a domain the brief does not name, take the first enum value of choice.method, if any."""
    try:
        schema = (entry or {}).get("schema") or {}
        method = schema["properties"]["choice"]["properties"]["method"]
        values = method.get("enum") or []
        return str(values[0]) if values else None
    except (KeyError, TypeError, AttributeError):
        return None


async def list_all(fetch: Callable[..., Awaitable[Any]], attr: str) -> list[Any]:
    """Walk a paginated list_* call (bounded, so a looping cursor cannot hang us)."""
    items: list[Any] = []
    cursor: str | None = None
    for _ in range(50):
        page = await fetch(cursor=cursor)
        items.extend(getattr(page, attr))
        cursor = page.next_cursor
        if not cursor:
            break
    return items


class ModeRun:
    def __init__(self, args: argparse.Namespace, mode: str, report: Report) -> None:
        self.args = args
        self.mode = mode
        self.report = report
        self.ws = Path(args.workspace).resolve() / mode
        self.timeout: float = args.timeout
        self.refusal: list[dict[str, Any]] = []

    def prepare_workspace(self) -> None:
        if self.ws.exists():
            if not (self.ws / MARKER).exists():
                raise SystemExit(f"refusing to reuse {self.ws}: it exists and was not made by this script")
            shutil.rmtree(self.ws)
        self.ws.mkdir(parents=True)
        (self.ws / MARKER).write_text("created by tests/python/cross_client.py\n")
        src = Path(self.args.data) / "dem.tif"
        if not src.is_file():
            raise SystemExit(f"--data {self.args.data}: no dem.tif there")
        shutil.copyfile(src, self.ws / "dem.tif")

    def client(self) -> Client:
        params = StdioServerParameters(
            command=self.args.server,
            args=["serve", "--workspace", str(self.ws), "--store", str(self.ws / ".preflight")],
            env=dict(os.environ),  # stdio_client passes only HOME/PATH/... unless told otherwise
        )
        server: Any = params
        if self.args.server_log:
            # Client(params) would send the server's stderr to ours; a transport lets us redirect it.
            server = stdio_client(params, errlog=self.args.server_log_file)
        return Client(server, mode=self.mode, read_timeout_seconds=self.timeout)

    async def check(self, name: str, body: Callable[[], Awaitable[str]]) -> bool:
        try:
            with anyio.fail_after(self.timeout):
                detail = await body()
        except CheckFailed as e:
            self.report.line(False, self.mode, name, str(e))
            return False
        except Exception as e:  # noqa: BLE001 - a check reports, it never aborts the run
            if self.args.verbose:
                traceback.print_exc(file=sys.stderr)
            self.report.line(False, self.mode, name, describe(e))
            return False
        self.report.line(True, self.mode, name, detail)
        return True

    async def run(self) -> None:
        self.prepare_workspace()
        done: set[str] = set()
        try:
            # Overall guard; every request is also bounded by read_timeout_seconds and by
            # check()'s own fail_after. Connecting happens inside this scope only.
            with anyio.fail_after(self.timeout * (len(CHECK_NAMES) + 2)):
                async with self.client() as client:
                    await self.run_checks(client, done)
        except BaseException as e:  # noqa: BLE001 - connect failures, crashes on shutdown
            if isinstance(e, KeyboardInterrupt):
                raise
            if self.args.verbose:
                traceback.print_exc(file=sys.stderr)
            reason = describe(_leaf(e))
            missing = [n for n in CHECK_NAMES if n not in done]
            if not missing:
                self.report.line(False, self.mode, "shutdown", reason)
            for n in missing:
                self.report.line(False, self.mode, n, f"not run: {reason}")

    async def run_checks(self, client: Client, done: set[str]) -> None:
        ws = self.ws
        dem = str(ws / "dem.tif")

        async def handshake() -> str:
            version = client.protocol_version
            if self.mode == "legacy":
                expect(version in HANDSHAKE_PROTOCOL_VERSIONS, f"protocol {version!r} is not a handshake version")
            elif version not in MODERN_PROTOCOL_VERSIONS:
                expect(
                    self.args.allow_auto_fallback,
                    f"auto mode fell back to {version!r}: the server did not answer server/discover",
                )
            info = client.server_info
            who = f"{info.name} {info.version}" if info else "anonymous server"
            return f"protocol {version}, {who}"

        async def listings() -> str:
            tools = {t.name: t for t in await list_all(client.list_tools, "tools")}
            for name in REQUIRED_TOOLS:
                expect(name in tools, f"tool {name} missing (have {sorted(tools)})")
                tool = tools[name]
                expect(isinstance(tool.description, str) and tool.description.strip(), f"{name}: no description")
                expect(isinstance(tool.input_schema, dict) and tool.input_schema, f"{name}: no input schema")
                expect(isinstance(tool.output_schema, dict) and tool.output_schema, f"{name}: no output schema")
            prompts = await list_all(client.list_prompts, "prompts")
            expect(len(prompts) >= 2, f"{len(prompts)} prompt(s), want >= 2")
            resources = await list_all(client.list_resources, "resources")
            uris = [str(r.uri) for r in resources]
            methodology = [u for u in uris if u.startswith("methodology://")]
            expect(methodology, f"no methodology:// resource among {uris[:10]}")
            return f"{len(tools)} tools, {len(prompts)} prompts, {len(resources)} resources ({methodology[0]} ...)"

        async def raster_info() -> str:
            result = await client.call_tool("raster_info", {"input": dem})
            expect(not result.is_error, f"is_error: {_text(result)}")
            sc = result.structured_content
            expect(isinstance(sc, dict), f"structured_content is {type(sc).__name__}, want dict")
            facts = sc.get("facts")
            expect(isinstance(facts, dict), f"no 'facts' object (keys {sorted(sc)})")
            crs = facts.get("crs")
            expect(isinstance(crs, dict), f"facts.crs is {type(crs).__name__}, want object")
            expect(crs.get("id"), f"facts.crs has no id: {crs}")
            return f"crs id {crs.get('id')}"

        async def error_results() -> str:
            missing = await client.call_tool("raster_info", {"input": str(ws / "nope.tif")})
            human, payload = error_parts(missing, "raster_info nope.tif")
            expect("nope.tif" in human, f"the message does not mention nope.tif: {human[:200]}")
            kind_missing = error_kind(payload, "raster_info nope.tif")
            wrong = await client.call_tool("raster_info", {"input": 123})
            human2, payload2 = error_parts(wrong, "raster_info input=123")
            expect("input" in human2, f"the message does not mention input: {human2[:200]}")
            kind_wrong = error_kind(payload2, "raster_info input=123")
            return f"missing file: {kind_missing}; wrong type: {kind_wrong}; no structured_content on either"

        def reproject_args(output: str, justification: dict[str, Any] | None = None) -> dict[str, Any]:
            a: dict[str, Any] = {
                "input": dem,
                "output": str(ws / output),
                "dst_crs": DST_CRS,
                "resampling": RESAMPLING,
            }
            if justification is not None:
                a["justification"] = justification
            return a

        async def refusal() -> str:
            result = await client.call_tool("raster_reproject", reproject_args(f"out_{self.mode}.tif"))
            expect(result.is_error, "is_error is False: the unjustified reprojection was not refused")
            human, payload = error_parts(result, "the refusal")
            entries = payload.get("refusal")
            expect(isinstance(entries, list) and entries, f"'refusal' is not a non-empty list: {entries!r}")
            domains = []
            for i, entry in enumerate(entries):
                expect(isinstance(entry, dict), f"refusal[{i}] is not an object")
                domains.append(entry.get("domain"))
                key = entry.get("key")
                expect(isinstance(key, str) and key.startswith("sha256:"), f"refusal[{i}].key {key!r}")
                prompt = entry.get("prompt")
                expect(isinstance(prompt, str) and prompt.strip(), f"refusal[{i}].prompt is not rendered text")
                expect(isinstance(entry.get("schema"), dict), f"refusal[{i}].schema is not an object")
                expect("severity" in entry, f"refusal[{i}] has no severity")
                expect(key in human, f"the refusal's message does not hold refusal[{i}].key {key}")
            for d in REFUSED_DOMAINS:
                expect(d in domains, f"domain {d} not refused (domains {domains})")
            self.refusal = entries
            return f"refused domains {domains}"

        async def justified() -> str:
            entries = {e.get("domain"): e for e in self.refusal if isinstance(e, dict)}
            domains = list(entries) or list(REFUSED_DOMAINS)
            just = {d: justification_for(d, entries.get(d)) for d in domains}
            output = ws / f"out_{self.mode}.tif"
            result = await client.call_tool("raster_reproject", reproject_args(output.name, just))
            expect(not result.is_error, f"is_error: {_text(result)}")
            sc = result.structured_content
            expect(isinstance(sc, dict), f"structured_content is {type(sc).__name__}, want dict")
            reflection = sc.get("reflection")
            expect(isinstance(reflection, list) and reflection, f"'reflection' is not a non-empty list: {reflection!r}")
            for i, r in enumerate(reflection):
                expect(isinstance(r, dict), f"reflection[{i}] is not an object")
                expect(r.get("decision") in ("proceed", "warn"), f"reflection[{i}].decision {r.get('decision')!r}")
                expect(r.get("key"), f"reflection[{i}] has no key")
            expect(output.is_file(), f"{output} was not written")
            return f"{[r.get('decision') for r in reflection]}, wrote {output.name} ({output.stat().st_size} B)"

        async def capsules_apply() -> str:
            output = ws / f"out_{self.mode}_again.tif"
            result = await client.call_tool("raster_reproject", reproject_args(output.name))
            expect(not result.is_error, f"refused again although capsules are stored: {_text(result)}")
            expect(output.is_file(), f"{output} was not written")
            return f"wrote {output.name} without a new justification"

        async def unknown_tool() -> str:
            try:
                result = await client.call_tool("no_such_tool_xyz", {"x": 1})
            except TimeoutError:
                raise
            except MCPError as e:
                return f"raised MCPError {e.code}: {e.message}"
            except Exception as e:  # noqa: BLE001 - any error is an accepted answer
                return f"raised {describe(e)}"
            expect(result.is_error, "an unknown tool returned a successful result")
            human, payload = error_parts(result, "the unknown tool's error result")
            return f"is_error result ({error_kind(payload, 'unknown tool')}): {human[:200]}"

        async def still_alive() -> str:
            tools = await list_all(lambda **kw: client.list_tools(cache_mode="bypass", **kw), "tools")
            return f"tools/list answered after the unknown tool ({len(tools)} tools)"

        bodies = (
            handshake,
            listings,
            raster_info,
            error_results,
            refusal,
            justified,
            capsules_apply,
            unknown_tool,
            still_alive,
        )
        for name, body in zip(CHECK_NAMES, bodies, strict=True):
            await self.check(name, body)
            done.add(name)


def _text(result: Any) -> str:
    parts = [getattr(c, "text", "") for c in (result.content or [])]
    text = " ".join(p for p in parts if p) or repr(result.structured_content)
    return text[:300]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--server", required=True, help="path to the gdal-mcp binary")
    p.add_argument("--workspace", required=True, help="scratch dir; <dir>/<mode> is recreated per mode")
    p.add_argument("--data", required=True, help="dir holding dem.tif (projected CRS with an EPSG id)")
    p.add_argument("--modes", default=",".join(MODES), help="comma list of legacy,auto (default: both)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per call / check (default 60)")
    p.add_argument("--allow-auto-fallback", action="store_true", help="accept auto mode settling on initialize")
    p.add_argument("--server-log", help="append the server's stderr to this file instead of ours")
    p.add_argument("-v", "--verbose", action="store_true", help="tracebacks of failures on stderr")
    args = p.parse_args(argv)
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    for m in args.modes:
        if m not in MODES:
            p.error(f"unknown mode {m!r} (choose from {', '.join(MODES)})")
    server = Path(args.server)
    if not (server.is_file() and os.access(server, os.X_OK)):
        p.error(f"--server {args.server}: not an executable file")
    args.server = str(server.resolve())
    if not (Path(args.data) / "dem.tif").is_file():
        p.error(f"--data {args.data}: no dem.tif there")
    return args


async def amain(args: argparse.Namespace) -> Report:
    report = Report()
    args.server_log_file = open(args.server_log, "a") if args.server_log else None  # noqa: SIM115
    try:
        for mode in args.modes:
            await ModeRun(args, mode, report).run()
    finally:
        if args.server_log_file:
            args.server_log_file.close()
    return report


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report = anyio.run(amain, args)
    print(f"{report.passed} passed, {report.failed} failed", flush=True)
    return 0 if report.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
