#!/usr/bin/env python3
"""Time `vector_join` with `predicate: "nearest"` and check it against PROJ's `geod` (issue 18).

Builds 10,000 target points and 400 sites (random, 10-12° E, 44-46° N, EPSG:4326) in a fresh
workspace, starts ``SERVER serve --workspace WS --store WS/.store``, joins each target to its
nearest site twice over raw JSON-RPC (the first call includes PROJ's start-up; the second is
the warm figure), then checks every 333rd target's nearest site and distance by brute force
with ``geod -I`` on WGS 84 (exit 1 on any mismatch over 1 mm).

    python3 tests/python/nearest_bench.py --server target/release/gdal-mcp
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def points(rnd: random.Random, n: int) -> list[tuple[float, float]]:
    return [(rnd.uniform(10, 12), rnd.uniform(44, 46)) for _ in range(n)]


def write(path: Path, pts: list[tuple[float, float]]) -> None:
    features = [
        {"type": "Feature", "properties": {"id": i},
         "geometry": {"type": "Point", "coordinates": list(p)}}
        for i, p in enumerate(pts)
    ]
    path.write_text(json.dumps({"type": "FeatureCollection", "features": features}))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--targets", type=int, default=10000)
    parser.add_argument("--sites", type=int, default=400)
    args = parser.parse_args()
    ws = Path(tempfile.mkdtemp(prefix="nearest-bench-"))
    rnd = random.Random(18)
    targets, sites = points(rnd, args.targets), points(rnd, args.sites)
    write(ws / "t.geojson", targets)
    write(ws / "s.geojson", sites)
    server = subprocess.Popen(
        [args.server, "serve", "--workspace", str(ws), "--store", str(ws / ".store")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    ids = iter(range(1, 1 << 30))

    def request(method: str, params: dict) -> dict:
        rid = next(ids)
        server.stdin.write(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method,
                                       "params": params}) + "\n")
        server.stdin.flush()
        while True:
            reply = json.loads(server.stdout.readline())
            if reply.get("id") == rid:
                return reply

    request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                           "clientInfo": {"name": "nearest-bench", "version": "1"}})
    server.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
    server.stdin.flush()
    for run in ("cold", "warm"):
        start = time.perf_counter()
        reply = request("tools/call", {"name": "vector_join", "arguments": {
            "input": "t.geojson", "join": "s.geojson", "predicate": "nearest",
            "fields": ["id"], "stats": ["first"], "output": f"{run}.geojson"}})
        seconds = time.perf_counter() - start
        if reply["result"].get("isError"):
            print(json.dumps(reply["result"])[:600], file=sys.stderr)
            return 1
        print(f"{run}: {seconds:.3f} s for {args.targets} targets x {args.sites} sites")
    server.stdin.close()
    server.wait(timeout=30)
    joined = json.loads((ws / "warm.geojson").read_text())["features"]
    mismatches = checked = 0
    for i in range(0, args.targets, 333):
        lines = "".join(f"{targets[i][1]} {targets[i][0]} {s[1]} {s[0]}\n" for s in sites)
        out = subprocess.run(["geod", "+ellps=WGS84", "-I", "-F", "%.6f", "+units=m"],
                             input=lines, capture_output=True, text=True, check=True).stdout
        distances = [float(line.split()[2]) for line in out.splitlines()]
        best = min(range(len(sites)), key=distances.__getitem__)
        got = joined[i]["properties"]
        checked += 1
        if got["id_first"] != best or abs(got["join_distance_m"] - distances[best]) > 1e-3:
            mismatches += 1
            print("mismatch", i, got, best, distances[best], file=sys.stderr)
    print(f"checked {checked} targets against geod: {mismatches} mismatches")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
