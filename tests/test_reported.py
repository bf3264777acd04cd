"""Reported values: transcription integrity, averages recomputed from cells, Table 4 arithmetic, claims registry."""
import shutil

import pandas as pd
import pytest
import yaml

from suite.report.claims import CLAIMS_PATH, load_claims, validate_claims
from suite.report.derived import load_derived
from suite.reported import REPORTED_DIR, load_figures, load_notes_derived, load_tables

# Reported numbers that do not follow from the others. Adding a transcription error or a new discrepancy makes
# test_only_known_inconsistencies fail. All four decode-only cells are Table 4 (1x H100, SGLang, batch 2):
# decode-only != batch x output / (E2E - TTFT).
KNOWN_INCONSISTENT = {
    "d_t4_decode_tput_transformer_128K/128",  # 33.7 printed vs 33.41 recomputed
    "d_t4_decode_tput_orthros_128K/128",  # 33.3 vs 33.55
    "d_t4_decode_tput_transformer_127K/1K",  # 33.2 vs 33.27
    "d_t4_decode_tput_orthros_127K/1K",  # 33.7 vs 34.69
    "d_t4_decode_ratio_128K/128",  # printed Orthros slower (0.988), recomputed faster (1.004)
    "d_t4_decode_ratio_127K/1K",  # printed 1.015, recomputed 1.043
}


@pytest.fixture(scope="module")
def tables():
    return load_tables()


@pytest.fixture(scope="module")
def derived():
    return load_derived()


def test_row_counts(tables):
    counts = tables.groupby("table").size().to_dict()
    # T1: 6 models x (7 tasks + avg); T2: 6 rows x (8 + avg); T3: 6 avgs + 4 tasks x 2 models;
    # T4: 6 x 4 metrics + 6 hybrid x 2; T7: 18 avgs + 9 rows x 6 tasks.
    assert counts == {"Table 1": 48, "Table 2": 54, "Table 3": 14, "Table 4": 36, "Table 7": 72}


def test_every_average_recomputed_from_cells(tables):
    """Independent of derived.py: group cells, take the mean, compare with the printed average (+-0.01)."""
    avg_tasks = {"avg7": 7, "avg8": 8, "avg6": 6, "avg6_recall": 6}
    checked, off = 0, []
    keys = ["table", "model", "variant", "scale"]
    for key, g in tables[tables["table"] != "Table 4"].groupby(keys):
        avg = g[g["task"].isin(list(avg_tasks))]
        cells = g[~g["task"].isin(list(avg_tasks))]
        assert len(avg) == 1, key
        if len(cells) != avg_tasks[avg["task"].iloc[0]]:
            continue  # Table 3 (4 of 6 cells) and Table 7 sizes without per-task cells
        checked += 1
        if abs(cells["value"].mean() - avg["value"].iloc[0]) > 0.01:
            off.append(key)
    assert checked == 6 + 6 + 9
    assert off == []


def test_table7_average_is_six_tasks_without_siqa(tables):
    t7 = tables[(tables["table"] == "Table 7") & (tables["task"] != "avg6")]
    assert "social_iqa" not in set(t7["task"])
    row = t7[(t7["model"] == "orthros") & (t7["scale"] == "6.8B")]
    assert row["value"].sum() / 6 == pytest.approx(53.10, abs=0.005)


def _t4(tables, model, config, metric):
    t = tables[(tables["table"] == "Table 4") & (tables["model"] == model) & (tables["setting"] == config)
               & (tables["metric"] == metric)]
    assert len(t) == 1
    return t["value"].iloc[0]


@pytest.mark.parametrize("metric,config,expected", [
    ("ttft_s", "128K/128", 4.54), ("ttft_s", "127K/1K", 4.40), ("ttft_s", "120K/8K", 4.46),
    ("e2e_s", "128K/128", 3.45), ("e2e_s", "127K/1K", 1.80), ("e2e_s", "120K/8K", 1.12)])
def test_table4_speedups(tables, metric, config, expected):
    ratio = _t4(tables, "transformer", config, metric) / _t4(tables, "orthros", config, metric)
    assert round(ratio, 2) == expected


@pytest.mark.parametrize("config,expected", [("128K/128", 2.20), ("127K/1K", 1.51), ("120K/8K", 1.09)])
def test_hybrid_e2e_speedups(tables, config, expected):
    ratio = _t4(tables, "linear_hybrid", config, "e2e_s") / _t4(tables, "orthros_h", config, "e2e_s")
    assert round(ratio, 2) == expected


