#!/usr/bin/env python3
"""Zonal statistics of gdal-mcp against exactextract 0.3.0 and rasterstats 0.21.0, over MCP stdio.

Copies L7_ETMs.tif, dem.tif, olinda_tracts.gpkg, lc.tif and nc.gpkg from --data into a fresh
workspace (recreated on every run), derives three inputs there with rasterio / pyogrio (no GDAL
Python bindings):

* ``dem_nodata.tif``: dem.tif with nodata -9999 declared, a block and ~3 % scattered cells set to
  it, and a few undeclared NaN cells (both kinds are nodata for every implementation here);
* ``tracts_4674.gpkg``: the 470 Olinda census tracts reprojected to EPSG:4674 (SIRGAS 2000
  geographic), with the original FID kept in the field ``src_fid``;
* ``lc_zones.gpkg``: 60 random polygons (seed 3) over lc.tif (land cover classes, Albers).

then starts ``SERVER serve --workspace WS --store WS/.preflight`` and compares ``zonal_stats``
with independent implementations, per feature (matched by OGR FID), on L7 band 1 (Byte) and
dem.tif (Float32) x the 470 tracts, lc.tif (classes) x the 60 random zones, and dem_nodata.tif:

* ``coverage`` against exactextract 0.3.0 (each cell weighted by the exact fraction of its area
  inside the polygon: count = sum of fractions, sum, mean, min/max over cells with a fraction
  > 0, std = its weighted population ``stdev``, majority/minority by summed fraction, variety).
  count, sum, mean, std, median: relative 1e-6 (coverage fractions differ only by float
  rounding), plus an absolute floor of 1e-9 x the band's largest |value| (1e-6 x for std, as
  exactextract's E[x^2] - E[x]^2 leaves ~sqrt(eps) x scale on near-constant zones); min, max,
  variety exact; majority, minority exact unless tied (below).
* ``cell_centre`` against rasterstats 0.21.0 ``all_touched=False`` (cells whose centre is
  inside, GDAL's rasterize default) and ``all_touched`` against rasterstats ``all_touched=True``
  (GDAL's ALL_TOUCHED burn); unweighted. count, min, max, median (numpy's), majority, minority,
  variety exact; sum, mean, std (numpy, ddof=0) relative 1e-9.

Median under coverage. The tool documents its median as exactextract's weighted-quantile
estimator (``WeightedQuantiles``) with **every cell** an element. exactextract's own ``median``
feeds that estimator its value -> summed-coverage histogram (one element per distinct value) and
casts the result to the band type (truncating for integer bands), which gives different numbers
whenever a zone repeats a value. So the checked reference is the estimator, ported here, applied
per cell to exactextract's own ``values`` and ``coverage`` output; the same port applied to the
histogram must reproduce exactextract's ``median`` exactly (``*.median_port``), and the zones
where ours differs from exactextract's own median are counted in an ``INFO`` line.

rasterstats is given the band as a float64 array (file nodata replaced by NaN) and a fill value
of -1e300 for cells outside the raster, which it masks; given the file path instead it counts
the zero fill of boundless reads as data for the tracts that reach past the raster edge.

Ties: for majority/minority the spec breaks ties towards the smallest value (as rasterstats does);
exactextract's majority takes the largest. Where exactextract's frequency table (its ``unique`` and
``frac`` operations) shows a tie (fractions equal within 1e-9 relative), ours must be the
smallest tied value; the tie is reported, not counted as a disagreement.

Nodata: ``ignore`` is compared with both anchors on dem_nodata.tif (both skip nodata and NaN);
``propagate`` must give null for every statistic but count for exactly the zones with a
nodata/NaN cell in their footprint (rasterstats / exactextract ``max`` over a 0/1 nodata
indicator raster), the ignore run's count for every zone, and the ignore run's values for the
others.

Zones in another CRS: the coverage run over ``tracts_4674.gpkg`` (refused by crs_datum,
severity required, and by aggregation) must match the same-CRS run and exactextract.

Every gated call is made twice: first without a justification, which must be refused by
``aggregation`` (plus ``crs_datum`` for the zones in EPSG:4674) with a ``sha256:`` key, the
decision fields the spec names and the severity it implies (``critical`` for sum under
all_touched or averaging on categorical data, ``required`` otherwise); then again with a
justification whose ``choice.method`` names the decision's values. Each call uses a statistic
set / semantics / nodata policy not used before in the run, so no stored capsule answers it.

One line per check, ``INFO`` lines for context, and last ``N passed, M failed``; exit code 0 only
when M == 0. ``--references-only`` runs the reference side (and prints the anchors' own
cross-agreement) without starting the server.

    python tests/python/zonal_references.py --server target/debug/gdal-mcp \\
        --workspace /tmp/zonal-ws --data target/testdata
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import traceback
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pyogrio.raw
import rasterio
import rasterio.warp
import shapely
import shapely.geometry
from exactextract import exact_extract
from exactextract.raster import NumPyRasterSource, RasterioRasterSource
from mcp import Client, MCPError
from mcp.client.stdio import StdioServerParameters, stdio_client
from rasterstats import zonal_stats as rasterstats_zonal

import careful  # beside this script

ALL_STATS = ("count", "sum", "mean", "min", "max", "std", "median", "majority", "minority", "variety")
EXACTEXTRACT_OP = {s: s for s in ALL_STATS} | {"std": "stdev"}
RASTERSTATS_STAT = {s: s for s in ALL_STATS} | {"variety": "unique"}
AVERAGING = {"mean", "sum", "std", "median"}
COPIED = ("L7_ETMs.tif", "dem.tif", "olinda_tracts.gpkg", "lc.tif", "nc.gpkg")
MARKER = ".zonal_references"  # marks a workspace this script created (safe to delete)
OUTSIDE = -1.0e300  # rasterstats' fill for cells beyond the raster (masked as nodata)
NODATA = -9999.0
TIE_REL = 1e-9


def without(*names: str) -> list[str]:
    return [s for s in ALL_STATS if s not in names]


# ---------------------------------------------------------------------------------------------
# reporting


class Report:
    def __init__(self) -> None:
        self.passed = 0
        self.failed = 0

    def check(self, ok: bool, name: str, detail: str) -> bool:
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        detail = " ".join(str(detail).split())
        if len(detail) > 900:
            detail = detail[:897] + "..."
        print(f"{'PASS' if ok else 'FAIL'} {name}: {detail}", flush=True)
        return ok

    @staticmethod
    def info(text: str) -> None:
        print(f"INFO {' '.join(text.split())}", flush=True)


class CheckFailed(Exception):
    pass


def expect(cond: Any, message: str) -> None:
    if not cond:
        raise CheckFailed(message)


def describe(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError):
        return f"MCPError {exc.code}: {exc.message}"
    if isinstance(exc, TimeoutError):
        return "timed out"
    return f"{type(exc).__name__}: {exc}"


# ---------------------------------------------------------------------------------------------
# inputs


@dataclass
class Zones:
    path: Path
    layer: str
    fids: list[int]
    geoms: list[Any]  # shapely geometries, in the layer's CRS

    @classmethod
    def read(cls, path: Path, layer: str) -> Zones:
        _, fids, wkb, _ = pyogrio.raw.read(path, layer=layer, return_fids=True)
        return cls(path, layer, [int(f) for f in fids], list(shapely.from_wkb(wkb)))

    def features(self) -> list[dict[str, Any]]:
        return [
            {"type": "Feature", "properties": {"fid": fid}, "geometry": shapely.geometry.mapping(g)}
            for fid, g in zip(self.fids, self.geoms, strict=True)
        ]


def write_polygons(path: Path, layer: str, geoms: list[Any], crs: str, fields: dict[str, np.ndarray]) -> None:
    pyogrio.raw.write(
        str(path),
        geometry=np.array(shapely.to_wkb(geoms), dtype=object),
        field_data=list(fields.values()),
        fields=list(fields),
        layer=layer,
        driver="GPKG",
        crs=crs,
        geometry_type="Polygon",
    )


def make_nodata_dem(src: Path, dst: Path) -> dict[str, int]:
    """dem.tif with nodata -9999: a block, ~3 % scattered cells, and 5 undeclared NaN cells."""
    with rasterio.open(src) as ds:
        z = ds.read(1)
        profile = ds.profile
    rng = np.random.default_rng(42)
    h, w = z.shape
    mask = np.zeros(z.shape, dtype=bool)
    mask[40:52, 30:47] = True
    mask |= rng.random(z.shape) < 0.03
    z = z.copy()
    z[mask] = NODATA
    nan_cells = [(int(rng.integers(0, h)), int(rng.integers(0, w))) for _ in range(5)]
    for r, c in nan_cells:
        z[r, c] = np.nan
    profile.update(nodata=NODATA)
    with rasterio.open(dst, "w", **profile) as out:
        out.write(z, 1)
    return {"declared": int(mask.sum()), "nan": int(np.isnan(z).sum()), "cells": int(z.size)}


def make_reprojected_tracts(src: Zones, dst: Path, dst_crs: str = "EPSG:4674") -> None:
    with rasterio.open(src.path.parent / "dem.tif") as ds:  # same CRS as the tracts
        src_crs = ds.crs
    moved = [
        shapely.geometry.shape(rasterio.warp.transform_geom(src_crs, dst_crs, shapely.geometry.mapping(g)))
        for g in src.geoms
    ]
    write_polygons(dst, "tracts", moved, dst_crs, {"src_fid": np.array(src.fids, dtype=np.int64)})


def make_lc_zones(raster: Path, dst: Path, n: int = 60) -> None:
    """Random star-shaped polygons (5-11 vertices, radius 2-12 % of the extent) over `raster`."""
    with rasterio.open(raster) as ds:
        b = ds.bounds
        crs = ds.crs.to_wkt()
    rng = np.random.default_rng(3)
    geoms = random_polygons(rng, (b.left, b.bottom, b.right, b.top), n, 0.02, 0.12)
    write_polygons(dst, "zones", geoms, crs, {"name": np.array([f"z{i}" for i in range(n)], dtype=object)})


def random_polygons(rng: np.random.Generator, bounds: tuple[float, float, float, float], n: int,
                    rmin: float, rmax: float) -> list[Any]:
    """`n` star-shaped (hence simple) polygons of 5-11 vertices with radius rmin-rmax of the
    extent's smaller side, centred so they lie inside `bounds`."""
    xmin, ymin, xmax, ymax = bounds
    side = min(xmax - xmin, ymax - ymin)
    out = []
    for _ in range(n):
        radius = side * rng.uniform(rmin, rmax)
        cx = rng.uniform(xmin + radius, xmax - radius)
        cy = rng.uniform(ymin + radius, ymax - radius)
        k = int(rng.integers(5, 12))
        # One vertex per sector of 2*pi/k: consecutive angles are less than pi apart, so the
        # ring is star-shaped around the centre and simple (sorted uniform angles are not).
        angles = (np.arange(k) + rng.uniform(0.0, 0.9, k)) * (2 * np.pi / k)
        radii = radius * rng.uniform(0.4, 1.0, k)
        ring = np.column_stack([cx + radii * np.cos(angles), cy + radii * np.sin(angles)])
        polygon = shapely.Polygon(ring)
        assert polygon.is_valid, shapely.is_valid_reason(polygon)
        out.append(polygon)
    return out


