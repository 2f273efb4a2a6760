#!/usr/bin/env python3
"""Measure the size of gdal-mcp's ``tools/list`` answer, and of the part a host shows the model.

Starts ``SERVER serve --workspace DIR`` (DIR defaults to a fresh temporary folder), speaks raw
JSON-RPC over the child's stdio (``initialize`` with protocolVersion 2025-11-25,
``notifications/initialized``, then ``tools/list``, following ``nextCursor`` if the server
paginates) and prints:

* the number of tools;
* the characters of the compact JSON (``json.dumps(x, separators=(",", ":"),
  ensure_ascii=False)``) of the whole ``tools/list`` result;
* the characters of the **model-facing** part: the compact JSON of
  ``[{name, description, inputSchema}]`` over every tool, which is what a host puts in the
  model's context on every turn (output schemas, annotations and the like stay with the
  client), with a rough token estimate (characters / 4);
* the same per tool, in a table sorted by size.

The exit code is 1 when the model-facing part exceeds ``--max-model-facing`` characters
(default 43000), 2 when the server could not be queried, 0 otherwise. Standard library only.

    python3 tests/python/tool_list_size.py --server target/debug/gdal-mcp [--workspace DIR] \\
        [--max-model-facing 43000]
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

PROTOCOL_VERSION = "2025-11-25"
MODEL_FACING_KEYS = ("name", "description", "inputSchema")


def compact(x: Any) -> str:
    return json.dumps(x, separators=(",", ":"), ensure_ascii=False)


def tokens(chars: int) -> int:
    """A rough token estimate: 4 characters per token."""
    return round(chars / 4)


class ServerError(Exception):
    pass


class RawClient:
    """Newline-delimited JSON-RPC over a child's stdin/stdout."""

    def __init__(self, argv: list[str], timeout: float) -> None:
        self.timeout = timeout
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(  # noqa: S603 - the binary is the caller's
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env=dict(os.environ),
        )
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.next_id = 1
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            self.lines.put(raw)
        self.lines.put(None)

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write((compact(message) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as e:
            try:
                code = self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                code = None
            raise ServerError(f"cannot write to the server ({e}); its exit code: {code}") from e

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        rid = self.next_id
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        deadline = time.monotonic() + self.timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ServerError(f"{method}: no answer within {self.timeout:g} s")
            try:
                raw = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            if raw is None:
                raise ServerError(f"{method}: the server closed stdout (exit code {self.proc.poll()})")
            try:
                message = json.loads(raw)
            except json.JSONDecodeError as e:
                raise ServerError(f"{method}: a non-JSON line on stdout: {raw[:200]!r}") from e
            if not isinstance(message, dict) or message.get("id") != rid or "method" in message:
                continue  # a notification (logging, progress) or a request from the server: not ours
            if "error" in message:
                raise ServerError(f"{method}: JSON-RPC error {compact(message['error'])[:300]}")
            result = message.get("result")
            if not isinstance(result, dict):
                raise ServerError(f"{method}: the result is not an object: {compact(result)[:200]}")
            return result

    def server_stderr(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")[-4000:]

    def close(self) -> None:
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        finally:
            self.stderr.close()


def fetch(server: str, workspace: str, timeout: float) -> tuple[dict[str, Any], list[dict[str, Any]], int]:
    """(initialize result, tools/list result(s) merged, number of pages)."""
    client = RawClient([server, "serve", "--workspace", workspace], timeout)
    try:
        init = client.request("initialize", {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "tool_list_size", "version": "0"},
        })
        client.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        pages: list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(100):
            page = client.request("tools/list", {"cursor": cursor} if cursor else {})
            pages.append(page)
            cursor = page.get("nextCursor")
            if not cursor:
                break
        return init, pages, len(pages)
    except ServerError as e:
        tail = client.server_stderr().strip()
        raise ServerError(f"{e}" + (f"\n--- server stderr (tail) ---\n{tail}" if tail else "")) from e
    finally:
        client.close()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--server", required=True, help="path to the gdal-mcp binary")
    p.add_argument("--workspace", help="workspace passed to the server (default: a fresh temporary folder)")
    p.add_argument("--max-model-facing", type=int, default=43000,
                   help="fail when the model-facing part exceeds this many characters (default 43000)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per request (default 60)")
    args = p.parse_args(argv)
    server = Path(args.server)
    if not (server.is_file() and os.access(server, os.X_OK)):
        p.error(f"--server {args.server}: not an executable file")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    reproduce = ["python3", "tests/python/tool_list_size.py", "--server", args.server]
    if args.workspace:
        reproduce += ["--workspace", args.workspace]
    reproduce += ["--max-model-facing", str(args.max_model_facing)]
    print(f"reproduce: {shlex.join(reproduce)}")

    server = str(Path(args.server).resolve())
    try:
        if args.workspace:
            Path(args.workspace).mkdir(parents=True, exist_ok=True)
            init, pages, n_pages = fetch(server, str(Path(args.workspace).resolve()), args.timeout)
        else:
            with tempfile.TemporaryDirectory(prefix="tool-list-size-") as ws:
                init, pages, n_pages = fetch(server, ws, args.timeout)
    except ServerError as e:
        print(f"ERROR: {e}", file=sys.stderr)
        return 2

    tools: list[dict[str, Any]] = [t for page in pages for t in (page.get("tools") or [])]
    whole: Any = pages[0] if n_pages == 1 else pages
    whole_chars = len(compact(whole))
    facing = [{k: t[k] for k in MODEL_FACING_KEYS if k in t} for t in tools]
    facing_chars = len(compact(facing))

    info = init.get("serverInfo") or {}
    print(f"server: {info.get('name', '?')} {info.get('version', '?')}, protocol {init.get('protocolVersion')}")
    print(f"tools: {len(tools)}" + (f" (over {n_pages} pages)" if n_pages > 1 else ""))
    print(f"tools/list result, compact JSON{' (all pages)' if n_pages > 1 else ''}: {whole_chars} chars "
          f"(~{tokens(whole_chars)} tokens)")
    print(f"model-facing [{{name, description, inputSchema}}], compact JSON: {facing_chars} chars "
          f"(~{tokens(facing_chars)} tokens at 4 chars/token); limit {args.max_model_facing} chars")
    if tools:
        print(f"model-facing per tool: {facing_chars / len(tools):.0f} chars on average")
    print()

    rows = []
    for t, f in zip(tools, facing, strict=True):
        rows.append({
            "name": str(t.get("name")),
            "facing": len(compact(f)),
            "description": len(str(t.get("description") or "")),
            "input": len(compact(t.get("inputSchema"))) if "inputSchema" in t else 0,
            "output": len(compact(t.get("outputSchema"))) if "outputSchema" in t else 0,
            "whole": len(compact(t)),
        })
    rows.sort(key=lambda r: (-r["facing"], r["name"]))
    width = max([len("tool")] + [len(r["name"]) for r in rows])
    header = (f"{'tool':<{width}}  {'model-facing':>12}  {'~tokens':>7}  {'description':>11}  "
              f"{'inputSchema':>11}  {'outputSchema':>12}  {'whole entry':>11}")
    print(header)
    print("-" * len(header))
    for r in rows:
        print(f"{r['name']:<{width}}  {r['facing']:>12}  {tokens(r['facing']):>7}  {r['description']:>11}  "
              f"{r['input']:>11}  {r['output']:>12}  {r['whole']:>11}")
    print("-" * len(header))
    print(f"{'total':<{width}}  {facing_chars:>12}  {tokens(facing_chars):>7}  "
          f"{sum(r['description'] for r in rows):>11}  {sum(r['input'] for r in rows):>11}  "
          f"{sum(r['output'] for r in rows):>12}  {whole_chars:>11}")
    print("(model-facing total = the list's compact JSON, brackets and commas included; whole entry = the "
          "tool's full compact JSON; total of that column = the whole tools/list result)")
    print()

    if facing_chars > args.max_model_facing:
        print(f"FAIL model-facing part is {facing_chars} chars > --max-model-facing {args.max_model_facing}")
        return 1
    print(f"PASS model-facing part is {facing_chars} chars <= {args.max_model_facing}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
