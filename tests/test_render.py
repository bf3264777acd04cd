"""Renderers on small fixture CSVs: specific numbers in the outputs, and 'not run' cells for missing inputs."""
import importlib
import re
import shutil
import subprocess
import time
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from suite.render import render
from suite.report.audit import evaluate_measure

FIX = Path(__file__).parent / "fixtures" / "results"
# the modules that draw the render's figures through the shared suite.report.figures._save
FIGURE_MODULES = ("suite.report.figures", "suite.experiments.mqar.figure", "suite.experiments.niah.figure",
                  "suite.experiments.so_ablation.figure")


def _capture_figures(monkeypatch, record) -> None:
    """Every figure module's ``_save`` replaced by ``record(fig, out_dir, name)``, which writes nothing."""
    for name in FIGURE_MODULES:
        monkeypatch.setattr(importlib.import_module(name), "_save", record)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")  # the tests that replace _save keep the figures it would have closed


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    out = tmp_path_factory.mktemp("render")
    render(FIX / "default", FIX / "gpu", out / "tables", out / "figures")
    return out


@pytest.fixture(scope="module")
def rendered_empty(tmp_path_factory):
    out = tmp_path_factory.mktemp("empty")
    render(out / "no_results", out / "no_gpu", out / "tables", out / "figures")
    return out


def _row(frame, **kw):
    mask = pd.Series(True, index=frame.index)
    for k, v in kw.items():
        mask &= frame[k] == v
    assert mask.sum() == 1, kw
    return frame[mask].iloc[0]


def test_table4_diff_is_measured_minus_reported(rendered):
    t4 = pd.read_csv(rendered / "tables" / "table4.csv")
    r = _row(t4, model="transformer", task="128K/128", metric="ttft_s")
    assert r["reported"] == 77.249 and r["measured"] == 20.0
    assert r["diff"] == pytest.approx(20.0 - 77.249)
    assert "H200" in r["measured_scale_conditions"] and "H100" in r["paper_scale_conditions"]
    assert _row(t4, model="orthros", task="127K/1K", metric="e2e_s")["status"].startswith("not run")


def test_table4_speedups_are_transformer_over_orthros(rendered):
    t4 = pd.read_csv(rendered / "tables" / "table4.csv")
    r = _row(t4, model="orthros vs transformer", task="128K/128", metric="e2e_speedup")
    assert r["reported"] == pytest.approx(84.911 / 24.647) and r["measured"] == pytest.approx(25.0 / 10.0)
    assert r["diff"] == pytest.approx(2.5 - 84.911 / 24.647)
    speedup = _row(t4, model="orthros vs transformer", task="127K/1K", metric="e2e_speedup")
    assert speedup["status"].startswith("not run")


def test_table1_fraction_converted_to_percent(rendered):
    t1 = pd.read_csv(rendered / "tables" / "table1.csv")
    r = _row(t1, model="orthros", task="ARC-E")
    assert r["measured"] == pytest.approx(40.0) and r["diff"] == pytest.approx(40.0 - 71.09)
    assert "6.1M params" in r["measured_scale_conditions"] and "T=256" in r["measured_scale_conditions"]
    assert _row(t1, model="orthros", task="HellaSwag")["status"] == "not run: dataset unavailable offline"
    ppl = _row(t1, model="orthros", task="val_ppl")
    assert pd.isna(ppl["reported"]) and ppl["measured"] == 30.0 and "not comparable" in ppl["status"]


def test_missing_conversion_gives_not_run(rendered):
    t2 = pd.read_csv(rendered / "tables" / "table2.csv")
    assert t2["status"].str.startswith("not run").all() and t2["measured"].isna().all()
    assert "conversion.csv missing" in t2["status"].iloc[0]