@pytest.mark.parametrize("model", ["transformer", "orthros"])
@pytest.mark.parametrize("config,out", [("128K/128", 128), ("127K/1K", 1024), ("120K/8K", 8192)])
def test_output_throughput_is_batch_times_output_over_e2e(tables, model, config, out):
    assert round(2 * out / _t4(tables, model, config, "e2e_s"), 1) == _t4(tables, model, config, "output_tok_s")


def test_decode_only_discrepancy_sizes(derived):
    d = derived.set_index("id")
    assert d.loc["d_t4_decode_tput_orthros_127K/1K", "recomputed"] == pytest.approx(2048 / (76.345 - 17.301))
    assert d.loc["d_t4_decode_tput_orthros_127K/1K", "diff"] == pytest.approx(33.7 - 2048 / (76.345 - 17.301))
    assert d.loc["d_t4_decode_tput_transformer_120K/8K", "status"] == "consistent"


def test_only_known_inconsistencies(derived):
    assert set(derived.loc[derived["status"] == "inconsistent", "id"]) == KNOWN_INCONSISTENT


def test_notes_numbers_follow_from_tables(derived):
    notes = load_notes_derived()
    d = derived.set_index("id")
    for nid in notes["id"]:
        assert d.loc[nid, "status"] == "consistent", nid
    assert d.loc["d_t2_llama3.1-8b_conversion_minus_base_cpt", "recomputed"] == pytest.approx(0.26)
    assert d.loc["d_t2_qwen3-8b_conversion_minus_base", "recomputed"] == pytest.approx(0.50)
    assert d.loc["d_t7_advantage_drops", "recomputed"] == 1  # 360M: Orthros below Transformer


def test_figures_reported_values():
    f = load_figures()
    ann = f[f["quantity"] == "prefill_speedup"].set_index("gpus")
    assert ann.loc["1", "value"] == 3.5 and ann.loc["1", "seq_len"] == "131072" and ann.loc["1", "y_unit"] == "ms"
    assert ann.loc["8", "value"] == 21.9 and ann.loc["8", "seq_len"] == "1048576"


def test_non_numeric_value_is_rejected(tmp_path):
    for p in REPORTED_DIR.glob("*.csv"):
        shutil.copy(p, tmp_path / p.name)
    frame = pd.read_csv(tmp_path / "table1.csv", dtype=str)
    frame.loc[3, "value"] = "53.4x"
    frame.to_csv(tmp_path / "table1.csv", index=False)
    with pytest.raises(ValueError, match="53.4x"):
        load_tables(tmp_path)


def test_claims_validate_and_count():
    claims = load_claims()
    assert len(claims) >= 20
    assert {c["check"]["kind"] for c in claims if "check" in c} == {"formula", "reading"}
    kinds = {e["kind"] for c in claims for e in c.get("evidence", [])}
    assert kinds == {"direct measurement", "proxy", "implementation check"}
    assert "C31" not in {c["id"] for c in claims}  # C12 measured on both profiles, counted once


def test_claim_formula_ids_exist(derived):
    ids = set(derived["id"])
    for c in load_claims():
        ref = c.get("check", {}).get("formula")
        for fid in ([ref] if isinstance(ref, str) else ref or []) + list(c.get("scale_effects", {}).values()):
            assert fid in ids, (c["id"], fid)


def test_schema_rejects_bad_claims():
    data = yaml.safe_load(CLAIMS_PATH.read_text())
    bad = {"claims": [dict(c) for c in data["claims"]]}
    del bad["claims"][0]["check"], bad["claims"][0]["evidence"]  # nothing to judge the claim by
    with pytest.raises(ValueError, match="claims/0"):
        validate_claims(bad)
    both = {"claims": [dict(c) for c in data["claims"]]}
    measure = dict(both["claims"][0]["evidence"][1]["measure"], expect={"le": 1.0})  # a direction and an expect
    both["claims"][0]["evidence"] = [{**both["claims"][0]["evidence"][1], "measure": measure}]
    with pytest.raises(ValueError, match="claims/0/evidence/0"):
        validate_claims(both)
    dup = {"claims": data["claims"] + [data["claims"][0]]}
    with pytest.raises(ValueError, match="duplicate"):
        validate_claims(dup)
    few = {"claims": data["claims"][:5]}
    with pytest.raises(ValueError):
        validate_claims(few)
