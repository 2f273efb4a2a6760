#!/usr/bin/env python3
"""What the first open in a child costs (`gdal::policy::probe`, attack round 23): `raster_info`
over raw stdio on five fresh copies of one 512 x 512 raster per format (GeoTIFF, not probed;
PNG, JPEG, netCDF and netCDF-4, probed), the median of each copy's first open and of the open
after it (the probe's outcome is kept per file version). Fixtures are made with gdal_translate
from `--source`.

    python3 tests/python/probe_bench.py --server target/debug/gdal-mcp \
        --source target/testdata/dem.tif --workspace /tmp/probe-bench
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import time

FORMATS = [
    ("GeoTIFF", "GTiff", "tif", []),
    ("PNG", "PNG", "png", ["-ot", "Byte", "-scale"]),
    ("JPEG", "JPEG", "jpg", ["-ot", "Byte", "-scale"]),
    ("netCDF", "netCDF", "nc", []),
    ("netCDF-4", "netCDF", "nc4", ["-co", "FORMAT=NC4"]),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--workspace", required=True)
    parser.add_argument("--copies", type=int, default=5)
    args = parser.parse_args()
    shutil.rmtree(args.workspace, ignore_errors=True)
    os.makedirs(args.workspace)
    base = os.path.join(args.workspace, "base.tif")
    subprocess.run(["gdal_translate", "-q", "-outsize", "512", "512", args.source, base], check=True)
    for _, driver, ext, extra in FORMATS:
        for i in range(args.copies):
            subprocess.run(["gdal_translate", "-q", "-of", driver, *extra, base,
                            os.path.join(args.workspace, f"f{i}.{ext}")],
                           check=True, stderr=subprocess.DEVNULL)
    server = subprocess.Popen([args.server, "serve", "--workspace", args.workspace],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, bufsize=1)
    ident = 0

    def request(method: str, params: dict) -> dict:
        nonlocal ident
        ident += 1
        server.stdin.write(json.dumps({"jsonrpc": "2.0", "id": ident, "method": method,
                                       "params": params}) + "\n")
        server.stdin.flush()
        while True:
            message = json.loads(server.stdout.readline())
            if message.get("id") == ident:
                return message

    def info(name: str) -> float:
        start = time.perf_counter()
        answer = request("tools/call", {"name": "raster_info", "arguments": {"input": name}})
        if answer.get("result", {}).get("isError"):
            raise SystemExit(f"raster_info {name} failed: {answer}")
        return (time.perf_counter() - start) * 1000

    request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "probe_bench", "version": "1"}})
    server.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
    info("base.tif")
    for label, _, ext, _ in FORMATS:
        first, again = [], []
        for i in range(args.copies):
            first.append(info(f"f{i}.{ext}"))
            again.append(info(f"f{i}.{ext}"))
        print(f"{label:9s} first open {statistics.median(first):7.1f} ms   "
              f"again {statistics.median(again):7.1f} ms")
    server.stdin.close()
    server.wait()


if __name__ == "__main__":
    main()