def test_audit_with_fixtures(rendered):
    a = pd.read_csv(rendered / "tables" / "claims_audit.csv").set_index("id")
    assert a.loc["C16", "measured"] == pytest.approx(12000 / 3000)
    assert a.loc["C16", "measured_kind"] == "direct measurement" and a.loc["C16", "measured_verdict"] == \
        "reproduced here" and a.loc["C16", "measured_minus_reported"] == pytest.approx(4.0 - 3.5)
    assert a.loc["C16", "rows_stale"].startswith("commit unknown")      # the fixtures' commit abc123
    assert a.loc["C17", "measured_verdict"] == "not run" and pd.isna(a.loc["C17", "measured_minus_reported"])
    assert "Prediction, not a measurement: 20 x, cost-model prediction for 8 GPUs" in a.loc["C17", "detail"]
    assert a.loc["C19", "measured"] == pytest.approx(25 / 10) and a.loc["C19", "measured_verdict"] == \
        "not reproduced here"
    assert a.loc["C21", "paper_verdict"] == "consistent with the paper's own tables"
    assert a.loc["C21", "measured_verdict"] == "reproduced here"
    assert a.loc["C09", "measured"] == pytest.approx(0.90 - 0.95)      # Orthros - the Transformer, the claim's arms
    assert a.loc["C09", "measured_verdict"] == "not testable at this scale"  # no answer counts: no noise estimate
    md = (rendered / "tables" / "claims_audit.md").read_text()
    assert "## Verdict counts" in md and "### C16 (paper)" in md


def test_empty_results_render_not_run(rendered_empty):
    t4 = pd.read_csv(rendered_empty / "tables" / "table4.csv")
    assert t4["status"].str.startswith("not run: ").all()
    a = pd.read_csv(rendered_empty / "tables" / "claims_audit.csv").set_index("id")
    assert a.loc["C16", "measured_verdict"] == "not run" and a.loc["C16", "measured_why"].startswith("not run:")
    assert a.loc["C27", "measured_verdict"] == "not run" and pd.isna(a.loc["C27", "paper_verdict"])
    assert a.loc["C13", "paper_verdict"] == "misreading" and a.loc["C23", "paper_verdict"] == "misreading"
    assert a.loc["C02", "paper_verdict"] == "consistent with the paper's own tables"
    md = (rendered_empty / "tables" / "claims_audit.md").read_text()
    assert "d_t4_decode_tput_orthros_127K/1K" in md and "-0.986" in md


def test_figures_written(rendered, rendered_empty):
    for base in (rendered, rendered_empty):
        for name in ["fig2", "fig3", "fig3_gpu", "fig4", "fig_mqar", "fig_mqar_gpu", "fig_decode_load"]:
            for ext in ["png", "pdf"]:
                assert (base / "figures" / f"{name}.{ext}").stat().st_size > 5000


def test_a_rerender_of_the_same_rows_writes_the_same_bytes(rendered, tmp_path):
    time.sleep(1.1)  # a date stamped in a file would differ by now
    render(FIX / "default", FIX / "gpu", tmp_path / "tables", tmp_path / "figures")
    for kind in ["tables", "figures"]:
        first = sorted(p.relative_to(rendered / kind) for p in (rendered / kind).rglob("*") if p.is_file())
        again = sorted(p.relative_to(tmp_path / kind) for p in (tmp_path / kind).rglob("*") if p.is_file())
        assert first and first == again
        changed = [str(p) for p in first if (rendered / kind / p).read_bytes() != (tmp_path / kind / p).read_bytes()]
        assert not changed, f"{kind} differ on a re-render: {changed}"


SPECIALS = "% _ & # $ { } ~ ^ \\"  # every character LaTeX reads as markup in text


