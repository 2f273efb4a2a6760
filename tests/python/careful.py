"""A careful agent's justification, for the cross-checks that must get past the gate.

Since issue 18 every built-in domain checks what each finding's answer contains (a tolerance no
smaller than the measured error, where a CRS comes from, the alternatives considered by id, the
offered safe alternative rejected with a reason); an answer that only acknowledges a finding is
refused. This mirrors `careful_answer` and `considered_instead` in `tests/src/lib.rs`: one answer
per evidence id, each with its own content.
"""

from __future__ import annotations

from typing import Any

ANSWERS = {
    "crs_change": "positions, areas and distances must survive for the regional map; we accept "
                  "up to 1000 m of positional error there",
    "ballpark_operation": "we accept up to 1000 m of positional error: the output is a regional "
                          "preview at 1 km cells",
    "unknown_accuracy": "we accept up to 1000 m of positional error: the output is a regional "
                        "preview at 1 km cells",
    "outside_area_of_use": "we accept up to 1000 m of positional error: the output is a "
                           "regional preview at 1 km cells",
    "source_crs_assigned": "the CRS is documented in the provider's metadata and was verified "
                           "by overlay on the basemap",
    "source_crs_overridden": "the CRS is documented in the provider's metadata and was verified "
                             "by overlay on the basemap",
    "source_crs_unidentified": "the CRS is documented in the provider's metadata and was "
                               "verified by overlay on the basemap",
    "crs_missing": "the CRS is documented in the provider's metadata and was verified by overlay "
                   "on the basemap",
    "geographic_dem_scaled": "we accept up to 1000 % of east-west gradient error in this preview",
    "geographic_dem_aspect": "we accept up to 180° of aspect error in this preview",
    "unit_mismatch": "the heights are in metres, as the provider's metadata documents",
    "dem_crs_missing": "the heights are in metres, as the provider's metadata documents",
    "continuous_input": "the surface is smooth, so the method keeps it continuous for the preview",
    "categorical_input": "interpolated class codes (blended values that are no class) are "
                         "acceptable because the output is a continuous preview that is never "
                         "used as classes",
    "stream_threshold": "channel heads mapped in the field start at about 1 km² of contributing "
                        "area",
    "pour_points": "the outlets were placed within 30 m of the mapped channel",
    "flat_fraction": "we accept that up to 100 % of cells route by flat handling in this preview",
    "upstream_interpolation": "we accept up to 10 m of vertical error from the upstream "
                              "resampling",
    "planar_distortion": "we accept up to 500 % of scale error for this preview",
    "target_distortion": "we accept up to 1000 % of scale error in the target CRS: the preview "
                         "is viewed, never measured",
    "categorical_mean": "the codes are ordered fractions, checked against the legend",
    "upstream_interpolated_classes": "the codes are ordered fractions, checked against the legend",
    "all_touched_sum": "the zones are disjoint, so no boundary cell is counted twice",
}
DEFAULT = "a regional preview whose figures are never used as measurements"

CONSIDERED = {
    "crs_datum": [("EPSG:3857 (Web Mercator)", "the basemap tiles reproject on their own")],
    "resampling": [("nearest", "nearest makes steps in a smooth surface"),
                   ("cubic", "cubic overshoots next to sharp edges")],
    "hydrology": [("fill", "filling floods real pits into flat lakes"),
                  ("breach", "breaching would notch the culvert crossings this map keeps"),
                  ("d8", "single-neighbour routing makes parallel paths"),
                  ("dinf", "dispersion spreads channels over hillslopes")],
    "aggregation": [("cell_centre", "centre membership drops the cells a zone only grazes"),
                    ("all_touched", "touched cells count the boundary cells twice"),
                    ("coverage", "exact cell fractions change the preview's figures by little")],
}


def _names(offered: dict[str, Any]) -> str:
    words = []
    for key, value in offered.items():
        if isinstance(value, str):
            words.append(value)
        elif isinstance(value, dict):
            words.extend(v for v in value.values() if isinstance(v, str))
        else:
            words.append(key)
    return " ".join(words)


def justification(entry: dict[str, Any], method: str, intent: str) -> dict[str, Any]:
    """A justification of `method` for one refusal entry that answers each finding by id."""
    domain = entry.get("domain", "")
    evidence: dict[str, str] = {}
    alternatives = [{"method": "keep the source CRS", "why_not": "the other layers are geographic"}]
    for item in entry.get("evidence") or []:
        ident = item.get("id")
        if not isinstance(ident, str):
            continue
        evidence[ident] = f"{ANSWERS.get(ident, DEFAULT)} ({ident})"
        offered = item.get("alternative")
        if isinstance(offered, dict):
            alternatives.append({
                "method": _names(offered),
                "why_not": f"the preview keeps the call's own setting to compare with the "
                           f"earlier runs ({ident})"})
    alternatives += [{"method": m, "why_not": w} for m, w in CONSIDERED.get(domain, [])]
    return {
        "intent": intent,
        "alternatives": alternatives,
        "choice": {
            "method": method,
            "rationale": f"{method} suits a regional preview at 1 km cells: positions within "
                         "1000 m and smooth surfaces are what the map needs",
            "tradeoffs": "we accept up to 1000 m of positional error and 10 % of value error, "
                         "since the figures are never used as measurements",
        },
        "evidence": evidence,
        "confidence": "medium",
        "assumptions": ["The input is a small real DEM used only for protocol testing."],
    }
