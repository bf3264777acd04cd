"""The claims registry (``paper_tables/claims.yaml``): its JSON schema and a validating loader.

Each claim names what the paper (or a seed note) asserts, under which conditions, how this suite checks it
(``check.kind``: ``formula`` over the reported tables -> ids in ``paper_tables/derived.csv``; ``measurement`` by this
suite -> a results CSV + filters; ``cost_model`` -> cost-model prediction rows; ``reading`` -> a textual check of a
seed's reading against the paper, with a fixed verdict and evidence), and the ways it is commonly misread.
An optional ``measure`` block adds a measurement next to a formula check (a proxy at the suite's scale); an optional
``benchmark`` block measures the claim on the paper's own metric (benchmark accuracy, ``suite.report.bench_audit``),
which the audit uses wherever it gives a verdict, falling back to the proxy otherwise.
"""
from __future__ import annotations

from pathlib import Path

import jsonschema
import yaml

from suite.config import load_yaml

CLAIMS_PATH = Path(__file__).resolve().parents[2] / "paper_tables" / "claims.yaml"

_FILTER = {"type": "object", "additionalProperties": {"anyOf": [
    {"type": ["string", "number"]}, {"type": "array", "items": {"type": ["string", "number"]}, "minItems": 1}]}}
_EXPECT = {"type": "object", "minProperties": 1, "additionalProperties": False, "properties": {
    "approx": {"type": "number"}, "rel_tol": {"type": "number", "exclusiveMinimum": 0},
    "ge": {"type": "number"}, "le": {"type": "number"}},
    "dependentRequired": {"approx": ["rel_tol"], "rel_tol": ["approx"]}}
_MEASURE = {"type": "object", "additionalProperties": False,
            "required": ["results", "column", "op", "where", "expect"],
            "properties": {
                "results": {"type": "string", "pattern": r"^\{(results|gpu)\}/[\w./-]+\.csv$"},
                "column": {"type": "string"}, "op": {"enum": ["ratio", "difference", "value"]},
                "numerator": _FILTER, "denominator": _FILTER, "where": _FILTER, "expect": _EXPECT,
                "proxy": {"type": "string"},
                "controls": {"enum": ["mqar", "niah", "lm", "conversion"],
                             "description": "judge only where both controls passed"},
                "cell": {"enum": ["mqar_control"],
                         "description": "only the rows the MQAR controls read: their cell at the widest size"},
                "seed_noise": {"type": "boolean", "description": "compare per seed under the 2-sigma noise rule"},
                "claim_is_difference": {"type": "boolean",
                                        "description": "the claim says the two differ: no difference fails it"}},
            "allOf": [{"if": {"properties": {"op": {"enum": ["ratio", "difference"]}}},
                       "then": {"required": ["numerator", "denominator"]}}]}
_BENCHMARK = {"type": "object", "additionalProperties": False,
              "required": ["results", "key", "op", "numerator", "tasks"],
              "description": "the claim on the paper's own metric: zero-shot benchmark accuracy (report/bench_audit)",
              "properties": {
                  "results": {"type": "string", "pattern": r"^\{(results|gpu)\}/[\w./-]+\.csv$"},
                  "key": {"enum": ["arch", "variant"]},
                  "op": {"enum": ["value", "difference", "wins", "size_losses", "gap_shrinks"]},
                  "numerator": {"type": "string"}, "denominator": {"type": "string"},
                  "tasks": {"type": "array", "minItems": 1, "items": {"type": "string"}},
                  "size": {"enum": ["largest", "all"]}, "expect": _EXPECT,
                  "seed_noise": {"type": "boolean"}, "claim_is_difference": {"type": "boolean"}},
              "allOf": [{"if": {"properties": {"op": {"enum": ["difference", "wins", "size_losses", "gap_shrinks"]}}},
                         "then": {"required": ["denominator"]}}]}
VERDICTS = ["consistent with the paper's own tables", "inconsistent", "reproduced here", "not reproduced here",
            "not testable here", "misreading", "not run", "invalid"]

CLAIMS_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object", "required": ["claims"], "additionalProperties": False,
    "properties": {"claims": {"type": "array", "minItems": 20, "items": {
        "type": "object", "additionalProperties": False,
        "required": ["id", "claim", "value", "unit", "source", "asserted_by", "conditions", "check", "misreadings"],
        "properties": {
            "id": {"type": "string", "pattern": r"^C\d{2}$"},
            "claim": {"type": "string", "minLength": 10},
            "value": {"type": ["number", "string"]},
            "unit": {"type": "string"},
            "source": {"type": "string", "minLength": 3},
            "asserted_by": {"enum": ["paper", "seed 000", "seed 001", "seed 002", "seed 003"]},
            "tolerance": {"type": "number", "minimum": 0},
            "conditions": {"type": "object", "additionalProperties": {"type": "string"},
                           "required": ["scale", "gpus", "lengths", "batch", "software", "timed"]},
            "check": {"type": "object", "required": ["kind"], "oneOf": [
                {"properties": {"kind": {"const": "formula"},
                                "formula": {"anyOf": [{"type": "string"},
                                                      {"type": "array", "items": {"type": "string"}, "minItems": 1}]},
                                "expect_value": {"type": "number"}},
                 "required": ["kind", "formula"], "additionalProperties": False},
                {"properties": {"kind": {"enum": ["measurement", "cost_model"]}, "measure": _MEASURE,
                                "untestable_reason": {"type": "string"}},
                 "required": ["kind", "measure"], "additionalProperties": False},
                {"properties": {"kind": {"const": "reading"},
                                "verdict": {"enum": ["misreading", "inconsistent", "not testable here"]},
                                "evidence": {"type": "string", "minLength": 10},
                                "formula": {"type": "string"}},
                 "required": ["kind", "verdict", "evidence"], "additionalProperties": False}]},
            "measure": _MEASURE,
            "benchmark": _BENCHMARK,
            "misreadings": {"type": "array", "items": {"type": "string", "minLength": 5}},
        }}}},
}


def validate_claims(data: dict) -> dict:
    """Validate parsed claims against ``CLAIMS_SCHEMA`` and id uniqueness; ValueError naming the offending claim."""
    try:
        jsonschema.validate(data, CLAIMS_SCHEMA)
    except jsonschema.ValidationError as err:
        where = "/".join(str(p) for p in err.absolute_path)
        raise ValueError(f"claims.yaml invalid at {where or '<root>'}: {err.message}") from err
    ids = [c["id"] for c in data["claims"]]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise ValueError(f"claims.yaml: duplicate claim ids {dupes}")
    return data


def load_claims(path: str | Path = CLAIMS_PATH) -> list[dict]:
    """Read and validate ``claims.yaml``; returns the list of claim dicts. Raises ValueError if invalid/unreadable."""
    path = Path(path)
    try:
        data = load_yaml(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as err:
        raise ValueError(f"cannot read claims file {path}: {err}") from err
    return validate_claims(data)["claims"]