@pytest.fixture(scope="module")
def rendered_specials(tmp_path_factory):
    """The fixtures with every LaTeX special character in a status cell of Table 1 (a 'not run' reason)."""
    out = tmp_path_factory.mktemp("specials")
    shutil.copytree(FIX, out / "in")
    quality = pd.read_csv(out / "in" / "default" / "quality.csv", dtype=str, keep_default_na=False)
    quality.loc[0, "status"] = f"not run: 50% of gpu_0 failed & #1 cost $2 {{x}} ~y ^z \\w ({SPECIALS})"
    quality.to_csv(out / "in" / "default" / "quality.csv", index=False)
    render(out / "in" / "default", out / "in" / "gpu", out / "tables", out / "figures")
    return out / "tables"


def _latex_rows(tex: str) -> list[list[str]]:
    """The header and body rows of a pandas ``to_latex`` tabular, each split into its cells at the unescaped &."""
    lines = tex.splitlines()
    rows = [lines[lines.index("\\toprule") + 1]] + lines[lines.index("\\midrule") + 1:lines.index("\\bottomrule")]
    return [re.split(r"(?<!\\)&", row.removesuffix(" \\\\")) for row in rows]


def test_every_latex_table_escapes_special_characters(rendered, rendered_specials):
    """An unescaped % in a cell starts a LaTeX comment (the rest of the row is lost); _ # $ ^ break the compile;
    & adds a column. Every cell of every .tex keeps its column and holds no unescaped special character."""
    for folder in (rendered / "tables", rendered_specials):
        texs = sorted(folder.glob("*.tex"))
        assert [t.stem for t in texs] == ["table1", "table2", "table3", "table4", "table7"]
        for tex in texs:
            csv = pd.read_csv(tex.with_suffix(".csv"), dtype=str, keep_default_na=False)
            rows = _latex_rows(tex.read_text())
            assert len(rows) == len(csv) + 1, tex
            for row in rows:
                assert len(row) == len(csv.columns), (tex, row)
                for cell in row:
                    bare = re.sub(r"\\(textasciitilde|textasciicircum|textbackslash|space)\b|\\[%_&#${}]", "", cell)
                    assert not re.search(r"[%_&#${}~^\\]", bare), (tex, cell)
    table1 = (rendered_specials / "table1.tex").read_text()
    assert r"not run: 50\% of gpu\_0 failed \& \#1 cost \$2 \{x\} \textasciitilde y" in table1
    assert r"measured\_std" in table1 and r"& \% &" in table1  # a header and Table 1's unit


@pytest.mark.skipif(shutil.which("pdflatex") is None or shutil.which("kpsewhich") is None
                    or not subprocess.run(["kpsewhich", "booktabs.sty"], capture_output=True, text=True).stdout,
                    reason="needs pdflatex with booktabs (Debian: texlive-latex-base, texlive-latex-recommended)")
def test_every_latex_table_compiles(rendered_specials, tmp_path):
    for tex in sorted(rendered_specials.glob("*.tex")):
        doc = tmp_path / f"{tex.stem}_doc.tex"
        doc.write_text("\\documentclass{article}\n\\usepackage{booktabs}\n\\begin{document}\n"
                       f"\\input{{{tex}}}\n\\end{{document}}\n")
        run = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", doc.name], cwd=tmp_path,
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, (tex.name, run.stdout[-2000:])


def test_a_render_that_fails_half_way_leaves_the_previous_outputs(tmp_path, monkeypatch):
    """The tables are written, then a figure fails: the output folders keep what they held (nothing half-written,
    no staging folder left beside them)."""
    import suite.render as render_module

    tables, figures = tmp_path / "tables", tmp_path / "figures"
    render(FIX / "default", FIX / "gpu", tables, figures)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    copy = tmp_path / "in"

    def broken(*args, **kwargs):
        raise IndexError("a figure fails")

    monkeypatch.setattr(render_module, "fig_mqar", broken)
    quality = pd.read_csv(FIX / "default" / "quality.csv")
    quality.loc[0, "value"] = 99.0  # tables written from these rows would differ
    shutil.copytree(FIX, copy)
    quality.to_csv(copy / "default" / "quality.csv", index=False)
    with pytest.raises(IndexError, match="a figure fails"):
        render(copy / "default", copy / "gpu", tables, figures)
    after = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and copy not in p.parents}
    assert after == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["figures", "in", "tables"]


