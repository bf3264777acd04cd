"""scripts/compare_results.py: a re-run's results tree against the committed one."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("compare_results", ROOT / "scripts" / "compare_results.py")
compare_results = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare_results)


def _tree(root: Path, rows: list[dict]) -> Path:
    (root / "eval").mkdir(parents=True)
    pd.DataFrame(rows).to_csv(root / "eval" / "niah.csv", index=False)
    return root


ROWS = [{"arch": "orthros", "accuracy": 0.5, "status": "ok", "commit": "aaa", "wall_s": 1.0, "note": None},
        {"arch": "swa", "accuracy": None, "status": "not run", "commit": "aaa", "wall_s": 2.0, "note": "x"}]


def test_only_commit_and_clock_columns_may_differ(tmp_path):
    old = _tree(tmp_path / "old", ROWS)
    same = _tree(tmp_path / "same", [r | {"commit": "bbb", "wall_s": 9.0} for r in ROWS])
    assert compare_results.compare(old, same) == {}
    assert compare_results.main([str(old), str(same)]) == 0
    changed = _tree(tmp_path / "changed", [ROWS[0] | {"accuracy": 0.75}, ROWS[1]])
    assert compare_results.compare(old, changed) == {"eval/niah.csv": ["accuracy: 1 rows (max abs diff 0.25)"]}
    assert compare_results.main([str(old), str(changed)]) == 1
    assert compare_results.compare(old, changed, {"accuracy"}) == {}
    # rows written before library versions were recorded, against a re-run that records them
    versions = _tree(tmp_path / "versions", [r | {"torch": "2.13.0", "transformers": "5.25.0"} for r in ROWS])
    assert compare_results.compare(old, versions) == {} and compare_results.compare(versions, old) == {}


def test_missing_files_columns_and_rows_are_reported(tmp_path):
    old = _tree(tmp_path / "old", ROWS)
    (tmp_path / "empty").mkdir()
    assert compare_results.compare(old, tmp_path / "empty") == {"eval/niah.csv": ["missing in the re-run"]}
    extra = _tree(tmp_path / "extra", [r | {"schedule": "cosine"} for r in ROWS])
    assert compare_results.compare(old, extra) == {
        "eval/niah.csv": ["columns differ (only in old: [], only in new: ['schedule'])"]}
    both = _tree(tmp_path / "both", [ROWS[0] | {"schedule": "cosine", "accuracy": 1.0}, ROWS[1] | {"schedule": "x"}])
    assert compare_results.compare(old, both)["eval/niah.csv"][1] == "accuracy: 1 rows (max abs diff 0.5)"
    short = _tree(tmp_path / "short", ROWS[:1])
    assert compare_results.compare(old, short) == {"eval/niah.csv": ["2 rows, re-run has 1"]}
    text = _tree(tmp_path / "text", [ROWS[0], ROWS[1] | {"status": "ok"}])
    assert compare_results.compare(old, text) == {"eval/niah.csv": ["status: 1 rows (e.g. 'not run' -> 'ok')"]}
    with pytest.raises(ValueError, match="no CSV"):
        compare_results.compare(tmp_path / "empty", old)


def test_tolerance_compares_numbers_within_it_and_text_exactly(tmp_path, capsys):
    """A re-run on another CPU: floats differ in the last digits and the device column names another CPU."""
    rows = [{"arch": "orthros", "loss": 1.234567, "accuracy": 0.5, "value": "0.25", "status": "ok", "passed": True,
             "device": "cpu:x86_64x2", "backend": "torch", "commit": "aaa"},
            {"arch": "swa", "loss": 0.0, "accuracy": None, "value": "not run", "status": "not run", "passed": False,
             "device": "cpu:x86_64x2", "backend": "torch", "commit": "aaa"}]
    old = _tree(tmp_path / "old", rows)
    pd.DataFrame({"x": [1.0]}).to_csv(old / "other.csv", index=False)
    other_cpu = [rows[0] | {"loss": 1.2345671, "value": "0.2500000001", "device": "cpu:x86_64x2 (AMD EPYC 7763)",
                            "backend": "fla-window", "commit": "bbb"},
                 rows[1] | {"loss": 1e-9, "device": "cpu:x86_64x2 (AMD EPYC 7763)"}]
    new = _tree(tmp_path / "new", other_cpu)
    pd.DataFrame({"x": [1.0]}).to_csv(new / "other.csv", index=False)
    exact = compare_results.compare(old, new)["eval/niah.csv"]
    assert exact[0] == "loss: 2 rows (max abs diff 1e-07)" and exact[1].startswith("value: 1 rows (max abs diff 1e-10")
    assert len(exact) == 2  # device, backend and commit are provenance: never compared
    assert compare_results.compare(old, new, rtol=1e-6) == {"eval/niah.csv": ["loss: 1 rows (max abs diff 1e-09)"]}
    assert compare_results.compare(old, new, rtol=1e-6, atol=1e-8) == {}
    assert compare_results.main([str(old), str(new), "--rtol", "1e-6", "--atol", "1e-8"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "0 of 2 CSVs differ, 2 agree (numbers compared within rtol=1e-06, atol=1e-08; provenance, clock and memory "
        "columns ignored)")
    far = _tree(tmp_path / "far", [other_cpu[0] | {"accuracy": 0.51}, other_cpu[1] | {"status": "ok",
                                                                                        "passed": True}])
    pd.DataFrame({"x": [1.0]}).to_csv(far / "other.csv", index=False)
    assert compare_results.compare(old, far, rtol=1e-3, atol=1e-8) == {"eval/niah.csv": [
        "accuracy: 1 rows (max abs diff 0.01)", "status: 1 rows (e.g. 'not run' -> 'ok')",
        "passed: 1 rows (e.g. False -> True)"]}
    assert compare_results.main([str(old), str(far), "--rtol", "1e-3"]) == 1
    assert capsys.readouterr().out.splitlines()[-1].startswith("1 of 2 CSVs differ, 1 agree (numbers compared within "
                                                               "rtol=0.001, atol=0;")
    with pytest.raises(SystemExit):
        compare_results.main([str(old), str(new), "--rtol", "-1"])
    assert "argument --rtol: must be a finite number >= 0, got '-1'" in capsys.readouterr().err
