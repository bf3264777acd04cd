"""GPU time per job from snakemake's metadata (suite.report.job_times), and its sum per rule."""
import base64
import json

import pandas as pd
import pytest

from suite.provenance import read_csv
from suite.report import job_times


def _record(root, output, rule, start, end, **extra):
    name = base64.urlsafe_b64encode(output.encode()).decode()
    if len(name) > 60:  # as snakemake's file store splits a name too long for the file system, here shorter
        *folders, name = ["@" + name[i:i + 60] for i in range(0, len(name), 60)]
        name = name[1:]
        for folder in folders:
            root = root / folder
        root.mkdir(parents=True, exist_ok=True)
    (root / name).write_text(json.dumps({"rule": rule, "starttime": start, "endtime": end, "incomplete": False,
                                         **extra}))


def test_record_keeps_the_jobs_of_this_call_and_summary_sums_them_per_rule(tmp_path, capsys):
    meta, tree = tmp_path / "metadata", tmp_path / "tree"
    meta.mkdir()

    def made(output, *args, **extra):  # a record whose output exists in the tree
        (tree / output).parent.mkdir(parents=True, exist_ok=True)
        (tree / output).write_text("x")
        _record(meta, output, *args, **extra)

    for i, (start, end) in enumerate(((1000.0, 1100.0), (1000.0, 1040.0))):
        for j, f in enumerate(("metrics", "loss")):  # one job, two outputs recorded 1 ms apart: one row
            made(f"results/gpu/scratch/lr_sweep/orthros/lr{i}/{f}.csv", "scratch_lr_sweep", start, end + j / 1000,
                 job_hash=i)
    made("results/gpu/scratch_lr.csv", "scratch_lr_pick", 1101.0, 1102.5, job_hash=7)
    for f in ("metrics", "loss"):  # failed: snakemake removed its outputs, kept their records
        _record(meta, f"results/gpu/scratch/lr_sweep/swa/lr0/{f}.csv", "scratch_lr_sweep", 1000.0, 1020.0, job_hash=3)
    made("results/gpu/old.csv", "scratch_data", 10.0, 20.0)                 # an earlier call's
    made("results/gpu/touched.csv", "scratch_data", None, None)             # marked done by --touch
    made("results/gpu/cut.csv", "scratch_train", 1000.0, 1200.0, incomplete=True)
    out = tmp_path / "job_times" / "call1.csv"
    job_times.main(["record", "--metadata", str(meta), "--since", "900", "--call-s", "130", "--gpu-jobs", "3",
                    "--device", "NVIDIA H200", "--commit", "abc", "--root", str(tree), "--out", str(out)])
    rows = read_csv(out)
    assert list(rows["rule"]) == ["scratch_lr_sweep", "scratch_lr_sweep", "scratch_lr_pick"]
    assert sorted(rows["seconds"]) == [1.5, 40.0, 100.0] and set(rows["call"]) == {"call1"}
    assert "results/gpu/scratch/lr_sweep/orthros/lr0/loss.csv results/gpu/scratch/lr_sweep/orthros/lr0/metrics.csv" \
        in set(rows["outputs"])
    pd.concat([rows.assign(call="call2"), rows]).to_csv(tmp_path / "both.csv", index=False)
    job_times.main(["summary", "--inputs", str(out), str(tmp_path / "both.csv"), "--out", str(tmp_path / "s.csv")])
    table = read_csv(tmp_path / "s.csv").set_index("rule")
    assert table.loc["scratch_lr_sweep", "jobs"] == 6 and table.loc["scratch_lr_sweep", "seconds"] == 420.0
    assert table.loc["all jobs", "seconds"] == pytest.approx(424.5)
    assert table.loc["calls", "jobs"] == 2 and table.loc["calls", "seconds"] == 260.0   # each call once
    assert table.index[0] == "scratch_lr_sweep" and table.loc["scratch_lr_sweep", "devices"] == "NVIDIA H200"
    capsys.readouterr()
    job_times.main(["record", "--metadata", str(meta), "--since", "5000", "--out", str(tmp_path / "none.csv")])
    assert "nothing written" in capsys.readouterr().out and not (tmp_path / "none.csv").exists()


def test_bad_inputs_name_the_file(tmp_path, capsys):
    meta = tmp_path / "metadata"
    meta.mkdir()
    (meta / "not-base64!").write_text("{}")
    with pytest.raises(SystemExit):
        job_times.main(["record", "--metadata", str(meta), "--since", "0", "--out", str(tmp_path / "x.csv")])
    assert "not-base64!: not a snakemake metadata record" in capsys.readouterr().err
    other = tmp_path / "other.csv"
    pd.DataFrame([{"rule": "a"}]).to_csv(other, index=False)
    with pytest.raises(SystemExit):
        job_times.main(["summary", "--inputs", str(other), "--out", str(tmp_path / "s.csv")])
    assert "not job-time files" in capsys.readouterr().err
