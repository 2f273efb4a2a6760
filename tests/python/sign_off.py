#!/usr/bin/env python3
"""A person's sign-off through the host (issue 20), driven by the official Python MCP SDK.

The operator's policy says every crs_datum decision needs a person (`outcome = "human"`);
`vector_reproject` of a GeoJSON to UTM meets it. The SDK's ``elicitation_callback`` plays
the person, in both connection modes of ``mcp`` 2.3.0's ``Client``:

* ``legacy`` (2025-11-25): the server sends ``elicitation/create`` within the call;
* ``auto`` (2026-07-28): the call returns an ``InputRequiredResult`` with the form and a
  sealed request state; the SDK answers and retries (or this script does, by hand, through
  ``client.session.call_tool(..., allow_input_required=True)``).

Checks per mode: accept (the call runs, its receipt names the host's client name and the
note), decline and cancel (refused, saying which, nothing written), expiry (a server started
with the test-only ``GDAL_MCP_SIGN_OFF_TTL_SECS=2``; the person answers after 3 s), an input
file changed after the answer (legacy: between the form and the run; auto: the same state
replayed after the file changed), and (auto) a state replayed unchanged and a state carried
to another server (another store and key). Each refusal must name what failed.

Usage::

    python tests/python/sign_off.py --server target/debug/gdal-mcp --workspace /tmp/so-ws

Exit code 0 only when every check passes; one line per check, the last ``N passed, M failed``.
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
from mcp import Client, Implementation
from mcp.client.stdio import StdioServerParameters
from mcp_types import ElicitResult, InputRequiredResult

MODES = ("legacy", "auto")
CLIENT_NAME = "sign-off-check"
MARKER = ".sign_off_check"
POLICY = """
[[rule]]
id = "people sign datum changes"
domain = "crs_datum"
outcome = "human"
"""


class CheckFailed(Exception):
    pass


def expect(cond: Any, message: str) -> None:
    if not cond:
        raise CheckFailed(message)


def text_of(result: Any) -> str:
    return "\n".join(getattr(c, "text", "") for c in (result.content or []))


def square(path: Path, x: float) -> None:
    """A one-degree square at (x, 10) in EPSG:4326, as GeoJSON (its content changes with x)."""
    ring = [[x, 10.0], [x + 1.0, 10.0], [x + 1.0, 11.0], [x, 11.0], [x, 10.0]]
    path.write_text(json.dumps({
        "type": "FeatureCollection",
        "features": [{"type": "Feature", "properties": {"id": 1},
                      "geometry": {"type": "Polygon", "coordinates": [ring]}}],
    }))


class Person:
    """The elicitation callback: answers with `action` (and `decision`/`note` on accept),
    after `delay` seconds, and runs `during` (a change to the world) before answering."""

    def __init__(self, action: str = "accept", decision: str = "approve", note: str = "",
                 delay: float = 0.0, during: Callable[[], None] | None = None) -> None:
        self.action, self.decision, self.note = action, decision, note
        self.delay, self.during = delay, during
        self.messages: list[str] = []

    async def __call__(self, context: Any, params: Any) -> ElicitResult:
        self.messages.append(getattr(params, "message", ""))
        if self.delay:
            await anyio.sleep(self.delay)
        if self.during:
            self.during()
        if self.action != "accept":
            return ElicitResult(action=self.action)
        return ElicitResult(action="accept", content={"decision": self.decision, "note": self.note})


class Run:
    def __init__(self, args: argparse.Namespace, mode: str) -> None:
        self.args, self.mode = args, mode
        self.root = Path(args.workspace).resolve() / mode
        self.passed = self.failed = 0

    def prepare(self) -> None:
        if self.root.exists():
            if not (self.root / MARKER).exists():
                raise SystemExit(f"refusing to reuse {self.root}: not made by this script")
            shutil.rmtree(self.root)
        for sub in ("ws", "other", "keys"):
            (self.root / sub).mkdir(parents=True)
        (self.root / MARKER).write_text("created by tests/python/sign_off.py\n")
        (self.root / "keys" / "policy.toml").write_text(POLICY)
        square(self.root / "ws" / "cell.geojson", 0.0)
        square(self.root / "other" / "cell.geojson", 0.0)

    def client(self, person: Person | None, *, ws: str = "ws", key: str = "a",
               ttl: str | None = None) -> Client:
        env = dict(os.environ)
        if ttl is not None:
            env["GDAL_MCP_SIGN_OFF_TTL_SECS"] = ttl
        folder = self.root / ws
        params = StdioServerParameters(
            command=self.args.server,
            args=["serve", "--workspace", str(folder), "--store", str(folder / ".preflight"),
                  "--key-file", str(self.root / "keys" / f"{key}.key"),
                  "--policy", str(self.root / "keys" / "policy.toml")],
            env=env,
        )
        return Client(params, mode=self.mode, read_timeout_seconds=self.args.timeout,
                      elicitation_callback=person,
                      client_info=Implementation(name=CLIENT_NAME, version="1.0"))

    def call_args(self, ws: str = "ws", output: str = "utm.gpkg") -> dict[str, Any]:
        folder = self.root / ws
        return {"input": str(folder / "cell.geojson"), "output": str(folder / output),
                "dst_crs": "EPSG:32631", "overwrite": True}

    def report(self, ok: bool, name: str, detail: str) -> None:
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        detail = " ".join(detail.split())[:400]
        print(f"{'PASS' if ok else 'FAIL'} [{self.mode}] {name}: {detail}", flush=True)

    async def check(self, name: str, body: Callable[[], Awaitable[str]]) -> None:
        try:
            with anyio.fail_after(self.args.timeout * 3):
                detail = await body()
        except CheckFailed as e:
            self.report(False, name, str(e))
        except Exception as e:  # noqa: BLE001 - a check reports, it never aborts the run
            if self.args.verbose:
                traceback.print_exc(file=sys.stderr)
            self.report(False, name, f"{type(e).__name__}: {e}")
        else:
            self.report(True, name, detail)

    def refused(self, result: Any, needle: str, output: str = "utm.gpkg") -> str:
        text = text_of(result)
        expect(result.is_error, f"not refused: {text[:300]}")
        expect(needle in text, f"the refusal does not say {needle!r}: {text[:600]}")
        expect(not (self.root / "ws" / output).exists(), f"{output} was written")
        return text

    async def run(self) -> None:
        self.prepare()
        out = self.root / "ws" / "utm.gpkg"

        async def accept() -> str:
            person = Person(note="checked the zone")
            async with self.client(person) as client:
                result = await client.call_tool("vector_reproject", self.call_args())
            expect(not result.is_error, f"refused: {text_of(result)[:500]}")
            expect(out.exists(), "no output")
            form = person.messages[0] if person.messages else ""
            for shown in ("vector_reproject", "cell.geojson", "sha256", "crs_change", "crs_datum"):
                expect(shown in form, f"the form does not show {shown!r}: {form[:400]}")
            receipts = result.structured_content["reflection"]
            crs = next(r for r in receipts if r["domain"] == "crs_datum")
            approval = (crs.get("policy") or {}).get("approval") or ""
            expect(CLIENT_NAME in approval and "checked the zone" in approval,
                   f"the receipt does not name the client and the note: {crs}")
            ledger = (self.root / "ws" / ".preflight" / "ledger.jsonl").read_text()
            kinds = [json.loads(line)["kind"] for line in ledger.splitlines()]
            expect("approval" in kinds and kinds.index("approval") > kinds.index("gate")
                   and "gate" in kinds[kinds.index("approval") + 1:],
                   f"ledger order {kinds}")
            out.unlink()
            return f"approved by {approval!r}; ledger {kinds}"

        async def decline() -> str:
            async with self.client(Person(decision="decline", note="not this zone")) as client:
                result = await client.call_tool("vector_reproject", self.call_args())
            text = self.refused(result, "declined")
            expect("not this zone" in text, "the note is not in the refusal")
            return "refused: declined, with the note"

        async def decline_action() -> str:
            async with self.client(Person(action="decline")) as client:
                result = await client.call_tool("vector_reproject", self.call_args())
            self.refused(result, "declined")
            return "refused: declined (action)"

        async def cancel() -> str:
            async with self.client(Person(action="cancel")) as client:
                result = await client.call_tool("vector_reproject", self.call_args())
            self.refused(result, "cancelled")
            return "refused: cancelled"

        async def expiry() -> str:
            if self.mode == "legacy":
                async with self.client(Person(delay=3.0), ttl="2") as client:
                    result = await client.call_tool("vector_reproject", self.call_args())
                self.refused(result, "expired")
                return "refused: the form's answer came after 2 s"
            async with self.client(Person(), ttl="2") as client:
                first = await client.session.call_tool(
                    "vector_reproject", self.call_args(), allow_input_required=True)
                expect(isinstance(first, InputRequiredResult), f"not input-required: {first}")
                await anyio.sleep(3.0)
                result = await client.session.call_tool(
                    "vector_reproject", self.call_args(), allow_input_required=True,
                    input_responses=answers(first), request_state=first.request_state)
            self.refused(result, "expired")
            return "refused: the state was answered after 2 s"

        async def input_changed() -> str:
            source = self.root / "ws" / "cell.geojson"
            if self.mode == "legacy":
                person = Person(during=lambda: square(source, 0.5))
                async with self.client(person) as client:
                    result = await client.call_tool("vector_reproject", self.call_args())
                self.refused(result, "the input file")
                square(source, 0.0)
                return "refused: the input changed between the form and the run"
            async with self.client(Person()) as client:
                first = await client.session.call_tool(
                    "vector_reproject", self.call_args(), allow_input_required=True)
                expect(isinstance(first, InputRequiredResult), f"not input-required: {first}")
                responses, state = answers(first), first.request_state
                ok = await client.session.call_tool(
                    "vector_reproject", self.call_args(), allow_input_required=True,
                    input_responses=responses, request_state=state)
                expect(not getattr(ok, "is_error", True), f"the answered retry failed: {text_of(ok)[:300]}")
                out.unlink()
                again = await client.session.call_tool(
                    "vector_reproject", self.call_args(), allow_input_required=True,
                    input_responses=responses, request_state=state)
                self.refused(again, "replayed")
                square(source, 0.5)
                changed = await client.session.call_tool(
                    "vector_reproject", self.call_args(), allow_input_required=True,
                    input_responses=responses, request_state=state)
                self.refused(changed, "the input file")
            square(source, 0.0)
            return "ran once; the replay refused; the replay after the change names the input"

        async def other_server() -> str:
            async with self.client(Person()) as client:
                first = await client.session.call_tool(
                    "vector_reproject", self.call_args(), allow_input_required=True)
                expect(isinstance(first, InputRequiredResult), f"not input-required: {first}")
            async with self.client(Person(), ws="other", key="b") as other:
                result = await other.session.call_tool(
                    "vector_reproject", self.call_args(ws="other"), allow_input_required=True,
                    input_responses=answers(first), request_state=first.request_state)
            text = text_of(result)
            expect(getattr(result, "is_error", False), f"not refused: {text[:300]}")
            expect("another server" in text, f"does not name another server: {text[:500]}")
            expect(not (self.root / "other" / "utm.gpkg").exists(), "written")
            return "refused: sealed by another server"

        await self.check("1.accept", accept)
        await self.check("2.decline", decline)
        await self.check("2b.decline_action", decline_action)
        await self.check("3.cancel", cancel)
        await self.check("4.expiry", expiry)
        await self.check("5.input_changed", input_changed)
        if self.mode == "auto":
            await self.check("6.other_server", other_server)


def answers(first: InputRequiredResult, decision: str = "approve") -> dict[str, Any]:
    """The person's answers to every form of an InputRequiredResult."""
    return {key: ElicitResult(action="accept", content={"decision": decision, "note": "by hand"})
            for key in (first.input_requests or {})}


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", required=True)
    parser.add_argument("--workspace", required=True)
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    passed = failed = 0
    for mode in args.modes.split(","):
        run = Run(args, mode)
        await run.run()
        passed += run.passed
        failed += run.failed
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(anyio.run(main))