def test_evaluate_measure_missing_and_filters():
    m = {"results": "{gpu}/prefill.csv", "column": "kv_cache_gib", "op": "ratio", "numerator": {"arch": "orthros"},
         "denominator": {"arch": "transformer"}, "where": {"status": "ok", "gpus": 1, "seq_len": 131072},
         "expect": {"approx": 1.0, "rel_tol": 0.05}}
    res = evaluate_measure(m, FIX / "default", FIX / "gpu")
    assert res["value"] == 1.0 and res["status"] == "ok" and res["estimate"].se is None   # one row an arm
    assert evaluate_measure(m, None, "/nonexistent")["status"].startswith("not run: /nonexistent/prefill.csv missing")
    with pytest.raises(ValueError, match="nope"):
        evaluate_measure({**m, "where": {"nope": 1}}, FIX / "default", FIX / "gpu")


def test_corrupt_results_csv_raises(tmp_path):
    (tmp_path / "default").mkdir()
    (tmp_path / "default" / "quality.csv").write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(ValueError, match="quality.csv"):
        render(tmp_path / "default", None, tmp_path / "t", tmp_path / "f")


def test_ttft_outlier_is_flagged_as_suspect():
    """A TTFT whose per-token cost is far off the same model's other configs is flagged; consistent ones are not."""
    import pandas as pd

    from suite.report.tables import ttft_suspects

    rows = [dict(arch=m, input_len=i, output_len=o, ttft_s=t, status="ok")
            for m, ts in (("a", (12.2, 7.3, 11.2)), ("b", (24.8, 24.5, 22.0)))
            for (i, o), t in zip(((131072, 128), (130048, 1024), (122880, 8192)), ts)]
    rows.append(dict(arch="c", input_len=131072, output_len=128, ttft_s=1.0, status="ok"))  # one config: no median
    flags = ttft_suspects(pd.DataFrame(rows))
    assert list(flags) == [("a", 130048.0, 1024.0)] and 0.6 < flags[("a", 130048.0, 1024.0)] < 0.7


def _copy_fixtures(tmp_path):
    import shutil

    shutil.copytree(FIX, tmp_path / "in")
    return tmp_path / "in" / "default", tmp_path / "in" / "gpu"


def _written(root):
    return sorted(p.name for p in root.rglob("*") if p.is_file()) if root.exists() else []


def test_missing_column_is_named_before_anything_is_written(tmp_path):
    res, gpu = _copy_fixtures(tmp_path)
    niah = pd.read_csv(res / "niah.csv")
    niah.drop(columns="status").to_csv(res / "niah.csv", index=False)
    with pytest.raises(ValueError, match=r"niah\.csv: missing column\(s\) \['status'\]"):
        render(res, gpu, tmp_path / "t", tmp_path / "f")
    assert _written(tmp_path / "t") == [] and _written(tmp_path / "f") == []


def test_bad_value_names_file_column_and_row(tmp_path):
    res, gpu = _copy_fixtures(tmp_path)
    prefill = pd.read_csv(gpu / "prefill.csv", dtype=str)
    prefill.loc[1, "ms"] = "fast"
    prefill.to_csv(gpu / "prefill.csv", index=False)
    with pytest.raises(ValueError, match=r"prefill\.csv row 2: column 'ms' holds 'fast', not a number"):
        render(res, gpu, tmp_path / "t", tmp_path / "f")
    assert _written(tmp_path / "t") == [] and _written(tmp_path / "f") == []


@pytest.mark.parametrize("name, column, value, kind", [("mqar", "accuracy", "7.5", "in \\[0, 1\\]"),
                                                      ("niah", "accuracy", "-0.4", "in \\[0, 1\\]"),
                                                      ("quality", "value", "-12", ">= 0")])
