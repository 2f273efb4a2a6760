#!/usr/bin/env python3
"""Side-by-side benchmark: gdal-mcp's DEM tools against RichDEM, same DEM, same run.

Generates a synthetic float32 DEM (sum of sines, noise and random pits; 10 m cells) and times:

* gdal-mcp (release binary, over MCP stdio): `dem_condition method=fill` then
  `dem_flow_accumulation algorithm=d8` (flats resolved), end to end including GeoTIFF reads and
  DEFLATE writes; justifications are stored beforehand so the gate is a cache hit;
* RichDEM (richdem2, OMP_NUM_THREADS=1): FillDepressions(epsilon=False), ResolveFlats and
  FlowAccumulation(D8), in memory.

    OMP_NUM_THREADS=1 python tests/python/hydrology_bench.py --server target/release/gdal-mcp --size 4000
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time

import anyio
import numpy as np
import richdem as rd
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from hydrology_anchors import call_justified


def server_peak_rss_mb(workspace: str) -> float:
    """VmHWM of the gdal-mcp process serving `workspace`."""
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().split(b"\0")
            if b"serve" in cmdline and workspace.encode() in cmdline:
                with open(f"/proc/{entry}/status") as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            return int(line.split()[1]) / 1024
        except OSError:
            continue
    return float("nan")


def synthetic(size: int) -> np.ndarray:
    rng = np.random.default_rng(5)
    scale = 4000.0 / size
    rows, cols = np.mgrid[0:size, 0:size].astype(np.float32) * scale
    z = (500 + 120 * np.sin(cols / 530) * np.sin(rows / 310) + 25 * np.sin(cols / 83 + rows / 120)
         + 0.002 * (cols + 0.5 * rows) + 3 * rng.random((size, size), dtype=np.float32))
    flat = z.ravel()
    pits = rng.integers(0, flat.size, flat.size // 2000)
    flat[pits] -= 20 * rng.random(pits.size, dtype=np.float32)
    return z.astype(np.float32)


async def gdal_mcp(server: str, workspace: str) -> dict[str, float]:
    params = StdioServerParameters(command=server, args=["serve", "--workspace", workspace],
                                   env=dict(os.environ))
    async with Client(params, mode="legacy", read_timeout_seconds=600) as client:
        times = {}
        for attempt in ("warm-up (stores the justifications)", "timed"):
            start = time.perf_counter()
            await call_justified(client, "dem_condition", {
                "input": "dem.tif", "output": "filled.tif", "method": "fill", "overwrite": True}, "fill")
            middle = time.perf_counter()
            result = await call_justified(client, "dem_flow_accumulation", {
                "input": "filled.tif", "output": "acc.tif", "algorithm": "d8", "overwrite": True}, "d8")
            end = time.perf_counter()
            assert not result.is_error, [getattr(c, "text", c) for c in result.content]
            times = {"dem_condition fill": middle - start, "dem_flow_accumulation d8": end - middle,
                     "total": end - start}
        times["peak RSS MB"] = server_peak_rss_mb(workspace)
        return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--server", required=True)
    parser.add_argument("--size", type=int, default=4000)
    parser.add_argument("--gdal-mcp-only", action="store_true",
                        help="skip RichDEM (for comparing two gdal-mcp binaries)")
    args = parser.parse_args()
    z = synthetic(args.size)
    with tempfile.TemporaryDirectory() as workspace:
        raw = os.path.join(workspace, "dem.bil")
        z.astype("<f4").tofile(raw)
        with open(os.path.join(workspace, "dem.hdr"), "w") as f:
            f.write(f"ENVI\nsamples = {args.size}\nlines = {args.size}\nbands = 1\nheader offset = 0\n"
                    "file type = ENVI Standard\ndata type = 4\ninterleave = bsq\nbyte order = 0\n"
                    "map info = {UTM, 1, 1, 500000, 4100000, 10, 10, 33, North, WGS-84}\n")
        subprocess.run(["gdal_translate", "-q", "-of", "GTiff", "-co", "TILED=YES", "-a_srs", "EPSG:32633",
                        raw, os.path.join(workspace, "dem.tif")], check=True)
        ours = anyio.run(gdal_mcp, os.path.abspath(args.server), workspace)
    if args.gdal_mcp_only:
        peak = ours.pop("peak RSS MB")
        for step, seconds in ours.items():
            print(f"gdal-mcp  {step:<28} {seconds:6.2f} s  (over MCP, incl. GeoTIFF read/write)")
        print(f"gdal-mcp  peak RSS of the server process: {peak:.0f} MB")
        return

    dem = rd.rdarray(z.astype(np.float64), no_data=-9999.0)
    dem.geotransform = [500000, 10, 0, 4100000, 0, -10]
    start = time.perf_counter()
    filled = rd.FillDepressions(dem, epsilon=False, in_place=False)
    t_fill = time.perf_counter()
    rd.ResolveFlats(filled, in_place=True)
    t_flats = time.perf_counter()
    rd.FlowAccumulation(filled, method="D8")
    t_acc = time.perf_counter()

    print(f"DEM {args.size}x{args.size} float32 ({z.nbytes / 2**20:.0f} MB), OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}")
    peak = ours.pop("peak RSS MB")
    for step, seconds in ours.items():
        print(f"gdal-mcp  {step:<28} {seconds:6.2f} s  (over MCP, incl. GeoTIFF read/write)")
    print(f"gdal-mcp  peak RSS of the server process: {peak:.0f} MB = {peak / (z.nbytes / 2**20):.2f} x the DEM")
    print(f"RichDEM   {'FillDepressions':<28} {t_fill - start:6.2f} s")
    print(f"RichDEM   {'ResolveFlats':<28} {t_flats - t_fill:6.2f} s")
    print(f"RichDEM   {'FlowAccumulation D8':<28} {t_acc - t_flats:6.2f} s")
    print(f"RichDEM   {'total':<28} {t_acc - start:6.2f} s  (in memory)")


if __name__ == "__main__":
    main()
