#!/usr/bin/env python3
"""Check PROV-JSON documents: W3C schema, the `prov` reader, and referential integrity.

    python tests/python/prov_check.py FILE [FILE...]

Exit 0 when every file passes. Exit 1 when any file has a problem; each problem is printed
as `FILE: /json/pointer: message`. Exit 2 on a usage error or a missing dependency.

It can also be imported: `check(document: dict) -> list[str]` returns the problems of one
parsed document. Each problem is written `/json/pointer: message`, and an empty list means
the document passes.

Three layers, each of which catches things the others miss:

1. The W3C PROV-JSON JSON Schema (draft-04), vendored in
   tests/fixtures/prov-json/prov-json-schema.json (see SOURCE.md there). Formats are
   asserted: `date-time` must be RFC 3339 with an offset, and `uri` must be an absolute
   URI (which a qualified name `pfx:local` is when `pfx` is a valid URI scheme).
2. The `prov` package must load the document without raising and without emitting a
   `ProvWarning`. Such a warning flags input that prov 3.3 will reject.
3. Checks the schema cannot express:
   - every id named by a relation (prov:entity, prov:activity, prov:agent, prov:plan,
     prov:generatedEntity, prov:usedEntity, prov:delegate, prov:responsible, and the other
     PROV-DM roles) is declared under `entity`, `activity` or `agent`, and in the section
     that fits its role;
   - every prefix used by an id, an attribute name, a typed literal's `type` or an
     `xsd:QName` value is declared in `prefix`. `prov` and `xsd` are predefined, and `_:`
     marks a blank node;
   - `used` has `prov:activity`. PROV-DM requires it, but the W3C schema's `usage` is a
     `$ref` to `generation` and requires `prov:entity` instead;
   - an `xsd:dateTime` typed literal holds an RFC 3339 date-time with an offset.

Dependencies: Python >= 3.11 standard library, `jsonschema` and `prov` (see requirements.txt).
"""

from __future__ import annotations

import json
import re
import sys
import warnings
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

try:
    import jsonschema
    from jsonschema.exceptions import best_match
    from prov.model import ProvDocument, ProvWarning
    import prov as _prov
except ImportError as _exc:  # pragma: no cover - environment problem, not a check result
    _IMPORT_ERROR: ImportError | None = _exc
else:
    _IMPORT_ERROR = None

SCHEMA_PATH = (
    Path(__file__).resolve().parent.parent / "fixtures" / "prov-json" / "prov-json-schema.json"
)

PREDEFINED_PREFIXES = {
    "prov": "http://www.w3.org/ns/prov#",
    "xsd": "http://www.w3.org/2001/XMLSchema#",
}
NODE_KINDS = ("entity", "activity", "agent")

# Which node kind each identifier-valued formal attribute must name, per relation (PROV-DM).
# "any" = any declared node; "generation"/"usage" = the id of a wasGeneratedBy/used record.
RELATION_REFS: dict[str, dict[str, str]] = {
    "used": {"prov:activity": "activity", "prov:entity": "entity"},
    "wasGeneratedBy": {"prov:entity": "entity", "prov:activity": "activity"},
    "wasInvalidatedBy": {"prov:entity": "entity", "prov:activity": "activity"},
    "wasStartedBy": {"prov:activity": "activity", "prov:trigger": "entity", "prov:starter": "activity"},
    "wasEndedBy": {"prov:activity": "activity", "prov:trigger": "entity", "prov:ender": "activity"},
    "wasEndedby": {"prov:activity": "activity", "prov:trigger": "entity", "prov:ender": "activity"},
    "wasInformedBy": {"prov:informed": "activity", "prov:informant": "activity"},
    "wasDerivedFrom": {
        "prov:generatedEntity": "entity",
        "prov:usedEntity": "entity",
        "prov:activity": "activity",
        "prov:generation": "generation",
        "prov:usage": "usage",
    },
    "wasAttributedTo": {"prov:entity": "entity", "prov:agent": "agent"},
    "wasAssociatedWith": {"prov:activity": "activity", "prov:agent": "agent", "prov:plan": "entity"},
    "actedOnBehalfOf": {"prov:delegate": "agent", "prov:responsible": "agent", "prov:activity": "activity"},
    "wasInfluencedBy": {"prov:influencer": "any", "prov:influencee": "any"},
    "specializationOf": {"prov:specificEntity": "entity", "prov:generalEntity": "entity"},
    "alternateOf": {"prov:alternate1": "entity", "prov:alternate2": "entity"},
    "hadMember": {"prov:collection": "entity", "prov:entity": "entity"},
    "mentionOf": {"prov:specificEntity": "entity", "prov:generalEntity": "entity"},
}
# PROV-DM mandatory arguments the W3C schema does not require (its `usage` = `generation`).
DM_REQUIRED = {"used": ("prov:activity",)}

