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