def test_a_value_out_of_its_range_is_refused(tmp_path, name, column, value, kind):
    """An accuracy of 7.5 or a perplexity of -12 is no measurement: before, it rendered with exit status 0."""
    res, gpu = _copy_fixtures(tmp_path)
    frame = pd.read_csv(res / f"{name}.csv", dtype=str)
    frame.loc[0, column] = value
    frame.to_csv(res / f"{name}.csv", index=False)
    with pytest.raises(ValueError, match=rf"{name}\.csv row 1: column '{column}' holds {value}, not a number {kind}"):
        render(res, gpu, tmp_path / "t", tmp_path / "f")
    assert _written(tmp_path / "t") == [] and _written(tmp_path / "f") == []


@pytest.mark.parametrize("name, column, value", [("quality", "value", ""), ("quality", "value", "nan"),
                                                ("niah", "accuracy", ""), ("niah", "accuracy", "NaN"),
                                                ("quality", "value", "inf"), ("mqar", "accuracy", ""),
                                                ("ablation", "n_params", "")])
def test_an_ok_row_without_a_finite_number_is_refused(tmp_path, name, column, value):
    """A row with status ok is a measurement: before, an empty or NaN NIAH accuracy rendered as a blank cell, and a
    quality cell whose seeds were all NaN crashed the render with a TypeError that named no file."""
    res, gpu = _copy_fixtures(tmp_path)
    frame = pd.read_csv(res / f"{name}.csv", dtype=str, keep_default_na=False)
    rows = frame.index[(frame["status"] == "ok") & (frame["arch"] == frame["arch"].iloc[1])]
    frame.loc[rows, column] = value  # every seed of the arch's cells
    frame.to_csv(res / f"{name}.csv", index=False)
    what = "holds inf" if value == "inf" else r"is empty \(or NaN\)"
    with pytest.raises(ValueError, match=rf"{name}\.csv row {rows[0] + 1}: column '{column}' {what} in a row with "
                                         "status 'ok'"):
        render(res, gpu, tmp_path / "t", tmp_path / "f")
    assert _written(tmp_path / "t") == [] and _written(tmp_path / "f") == []


def test_only_a_row_that_says_why_may_leave_its_numbers_empty(tmp_path):
    """An empty number is fine in a row whose status says it was not measured, and in MQAR's far-answer accuracy of
    an ok row (no answer of that cell lies beyond the window's reach)."""
    res, gpu = _copy_fixtures(tmp_path)
    niah = pd.read_csv(res / "niah.csv")
    niah.loc[0, ["accuracy", "status"]] = [float("nan"), "failed: CUDA out of memory"]
    niah.to_csv(res / "niah.csv", index=False)
    pd.read_csv(res / "mqar.csv").assign(accuracy_far=float("nan")).to_csv(res / "mqar.csv", index=False)
    render(res, gpu, tmp_path / "t", tmp_path / "f")
    audit = pd.read_csv(tmp_path / "t" / "claims_audit.csv").set_index("id")
    assert audit.loc["C09", "measured_verdict"]  # rendered: the empty cells refused nothing


def test_a_results_csv_cut_short_is_refused(tmp_path):
    res, gpu = _copy_fixtures(tmp_path)
    text = (res / "quality.csv").read_text()
    (res / "quality.csv").write_text(text[: int(len(text) * 0.6)])
    with pytest.raises(ValueError, match=r"(truncated|damaged) CSV .*quality\.csv"):
        render(res, gpu, tmp_path / "t", tmp_path / "f")
    assert _written(tmp_path / "t") == [] and _written(tmp_path / "f") == []