_RFC3339 = re.compile(
    r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$"
)
# RFC 3986 absolute URI: scheme ":" then no whitespace or characters URIs never contain.
_ABS_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:[^\s<>\"{}|\\^`]*$")
_PREFIX_NAME = re.compile(r"^[a-zA-Z0-9_\-]+$")  # the schema's own prefix pattern

Problem = tuple[str, str]  # (JSON pointer, message)


# --------------------------------------------------------------------------- helpers


def _pointer(parts: Iterable[Any]) -> str:
    """RFC 6901 JSON pointer for a path; the whole document is "/"."""
    out = "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)
    return out or "/"


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def is_rfc3339(value: str) -> bool:
    if not _RFC3339.match(value):
        return False
    try:
        datetime.fromisoformat(value.replace("z", "Z").replace("t", "T"))
    except ValueError:
        return False
    return True


def _format_checker() -> "jsonschema.FormatChecker":
    checker = jsonschema.FormatChecker(formats=())

    @checker.checks("date-time")
    def _date_time(value: object) -> bool:
        return not isinstance(value, str) or is_rfc3339(value)

    @checker.checks("uri")
    def _uri(value: object) -> bool:
        return not isinstance(value, str) or bool(_ABS_URI.match(value))

    return checker


@lru_cache(maxsize=1)
def _validator() -> Any:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)  # draft-04, from its "$schema"
    cls.check_schema(schema)
    return cls(schema, format_checker=_format_checker())


# --------------------------------------------------------------------------- layer 1: schema


def schema_problems(document: Any) -> list[Problem]:
    problems = []
    errors = sorted(_validator().iter_errors(document), key=lambda e: (list(map(str, e.absolute_path)), e.message))
    for error in errors:
        message = _short(error.message)
        if error.context:  # anyOf/oneOf: say which branch came closest
            closest = best_match(error.context)
            message += f" (closest: {_pointer(closest.absolute_path)}: {_short(closest.message, 200)})"
        problems.append((_pointer(error.absolute_path), f"schema: {message}"))
    return problems


# --------------------------------------------------------------------------- layer 2: prov


def prov_problems(document: Any) -> list[Problem]:
    problems: list[Problem] = []
    version = getattr(_prov, "__version__", "?")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            ProvDocument.deserialize(content=json.dumps(document), format="json")
        except Exception as exc:  # noqa: BLE001 - any failure to load is the finding
            problems.append(("/", f"prov {version} cannot load it: {type(exc).__name__}: {_short(str(exc))}"))
    for w in caught:
        if issubclass(w.category, ProvWarning):
            problems.append(("/", f"prov {version} warns: {w.category.__name__}: {_short(str(w.message))}"))
    return problems


# --------------------------------------------------------------------------- layer 3: integrity


