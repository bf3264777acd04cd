"""suite.report.kv_precision: the FP8-on-real-weights table carries the pass/fail of the targets that judge each row."""
from pathlib import Path

import pandas as pd

from suite.report.kv_precision import fp8_real_table


def test_fp8_rows_show_their_targets_not_only_that_they_were_measured():
    rows = pd.DataFrame([dict(seq_len=T, n_seqs=1, comparison=c, test="fp8 K/V (block 16)" if b else "fp32 K/V",
                              reference="bf16 K/V" if b else "model forward", top1_agreement=0.9,
                              ppl_ref=10.0, ppl_test=10.2, status="ok", base_model="m", quantization="q",
                              arch="orthros", window=128, split="test", tokens=64, dtype="float32", fp8_block=b,
                              device="cpu",
                              commit="abc") for T in (32, 64) for c, b in (("path floor", None), ("fp8 check", 16))])
    targets = pd.DataFrame([
        dict(source="fp8_kv_real.csv", method="path check", seq_len=32.0, threshold=0.99, status="pass",
             target="runner vs forward: top-1 agreement (T=32, ...) >= 0.99"),
        dict(source="fp8_kv_real.csv", method="target", seq_len=32.0, threshold=0.99, status="fail",
             target="fp8 K/V (block 16) vs bf16 K/V: top-1 agreement (T=32, ...) >= 0.99"),
        dict(source="fp8_kv_real.csv", method="target", seq_len=32.0, threshold=0.01, status="fail",
             target="fp8 K/V (block 16) vs bf16 K/V: |perplexity change| (T=32, ...) < 0.01"),
        dict(source="other.csv", method="target", seq_len=64.0, threshold=1, status="pass", target="x (T=64) >= 1"),
    ])
    table = fp8_real_table(rows, "missing", targets).set_index(["seq_len", "comparison"])
    assert table.loc[(32, "path floor"), "targets"] == "top-1 agreement >= 0.99: pass"
    assert table.loc[(32, "fp8 check"), "targets"] == ("top-1 agreement >= 0.99: fail; "
                                                      "|perplexity change| < 0.01: fail")
    assert table.loc[(64, "fp8 check"), "targets"] == ""  # another source's row judges nothing here
    assert "FP8 block 16" in table.loc[(32, "fp8 check"), "conditions"]
    assert "FP8 block" not in table.loc[(32, "path floor"), "conditions"]
    assert fp8_real_table(None, "x.csv missing").status.tolist() == ["not run: x.csv missing"]


def test_runs_on_two_machines_each_show_their_own_targets():
    """A CPU run (float32 model) and a GPU run (bf16) of the same T share fp8_kv_real.csv and targets.csv: each row
    shows the verdicts of its own run only."""
    runs = (("cpu", "float32", "pass"), ("gpu", "bfloat16", "fail"))
    rows = pd.DataFrame([dict(seq_len=32, n_seqs=1, comparison="path floor", test="t", reference="r",
                              top1_agreement=0.9, ppl_ref=10.0, ppl_test=10.2, status="ok", base_model="m",
                              quantization="q", arch="orthros", window=128, split="test", tokens=64, dtype=dtype,
                              fp8_block=None, device=device, commit="abc") for device, dtype, _ in runs])
    targets = pd.DataFrame([dict(source="fp8_kv_real.csv", method="path check", seq_len=32.0, threshold=0.99,
                                 status=status, device=device, dtype=dtype,
                                 target="runner vs forward: top-1 agreement (T=32, ...) >= 0.99")
                            for device, dtype, status in runs])
    table = fp8_real_table(rows, "missing", targets).set_index("conditions")
    assert [v.rsplit(": ", 1)[1] for v in table["targets"]] == ["pass", "fail"]


def test_each_fp8_scale_block_shows_its_own_targets():
    """One run with FP8 scale blocks 64 and 4096: each FP8 check row shows the verdicts of its own block only."""
    rows = pd.DataFrame([dict(seq_len=32, n_seqs=1, comparison="fp8 check", test=f"fp8 K/V (block {b})",
                              reference="bf16 K/V", top1_agreement=0.9, ppl_ref=10.0, ppl_test=10.2, status="ok",
                              base_model="m", quantization="q", arch="orthros", window=128, split="test", tokens=64,
                              dtype="float32", fp8_block=b, device="gpu", commit="abc") for b in (64, 4096)])
    targets = pd.DataFrame([dict(source="fp8_kv_real.csv", method="target", seq_len=32.0, threshold=0.01,
                                 status=status, device="gpu", dtype="float32", commit="abc",
                                 target=f"fp8 K/V (block {b}) vs bf16 K/V: |perplexity change| (T=32, ...) < 0.01")
                            for b, status in ((64, "pass"), (4096, "fail"))])
    table = fp8_real_table(rows, "missing", targets)
    assert table["targets"].tolist() == ["|perplexity change| < 0.01: pass", "|perplexity change| < 0.01: fail"]


def test_the_loader_refuses_an_fp8_file_without_a_column_the_table_shows(tmp_path):
    """Every column the table shows is checked when results/gpu/fp8_kv_real.csv is read: a missing one, or text in a
    number column, is an error naming the file, column (and row), not a silently shorter or garbled table."""
    import pytest

    from suite.report.kv_precision import COLUMNS
    from suite.report.measured import read_result

    committed = Path(__file__).resolve().parents[1] / "results/gpu/fp8_kv_real.csv"
    good = pd.read_csv(committed)
    assert set(COLUMNS) <= set(good.columns) and len(read_result(committed, "gpu_fp8_kv_real"))
    good.drop(columns=["ppl_rel_change"]).to_csv(tmp_path / "a.csv", index=False)
    with pytest.raises(ValueError, match=r"a.csv: missing column\(s\) \['ppl_rel_change'\]"):
        read_result(tmp_path / "a.csv", "gpu_fp8_kv_real")
    good.astype({"ppl_rel_hi": object}).assign(ppl_rel_hi="abc").to_csv(tmp_path / "b.csv", index=False)
    with pytest.raises(ValueError, match="b.csv row 1: column 'ppl_rel_hi' holds 'abc', not a number"):
        read_result(tmp_path / "b.csv", "gpu_fp8_kv_real")