def test_extra_columns_and_files_are_tolerated(tmp_path):
    res, gpu = _copy_fixtures(tmp_path)
    mqar = pd.read_csv(res / "mqar.csv")
    mqar.assign(task_variant="new column the renderers do not read").to_csv(res / "mqar.csv", index=False)
    (res / "notes.csv").write_text("anything,at,all\n1,2,3\n")
    render(res, gpu, tmp_path / "t", tmp_path / "f")
    assert "table3.csv" in _written(tmp_path / "t")


def test_all_nan_measurement_is_not_run_not_a_verdict(tmp_path):
    """A claim on a column an ok row may leave empty (MQAR's far-answer accuracy) reads 'not run' when every row
    leaves it empty, and drops the empty ones otherwise."""
    res, gpu = _copy_fixtures(tmp_path)
    mqar = pd.read_csv(res / "mqar.csv")
    mqar.assign(accuracy_far=float("nan")).to_csv(res / "mqar.csv", index=False)
    m = {"results": "{results}/mqar.csv", "column": "accuracy_far", "op": "difference",
         "numerator": {"arch": "orthros"}, "denominator": {"arch": "swa"}, "where": {"status": "ok"},
         "expect": {"ge": 0.0}}
    got = evaluate_measure(m, res, gpu)
    assert got["status"] == "not run: no measured value (all NaN)" and got["value"] is None
    measured = mqar.assign(accuracy_far=[0.75, 0.5, 0.9])  # plus an orthros row without a value: it is dropped
    pd.concat([measured, mqar.iloc[[0]].assign(accuracy_far=float("nan"))]).to_csv(res / "mqar.csv", index=False)
    assert evaluate_measure(m, res, gpu)["value"] == pytest.approx(0.25)


def test_figure_titles_carry_scale_and_the_caption_carries_provenance(monkeypatch, tmp_path):
    from suite.report import figures

    shown = []
    _capture_figures(monkeypatch, lambda fig, out_dir, name: shown.append((name, fig)) or [])
    render(FIX / "default", FIX / "gpu", tmp_path / "tables", tmp_path / "figures")
    assert {"fig2", "fig3", "fig3_gpu", "fig_mqar", "fig_mqar_gpu", "fig4"} <= {name for name, _ in shown}
    for name, fig in shown:
        titles = [ax.get_title() for ax in fig.axes] + [fig._suptitle.get_text() if fig._suptitle else ""]
        assert not any(f"{key}=" in t for t in titles for key in figures.CAPTION_COLUMNS), (name, titles)
        foot = [t.get_text() for t in fig.texts]
        if name != "fig4" and any("Measured" in t for t in titles):
            assert any(t.startswith("Measured rows:") for t in foot), (name, foot)


def test_gpu_niah_figure_says_whether_the_gpu_controls_passed(monkeypatch, tmp_path):
    """fig3_gpu draws results/gpu/niah.csv and is marked invalid by results/gpu/controls.csv, not by the default
    profile's controls (which pass in the fixture)."""
    import shutil

    gpu = tmp_path / "gpu"
    shutil.copytree(FIX / "gpu", gpu)
    shutil.copy(FIX / "default" / "niah.csv", gpu / "niah.csv")
    controls = pd.read_csv(FIX / "default" / "controls.csv")
    suptitles = {}
    _capture_figures(monkeypatch, lambda fig, out_dir, name: suptitles.setdefault(name, []).append(
        fig._suptitle.get_text() if fig._suptitle else "") or [])
    render(FIX / "default", gpu, tmp_path / "t0", tmp_path / "f0")  # no gpu controls.csv
    failed = controls.assign(passed=[not (e == "niah" and c == "positive") for e, c in
                                     zip(controls["experiment"], controls["control"])])
    failed.to_csv(gpu / "controls.csv", index=False)
    render(FIX / "default", gpu, tmp_path / "t1", tmp_path / "f1")
    controls.to_csv(gpu / "controls.csv", index=False)
    render(FIX / "default", gpu, tmp_path / "t2", tmp_path / "f2")
    missing, failing, passing = suptitles["fig3_gpu"]
    assert "invalid: controls not run" in missing
    assert "invalid: positive control failed (transformer" in failing
    assert "invalid" not in passing and "invalid" not in suptitles["fig3"][1]