class _Container:
    """Integrity checks of one container (the document, or one named bundle)."""

    def __init__(self, content: dict, path: list, inherited: dict[str, str]):
        self.content = content
        self.path = path
        self.problems: list[Problem] = []
        self.prefixes = dict(PREDEFINED_PREFIXES)
        self.prefixes.update(inherited)
        self.kinds: dict[str, set[str]] = {}

    def add(self, parts: list, message: str) -> None:
        self.problems.append((_pointer(self.path + parts), message))

    def run(self) -> list[Problem]:
        self.read_prefixes()
        self.read_nodes()
        for rel, refs in RELATION_REFS.items():
            records = self.content.get(rel)
            if isinstance(records, dict):
                for rec_id, body in records.items():
                    self.check_id_prefix([rel, rec_id], rec_id, "relation id")
                    for i, element in enumerate(body if isinstance(body, list) else [body]):
                        at = [rel, rec_id] + ([i] if isinstance(body, list) else [])
                        if isinstance(element, dict):
                            self.check_relation(rel, refs, at, element)
        return self.problems

    def read_prefixes(self) -> None:
        declared = self.content.get("prefix", {})
        if not isinstance(declared, dict):
            return  # the schema reports it
        for name, uri in declared.items():
            if name == "default":
                if isinstance(uri, str):
                    self.prefixes[""] = uri
                continue
            if not _PREFIX_NAME.match(name):
                self.add(["prefix", name], f"prefix name {name!r} does not match the schema's pattern ^[a-zA-Z0-9_\\-]+$")
            if name in PREDEFINED_PREFIXES and uri != PREDEFINED_PREFIXES[name]:
                self.add(["prefix", name], f"prefix {name!r} must stay bound to {PREDEFINED_PREFIXES[name]}")
            if isinstance(uri, str):
                self.prefixes[name] = uri

    def read_nodes(self) -> None:
        for kind in NODE_KINDS:
            records = self.content.get(kind)
            if not isinstance(records, dict):
                continue
            for node_id, attrs in records.items():
                self.kinds.setdefault(node_id, set()).add(kind)
                self.check_id_prefix([kind, node_id], node_id, f"{kind} id")
                for i, element in enumerate(attrs if isinstance(attrs, list) else [attrs]):
                    at = [kind, node_id] + ([i] if isinstance(attrs, list) else [])
                    if isinstance(element, dict):
                        self.check_attributes(at, element, formal=())

    def check_relation(self, rel: str, refs: dict[str, str], at: list, element: dict) -> None:
        for key in DM_REQUIRED.get(rel, ()):
            if key not in element:
                self.add(at, f"PROV-DM: {rel} requires {key} (the W3C schema does not enforce it)")
        for key, expected in refs.items():
            if key not in element:
                continue
            values = element[key]
            for j, ref in enumerate(values if isinstance(values, list) else [values]):
                where = at + [key] + ([j] if isinstance(values, list) else [])
                if isinstance(ref, str):
                    self.check_reference(where, rel, key, ref, expected)
        self.check_attributes(at, element, formal=refs.keys() | {"prov:time"})

    def check_reference(self, where: list, rel: str, key: str, ref: str, expected: str) -> None:
        self.check_id_prefix(where, ref, f"{key} value")
        if expected in ("generation", "usage"):
            table = "wasGeneratedBy" if expected == "generation" else "used"
            if ref not in (self.content.get(table) or {}):
                self.add(where, f"{key} {ref!r} is not the id of a {table} record in this container")
            return
        kinds = self.kinds.get(ref)
        if not kinds:
            wanted = "entity, activity or agent" if expected == "any" else expected
            self.add(where, f"dangling reference: {key} {ref!r} is not declared (expected under {wanted!r})")
        elif expected != "any" and expected not in kinds:
            self.add(where, f"{key} {ref!r} is declared as {'/'.join(sorted(kinds))}, but {rel} needs an {expected}")

    def check_attributes(self, at: list, element: dict, formal: Iterable[str]) -> None:
        formal = set(formal)
        for name, value in element.items():
            if name in formal:
                continue
            self.check_name_prefix(at + [name], name, "attribute name")
            values = value if isinstance(value, list) else [value]
            for j, v in enumerate(values):
                if isinstance(v, dict):
                    self.check_typed_literal(at + [name] + ([j] if isinstance(value, list) else []), v)

    def check_typed_literal(self, where: list, literal: dict) -> None:
        datatype = literal.get("type")
        if not isinstance(datatype, str):
            return
        if not re.match(r"^[A-Za-z][A-Za-z0-9+.\-]*://", datatype):  # a qualified name, not a full URI
            self.check_name_prefix(where + ["type"], datatype, "datatype")
        body = literal.get("$")
        if not isinstance(body, str):
            return
        if datatype in ("xsd:QName", "prov:QUALIFIED_NAME"):
            self.check_name_prefix(where + ["$"], body, "qualified-name value")
        elif datatype == "xsd:dateTime" and not is_rfc3339(body):
            self.add(where + ["$"], f"xsd:dateTime value {body!r} is not an RFC 3339 date-time with an offset")

    def check_id_prefix(self, where: list, ident: str, what: str) -> None:
        if ident.startswith("_:"):
            return  # blank node
        self.check_name_prefix(where, ident, what)

    def check_name_prefix(self, where: list, name: str, what: str) -> None:
        if ":" not in name:
            if "" not in self.prefixes:
                self.add(where, f"{what} {name!r} has no prefix and no default namespace is declared")
            return
        prefix = name.split(":", 1)[0]
        if prefix not in self.prefixes:
            self.add(where, f"undeclared prefix {prefix!r} in {what} {name!r}")


