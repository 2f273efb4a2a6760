#!/usr/bin/env python3
"""The server's resident memory under N distinct refused CRSs (issue 21, item 8): each call is
a `raster_reproject` to a CRS never seen before (a transverse Mercator on its own central
meridian and false easting), refused by the crs_datum gate for want of a justification; the
server renders a prompt, issues a decision key, asks PROJ for the transformation and matches
the CRS to an authority. RSS (VmRSS) is sampled every `--every` calls. A benchmark, not a test:

    python3 tests/python/refused_crs_memory.py --server target/debug/gdal-mcp --calls 10000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", required=True)
    parser.add_argument("--calls", type=int, default=10000)
    parser.add_argument("--every", type=int, default=1000)
    args = parser.parse_args()
    workspace = tempfile.mkdtemp(prefix="refused-crs-")
    dem = os.path.join(workspace, "dem.tif")
    asc = os.path.join(workspace, "dem.asc")
    with open(asc, "w", encoding="ascii") as grid:
        grid.write("ncols 16\nnrows 16\nxllcorner 15.0\nyllcorner 45.0\ncellsize 0.001\n")
        for row in range(16):
            grid.write(" ".join(str(100 + row + col) for col in range(16)) + "\n")
    subprocess.run(["gdal_translate", "-q", "-a_srs", "EPSG:4326", asc, dem], check=True)
    server = subprocess.Popen(
        [args.server, "serve", "--workspace", workspace],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        text=True, bufsize=1)

    def request(ident: int, method: str, params: dict) -> dict:
        server.stdin.write(json.dumps({"jsonrpc": "2.0", "id": ident, "method": method,
                                       "params": params}) + "\n")
        server.stdin.flush()
        while True:
            message = json.loads(server.stdout.readline())
            if message.get("id") == ident:
                return message

    request(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                              "clientInfo": {"name": "refused_crs_memory", "version": "1"}})
    server.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
    started = time.perf_counter()
    samples = [(0, rss_kib(server.pid))]
    refused = 0
    for ident in range(1, args.calls + 1):
        lon = 14.0 + (ident % 2000) * 0.001
        easting = 500000 + ident
        crs = (f"+proj=tmerc +lat_0=0 +lon_0={lon:.3f} +k=0.9996 +x_0={easting} +y_0=0 "
               "+ellps=intl +towgs84=-87,-98,-121,0,0,0,0 +units=m +no_defs")
        answer = request(ident, "tools/call", {"name": "raster_reproject", "arguments": {
            "input": "dem.tif", "output": f"out{ident}.tif", "resampling": "bilinear",
            "dst_crs": crs}})
        text = json.dumps(answer)
        if answer.get("result", {}).get("isError") and "refusal" in text:
            refused += 1
        if ident % args.every == 0:
            samples.append((ident, rss_kib(server.pid)))
    elapsed = time.perf_counter() - started
    print(f"{args.calls} calls ({refused} refused by the gate) in {elapsed:.0f} s")
    base = samples[1][1] if len(samples) > 1 else samples[0][1]
    for calls, kib in samples:
        print(f"  after {calls:>6} calls: RSS {kib / 1024:7.1f} MiB ({(kib - base) / 1024:+.1f} MiB "
              f"since {samples[1][0] if len(samples) > 1 else 0})")
    server.stdin.close()
    server.wait()


if __name__ == "__main__":
    main()
