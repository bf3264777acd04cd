"""The claims registry (``paper_tables/claims.yaml``): its JSON schema and a validating loader.

Each claim names what the paper (or a seed note, or this suite) asserts, under which conditions, and how it is
judged (the rules: ``suite.report.verdicts``, ``docs/verdicts.md``):

- ``check``: against the paper's own numbers and text. ``formula``: ids in ``paper_tables/derived.csv`` whose
  recomputed values must agree with the claim (``expect_value``: the first one's, within the printed precision;
  ``expect``: every one meets that rule); ``reading``: a textual check of a seed's reading, with a fixed verdict, its
  evidence and optional formula ids whose values it quotes.
- ``evidence``: this suite's measurements of the claim, closest to the claim first, each of one ``kind`` (direct
  measurement, proxy, implementation check) and ``describe``d in words (what, at which scale): a ``measure`` block
  (a results CSV, filters and an op), a ``benchmark`` block (the paper's own metric, benchmark accuracy:
  ``suite.report.bench_audit``) or a ``soundness`` block (the baselines' own checks: ``suite.report.soundness``).
  A claimed difference names its ``direction``; a claimed value its ``expect``.
- ``scale_effects``: the paper's own effect at each reported scale (scale -> derived id), for the scale rule;
  ``prediction``: a cost-model number printed beside the claim, never a measurement.
"""
from __future__ import annotations

from pathlib import Path

import jsonschema
import yaml

from suite.config import load_yaml
from suite.report.verdicts import SCALE_NAME

CLAIMS_PATH = Path(__file__).resolve().parents[2] / "paper_tables" / "claims.yaml"

_FILTER = {"type": "object", "additionalProperties": {"anyOf": [
    {"type": ["string", "number"]}, {"type": "array", "items": {"type": ["string", "number"]}, "minItems": 1}]}}
_EXPECT = {"type": "object", "minProperties": 1, "additionalProperties": False, "properties": {
    "approx": {"type": "number"}, "rel_tol": {"type": "number", "exclusiveMinimum": 0},
    "ge": {"type": "number"}, "le": {"type": "number"}},
    "dependentRequired": {"approx": ["rel_tol"], "rel_tol": ["approx"]}}
_DIRECTION = {"enum": ["lower", "higher"],
              "description": "a claimed difference: numerator below (lower) or above (higher) the denominator"}
_JUDGED = [{"required": ["direction"], "not": {"required": ["expect"]}},
           {"required": ["expect"], "not": {"required": ["direction"]}}]
_RESULTS = {"type": "string", "pattern": r"^\{(results|gpu)\}/[\w./-]+\.csv$"}
_MEASURE = {"type": "object", "additionalProperties": False,
            "required": ["results", "column", "op", "where", "unit"],
            "properties": {
                "results": _RESULTS, "column": {"type": "string"}, "op": {"enum": ["ratio", "difference", "value"]},
                "numerator": _FILTER, "denominator": _FILTER, "where": _FILTER, "expect": _EXPECT,
                "direction": _DIRECTION, "unit": {"type": "string", "minLength": 1},
                "controls": {"enum": ["mqar", "niah", "lm", "scratch_lm", "scratch_niah", "conversion"],
                             "description": "judge only where both controls passed"},
                "cell": {"enum": ["mqar_control", "mqar_control_size"],
                         "description": "the MQAR controls' cell at the widest size, or every cell of that size"},
                "stats": {"enum": ["paired", "binomial"],
                          "description": "paired over shared (size, seed) keys (default), or binomial over "
                                         "held-out answers (one seed)"},
                "best_of": {"enum": ["min", "max"],
                            "description": "the denominator is the best of its archs per key (lowest / highest)"},
                "trivial": {"enum": ["unigram", "chance"],
                            "description": "not testable when a compared model is near this trivial baseline"},
                "per": {"type": "string", "minLength": 1,
                        "description": "a claimed win on most groups: one estimate per value of this column "
                                       "(suite.report.verdicts.judge_wins)"},
                "weight": {"type": "string", "minLength": 1,
                           "description": "means weighted by this column (e.g. position buckets by n_tokens)"},
                "batch_prefill": {"type": "boolean",
                                  "description": "invalid where a compared model's TTFT contradicts its prefill "
                                                 "(suite.report.soundness.batch_contradictions)"}},
            "dependentRequired": {"per": ["direction"]},
            "allOf": [{"if": {"properties": {"op": {"enum": ["ratio", "difference"]}}},
                       "then": {"required": ["numerator", "denominator"]}}]}