def integrity_problems(document: Any) -> list[Problem]:
    if not isinstance(document, dict):
        return []  # the schema reports it
    top = _Container(document, [], {})
    top.run()
    nested: list[Problem] = []
    bundles = document.get("bundle")
    if isinstance(bundles, dict):
        inherited = {k: v for k, v in top.prefixes.items() if k not in PREDEFINED_PREFIXES}
        for bundle_id, content in bundles.items():
            top.check_id_prefix(["bundle", bundle_id], bundle_id, "bundle id")
            if isinstance(content, dict):
                nested += _Container(content, ["bundle", bundle_id], inherited).run()
    return top.problems + nested


# --------------------------------------------------------------------------- entry points


def _require_dependencies() -> None:
    if _IMPORT_ERROR is not None:
        raise ImportError(
            f"prov_check needs jsonschema and prov ({_IMPORT_ERROR}); "
            "install them with: pip install -r tests/python/requirements.txt"
        ) from _IMPORT_ERROR


def problems_of(document: Any) -> list[Problem]:
    """All problems of one parsed document as (JSON pointer, message) pairs."""
    _require_dependencies()
    return schema_problems(document) + prov_problems(document) + integrity_problems(document)


def check(document: dict) -> list[str]:
    """Problems of one parsed PROV-JSON document, each "/pointer: message"; [] if it passes."""
    return [f"{where}: {message}" for where, message in problems_of(document)]


def _load(path: Path) -> tuple[Any, list[str]]:
    duplicates: list[str] = []

    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict:
        seen: dict[str, Any] = {}
        for key, value in pairs:
            if key in seen:
                duplicates.append(key)
            seen[key] = value
        return seen

    document = json.loads(path.read_text(encoding="utf-8"), object_pairs_hook=pairs_hook)
    return document, [f"/: JSON object key {key!r} is repeated; JSON readers keep only its last value" for key in duplicates]


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python tests/python/prov_check.py FILE [FILE...]", file=sys.stderr)
        return 2
    try:
        _require_dependencies()
    except ImportError as exc:
        print(f"prov_check: {exc}", file=sys.stderr)
        return 2
    passed = failed = 0
    for name in argv:
        path = Path(name)
        try:
            document, problems = _load(path)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            document, problems = None, [f"/: cannot read JSON: {exc}"]
        if document is not None:
            problems += check(document)
        if problems:
            failed += 1
            for problem in problems:
                print(f"{name}: {problem}")
        else:
            passed += 1
            print(f"{name}: OK")
    print(f"prov_check: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