# ---------------------------------------------------------------------------------------------
# reference implementations


def _num(v: Any) -> float | None:
    if v is None:
        return None
    v = float(v)
    return None if math.isnan(v) else v


def ties(unique: Iterable[Any], frac: Iterable[Any]) -> dict[str, list[float]]:
    u = np.asarray(list(unique), dtype=np.float64)
    f = np.asarray(list(frac), dtype=np.float64)
    if u.size == 0:
        return {"majority": [], "minority": []}
    hi, lo = f.max(), f.min()
    return {
        "majority": sorted(u[f >= hi * (1 - TIE_REL)].tolist()),
        "minority": sorted(u[f <= lo * (1 + TIE_REL)].tolist()),
    }


def weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    """exactextract's ``WeightedQuantiles::quantile`` (weighted_quantiles.cpp), ported: with the
    elements sorted by value, S_0 = 0, S_i = i*w_i + (n-1)*sum_{j<i} w_j, S_n = (n-1)*sum w; find
    the first S_i > q*S_n and interpolate linearly from the element before it (the last value
    when there is none). Elements of equal value are taken in increasing weight."""
    order = np.lexsort((weights, values))
    x, w = np.asarray(values, np.float64)[order], np.asarray(weights, np.float64)[order]
    n = len(x)
    before = np.concatenate([[0.0], np.cumsum(w)[:-1]])
    s = np.arange(n) * w + (n - 1) * before
    s[0] = 0.0
    target = q * w.sum() * (n - 1)
    right = int(np.searchsorted(s, target, side="right"))
    if right == n:
        return float(x[-1])
    left = right - 1
    return float(x[left] + (target - s[left]) * (x[right] - x[left]) / (s[right] - s[left]))


