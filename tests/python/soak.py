#!/usr/bin/env python3
"""Soak: 10,000 mixed calls against one server, over the `mcp` Python SDK (issue 21).

A benchmark, not a test. The calls cycle through seven kinds: `raster_info`, `vector_query`,
`raster_sample`, a `raster_reproject` to a CRS never seen before (refused by crs_datum for want
of a justification), a gated `raster_reproject` with its justification inline, a
`vector_measure`, and a small warp that its stored capsule lets through. Every answer is checked
against the kind's expected outcome. Every `--every` calls the server's resident memory
(VmRSS), open descriptors (/proc/PID/fd) and threads (/proc/PID/task) are recorded; flat is
the target.

    python3 -m venv target/pyvenv && target/pyvenv/bin/pip install mcp==2.3.0
    target/pyvenv/bin/python tests/python/soak.py --server target/release/gdal-mcp --calls 10000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters

sys.path.insert(0, str(Path(__file__).resolve().parent))
import careful  # noqa: E402

KINDS = ("info", "query", "sample", "refused_crs", "justified", "measure", "warp")


def server_pid(workspace: Path) -> int | None:
    """The gdal-mcp process serving `workspace` (a child of this process)."""
    me = os.getpid()
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().split(b"\0")
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        if b"serve" in cmdline and str(workspace).encode() in cmdline and ppid == me:
            return int(entry)
    return None


def resources(pid: int) -> tuple[int, int, int]:
    """(VmRSS in KiB, open descriptors, threads) of `pid`."""
    rss = 0
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
    return rss, len(os.listdir(f"/proc/{pid}/fd")), len(os.listdir(f"/proc/{pid}/task"))


def make_data(ws: Path) -> None:
    """A 64 × 64 DEM in UTM 33N and a GeoJSON of 20 one-degree cells at the equator."""
    asc = ws / "dem.asc"
    with open(asc, "w", encoding="ascii") as grid:
        grid.write("ncols 64\nnrows 64\nxllcorner 500000\nyllcorner 5000000\ncellsize 30\n")
        for row in range(64):
            grid.write(" ".join(str(100 + row + (col % 7)) for col in range(64)) + "\n")
    subprocess.run(["gdal_translate", "-q", "-a_srs", "EPSG:32633", str(asc), str(ws / "dem.tif")],
                   check=True)
    features = []
    for i in range(20):
        x = float(i)
        ring = [[x, 0.0], [x + 1, 0.0], [x + 1, 1.0], [x, 1.0], [x, 0.0]]
        features.append({"type": "Feature", "properties": {"id": i, "name": f"cell {i}"},
                         "geometry": {"type": "Polygon", "coordinates": [ring]}})
    (ws / "cells.geojson").write_text(json.dumps({"type": "FeatureCollection", "features": features}))


def refusal_entries(result: Any) -> list[dict[str, Any]]:
    """The refusal entries of an error result (its second text block), if it is a refusal."""
    texts = [c.text for c in result.content if getattr(c, "type", "") == "text"]
    if len(texts) < 2:
        return []
    try:
        payload = json.loads(texts[1])
    except json.JSONDecodeError:
        return []
    entries = payload.get("refusal") if isinstance(payload, dict) else None
    return entries if isinstance(entries, list) else []


def first_text(result: Any) -> str:
    texts = [c.text for c in result.content if getattr(c, "type", "") == "text"]
    return texts[0] if texts else ""


async def justify(client: Client, arguments: dict[str, Any], method: str) -> dict[str, Any]:
    """A justification for every domain that refuses `arguments`, from the refusal itself."""
    first = await client.call_tool("raster_reproject", arguments)
    entries = refusal_entries(first)
    if not first.is_error or not entries:
        raise SystemExit(f"expected a refusal for {arguments}: {first_text(first)[:300]}")
    return {e["domain"]: careful.justification(e, method if e["domain"] == "resampling"
                                               else arguments["dst_crs"],
                                               "soak: a regional preview, repeated")
            for e in entries}


async def run(args: argparse.Namespace, ws: Path) -> int:
    params = StdioServerParameters(command=args.server, args=["serve", "--workspace", str(ws)],
                                   env=dict(os.environ))
    async with Client(params, mode="legacy", read_timeout_seconds=args.timeout) as client:
        pid = server_pid(ws)
        if pid is None:
            raise SystemExit("cannot find the server's process")
        justified_args = {"input": "dem.tif", "output": "justified.tif", "dst_crs": "EPSG:4326",
                          "resampling": "bilinear", "overwrite": True}
        justified_args["justification"] = await justify(client, dict(justified_args), "bilinear")
        warp_args = {"input": "dem.tif", "output": "warp.tif", "dst_crs": "EPSG:3035",
                     "resampling": "bilinear", "overwrite": True}
        # Once: refused, justified inline (the capsule is stored); every later warp is let
        # through by its capsule.
        warp_once = dict(warp_args, justification=await justify(client, dict(warp_args), "bilinear"))
        done = await client.call_tool("raster_reproject", warp_once)
        if done.is_error:
            raise SystemExit(f"the justified warp failed: {first_text(done)}")

        def arguments(kind: str, i: int) -> tuple[str, dict[str, Any]]:
            if kind == "info":
                return "raster_info", {"input": "dem.tif"}
            if kind == "query":
                return "vector_query", {"input": "cells.geojson", "where": f"id >= {i % 20}",
                                        "limit": 5}
            if kind == "sample":
                return "raster_sample", {"input": "dem.tif",
                                         "coordinates": [[500015.0 + 30 * (i % 64), 5001905.0]]}
            if kind == "refused_crs":
                lon = 14.0 + (i % 2000) * 0.001
                crs = (f"+proj=tmerc +lat_0=0 +lon_0={lon:.3f} +k=0.9996 +x_0={500000 + i} "
                       "+y_0=0 +ellps=intl +towgs84=-87,-98,-121,0,0,0,0 +units=m +no_defs")
                return "raster_reproject", {"input": "dem.tif", "output": f"refused{i}.tif",
                                            "dst_crs": crs, "resampling": "bilinear"}
            if kind == "justified":
                return "raster_reproject", justified_args
            if kind == "measure":
                return "vector_measure", {"input": "cells.geojson"}
            return "raster_reproject", warp_args

        started = time.perf_counter()
        samples = [(0, *resources(pid))]
        failures: dict[str, int] = {k: 0 for k in KINDS}
        examples: dict[str, str] = {}
        kinds = [k for k in KINDS if k in args.kinds.split(",")]
        for i in range(1, args.calls + 1):
            kind = kinds[i % len(kinds)]
            name, call = arguments(kind, i)
            result = await client.call_tool(name, call)
            refused = bool(result.is_error) and bool(refusal_entries(result))
            ok = refused if kind == "refused_crs" else not result.is_error
            if not ok:
                failures[kind] += 1
                examples.setdefault(kind, first_text(result)[:300])
            if i % args.every == 0:
                samples.append((i, *resources(pid)))
                rss, fds, threads = samples[-1][1:]
                print(f"  {i:>6} calls: RSS {rss / 1024:7.1f} MiB, {fds} fds, {threads} threads "
                      f"({time.perf_counter() - started:.0f} s)", flush=True)
        elapsed = time.perf_counter() - started
    print(f"{args.calls} mixed calls in {elapsed:.0f} s ({args.calls / elapsed:.1f} calls/s); "
          f"unexpected answers: {sum(failures.values())} {failures}")
    for kind, example in examples.items():
        print(f"  first unexpected {kind}: {example}")
    base = next((s for s in samples if s[0] >= args.every * 4), samples[-1])
    last = samples[-1]
    print(f"from {base[0]} to {last[0]} calls: RSS {(last[1] - base[1]) / 1024:+.1f} MiB, "
          f"fds {last[2] - base[2]:+d}, threads {last[3] - base[3]:+d}")
    print("| calls | RSS (MiB) | open fds | threads |")
    print("|---:|---:|---:|---:|")
    for calls, rss, fds, threads in samples:
        print(f"| {calls} | {rss / 1024:.1f} | {fds} | {threads} |")
    return 1 if sum(failures.values()) else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", required=True)
    parser.add_argument("--calls", type=int, default=10000)
    parser.add_argument("--every", type=int, default=500)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--kinds", default=",".join(KINDS),
                        help="a comma-separated subset of " + ",".join(KINDS))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        ws = Path(tmp)
        make_data(ws)
        sys.exit(asyncio.run(run(args, ws)))


if __name__ == "__main__":
    main()