_PREDICTION = {**_MEASURE, "description": "a cost-model prediction, printed in the detail only (no pass rule)"}
_MEASURE = {**_MEASURE, "oneOf": _JUDGED}
_BENCHMARK = {"type": "object", "additionalProperties": False,
              "required": ["results", "key", "op", "numerator", "tasks"],
              "description": "the claim on the paper's own metric: zero-shot benchmark accuracy (report/bench_audit)",
              "properties": {
                  "results": _RESULTS, "key": {"enum": ["arch", "variant"]},
                  "op": {"enum": ["difference", "wins", "size_wins", "gap_shrinks"]},
                  "numerator": {"type": "string"}, "denominator": {"type": "string"},
                  "tasks": {"type": "array", "minItems": 1, "items": {"type": "string"}},
                  "size": {"enum": ["largest", "all"]}, "expect": _EXPECT, "direction": _DIRECTION,
                  "controlled_tasks_only": {"type": "boolean", "description": "judge only the tasks whose benchmark "
                                            "controls pass; the others are named in the detail"}},
              "oneOf": _JUDGED,
              "allOf": [{"if": {"properties": {"op": {"const": "difference"}}}, "then": {"required": ["direction"]}}]}
_SOUNDNESS = {"type": "array", "minItems": 1, "items": {"enum": ["{results}", "{gpu}"]},
              "description": "the profiles whose baselines are checked (MQAR grid and main LM comparison)"}
_EVIDENCE = {"type": "object", "additionalProperties": False, "required": ["kind", "describe"],
             "properties": {"kind": {"enum": ["direct measurement", "proxy", "implementation check"]},
                            "describe": {"type": "string", "minLength": 10},
                            "measure": _MEASURE, "benchmark": _BENCHMARK, "soundness": _SOUNDNESS},
             "oneOf": [{"required": ["measure"]}, {"required": ["benchmark"]}, {"required": ["soundness"]}]}
CLAIMS_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object", "required": ["claims"], "additionalProperties": False,
    "properties": {"claims": {"type": "array", "minItems": 20, "items": {
        "type": "object", "additionalProperties": False,
        "required": ["id", "claim", "value", "unit", "source", "asserted_by", "conditions", "misreadings"],
        "anyOf": [{"required": ["check"]}, {"required": ["evidence"]}],
        "properties": {
            "id": {"type": "string", "pattern": r"^C\d{2}$"},
            "claim": {"type": "string", "minLength": 10},
            "value": {"type": ["number", "string"]},
            "unit": {"type": "string"},
            "source": {"type": "string", "minLength": 3},
            "asserted_by": {"enum": ["paper", "seed 000", "seed 001", "seed 002", "seed 003", "suite"]},
            "tolerance": {"type": "number", "minimum": 0},
            "conditions": {"type": "object", "additionalProperties": {"type": "string"},
                           "required": ["scale", "gpus", "lengths", "batch", "software", "timed"]},
            "check": {"type": "object", "required": ["kind"], "oneOf": [
                {"properties": {"kind": {"const": "formula"},
                                "formula": {"anyOf": [{"type": "string"},
                                                      {"type": "array", "items": {"type": "string"}, "minItems": 1}]},
                                "expect_value": {"type": "number"}, "expect": _EXPECT},
                 "required": ["kind", "formula"], "additionalProperties": False},
                {"properties": {"kind": {"const": "reading"},
                                "verdict": {"enum": ["misreading", "inconsistent"]},
                                "evidence": {"type": "string", "minLength": 10},
                                "formula": {"anyOf": [{"type": "string"},
                                                      {"type": "array", "items": {"type": "string"}, "minItems": 1}]}},
                 "required": ["kind", "verdict", "evidence"], "additionalProperties": False}]},
            "evidence": {"type": "array", "minItems": 1, "items": _EVIDENCE},
            "scale_effects": {"type": "object", "minProperties": 2,
                              "propertyNames": {"pattern": f"^{SCALE_NAME}$"},
                              "additionalProperties": {"type": "string"}},
            "prediction": _PREDICTION,
            "note": {"type": "string", "minLength": 10, "description": "printed in the audit's detail"},
            "window_note": {"type": "object", "additionalProperties": False, "required": ["tokenizer", "window"],
                            "properties": {"tokenizer": {"enum": ["suite", "base"]},
                                           "window": {"type": "string", "description": "study-config key path"}}},
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