def medians(values: Any, coverage: Any, dtype: np.dtype) -> tuple[float | None, float | None]:
    """(per cell, per value) weighted medians of one zone from exactextract's own cell values and
    coverage fractions. Per value is what exactextract's ``median`` computes: the estimator over
    its value -> summed coverage histogram, cast to the band's type (truncated for integers)."""
    v, c = np.asarray(values, np.float64), np.asarray(coverage, np.float64)
    keep = (c > 0) & ~np.isnan(v)
    v, c = v[keep], c[keep]
    if v.size == 0:
        return None, None
    per_cell = weighted_quantile(v, c, 0.5)
    distinct, index = np.unique(v, return_inverse=True)
    per_value = weighted_quantile(distinct, np.bincount(index, weights=c), 0.5)
    per_value = float(np.trunc(per_value)) if dtype.kind in "iu" else float(dtype.type(per_value))
    return per_cell, per_value


def ref_exactextract(raster: Path, band: int, zones: Zones, stats: list[str]) -> dict[int, dict[str, Any]]:
    """exactextract on the file itself (rasterio source): nodata and NaN cells are skipped.

    ``median`` is the tool's documented definition: exactextract's weighted-quantile estimator
    applied to every cell (fed with exactextract's own cell values and coverage fractions).
    exactextract's own ``median`` applies it to the value histogram instead and casts to the
    band type; it is kept as ``_median_native`` (and its port as ``_median_port``)."""
    ops = [EXACTEXTRACT_OP[s] for s in stats]
    want_ties = "majority" in stats or "minority" in stats
    if want_ties:
        ops += ["unique", "frac"]
    if "median" in stats:
        ops += ["values", "coverage"]
    with rasterio.open(raster) as ds:
        dtype = np.dtype(ds.dtypes[band - 1])
        rows = exact_extract(RasterioRasterSource(ds, band), zones.features(), ops, include_cols=["fid"])
    out: dict[int, dict[str, Any]] = {}
    for row in rows:
        p = row["properties"]
        rec: dict[str, Any] = {s: _num(p.get(EXACTEXTRACT_OP[s])) for s in stats}
        if want_ties:
            rec["_ties"] = ties(p["unique"], p["frac"])
        if "median" in stats:
            rec["_median_native"] = rec["median"]
            rec["median"], rec["_median_port"] = medians(p["values"], p["coverage"], dtype)
        out[int(p["fid"])] = rec
    return out


def band_as_float(raster: Path, band: int) -> tuple[np.ndarray, Any]:
    with rasterio.open(raster) as ds:
        a = ds.read(band).astype(np.float64)
        nodata = ds.nodatavals[band - 1]
        transform = ds.transform
    if nodata is not None and not math.isnan(nodata):
        a[a == nodata] = np.nan
    return a, transform


def ref_rasterstats(raster: Path, band: int, zones: Zones, stats: list[str], all_touched: bool
                    ) -> dict[int, dict[str, Any]]:
    a, transform = band_as_float(raster, band)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rows = rasterstats_zonal(zones.features(), a, affine=transform, nodata=OUTSIDE,
                                 stats=[RASTERSTATS_STAT[s] for s in stats], all_touched=all_touched)
    return {fid: {s: _num(r.get(RASTERSTATS_STAT[s])) for s in stats} for fid, r in zip(zones.fids, rows, strict=True)}


