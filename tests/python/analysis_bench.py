#!/usr/bin/env python3
"""Time gdal-mcp's analysis tools against the Python stack on the same data (issue 11).

Builds the inputs in a fresh workspace, starts ``SERVER serve --workspace WS --store WS/.store``,
and times each call over raw JSON-RPC (one server, warm: the first call of each tool is not
timed) against an equivalent in the Python geospatial stack, best of ``--repeat`` runs:

* ``vector_measure`` geodesic, N polygons of 32 vertices (0.4-1.3 km across, 44-46° N) vs
  ``pyproj.Geod(ellps="WGS84").geometry_area_perimeter`` per polygon;
* ``vector_measure`` planar in EPSG:32632 vs pyproj ``Transformer`` + ``shapely.area`` /
  ``shapely.length`` (vectorised);
* ``vector_buffer`` geodesic, N points by 500 m vs per-point azimuthal equidistant ``pyproj`` +
  ``shapely.buffer`` and back;
* ``vector_join`` N points x 400 squares, ``contains`` with a sum, vs ``shapely.STRtree``
  query + ``numpy.bincount``;
* ``raster_calc`` NDVI over two SIZE x SIZE Float32 rasters vs numpy (read with rasterio,
  compute, write a ZSTD GeoTIFF), with the server's peak RSS (``VmHWM``) after the call.

The geodesic measure is gated by nothing (no finding), the planar one runs in UTM at its own
zone (scale error below 0.1 %, so not gated either); the join and buffer need no justification.

    OMP_NUM_THREADS=1 target/pyvenv/bin/python tests/python/analysis_bench.py \\
        --server target/release/gdal-mcp [--features 10000] [--size 4000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyproj
import rasterio
import shapely
from rasterio.transform import from_origin


class Server:
    def __init__(self, binary: str, workspace: Path) -> None:
        self.p = subprocess.Popen(
            [binary, "serve", "--workspace", str(workspace), "--store", str(workspace / ".store")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )
        self.next = 1
        self.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                    "clientInfo": {"name": "analysis_bench", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict) -> None:
        assert self.p.stdin is not None
        self.p.stdin.write(json.dumps(message) + "\n")
        self.p.stdin.flush()

    def request(self, method: str, params: dict) -> dict:
        ident = self.next
        self.next += 1
        self.send({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        assert self.p.stdout is not None
        while True:
            reply = json.loads(self.p.stdout.readline())
            if reply.get("id") == ident:
                return reply

    def call(self, tool: str, arguments: dict) -> dict:
        result = self.request("tools/call", {"name": tool, "arguments": arguments})["result"]
        if result.get("isError"):
            raise SystemExit(f"{tool} failed: {result['content'][0]['text'][:400]}")
        return result["structuredContent"]

    def peak_rss_mb(self) -> float:
        for line in Path(f"/proc/{self.p.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def close(self) -> None:
        self.p.kill()
        self.p.wait()


def best(repeat: int, job) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        job()
        times.append(time.perf_counter() - start)
    return min(times)


def geojson(path: Path, epsg: int, geometries: list, properties: list[dict] | None = None) -> None:
    features = [
        {"type": "Feature", "properties": (properties[i] if properties else {}),
         "geometry": shapely.geometry.mapping(g)}
        for i, g in enumerate(geometries)
    ]
    path.write_text(json.dumps({
        "type": "FeatureCollection",
        "crs": {"type": "name", "properties": {"name": f"urn:ogc:def:crs:EPSG::{epsg}"}},
        "features": features,
    }))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", required=True)
    ap.add_argument("--features", type=int, default=10000)
    ap.add_argument("--size", type=int, default=4000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(11)
    ws = Path(tempfile.mkdtemp(prefix="analysis-bench-"))
    rows = []
    try:
        # Polygons near 45° N (32-gons, 0.4-1.3 km across, on a grid so that none overlap: the
        # measurement domain would rightly ask about a sum over overlaps), lon/lat and UTM 32N.
        n = args.features
        side = math.ceil(math.sqrt(n))
        lon = 8.0 + (np.arange(n) % side) * 0.02 + rng.uniform(-0.002, 0.002, n)
        lat = 44.0 + (np.arange(n) // side) * 0.02 + rng.uniform(-0.002, 0.002, n)
        radius_deg = rng.uniform(0.002, 0.006, n)
        angles = np.linspace(0, 2 * math.pi, 33)
        polygons = [
            shapely.Polygon(np.column_stack([lo + r * np.cos(angles) / math.cos(math.radians(la)),
                                             la + r * np.sin(angles)]))
            for lo, la, r in zip(lon, lat, radius_deg)
        ]
        geojson(ws / "polygons.geojson", 4326, polygons)
        subprocess.run(["ogr2ogr", "-q", str(ws / "polygons.gpkg"), str(ws / "polygons.geojson")], check=True)
        server = Server(args.server, ws)
        server.call("vector_measure", {"input": "polygons.gpkg", "features": False})
        t_ours = best(args.repeat, lambda: server.call("vector_measure", {"input": "polygons.gpkg", "features": False}))
        geod = pyproj.Geod(ellps="WGS84")
        t_ref = best(args.repeat, lambda: [geod.geometry_area_perimeter(p) for p in polygons])
        ours = server.call("vector_measure", {"input": "polygons.gpkg", "features": False})["polygons"]["area"]
        ref = sum(abs(geod.geometry_area_perimeter(p)[0]) for p in polygons)
        rows.append((f"vector_measure geodesic, {n} polygons", t_ours, "pyproj Geod per polygon", t_ref,
                     f"total area rel. diff {abs(ours - ref) / ref:.1e}"))

        to_utm = pyproj.Transformer.from_crs(4326, 32632, always_xy=True)
        utm = [shapely.transform(p, lambda xy: np.column_stack(to_utm.transform(xy[:, 0], xy[:, 1])))
               for p in polygons]
        geojson(ws / "polygons_utm.geojson", 32632, utm)
        subprocess.run(["ogr2ogr", "-q", str(ws / "polygons_utm.gpkg"), str(ws / "polygons_utm.geojson")], check=True)
        planar = {"input": "polygons_utm.gpkg", "method": "planar", "features": False}
        server.call("vector_measure", planar)
        t_ours = best(args.repeat, lambda: server.call("vector_measure", planar))
        arr = np.array(polygons, dtype=object)

        def shapely_planar():
            moved = shapely.transform(arr, lambda xy: np.column_stack(to_utm.transform(xy[:, 0], xy[:, 1])))
            return shapely.area(moved).sum(), shapely.length(moved).sum()

        t_ref = best(args.repeat, shapely_planar)
        rows.append((f"vector_measure planar (UTM), {n} polygons", t_ours,
                     "pyproj transform + shapely area/length", t_ref, ""))

        # Buffers of points by 500 m, geodesic.
        points = [shapely.Point(a, b) for a, b in zip(lon, lat)]
        geojson(ws / "points.geojson", 4326, points, [{"v": float(i % 7)} for i in range(n)])
        subprocess.run(["ogr2ogr", "-q", str(ws / "points.gpkg"), str(ws / "points.geojson")], check=True)
        k = [0]

        def buffer_ours():
            k[0] += 1
            server.call("vector_buffer", {"input": "points.gpkg", "output": f"b{k[0]}.gpkg",
                                          "distance": 500, "unit": "m"})

        buffer_ours()
        t_ours = best(args.repeat, buffer_ours)

        def buffer_ref():
            out = []
            for p in points:
                local = pyproj.CRS.from_proj4(f"+proj=aeqd +lat_0={p.y} +lon_0={p.x} +datum=WGS84 +units=m")
                there = pyproj.Transformer.from_crs(4326, local, always_xy=True)
                back = pyproj.Transformer.from_crs(local, 4326, always_xy=True)
                b = shapely.buffer(shapely.Point(there.transform(p.x, p.y)), 500, quad_segs=8)
                out.append(shapely.transform(b, lambda xy: np.column_stack(back.transform(xy[:, 0], xy[:, 1]))))
            return out

        t_ref = best(1, buffer_ref)
        rows.append((f"vector_buffer geodesic 500 m, {n} points", t_ours,
                     "per-point pyproj AEQD + shapely buffer", t_ref, "reference timed once"))

        # Points in 400 squares (20 x 20 over the points' area), contains + sum.
        step = side * 0.02 / 20
        squares = [shapely.box(8 + i * step, 44 + j * step, 8 + (i + 1) * step, 44 + (j + 1) * step)
                   for i in range(20) for j in range(20)]
        geojson(ws / "squares.geojson", 4326, squares, [{"cell": i} for i in range(400)])
        subprocess.run(["ogr2ogr", "-q", str(ws / "squares.gpkg"), str(ws / "squares.geojson")], check=True)

        def join_ours():
            k[0] += 1
            return server.call("vector_join", {"input": "squares.gpkg", "join": "points.gpkg",
                                               "predicate": "contains", "fields": ["v"], "stats": ["sum"],
                                               "output": f"j{k[0]}.gpkg"})

        join_ours()
        t_ours = best(args.repeat, join_ours)
        values = np.array([float(i % 7) for i in range(n)])

        def join_ref():
            tree = shapely.STRtree(np.array(points, dtype=object))
            target, source = tree.query(np.array(squares, dtype=object), predicate="contains")
            return np.bincount(target, weights=values[source], minlength=len(squares))

        t_ref = best(args.repeat, join_ref)
        rows.append((f"vector_join contains+sum, {n} points x 400 squares", t_ours,
                     "shapely STRtree + numpy bincount", t_ref, ""))
        server.close()

        # NDVI over two SIZE² Float32 rasters.
        size = args.size
        server = Server(args.server, ws)
        for name, scale in (("nir", 0.6), ("red", 0.2)):
            data = (rng.random((size, size), dtype=np.float32) * scale + 0.05).astype(np.float32)
            with rasterio.open(ws / f"{name}.tif", "w", driver="GTiff", width=size, height=size, count=1,
                               dtype="float32", crs="EPSG:32632", transform=from_origin(500000, 5000000, 10, 10),
                               tiled=True, compress="zstd") as d:
                d.write(data, 1)
        rss_before = server.peak_rss_mb()

        def calc_ours():
            k[0] += 1
            server.call("raster_calc", {"inputs": {"nir": "nir.tif", "red": "red.tif"},
                                        "expression": "(nir - red) / (nir + red)",
                                        "output": f"ndvi{k[0]}.tif", "data_type": "Float32"})

        t_ours = best(args.repeat, calc_ours)
        rss_after = server.peak_rss_mb()

        def calc_ref():
            with rasterio.open(ws / "nir.tif") as a, rasterio.open(ws / "red.tif") as b:
                nir, red = a.read(1), b.read(1)
                profile = a.profile
            ndvi = (nir - red) / (nir + red)
            with rasterio.open(ws / "ndvi_ref.tif", "w", **profile) as d:
                d.write(ndvi.astype(np.float32), 1)

        t_ref = best(args.repeat, calc_ref)
        rows.append((f"raster_calc NDVI {size}x{size}", t_ours, "rasterio + numpy", t_ref,
                     f"server peak RSS {rss_before:.0f} -> {rss_after:.0f} MB "
                     f"(the two inputs are {2 * size * size * 4 / 2**20:.0f} MB as Float32)"))
        server.close()
    finally:
        shutil.rmtree(ws, ignore_errors=True)

    print(f"{'operation':52} {'gdal-mcp':>10} {'reference':>10}  reference / notes")
    for name, ours, ref_name, ref, note in rows:
        print(f"{name:52} {ours:9.3f}s {ref:9.3f}s  {ref_name}{'; ' + note if note else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