def test_mqar_grid_figure_and_table_rows_of_the_gpu_profile(monkeypatch, tmp_path):
    """results/gpu/mqar.csv holding a grid: fig_mqar_gpu draws one panel per (size, seq_len), a line per arch, and is
    marked by results/gpu/controls.csv; Table 3 gets its rows, gated by the same controls."""
    import shutil

    from suite.eval.controls import mqar_controls
    from tests.test_controls import mqar_grid

    gpu = tmp_path / "gpu"
    shutil.copytree(FIX / "gpu", gpu)
    grid = mqar_grid()
    grid.to_csv(gpu / "mqar.csv", index=False)
    shown = {}
    _capture_figures(monkeypatch, lambda fig, out_dir, name: shown.setdefault(name, []).append(fig) or [])
    for i, cell in enumerate([(128, 8), (256, 16)]):                  # controls pass at (128, 8), fail at (256, 16)
        pd.DataFrame(mqar_controls(grid, *cell, "d256")).to_csv(gpu / "controls.csv", index=False)
        render(FIX / "default", gpu, tmp_path / f"t{i}", tmp_path / f"f{i}")
    passing, failing = shown["fig_mqar_gpu"]
    panels = {ax.get_title(): ax for ax in passing.axes if "T=" in ax.get_title()}
    assert set(panels) == {"d64 (166K params), T=128", "d64 (166K params), T=256", "d256 (2.01M params), T=128",
                           "d256 (2.01M params), T=256"}
    lines = {line.get_label(): line for line in panels["d256 (2.01M params), T=128"].get_lines()}
    assert list(lines["transformer"].get_xdata()) == [8] and list(lines["transformer"].get_ydata()) == [0.97]
    assert set(lines) >= {"transformer", "swa", "orthros", "chance"}
    title = passing._suptitle.get_text()
    assert "Measured MQAR, gpu profile (this suite): one model per arch and size, trained on T=128: 8 pairs; " \
           "T=256: 16/32/64 pairs" in title and "invalid" not in title
    assert "gdn: not run: cut by the call's cap" in title
    assert "invalid: positive control failed (transformer 0.88 vs >= 0.95)" in failing._suptitle.get_text()
    assert "invalid" not in shown["fig_mqar"][0]._suptitle.get_text()          # the default profile's own controls
    t3 = pd.read_csv(tmp_path / "t1" / "table3.csv")
    cell = _row(t3, model="transformer", task="MQAR accuracy (d256, T=128, 8 pairs) (gpu profile)")
    assert cell["measured"] == pytest.approx(0.97) and cell["scale"] == "2.01M" and cell["n_trials"] == 500
    assert cell["status"].startswith("invalid: positive control failed (transformer 0.88")
    ok = _row(pd.read_csv(tmp_path / "t0" / "table3.csv"), model="transformer",
              task="MQAR accuracy (d256, T=128, 8 pairs) (gpu profile)")
    assert ok["status"].startswith("measured only")