def touching_nodata(raster: Path, band: int, zones: Zones, semantics: str) -> set[int]:
    """FIDs of the zones with at least one nodata/NaN cell in them under `semantics`."""
    a, transform = band_as_float(raster, band)
    indicator = np.isnan(a).astype(np.float64)
    if semantics == "coverage":
        h, w = a.shape
        x0, y0 = transform.c, transform.f
        src = NumPyRasterSource(indicator, x0, y0 + h * transform.e, x0 + w * transform.a, y0)
        rows = exact_extract(src, zones.features(), ["max"], include_cols=["fid"])
        return {int(r["properties"]["fid"]) for r in rows if (_num(r["properties"]["max"]) or 0) > 0}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rows = rasterstats_zonal(zones.features(), indicator, affine=transform, nodata=OUTSIDE, stats=["max"],
                                 all_touched=semantics == "all_touched")
    return {fid for fid, r in zip(zones.fids, rows, strict=True) if (r["max"] or 0) > 0}


def ref_for(semantics: str, raster: Path, band: int, zones: Zones, stats: list[str]) -> dict[int, dict[str, Any]]:
    if semantics == "coverage":
        return ref_exactextract(raster, band, zones, stats)
    return ref_rasterstats(raster, band, zones, stats, all_touched=semantics == "all_touched")


# ---------------------------------------------------------------------------------------------
# comparison


@dataclass
class Tol:
    rel: float = 0.0
    abs_scale: float = 0.0  # absolute floor, times the raster's largest |value|

    def label(self) -> str:
        if self.rel == 0 and self.abs_scale == 0:
            return "exact"
        floor = f" + {self.abs_scale:g}*scale" if self.abs_scale else ""
        return f"rel {self.rel:g}{floor}"


EXACT = Tol()
# Coverage fractions (and so count, sum, mean) differ only by float rounding: 1e-6 relative. The
# absolute floors cover values near zero; std's is larger because exactextract computes the
# weighted variance as E[x^2] - E[x]^2, which leaves ~sqrt(eps)*scale of noise on zones of
# (nearly) constant value.
TOLERANCES: dict[str, dict[str, Tol]] = {
    "coverage": {
        "count": Tol(1e-6, 1e-12), "sum": Tol(1e-6, 1e-9), "mean": Tol(1e-6, 1e-9),
        "std": Tol(1e-6, 1e-6), "median": Tol(1e-6, 1e-9),
        "min": EXACT, "max": EXACT, "variety": EXACT, "majority": EXACT, "minority": EXACT,
    },
    "cell_centre": {
        "count": EXACT, "sum": Tol(1e-9, 1e-12), "mean": Tol(1e-9, 1e-12), "std": Tol(1e-9, 1e-12),
        "min": EXACT, "max": EXACT, "median": EXACT, "majority": EXACT, "minority": EXACT, "variety": EXACT,
    },
}
TOLERANCES["all_touched"] = TOLERANCES["cell_centre"]


@dataclass
class Comparison:
    stat: str
    compared: int = 0
    max_rel: float = 0.0
    tie_breaks: list[str] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)


def compare(ours: dict[int, dict[str, Any]], ref: dict[int, dict[str, Any]], stat: str, tol: Tol,
            scale: float) -> Comparison:
    cmp = Comparison(stat)
    for fid in sorted(set(ref) | set(ours)):
        if fid not in ours:
            cmp.mismatches.append(f"fid {fid}: missing from our result")
            continue
        if fid not in ref:
            cmp.mismatches.append(f"fid {fid}: not in the reference")
            continue
        a, b = ours[fid].get(stat), ref[fid].get(stat)
        cmp.compared += 1
        if a is None and b is None:
            continue
        if a is None or b is None:
            cmp.mismatches.append(f"fid {fid}: ours {a!r} vs ref {b!r}")
            continue
        a, b = float(a), float(b)
        diff = abs(a - b)
        big = max(abs(a), abs(b))
        if big > 0:
            cmp.max_rel = max(cmp.max_rel, diff / big)
        if diff <= tol.rel * big + tol.abs_scale * scale:
            continue
        tied = ref[fid].get("_ties", {}).get(stat, [])
        if stat in ("majority", "minority") and len(tied) > 1 and a in tied and b in tied:
            if a == min(tied):
                cmp.tie_breaks.append(f"fid {fid}: tie {tied}, ours {a:g}, ref {b:g}")
                continue
            cmp.mismatches.append(f"fid {fid}: tie {tied} broken to {a:g}, not the smallest (ref {b:g})")
            continue
        cmp.mismatches.append(f"fid {fid}: ours {a!r} vs ref {b!r} (diff {diff:.3g})")
    return cmp


def report_comparisons(report: Report, name: str, ours: dict[int, dict[str, Any]], ref: dict[int, dict[str, Any]],
                       stats: list[str], semantics: str, scale: float, against: str) -> None:
    for stat in stats:
        tol = TOLERANCES[semantics][stat]
        cmp = compare(ours, ref, stat, tol, scale)
        ok = not cmp.mismatches and cmp.compared > 0
        versus = against
        if stat == "median" and semantics == "coverage" and any("_median_native" in r for r in ref.values()):
            versus = (f"{against} (its WeightedQuantiles estimator applied per cell to its own cell values and "
                      f"coverage fractions: the tool's documented median)")
        detail = f"{cmp.compared - len(cmp.mismatches)}/{cmp.compared} features agree with {versus} ({tol.label()}"
        detail += f", max rel diff {cmp.max_rel:.2g})" if tol.rel or tol.abs_scale else ")"
        if cmp.tie_breaks:
            detail += f"; {len(cmp.tie_breaks)} tie(s) broken to the smallest value as specified: " + "; ".join(cmp.tie_breaks[:3])
        if cmp.mismatches:
            detail += f"; {len(cmp.mismatches)} differ: " + "; ".join(cmp.mismatches[:6])
        report.check(ok, f"{name}.{stat}", detail)
        if stat == "median" and semantics == "coverage" and any("_median_native" in r for r in ref.values()):
            median_lines(report, name, ours, ref)


