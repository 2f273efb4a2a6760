#!/usr/bin/env python3
"""Side-by-side benchmark of zonal statistics: gdal-mcp's `zonal_stats` (over MCP stdio) against
rasterstats 0.21.0 and exactextract 0.3.0, same data, same run.

Data, written into a fresh --workspace (recreated on every run):

* ``bench.tif``: SIZE x SIZE Float32 GeoTIFF (default 4000 x 4000), uncompressed, **tiled
  256 x 256**, no nodata, uniform random values in [0, 1000) from numpy's default_rng(20240607),
  EPSG:32633 with 10 m cells;
* ``zones.gpkg``: ZONES (default 100) random star-shaped polygons of 5-11 vertices, radius 1-6 %
  of the extent (vertices at 40-100 % of it), inside the raster, default_rng(7).

Statistics count, min, max, mean, sum everywhere:

* rasterstats: ``zonal_stats(features, path, all_touched=False)`` (cell centres), in process;
* exactextract: ``exact_extract(RasterioRasterSource(rasterio.open(path)), features, ...)``
  (coverage fractions), in process;
* gdal-mcp: ``zonal_stats`` with ``semantics`` cell_centre and coverage, timed as the tool round
  trip seen by the client. The first call of each is refused by the aggregation domain and is
  justified (and the capsule stored) before timing, so the timed calls are cache hits of the gate.
  Server CPU is read before and after each call: the on-CPU time of the server's threads from
  /proc/<pid>/task/*/schedstat (nanoseconds), cross-checked against user + system time from
  /proc/<pid>/stat (clock ticks) averaged over the timed calls.

Each implementation runs once untimed (warm page cache, imports), then REPEAT times interleaved;
the median and minimum are reported, wall and CPU. The agreement of the per-zone means is printed
under the table: ours vs the implementation with the same semantics, and exactextract vs
rasterstats.

    python tests/python/zonal_bench.py --server target/release/gdal-mcp --workspace /tmp/zonal-bench
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import rasterio
from exactextract import exact_extract
from exactextract.raster import RasterioRasterSource
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from rasterio.transform import from_origin
from rasterstats import zonal_stats as rasterstats_zonal

from zonal_references import Gate, Report, Zones, random_polygons, text_of, write_polygons

STATS = ["count", "min", "max", "mean", "sum"]
MARKER = ".zonal_bench"
BLOCK = 256


def make_data(ws: Path, size: int, zones: int) -> tuple[Path, Path]:
    raster, vector = ws / "bench.tif", ws / "zones.gpkg"
    rng = np.random.default_rng(20240607)
    values = (rng.random((size, size), dtype=np.float32) * 1000).astype(np.float32)
    transform = from_origin(500000.0, 4100000.0, 10.0, 10.0)
    profile = {"driver": "GTiff", "width": size, "height": size, "count": 1, "dtype": "float32",
               "crs": "EPSG:32633", "transform": transform, "tiled": True, "blockxsize": BLOCK,
               "blockysize": BLOCK, "compress": "none"}
    with rasterio.open(raster, "w", **profile) as out:
        out.write(values, 1)
    bounds = (500000.0, 4100000.0 - 10.0 * size, 500000.0 + 10.0 * size, 4100000.0)
    geoms = random_polygons(np.random.default_rng(7), bounds, zones, 0.01, 0.06)
    with rasterio.open(raster) as ds:
        wkt = ds.crs.to_wkt()
    write_polygons(vector, "zones", geoms, wkt, {"name": np.array([f"z{i}" for i in range(zones)], dtype=object)})
    return raster, vector


def server_cpu(pid: int | None) -> float:
    """User + system CPU seconds of `pid` (and of its waited-for children), /proc/<pid>/stat:
    includes exited threads, resolution one clock tick."""
    if pid is None:
        return float("nan")
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def server_cpu_fine(pid: int | None) -> float:
    """CPU seconds of the live threads of `pid` (sum of /proc/<pid>/task/*/schedstat, ns)."""
    if pid is None:
        return float("nan")
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return float("nan")
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue
    return total / 1e9


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


class Timings:
    def __init__(self) -> None:
        self.wall: dict[str, list[float]] = {}
        self.cpu: dict[str, list[float]] = {}

    def add(self, name: str, wall: float, cpu: float) -> None:
        self.wall.setdefault(name, []).append(wall)
        self.cpu.setdefault(name, []).append(cpu)


def run_rasterstats(raster: Path, features: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], float, float]:
    w0, c0 = time.perf_counter(), time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rows = rasterstats_zonal(features, str(raster), stats=STATS, nodata=-9999.0, all_touched=False)
    return rows, time.perf_counter() - w0, time.process_time() - c0


def run_exactextract(raster: Path, features: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], float, float]:
    w0, c0 = time.perf_counter(), time.process_time()
    with rasterio.open(raster) as ds:
        rows = exact_extract(RasterioRasterSource(ds, 1), features, STATS)
    rows = [r["properties"] for r in rows]
    return rows, time.perf_counter() - w0, time.process_time() - c0


def agreement(a: list[float | None], b: list[float | None]) -> tuple[float, float]:
    """Mean and max relative difference over the zones where both have a value."""
    rel = [abs(x - y) / max(abs(x), abs(y)) for x, y in zip(a, b, strict=True)
           if x is not None and y is not None and max(abs(x), abs(y)) > 0]
    return (float(np.mean(rel)), float(np.max(rel))) if rel else (float("nan"), float("nan"))


async def run(args: argparse.Namespace, ws: Path, raster: Path, vector: Path) -> int:
    zones = Zones.read(vector, "zones")
    features = zones.features()
    report = Report()
    timings = Timings()
    results: dict[str, list[Any]] = {}
    ticks: dict[str, float] = {}

    def call_args(semantics: str) -> dict[str, Any]:
        return {"input": str(raster), "zones": str(vector), "zone_layer": "zones", "stats": STATS,
                "semantics": semantics}

    async def references_and(client: Client | None) -> bool:
        pid = server_pid(ws) if client else None
        if client:
            # Warm-up: justify once per semantics (refused by aggregation, then justified inline).
            gate = Gate(client, report)
            for semantics in ("cell_centre", "coverage"):
                if await gate.call(f"bench.{semantics}", call_args(semantics)) is None:
                    return False
        run_rasterstats(raster, features)
        run_exactextract(raster, features)
        for _ in range(args.repeat):
            rows, wall, cpu = run_rasterstats(raster, features)
            timings.add("rasterstats", wall, cpu)
            results["rasterstats"] = [r.get("mean") for r in rows]
            results["rasterstats count"] = [r.get("count") for r in rows]
            rows, wall, cpu = run_exactextract(raster, features)
            timings.add("exactextract", wall, cpu)
            results["exactextract"] = [r.get("mean") for r in rows]
            results["exactextract count"] = [r.get("count") for r in rows]
            if client is None:
                continue
            for semantics in ("cell_centre", "coverage"):
                c0, t0 = server_cpu_fine(pid), server_cpu(pid)
                w0 = time.perf_counter()
                result = await client.call_tool("zonal_stats", call_args(semantics))
                wall = time.perf_counter() - w0
                cpu = server_cpu_fine(pid) - c0
                ticks[semantics] = ticks.get(semantics, 0.0) + server_cpu(pid) - t0
                if result.is_error:
                    report.check(False, f"bench.{semantics}.timed",
                                 f"error: {text_of(result)}")
                    return False
                timings.add(f"gdal-mcp {semantics}", wall, cpu)
                by_fid = {int(f["fid"]): f for f in result.structured_content["features"]}
                results[f"gdal-mcp {semantics}"] = [by_fid.get(fid, {}).get("mean") for fid in zones.fids]
                results[f"gdal-mcp {semantics} count"] = [by_fid.get(fid, {}).get("count") for fid in zones.fids]
        return True

    if args.server:
        params = StdioServerParameters(command=args.server, args=["serve", "--workspace", str(ws), "--store",
                                                                  str(ws / ".preflight")], env=dict(os.environ))
        transport: Any = stdio_client(params, errlog=args.server_log_file) if args.server_log_file else params
        async with Client(transport, mode="legacy", read_timeout_seconds=args.timeout) as client:
            ok = await references_and(client)
    else:
        ok = await references_and(None)
    if not ok:
        print(f"{report.passed} passed, {report.failed} failed")
        return 1

    mb = raster.stat().st_size / 2**20
    server = args.server or "not run"
    server_kind = "release" if "/release/" in server else "debug" if "/debug/" in server else "?"
    print()
    print(f"zonal statistics, {args.size}x{args.size} Float32 GeoTIFF ({mb:.0f} MB, uncompressed, tiled "
          f"{BLOCK}x{BLOCK}), {len(features)} random polygons (5-11 vertices, radius 1-6 % of the extent); "
          f"stats {','.join(STATS)}; {args.repeat} repeats after one warm-up; server {server_kind} build "
          f"({server}); {os.cpu_count()} CPUs")
    print()
    print("| implementation | semantics | wall median (s) | wall min (s) | CPU median (s) | CPU min (s) |")
    print("|---|---|---:|---:|---:|---:|")
    rows_out = [
        ("rasterstats 0.21.0 (in process)", "cell centre", "rasterstats"),
        ("exactextract 0.3.0 (in process)", "coverage", "exactextract"),
        ("gdal-mcp zonal_stats (MCP round trip; server CPU)", "cell_centre", "gdal-mcp cell_centre"),
        ("gdal-mcp zonal_stats (MCP round trip; server CPU)", "coverage", "gdal-mcp coverage"),
    ]
    for label, semantics, key in rows_out:
        if key not in timings.wall:
            continue
        w, c = timings.wall[key], timings.cpu[key]
        print(f"| {label} | {semantics} | {statistics.median(w):.3f} | {min(w):.3f} | "
              f"{statistics.median(c):.3f} | {min(c):.3f} |")
    print()
    print(f"Wall: time.perf_counter() around each call (the MCP round trip for gdal-mcp). CPU: time.process_time() of "
          f"this process for the in-process references; for gdal-mcp the on-CPU time of the server's threads "
          f"(sum of /proc/<pid>/task/*/schedstat). Cross-check, user+system from /proc/<pid>/stat (1/"
          f"{os.sysconf('SC_CLK_TCK')} s ticks, exited threads included) averaged over the timed calls: "
          + ", ".join(f"{k} {v / args.repeat:.3f} s" for k, v in ticks.items())
          + f". Load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}.")
    print()
    pairs = [
        ("gdal-mcp cell_centre", "rasterstats"),
        ("gdal-mcp coverage", "exactextract"),
        ("exactextract", "rasterstats"),
        ("gdal-mcp coverage", "gdal-mcp cell_centre"),
    ]
    print("Agreement of the per-zone means (relative difference, over zones where both have one):")
    for a, b in pairs:
        if a not in results or b not in results:
            continue
        mean_rel, max_rel = agreement(results[a], results[b])
        ca = sum(x or 0 for x in results[f"{a} count"])
        cb = sum(x or 0 for x in results[f"{b} count"])
        print(f"  {a} vs {b}: mean {mean_rel:.2g}, max {max_rel:.2g}; total count ratio {ca / cb:.6f}")
    if "gdal-mcp cell_centre" in results:
        # rasterstats reduces a Float32 band in float32 (numpy's masked mean/sum); on a float64
        # copy of the band it shows what is left once that rounding is gone.
        with rasterio.open(raster) as ds:
            band64, transform = ds.read(1).astype(np.float64), ds.transform
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rows64 = rasterstats_zonal(features, band64, affine=transform, stats=["mean"], nodata=-9999.0)
        del band64
        mean_rel, max_rel = agreement(results["gdal-mcp cell_centre"], [r["mean"] for r in rows64])
        print(f"  gdal-mcp cell_centre vs rasterstats on a float64 copy of the band (untimed): mean {mean_rel:.2g}, "
              f"max {max_rel:.2g} (rasterstats on the file accumulates Float32 in float32)")
        same = sum(x == y for x, y in zip(results["gdal-mcp cell_centre count"], results["rasterstats count"]))
        print(f"  cell-centre counts identical to rasterstats in {same}/{len(features)} zones")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--server", help="path to the gdal-mcp binary (a release build for figures); without it only "
                   "the references are timed")
    p.add_argument("--workspace", required=True, help="scratch dir, recreated on every run")
    p.add_argument("--repeat", type=int, default=5, help="timed repeats (default 5)")
    p.add_argument("--size", type=int, default=4000, help="raster width and height (default 4000)")
    p.add_argument("--zones", type=int, default=100, help="number of polygons (default 100)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per MCP request (default 600)")
    p.add_argument("--server-log", help="append the server's stderr to this file instead of ours")
    args = p.parse_args(argv)
    if args.server:
        server = Path(args.server)
        if not (server.is_file() and os.access(server, os.X_OK)):
            p.error(f"--server {args.server}: not an executable file")
        args.server = str(server.resolve())
    ws = Path(args.workspace).resolve()
    if ws.exists():
        if not (ws / MARKER).exists():
            p.error(f"refusing to reuse {ws}: it exists and was not made by this script")
        shutil.rmtree(ws)
    ws.mkdir(parents=True)
    (ws / MARKER).write_text("created by tests/python/zonal_bench.py\n")
    raster, vector = make_data(ws, args.size, args.zones)
    args.server_log_file = open(args.server_log, "a") if args.server_log else None  # noqa: SIM115
    try:
        return anyio.run(run, args, ws, raster, vector)
    finally:
        if args.server_log_file:
            args.server_log_file.close()


if __name__ == "__main__":
    sys.exit(main())