def test_gpu_profile_rows_stay_apart_from_the_other_profiles_cells():
    """Tables 1/7: results/gpu rows are measured-only rows marked '(gpu profile)', never averaged with a CPU cell of
    the same size, and gated by the gpu profile's own controls."""
    import pandas as pd

    from suite.report.tables import gpu_profile_rows, lm_table

    def frame(values, device):
        return pd.DataFrame([dict(arch="orthros", size="1M", task="val_ppl", metric="byte_perplexity", value=v,
                                  unit="ppl", status="ok", seed=42 + i, n_params=1e6, device=device)
                             for i, v in enumerate(values)])

    empty = pd.DataFrame(columns=["model", "variant", "scale", "task", "task_label", "metric", "value", "unit"])
    both = lm_table(empty, frame([6.0, 8.0], "cpu"), frame([4.0, 4.0, 4.0], "NVIDIA H200"), paper_cond="",
                    missing="", invalid=None, gpu_invalid="invalid: lm control failed", controls=None,
                    gpu_controls=None).set_index("scale")
    assert both.loc["1M", "measured"] == 7.0 and both.loc["1M", "n_seeds"] == 2
    assert both.loc["1M (gpu profile)", "measured"] == 4.0 and both.loc["1M (gpu profile)", "n_seeds"] == 3
    assert both.loc["1M (gpu profile)", "status"].startswith("invalid: lm control failed")
    assert both.loc["1M", "status"].startswith("measured only")
    assert gpu_profile_rows(None, key="arch", invalid=None).empty


def test_the_mqar_proxy_claim_reads_the_controls_size(tmp_path):
    """C09's MQAR evidence (Orthros - the Transformer) reads every cell of the size the MQAR controls read (the
    grid's widest, d256), gated by those controls; ``cell: mqar_control`` reads the controls' own cell (T=128, 8
    pairs at d256, not the default profile's 4 pairs, which the grid lacks)."""
    from suite.eval.controls import mqar_controls
    from suite.report.audit import evaluate_measure
    from suite.report.claims import load_claims
    from tests.test_controls import mqar_grid

    claim = next(c for c in load_claims() if c["id"] == "C09")
    measure = next(e["measure"] for e in claim["evidence"] if e.get("measure", {}).get("results", "").startswith(
        "{results}"))
    grid = mqar_grid()
    grid.to_csv(tmp_path / "mqar.csv", index=False)
    passing = pd.DataFrame(mqar_controls(grid, 128, 8, "d256")).assign(experiment="mqar")
    res = evaluate_measure(measure, tmp_path, None, passing)
    assert res["status"] == "ok" and set(res["num"]["size"]) == {"d256"}
    assert res["value"] == pytest.approx(((0.99 - 0.97) + (0.90 - 0.88)) / 2)      # (T=128, 8), (T=256, 16)
    failing = passing.assign(passed=[False, True])
    assert evaluate_measure(measure, tmp_path, None, failing)["status"].startswith("invalid: positive control")
    cell = {**measure, "cell": "mqar_control", "column": "accuracy_far", "denominator": {"arch": "swa"}}
    res = evaluate_measure(cell, tmp_path, None, passing)
    assert res["value"] == pytest.approx(0.98 - 0.003) and "(1+1 rows)" in res["conditions"]
    # a failed run at the controls' cell: its status, not another size's value, nor other cells' statuses
    broken = grid.copy()
    at = (broken["arch"] == "orthros") & (broken["size"] == "d256") & (broken["seq_len"] == 128)
    broken.loc[at, ["status", "accuracy_far"]] = ["failed: CUDA out of memory", float("nan")]
    broken.loc[(broken["arch"] == "orthros") & (broken["seq_len"] == 256), "status"] = "not run: too many pairs"
    broken.to_csv(tmp_path / "mqar.csv", index=False)
    res = evaluate_measure(cell, tmp_path, None, passing)
    assert res["value"] is None and res["status"] == "not run: failed: CUDA out of memory"
    # a single-size study: its one size; rows without train_kv name no control cell
    grid[grid["size"] != "d256"].to_csv(tmp_path / "mqar.csv", index=False)
    assert evaluate_measure(cell, tmp_path, None, passing)["value"] == pytest.approx(0.45 - 0.20)
    grid.drop(columns="train_kv").to_csv(tmp_path / "mqar.csv", index=False)
    res = evaluate_measure(cell, tmp_path, None, passing)
    assert res["value"] is None and res["status"].startswith("not run: no rows match {'status': 'ok'} at the MQAR "
                                                             "controls' cell")