def median_lines(report: Report, name: str, ours: dict[int, dict[str, Any]], ref: dict[int, dict[str, Any]]) -> None:
    """The port of exactextract's estimator must reproduce exactextract's own median exactly
    (validating the per-cell reference above); where ours differs from exactextract's own median
    is reported as INFO: the tool takes every cell as an element, exactextract its value histogram."""
    port_bad = [f"fid {f}: port {r['_median_port']!r} vs exactextract {r['_median_native']!r}"
                for f, r in sorted(ref.items()) if r["_median_port"] != r["_median_native"]]
    report.check(not port_bad, f"{name}.median_port",
                 f"the port of exactextract's WeightedQuantiles over its value histogram, cast to the band type, "
                 f"reproduces exactextract's median in {len(ref) - len(port_bad)}/{len(ref)} features"
                 + (f"; differs: {'; '.join(port_bad[:6])}" if port_bad else ""))
    differ = []
    for f, r in sorted(ref.items()):
        a, b = (ours.get(f) or {}).get("median"), r["_median_native"]
        if a is None or b is None:
            if a is not b:
                differ.append((f, a, b))
        elif abs(a - b) > 1e-6 * max(abs(a), abs(b)):
            differ.append((f, a, b))
    if differ:
        report.info(f"{name}.median: ours differs from exactextract's own median (per-value histogram, cast to the "
                    f"band type) in {len(differ)}/{len(ref)} features, e.g. "
                    + "; ".join(f"fid {f}: ours {a!r} vs exactextract {b!r}" for f, a, b in differ[:4]))


