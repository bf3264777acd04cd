"""Provenance: the commit column names the project's own checkout, never an enclosing repository's."""
import gzip
import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

import suite.provenance

GIT = shutil.which("git") or "git"


def _git(cwd, *args):
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1", "PATH": "/usr/bin:/bin"}
    return subprocess.run([GIT, *args], cwd=cwd, env=env, capture_output=True, text=True, check=True).stdout.strip()


def _new_repo(path: Path) -> str:
    """A git repository at ``path`` with one commit; returns its 12-digit short hash."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "README").write_text("x\n")
    _git(path, "init", "-q")
    _git(path, "add", "README")
    _git(path, "commit", "-q", "-m", "init")
    return _git(path, "rev-parse", "--short=12", "HEAD")


def _copy_of_provenance(root: Path):
    """suite/provenance.py copied to ``root``/suite/, imported from there (its project root is then ``root``)."""
    target = root / "suite" / "provenance.py"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(suite.provenance.__file__, target)
    spec = importlib.util.spec_from_file_location("provenance_copy", target)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_copy_inside_another_repository_records_unknown(tmp_path, monkeypatch):
    monkeypatch.delenv("SUITE_COMMIT", raising=False)
    outer_sha = _new_repo(tmp_path / "outer")
    copy = _copy_of_provenance(tmp_path / "outer" / "unpacked" / "orthros")  # an archive unpacked in a checkout
    got = copy.git_commit()
    assert outer_sha not in got
    assert got == "unknown"
    monkeypatch.setenv("SUITE_COMMIT", "abc123")  # told by the command that started the run: wins
    assert copy.git_commit() == "abc123"


def test_checkout_at_project_root_records_its_commit(tmp_path, monkeypatch):
    monkeypatch.delenv("SUITE_COMMIT", raising=False)
    root = tmp_path / "proj"
    copy = _copy_of_provenance(root)
    sha = _new_repo(root)
    assert copy.git_commit() == sha  # the copied file is untracked: not dirty
    _git(root, "add", "suite/provenance.py")
    _git(root, "commit", "-q", "-m", "code")
    assert copy.git_commit() == _git(root, "rev-parse", "--short=12", "HEAD")
    (root / "suite" / "provenance.py").write_text("# edited\n")
    assert copy.git_commit().endswith("-dirty")


def test_cpu_model_is_read_from_cpuinfo_and_shortened(tmp_path, monkeypatch):
    cpuinfo = tmp_path / "cpuinfo"
    for line, model in [("model name\t: Intel(R) Xeon(R) Platinum 8480+ CPU @ 2.00GHz", "Intel Xeon Platinum 8480+"),
                        ("model name\t: AMD EPYC 7763 64-Core Processor", "AMD EPYC 7763"),
                        ("model name\t: Intel(R) Core(TM) i7-8700K CPU @ 3.70GHz", "Intel Core i7-8700K")]:
        cpuinfo.write_text(f"processor\t: 0\nvendor_id\t: x\n{line}\nflags\t: fpu\n\nprocessor\t: 1\n{line}\n")
        assert suite.provenance.cpu_model(cpuinfo) == model
    monkeypatch.setattr(suite.provenance.platform, "processor", lambda: "arm")
    cpuinfo.write_text("processor\t: 0\nBogoMIPS\t: 50.00\n")  # no model name (many ARM kernels)
    assert suite.provenance.cpu_model(cpuinfo) == "arm"
    assert suite.provenance.cpu_model(tmp_path / "absent") == "arm"


def test_cpu_device_names_the_model_after_the_old_label(monkeypatch):
    monkeypatch.setattr(suite.provenance.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(suite.provenance.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(suite.provenance, "cpu_model", lambda: "AMD EPYC 7763")
    assert suite.provenance.device_name("cpu") == "cpu:x86_64x2 (AMD EPYC 7763)"
    assert suite.provenance.provenance("p", 0, "float32", "torch")["device"] == "cpu:x86_64x2 (AMD EPYC 7763)"
    monkeypatch.setattr(suite.provenance, "cpu_model", lambda: "")  # unknown model: the label rows had before
    assert suite.provenance.device_name("cpu") == "cpu:x86_64x2"


def test_write_csv_leaves_a_file_as_readable_as_a_plain_write(tmp_path):
    import os

    from suite.provenance import write_csv

    plain = tmp_path / "plain.csv"
    plain.write_text("a\n1\n")
    written = write_csv([{"a": 1}], tmp_path / "out.csv")  # through mkstemp, which creates files 0600
    assert (written.stat().st_mode & 0o777) == (plain.stat().st_mode & 0o777)
    assert written.read_text() == "a\n1\n" and not [p for p in os.listdir(tmp_path) if p.startswith(".")]


def test_commit_hashes_that_look_like_numbers_are_read_back_as_text(tmp_path):
    """5638e28 (a float literal) and an all-digit hash came back as 5.638e+31 and an int, and the collected CSVs
    of the gpu run at 5638e28 carried 5.6379999999999995e+31 in their commit column."""
    from suite.collect import concat

    hashes = ["5638e28", "123456789012", "00a1b2c"]
    paths = []
    for i, commit in enumerate(hashes):
        paths.append(suite.provenance.write_csv([{"value": i, "commit": commit, "device": "1e3", "seed": 42}],
                                                tmp_path / f"run{i}.csv"))
        assert suite.provenance.read_csv(paths[-1])["commit"].tolist() == [commit]
    merged = suite.provenance.write_csv(concat([str(p) for p in paths]), tmp_path / "merged.csv")
    back = suite.provenance.read_csv(merged)
    assert back["commit"].tolist() == hashes
    assert back["device"].tolist() == ["1e3"] * 3
    assert back["value"].tolist() == [0, 1, 2] and back["seed"].tolist() == [42] * 3  # numbers stay numbers
    assert "5638e28" in merged.read_text() and "e+31" not in merged.read_text()


def test_text_columns_keep_n_a_and_only_an_empty_cell_is_missing(tmp_path):
    """params.csv writes the device ``n/a``; pandas' default NA strings would have read it (and a dtype ``NA``)
    back as missing."""
    path = tmp_path / "rows.csv"
    path.write_text("value,device,dtype,backend,seed\n1,n/a,NA,,42\nnan,cpu,float32,eager,\n")
    back = suite.provenance.read_csv(path)
    assert back["device"].tolist() == ["n/a", "cpu"] and back["dtype"].tolist() == ["NA", "float32"]
    assert back["backend"].isna().tolist() == [True, False] and back["backend"][1] == "eager"
    assert back["value"].isna().tolist() == [False, True] and back["seed"].isna().tolist() == [False, True]
    header_only = tmp_path / "header.csv"
    header_only.write_text("value,device\n")
    assert suite.provenance.read_csv(header_only).empty


def test_a_results_csv_cut_short_is_refused_naming_the_file(tmp_path):
    """pandas reads a file cut mid-row without a word (the row's missing cells empty): the renderers then dropped
    rows silently (a new user's report)."""
    rows = [{"arch": a, "value": v, "commit": "abc1234"} for a, v in [("orthros", 1.5), ("transformer", 2.25)]]
    whole = suite.provenance.write_csv(rows, tmp_path / "whole.csv")
    assert suite.provenance.read_csv(whole)["value"].tolist() == [1.5, 2.25]
    text = whole.read_text()
    for cut in (len(text) - 1, text.rindex(",")):  # inside the last row: no line end, or fields missing
        cut_file = tmp_path / f"cut{cut}.csv"
        cut_file.write_text(text[:cut])
        with pytest.raises(ValueError, match=rf"truncated CSV .*cut{cut}\.csv"):
            suite.provenance.read_csv(cut_file)
    short = tmp_path / "short.csv"
    short.write_text(text.replace("orthros,1.5,abc1234", "orthros,1.5"))
    with pytest.raises(ValueError, match=r"damaged CSV .*short\.csv row 1: 2 fields where the header has 3"):
        suite.provenance.read_csv(short)
    quoted = tmp_path / "quoted.csv"  # a quoted cell may hold a comma and a line break
    quoted.write_text('arch,status\northros,"not run: a, b\nc"\n')
    assert suite.provenance.read_csv(quoted)["status"].tolist() == ["not run: a, b\nc"]


def test_a_gzipped_results_csv_reads_like_the_plain_one_and_a_damaged_one_is_named(tmp_path):
    """Per-document outcomes are kept in git gzipped (results/gpu/pretrained/docs/): the same checks, the same
    frame."""
    plain = suite.provenance.write_csv([{"arch": "base", "doc_id": 0, "value": 1.0, "commit": "5638e28"}],
                                       tmp_path / "docs.csv")
    packed = tmp_path / "docs.csv.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert suite.provenance.read_csv(packed).equals(suite.provenance.read_csv(plain))
    assert suite.provenance.read_csv(packed)["commit"].tolist() == ["5638e28"]
    for name, data in [("cut.csv.gz", packed.read_bytes()[:-9]), ("plain.csv.gz", plain.read_bytes())]:
        (tmp_path / name).write_bytes(data)
        with pytest.raises(ValueError, match=rf"corrupt CSV .*{name}"):
            suite.provenance.read_csv(tmp_path / name)


def test_every_row_records_the_library_versions_without_importing_them(monkeypatch):
    """The versions come from the installed distributions' metadata (importing FLA alone costs ~30 s on a CPU);
    a library that is not installed reads ``absent``; driver and CUDA only on a GPU."""
    monkeypatch.setitem(suite.provenance.SOFTWARE, "fla", ("no-such-distribution-xyz",))
    row = suite.provenance.provenance("default", 0, "float32", "torch", "cpu")
    import torch
    import transformers

    assert row["torch"] == torch.__version__ and row["transformers"] == transformers.__version__
    assert row["fla"] == "absent" and "driver" not in row and "cuda" not in row
    assert list(row)[:len(suite.provenance.PROVENANCE_COLUMNS)] == suite.provenance.PROVENANCE_COLUMNS


def test_a_benchmarks_rows_and_targets_carry_each_column_once(tmp_path):
    """The GPU benchmarks' environment columns (library versions, GPU) and the provenance columns overlap: the CSV
    and its targets.csv name each column once."""
    from benchmarks.gpu_common import RowWriter, common_columns

    writer = RowWriter(tmp_path / "bench.csv", common_columns("cpu", "float32", "default"))
    writer.add(arch="orthros", value=1.0)
    writer.target(arch="orthros", method="m", target="t", value=1.0, threshold=0.5, status="pass")
    for name in ("bench.csv", "targets.csv"):
        header = (tmp_path / name).read_text().splitlines()[0].split(",")
        assert len(header) == len(set(header)), name
        assert {"torch", "transformers", "commit", "gpu_name"} <= set(header), name