def by_fid(result: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {int(f["fid"]): f for f in result["features"]}


def by_id(result: dict[str, Any]) -> dict[int, dict[str, Any]]:
    return {int(f["id"]): f for f in result["features"]}


def raster_scale(raster: Path, band: int) -> float:
    a, _ = band_as_float(raster, band)
    return float(np.nanmax(np.abs(a))) or 1.0


# ---------------------------------------------------------------------------------------------
# the MCP side


def decision_words(decision: Any) -> str:
    """The decision's values as words, e.g. "zonal count max mean coverage ignore continuous polygons"."""
    words: list[str] = []

    def walk(v: Any) -> None:
        if isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
        elif v is not None:
            words.append(str(v))

    walk(decision)
    return " ".join(words)


def justification(entry: dict[str, Any], purpose: str) -> dict[str, Any]:
    """Each finding answered by id with its own content (issue 18: an acknowledgement is
    refused); see careful.py."""
    method = decision_words(entry.get("decision")) or str(entry.get("domain"))
    return careful.justification(
        entry, method,
        f"{purpose}: compare gdal-mcp's zonal statistics with an independent implementation.")


def expected_severity(decision: dict[str, Any]) -> str:
    stats = set(decision.get("statistics") or [])
    if decision.get("semantics") == "all_touched" and "sum" in stats:
        return "critical"
    if decision.get("data") == "categorical" and stats & AVERAGING:
        return "critical"
    return "required"


def text_of(result: Any) -> str:
    parts = [getattr(c, "text", "") for c in (result.content or [])]
    return (" ".join(p for p in parts if p) or repr(result.structured_content))[:400]


def error_payload(result: Any) -> Any:
    """The JSON of an error or refusal result's second text block (``{"error": ...}`` or
    ``{"refusal": [...], ...}``); such results carry no structuredContent. None if absent."""
    content = list(result.content or [])
    if len(content) < 2 or not isinstance(getattr(content[1], "text", None), str):
        return None
    try:
        return json.loads(content[1].text)
    except json.JSONDecodeError:
        return None


class Gate:
    """Makes each gated call twice (refused, then justified) and checks both answers."""

    def __init__(self, client: Client, report: Report) -> None:
        self.client = client
        self.report = report
        self.severities: dict[str, str] = {}

    async def call(self, name: str, arguments: dict[str, Any], domains: tuple[str, ...] = ("aggregation",),
                   severities: dict[str, str] | None = None,
                   absent: tuple[str, ...] = ()) -> dict[str, Any] | None:
        """`domains` must all refuse and `absent` must not; `severities` gives the expected
        severity of domains other than aggregation (whose severity follows from its decision,
        see expected_severity)."""
        first = await self.client.call_tool("zonal_stats", arguments)
        sc = error_payload(first)
        try:
            expect(first.is_error, "the unjustified call was not refused")
            expect(first.structured_content is None, "the refusal carries structuredContent")
            expect(isinstance(sc, dict) and isinstance(sc.get("refusal"), list) and sc["refusal"],
                   f"no refusal list in the answer: {text_of(first)}")
            entries = {e.get("domain"): e for e in sc["refusal"]}
            for d in domains:
                expect(d in entries, f"not refused by {d} (refused by {sorted(entries)})")
            for d in absent:
                expect(d not in entries, f"refused by {d}, which has nothing to ask here")
            agg = entries["aggregation"]
            decision = agg.get("decision") or {}
            key = agg.get("key")
            expect(isinstance(key, str) and key.startswith("sha256:"), f"aggregation key {key!r}")
            wanted = {
                "operation": "zonal",
                "statistics": sorted(set(arguments["stats"])),
                "semantics": arguments["semantics"],
                "nodata_policy": arguments.get("nodata_policy", "ignore"),
            }
            for k, v in wanted.items():
                expect(decision.get(k) == v, f"decision.{k} is {decision.get(k)!r}, want {v!r} (decision {decision})")
            severity = expected_severity(decision)
            expect(agg.get("severity") == severity,
                   f"aggregation severity {agg.get('severity')!r}, want {severity!r} for {decision}")
            expect(bool(agg.get("requires_assumptions")) == (severity == "critical"),
                   f"requires_assumptions {agg.get('requires_assumptions')!r} for severity {severity}")
            for d, want in (severities or {}).items():
                expect(entries[d].get("severity") == want,
                       f"{d} severity {entries[d].get('severity')!r}, want {want!r} ({entries[d].get('reason')})")
        except CheckFailed as e:
            self.report.check(False, f"{name}.gate", str(e))
            return None
        refused = ", ".join(f"{d} ({e.get('severity')}, {e.get('key', '')[:15]}...)" for d, e in entries.items())
        just = {d: justification(e, name) for d, e in entries.items()}
        second = await self.client.call_tool("zonal_stats", {**arguments, "justification": just})
        sc2 = second.structured_content
        try:
            expect(not second.is_error, f"refused or failed after justifying {sorted(just)}: {text_of(second)}")
            expect(isinstance(sc2, dict) and isinstance(sc2.get("features"), list), f"no features list: {text_of(second)}")
            reflection = sc2.get("reflection") or []
            decisions = {r.get("domain"): r.get("decision") for r in reflection if isinstance(r, dict)}
            for d in entries:
                expect(decisions.get(d) in ("proceed", "warn"), f"reflection for {d}: {decisions.get(d)!r} ({reflection})")
            for k in ("semantics", "nodata_policy"):
                want = arguments.get(k, "ignore")
                expect(sc2.get(k) == want, f"result {k} {sc2.get(k)!r}, want {want!r}")
        except CheckFailed as e:
            self.report.check(False, f"{name}.gate", f"refused by {refused}; then: {e}")
            return None
        self.report.check(True, f"{name}.gate",
                          f"refused by {refused} for {decision_words(decision)}; justified inline: "
                          f"{len(sc2['features'])} features, receipts {decisions}")
        return sc2


# ---------------------------------------------------------------------------------------------
# the run


@dataclass
class Anchor:
    name: str
    raster: str
    band: int
    zones: str
    layer: str
    semantics: str
    stats: list[str]


def anchors() -> list[Anchor]:
    """Each anchor's (statistics, semantics, policy, data) decision is new in the run."""
    full, no_variety = list(ALL_STATS), without("variety")
    return [
        Anchor("coverage.L7b1", "L7_ETMs.tif", 1, "olinda_tracts.gpkg", "tracts", "coverage", full),
        Anchor("coverage.dem", "dem.tif", 1, "olinda_tracts.gpkg", "tracts", "coverage", no_variety),
        Anchor("cell_centre.L7b1", "L7_ETMs.tif", 1, "olinda_tracts.gpkg", "tracts", "cell_centre", full),
        Anchor("cell_centre.dem", "dem.tif", 1, "olinda_tracts.gpkg", "tracts", "cell_centre", no_variety),
        Anchor("all_touched.L7b1", "L7_ETMs.tif", 1, "olinda_tracts.gpkg", "tracts", "all_touched", full),
        Anchor("all_touched.dem", "dem.tif", 1, "olinda_tracts.gpkg", "tracts", "all_touched", no_variety),
        Anchor("categorical.cell_centre.lc", "lc.tif", 1, "lc_zones.gpkg", "zones", "cell_centre",
               ["count", "majority", "minority", "variety"]),
        Anchor("categorical.coverage.lc", "lc.tif", 1, "lc_zones.gpkg", "zones", "coverage",
               ["count", "majority", "minority", "variety"]),
    ]


NODATA_STATS_IGNORE = without("variety", "minority")  # decisions distinct from the anchors above
NODATA_STATS_PROPAGATE = without("variety", "majority")
CRS_STATS = without("std")


def anchor_line(report: Report, semantics: str) -> None:
    what = {
        "coverage": "exactextract 0.3.0 (coverage: cells weighted by their exact covered fraction)",
        "cell_centre": "rasterstats 0.21.0 all_touched=False (cell_centre: cells whose centre is inside, unweighted)",
        "all_touched": "rasterstats 0.21.0 all_touched=True (all_touched: every cell GDAL's ALL_TOUCHED burns, unweighted)",
    }[semantics]
    report.info(f"semantics {semantics} is anchored on {what}")


class Run:
    def __init__(self, args: argparse.Namespace, report: Report) -> None:
        self.args = args
        self.report = report
        self.ws = Path(args.workspace).resolve()
        self.refs: dict[str, dict[int, dict[str, Any]]] = {}

    def prepare(self) -> None:
        if self.ws.exists():
            if not (self.ws / MARKER).exists():
                raise SystemExit(f"refusing to reuse {self.ws}: it exists and was not made by this script")
            shutil.rmtree(self.ws)
        self.ws.mkdir(parents=True)
        (self.ws / MARKER).write_text("created by tests/python/zonal_references.py\n")
        for name in COPIED:
            shutil.copyfile(Path(self.args.data) / name, self.ws / name)
        aux = Path(self.args.data) / "lc.tif.aux.xml"
        if aux.is_file():
            shutil.copyfile(aux, self.ws / aux.name)
        made = make_nodata_dem(self.ws / "dem.tif", self.ws / "dem_nodata.tif")
        self.report.info(f"dem_nodata.tif: {made['declared']} of {made['cells']} cells set to nodata {NODATA:g}, "
                         f"{made['nan']} more set to NaN (undeclared)")
        self.tracts = Zones.read(self.ws / "olinda_tracts.gpkg", "tracts")
        make_reprojected_tracts(self.tracts, self.ws / "tracts_4674.gpkg")
        make_lc_zones(self.ws / "lc.tif", self.ws / "lc_zones.gpkg")
        self.zones = {
            "olinda_tracts.gpkg": self.tracts,
            "lc_zones.gpkg": Zones.read(self.ws / "lc_zones.gpkg", "zones"),
        }

    def references(self) -> None:
        """Compute every reference before the server starts (and show how the anchors agree)."""
        for semantics in ("coverage", "cell_centre", "all_touched"):
            anchor_line(self.report, semantics)
        for a in anchors():
            self.refs[a.name] = ref_for(a.semantics, self.ws / a.raster, a.band, self.zones[a.zones], a.stats)
        nd = self.ws / "dem_nodata.tif"
        for semantics in ("cell_centre", "coverage"):
            self.refs[f"nodata.ignore.{semantics}"] = ref_for(semantics, nd, 1, self.tracts, NODATA_STATS_IGNORE)
            self.refs[f"nodata.touching.{semantics}"] = {f: {} for f in touching_nodata(nd, 1, self.tracts, semantics)}
        for semantics in ("cell_centre", "coverage"):
            n = len(self.refs[f"nodata.touching.{semantics}"])
            self.report.info(f"dem_nodata.tif: {n} of {len(self.tracts.fids)} tracts touch a nodata/NaN cell under {semantics}")
        cov, cc = self.refs["coverage.L7b1"], self.refs["cell_centre.L7b1"]
        common = [f for f in cov if cov[f]["mean"] is not None and cc[f]["mean"] is not None]
        rel = [abs(cov[f]["mean"] - cc[f]["mean"]) / abs(cc[f]["mean"]) for f in common]
        ratio = sum(cov[f]["count"] for f in cov) / max(1.0, sum(cc[f]["count"] or 0 for f in cc))
        self.report.info(f"anchors between themselves (L7 band 1 x {len(cov)} tracts): mean |rel diff| of means "
                         f"exactextract vs rasterstats {np.mean(rel):.2g} (max {np.max(rel):.2g}); total count ratio "
                         f"{ratio:.5f}; {sum(1 for f in cc if not cc[f]['count'])} tracts have no cell centre inside")

    def server(self) -> Any:
        params = StdioServerParameters(
            command=self.args.server,
            args=["serve", "--workspace", str(self.ws), "--store", str(self.ws / ".preflight")],
            env=dict(os.environ),
        )
        if self.args.server_log:
            return stdio_client(params, errlog=self.args.server_log_file)
        return params

    async def run_mcp(self) -> None:
        async with Client(self.server(), mode="legacy", read_timeout_seconds=self.args.timeout) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            if not self.report.check("zonal_stats" in tools, "listing", f"{len(tools)} tools"
                                     + ("" if "zonal_stats" in tools else f", no zonal_stats among {sorted(tools)}")):
                return
            gate = Gate(client, self.report)
            await self.anchors(gate)
            await self.nodata(gate)
            await self.other_crs(gate)

    async def guarded(self, name: str, body: Any) -> None:
        try:
            with anyio.fail_after(self.args.timeout * 3):
                await body()
        except Exception as e:  # noqa: BLE001 - report and go on with the next check
            if self.args.verbose:
                traceback.print_exc(file=sys.stderr)
            self.report.check(False, name, describe(e))

    def args_for(self, raster: str, zones: str, layer: str, semantics: str, stats: list[str], band: int = 1,
                 policy: str = "ignore", **extra: Any) -> dict[str, Any]:
        a = {"input": str(self.ws / raster), "zones": str(self.ws / zones), "zone_layer": layer, "band": band,
             "stats": stats, "semantics": semantics, "nodata_policy": policy}
        a.update(extra)
        return a

    async def anchors(self, gate: Gate) -> None:
        self.results: dict[str, dict[str, Any]] = {}
        for a in anchors():
            async def body(a: Anchor = a) -> None:
                result = await gate.call(a.name, self.args_for(a.raster, a.zones, a.layer, a.semantics, a.stats, a.band))
                if result is None:
                    return
                self.results[a.name] = result
                against = "exactextract" if a.semantics == "coverage" else \
                    f"rasterstats all_touched={a.semantics == 'all_touched'}"
                report_comparisons(self.report, a.name, by_fid(result), self.refs[a.name], a.stats, a.semantics,
                                   raster_scale(self.ws / a.raster, a.band), against)
            await self.guarded(a.name, body)

    async def nodata(self, gate: Gate) -> None:
        nd = "dem_nodata.tif"
        scale = raster_scale(self.ws / nd, 1)
        for semantics in ("cell_centre", "coverage"):
            name = f"nodata.{semantics}"

            async def body(semantics: str = semantics, name: str = name) -> None:
                ignore = await gate.call(f"{name}.ignore", self.args_for(
                    nd, "olinda_tracts.gpkg", "tracts", semantics, NODATA_STATS_IGNORE))
                if ignore is None:
                    return
                against = "exactextract (skips nodata and NaN)" if semantics == "coverage" else \
                    "rasterstats (skips nodata and NaN)"
                report_comparisons(self.report, f"{name}.ignore", by_fid(ignore), self.refs[f"nodata.ignore.{semantics}"],
                                   NODATA_STATS_IGNORE, semantics, scale, against)
                propagate = await gate.call(f"{name}.propagate", self.args_for(
                    nd, "olinda_tracts.gpkg", "tracts", semantics, NODATA_STATS_PROPAGATE, policy="propagate"))
                if propagate is None:
                    return
                touching = set(self.refs[f"nodata.touching.{semantics}"])
                ours_i, ours_p = by_fid(ignore), by_fid(propagate)
                # A tract partly outside the raster has no value for that part: its share
                # outside is measured against shapely, and under propagate it is null as for
                # nodata (attack round 15, R15-B21).
                with rasterio.open(self.ws / nd) as src:
                    extent = shapely.geometry.box(*src.bounds)
                outside = {}
                for fid, g in zip(self.tracts.fids, self.tracts.geoms, strict=True):
                    share = 1.0 - g.intersection(extent).area / g.area if g.area > 0 else 0.0
                    if share > 1e-9:
                        outside[fid] = share
                for fid in self.tracts.fids:
                    got = (ours_i.get(fid) or {}).get("outside_share")
                    want = outside.get(fid)
                    if (got is None) != (want is None) or (
                            want is not None and abs(got - want) > 1e-6 * max(want, 1e-3)):
                        self.report.check(False, f"{name}.outside_share",
                                          f"fid {fid}: outside_share {got!r}, shapely {want!r}")
                        return
                self.report.check(True, f"{name}.outside_share",
                                  f"{len(outside)} tracts lie partly outside the raster; their share "
                                  "outside equals shapely's within 1e-6")
                touching = touching | set(outside)
                shared = [s for s in NODATA_STATS_PROPAGATE if s in NODATA_STATS_IGNORE and s != "count"]
                problems: list[str] = []
                nulled = 0
                for fid in self.tracts.fids:
                    p, i = ours_p.get(fid), ours_i.get(fid)
                    if p is None or i is None:
                        problems.append(f"fid {fid}: missing")
                        continue
                    if p.get("count") != i.get("count"):
                        problems.append(f"fid {fid}: count {p.get('count')!r} under propagate vs {i.get('count')!r} under ignore")
                    if fid in touching:
                        nulled += 1
                        bad = {s: p.get(s) for s in NODATA_STATS_PROPAGATE if s != "count" and p.get(s) is not None}
                        if bad:
                            problems.append(f"fid {fid} touches nodata but has {bad}")
                    else:
                        bad = {s: (p.get(s), i.get(s)) for s in shared if p.get(s) != i.get(s)}
                        if bad:
                            problems.append(f"fid {fid} touches no nodata but propagate != ignore: {bad}")
                self.report.check(not problems and 0 < nulled < len(self.tracts.fids), f"{name}.propagate",
                                  f"{nulled} tracts touching nodata/NaN or partly outside the raster (per the {'exactextract' if semantics == 'coverage' else 'rasterstats'} "
                                  f"footprint) have null stats and their valid-cell count; the other "
                                  f"{len(self.tracts.fids) - nulled} equal the ignore run exactly"
                                  + (f"; {len(problems)} problem(s): " + "; ".join(problems[:6]) if problems else ""))
            await self.guarded(name, body)

    async def other_crs(self, gate: Gate) -> None:
        name = "other_crs.coverage.L7b1"

        async def body() -> None:
            moved = await gate.call(name, self.args_for(
                "L7_ETMs.tif", "tracts_4674.gpkg", "tracts", "coverage", CRS_STATS, id_field="src_fid"),
                # SIRGAS 2000 lon/lat onto SIRGAS 2000 / UTM: a conversion the raster's CRS
                # fixes, which crs_datum does not ask about (attack round 21, R21-B10).
                domains=("aggregation",), absent=("crs_datum",))
            if moved is None:
                return
            ours = by_id(moved)
            scale = raster_scale(self.ws / "L7_ETMs.tif", 1)
            same = self.results.get("coverage.L7b1")
            if same is None:
                self.report.check(False, f"{name}.vs_same_crs", "no result of coverage.L7b1 to compare with")
            else:
                report_comparisons(self.report, f"{name}.vs_same_crs", ours, by_fid(same), CRS_STATS, "coverage",
                                   scale, "coverage.L7b1 (the tracts in EPSG:31985, the raster's CRS)")
            report_comparisons(self.report, f"{name}.vs_exactextract", ours, self.refs["coverage.L7b1"], CRS_STATS,
                               "coverage", scale, "exactextract on the tracts in EPSG:31985")
        await self.guarded(name, body)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--server", help="path to the gdal-mcp binary (not needed with --references-only)")
    p.add_argument("--workspace", required=True, help="scratch dir, recreated on every run")
    p.add_argument("--data", required=True, help="dir holding " + ", ".join(COPIED))
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per MCP request (default 120)")
    p.add_argument("--references-only", action="store_true", help="compute the references only; no server")
    p.add_argument("--server-log", help="append the server's stderr to this file instead of ours")
    p.add_argument("-v", "--verbose", action="store_true", help="tracebacks of failures on stderr")
    args = p.parse_args(argv)
    for name in COPIED:
        if not (Path(args.data) / name).is_file():
            p.error(f"--data {args.data}: no {name} there")
    if not args.references_only:
        if not args.server:
            p.error("--server is required (or give --references-only)")
        server = Path(args.server)
        if not (server.is_file() and os.access(server, os.X_OK)):
            p.error(f"--server {args.server}: not an executable file")
        args.server = str(server.resolve())
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report = Report()
    run = Run(args, report)
    run.prepare()
    run.references()
    if not args.references_only:
        args.server_log_file = open(args.server_log, "a") if args.server_log else None  # noqa: SIM115
        try:
            anyio.run(run.run_mcp)
        except Exception as e:  # noqa: BLE001 - connect failures, crashes on shutdown
            if args.verbose:
                traceback.print_exc(file=sys.stderr)
            report.check(False, "session", describe(e))
        finally:
            if args.server_log_file:
                args.server_log_file.close()
    print(f"{report.passed} passed, {report.failed} failed", flush=True)
    return 0 if report.failed == 0 and (report.passed > 0 or args.references_only) else 1


if __name__ == "__main__":
    sys.exit(main())
