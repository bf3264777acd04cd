"""Command lines refuse bad input with a message naming the argument, file or value and exit status 2 (no
traceback): an unknown --size, a missing --checkpoint or --data-dir, a damaged CSV given to the renderer
(suite.cli.usage_errors); --no-progress also silences the Hugging Face progress bars."""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from suite.cli import usage_errors
from suite.train.checkpoint import checkpoint_folder

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures" / "results"


def _refused(main, argv, capsys) -> str:
    """stderr of ``main(argv)``, which must stop with exit status 2 (argparse's usage error)."""
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    return capsys.readouterr().err


def test_usage_errors_turns_the_named_exceptions_into_exit_status_2(capsys):
    parser = argparse.ArgumentParser(prog="tool")
    with pytest.raises(SystemExit) as stop:
        with usage_errors(parser):
            raise ValueError("file x.csv: column 'ms' holds 'fast'")
    assert stop.value.code == 2
    assert "tool: error: file x.csv: column 'ms' holds 'fast'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        with usage_errors(parser, FileNotFoundError):
            raise FileNotFoundError("checkpoint not found: c")
    with pytest.raises(KeyError):  # other exceptions (a bug) keep their traceback
        with usage_errors(parser, FileNotFoundError):
            raise KeyError("k")


def test_unknown_size_lists_the_known_ones(data_dir, tmp_path, capsys):
    from suite.experiments.mqar import run as mqar
    from suite.experiments.niah import run as niah
    from suite.train import run

    for main, argv in [(run.main, ["--arch", "orthros", "--size", "7Q", "--data-dir", str(data_dir),
                                   "--out-dir", str(tmp_path / "o")]),
                       (mqar.main, ["--arch", "orthros", "--size", "7Q", "--out", str(tmp_path / "n.csv")]),
                       (niah.main, ["--arch", "orthros", "--size", "7Q", "--data-dir", str(data_dir),
                                    "--haystack", str(data_dir / "test.txt"), "--out", str(tmp_path / "n.csv")])]:
        err = _refused(main, argv, capsys)
        assert "argument --size: unknown size '7Q'; known sizes: 0.5M, 1M, 1.5M" in err
        assert "qwen3_8b" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists() and not (tmp_path / "n.csv").exists()


def test_unknown_arch_lists_the_known_ones(data_dir, tmp_path, capsys):
    from benchmarks import prefill_cpu
    from suite.experiments.mqar import run as mqar
    from suite.experiments.niah import run as niah
    from suite.train import run

    for main, argv in [(run.main, ["--arch", "orthos", "--size", "1M", "--data-dir", str(data_dir),
                                   "--out-dir", str(tmp_path / "o")]),
                       (mqar.main, ["--arch", "orthos", "--size", "1M", "--out", str(tmp_path / "n.csv")]),
                       (niah.main, ["--arch", "orthos", "--size", "1M", "--data-dir", str(data_dir),
                                    "--haystack", str(data_dir / "test.txt"), "--out", str(tmp_path / "n.csv")]),
                       (prefill_cpu.main, ["--archs", "orthros,orthos", "--lengths", "32", "--repeats", "1",
                                           "--out", str(tmp_path / "n.csv")])]:
        err = _refused(main, argv, capsys)
        assert "unknown architecture 'orthos'; known: gdn, gla, linear_hybrid, orthros, " in err
        assert "Traceback" not in err
    assert "swa, transformer, llama\n" in _refused(mqar.main, ["--arch", "x", "--size", "1M", "--out", "o.csv"], capsys)
    assert not (tmp_path / "o").exists() and not (tmp_path / "n.csv").exists()


def test_counts_below_one_are_refused_before_any_work(data_dir, tmp_path, capsys):
    from suite.experiments.mqar import run as mqar
    from suite.experiments.niah import run as niah
    from suite.train import run

    train = ["--arch", "orthros", "--size", "1M", "--data-dir", str(data_dir), "--out-dir", str(tmp_path / "o")]
    mqar_args = ["--arch", "orthros", "--size", "1M", "--out", str(tmp_path / "n.csv")]
    niah_args = ["--arch", "orthros", "--size", "1M", "--data-dir", str(data_dir), "--haystack",
                 str(data_dir / "test.txt"), "--out", str(tmp_path / "n.csv")]
    cases = [(run.main, train, "--steps", "0"), (run.main, train, "--batch-size", "-4"),
             (mqar.main, mqar_args, "--steps", "0"), (mqar.main, mqar_args, "--steps", "-3"),
             (mqar.main, mqar_args, "--batch-size", "0"), (mqar.main, mqar_args, "--num-test", "0"),
             (niah.main, niah_args, "--steps", "0"), (niah.main, niah_args, "--batch-size", "-1")]
    for main, argv, flag, value in cases:
        err = _refused(main, argv + [flag, value], capsys)
        assert f"argument {flag}: must be an integer >= 1, got {value}\n" in err and "Traceback" not in err
    assert "argument --seq-len: values must be integers >= 2, got '64,0'" in \
        _refused(mqar.main, mqar_args + ["--seq-len", "64,0"], capsys)
    assert "argument --warmup: must be an integer >= 0, got -1" in \
        _refused(run.main, train + ["--warmup", "-1"], capsys)
    assert "error: give --steps, --batch-size, --seq-len or a --config whose train section sets them" in \
        _refused(run.main, train, capsys)  # no --config: nothing gives them
    # one schedule rule (suite.config.warmup_problem) on every command line that takes a warmup
    assert "error: --warmup (or train.warmup): 10 must be below --steps (or the train recipe's steps) 6" in \
        _refused(run.main, train + ["--steps", "6", "--batch-size", "2", "--seq-len", "32", "--warmup", "10"], capsys)
    assert "error: --warmup: 5 must be below --steps 5" in \
        _refused(mqar.main, mqar_args + ["--steps", "5", "--warmup", "5"], capsys)
    assert not (tmp_path / "o").exists() and not (tmp_path / "n.csv").exists()


def test_unwritable_output_path_is_refused_before_any_work(data_dir, tmp_path, capsys):
    from benchmarks import prefill_cpu
    from suite.eval import harness
    from suite.experiments.mqar import run as mqar
    from suite.experiments.niah import run as niah
    from suite.train import run

    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    under_file = a_file / "sub" / "x.csv"
    niah_args = ["--arch", "orthros", "--size", "1M", "--data-dir", str(data_dir), "--haystack",
                 str(data_dir / "test.txt"), "--steps", "2"]
    clis = [(run.main, ["--arch", "orthros", "--size", "1M", "--data-dir", str(data_dir), "--steps", "2"], "--out-dir"),
            (mqar.main, ["--arch", "orthros", "--size", "1M", "--steps", "2"], "--out"),
            (niah.main, niah_args, "--out"),
            (harness.main, ["--checkpoint", str(tmp_path)], "--out"),
            (prefill_cpu.main, ["--lengths", "32", "--repeats", "1"], "--out")]
    for main, argv, flag in clis:
        err = _refused(main, argv + [flag, str(under_file)], capsys)
        assert f"argument {flag}: cannot write {under_file}: {a_file} is a file, not a folder" in err
        err = _refused(main, argv + [flag, "/proc/x.csv"], capsys)
        assert f"argument {flag}: cannot write /proc/x.csv: cannot create files in /proc" in err
        assert "Traceback" not in err
    assert "argument --out: cannot write " + f"{tmp_path}: it is a folder" in \
        _refused(mqar.main, clis[1][1] + ["--out", str(tmp_path)], capsys)
    assert f"argument --out-dir: cannot write {a_file}: it is a file" in \
        _refused(run.main, clis[0][1] + ["--out-dir", str(a_file)], capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"] and a_file.read_text() == "x"


def test_a_length_that_cannot_fit_in_memory_is_refused_before_allocating(data_dir, tmp_path, capsys):
    """A huge --seq-len (training), --lengths (NIAH, CPU prefill) or 128k-mode --seq-len: exit status 2 naming the
    option, the memory it needs at least and what the host has, before any model is built; nothing is written (no
    run_config.json, no CSV)."""
    from benchmarks import prefill_cpu
    from suite.experiments.niah import run as niah
    from suite.train import run

    tokens = len(__import__("numpy").load(data_dir / "tokens" / "val.npy"))
    seq_len = tokens // 2  # the splits hold it; a batch this wide cannot fit
    out_dir, out = tmp_path / "run", tmp_path / "x.csv"
    err = _refused(run.main, ["--arch", "transformer", "--size", "1M", "--data-dir", str(data_dir), "--out-dir",
                              str(out_dir), "--steps", "2", "--batch-size", "100000000", "--seq-len", str(seq_len)],
                   capsys)
    assert re.search(rf"error: --seq-len {seq_len} \(or the train recipe's\) at batch 100000000: needs at least "
                     r"[\d.]+ TiB \(logits \[100000000, \d+, 512\], .*\), but [\d.]+ GiB (available on this host|left "
                     r"under this process's cgroup memory limit)", err), err
    assert not (out_dir / "run_config.json").exists() and "Traceback" not in err
    niah_args = ["--arch", "transformer", "--size", "1M", "--data-dir", str(data_dir), "--haystack",
                 str(data_dir / "test.txt"), "--format", "code", "--value-digits", "1", "--queries", "1", "--steps",
                 "2", "--train-len", "128", "--out", str(out)]
    err = _refused(niah.main, niah_args + ["--lengths", "64,10000000000"], capsys)
    assert re.search(r"error: --lengths \(longest 10000000000\): needs at least [\d.]+ TiB \(hidden states "
                     r"\[1, 10000000000, \d+\], keys and values of one attention layer, weights\), but", err), err
    err = _refused(prefill_cpu.main, ["--archs", "orthros", "--lengths", "256,100000000000", "--out", str(out)],
                   capsys)
    assert "error: --lengths (longest 100000000000) (orthros 1M): needs at least" in err
    err = _refused(prefill_cpu.main, ["--mode", "128k", "--seq-len", "100000000000", "--out", str(out)], capsys)
    assert "error: --seq-len 100000000000 (orthros 1M): needs at least" in err and "every attention layer" in err
    assert not out.exists()


def _parser_of(main, monkeypatch) -> argparse.ArgumentParser:
    """The parser a CLI's ``main`` builds, caught at its ``parse_args`` call."""
    class Built(Exception):
        pass

    def stop(self, *args, **kwargs):
        raise Built(self)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", stop)
    with pytest.raises(Built) as built:
        main([])
    monkeypatch.undo()
    return built.value.args[0]


def test_shell_scripts_call_the_clis_with_options_they_accept(monkeypatch):
    """Every call of suite.experiments.niah.run / suite.experiments.mqar.run / suite.train.run in the repository's shell
    scripts names options that CLI has, never two of one mutually exclusive group (niah's --arch and --checkpoint)."""
    from suite.experiments.mqar import run as mqar
    from suite.experiments.niah import run as niah
    from suite.train import run

    parsers = {name: _parser_of(main, monkeypatch) for name, main in
               (("suite.experiments.niah.run", niah.main), ("suite.experiments.mqar.run", mqar.main),
                ("suite.train.run", run.main))}
    scripts = subprocess.run(["git", "ls-files", "*.sh"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    calls = 0
    for script in scripts:
        text = (ROOT / script).read_text().replace("\\\n", " ")  # one logical line per command
        for name, parser in parsers.items():
            for call in re.findall(rf"{re.escape(name)}\b([^|;)>]*)", text):
                calls += 1
                flags = set(re.findall(r"(?<![\w-])--[a-z][\w-]*", call))
                unknown = flags - set(parser._option_string_actions)
                assert not unknown, f"{script}: {name} has no option {sorted(unknown)}"
                for group in parser._mutually_exclusive_groups:
                    both = flags & {o for action in group._group_actions for o in action.option_strings}
                    assert len(both) <= 1, f"{script}: {name} takes only one of {sorted(both)}"
    assert calls >= 2  # multi_gpu_all.sh (train.run twice)


def test_checkpoint_folder_names_a_missing_path(tmp_path):
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "file").write_text("x")
    assert checkpoint_folder(tmp_path / "ckpt") == tmp_path / "ckpt"
    with pytest.raises(FileNotFoundError, match=f"checkpoint not found: {tmp_path / 'none'}$"):
        checkpoint_folder(tmp_path / "none")
    with pytest.raises(NotADirectoryError, match="is a file"):
        checkpoint_folder(tmp_path / "file")
    assert checkpoint_folder("EleutherAI/pythia-14m", hub_ids=True) == Path("EleutherAI/pythia-14m")
    for local in ("./none", "../none", "/none/x", "a/b/c"):  # a path, never a Hub id
        with pytest.raises(FileNotFoundError, match=f"checkpoint not found: {local}$"):
            checkpoint_folder(local, hub_ids=True)
    with pytest.raises(FileNotFoundError):
        checkpoint_folder("EleutherAI/pythia-14m")  # the suite's own CLIs take folders only


def test_missing_checkpoint_is_named_by_the_eval_clis(tmp_path, capsys):
    from suite.eval import harness, lm_eval_cli
    from suite.experiments.niah import run as niah

    missing = tmp_path / "work_dirs" / "ci" / "train" / "none" / "checkpoint"
    hay = tmp_path / "hay.txt"
    hay.write_text("text\n")
    err = _refused(harness.main, ["--checkpoint", str(missing), "--out", str(tmp_path / "q.csv")], capsys)
    assert f"error: checkpoint not found: {missing}\n" in err and "Repo id" not in err
    err = _refused(niah.main, ["--checkpoint", str(missing), "--haystack", str(hay), "--out", str(tmp_path / "n.csv")],
                   capsys)
    assert f"error: checkpoint not found: {missing}\n" in err and "Repo id" not in err
    err = _refused(lm_eval_cli.check_model_paths,
                   ["--model", "hf", "--model_args", f"pretrained={missing},dtype=float32", "--tasks", "arc_easy"],
                   capsys)
    assert f"error: --model_args pretrained: checkpoint not found: {missing}\n" in err
    err = _refused(lm_eval_cli.check_model_paths, ["run", "--model_args", f"pretrained={tmp_path}",
                                                   f"tokenizer={missing}"], capsys)
    assert f"--model_args tokenizer: checkpoint not found: {missing}" in err
    lm_eval_cli.check_model_paths(["--model", "hf", "--model_args", "pretrained=EleutherAI/pythia-14m"])  # a Hub id
    lm_eval_cli.check_model_paths(["--model", "hf", "--model_args", f"pretrained={tmp_path}", "--tasks", "x"])
    assert not list(tmp_path.glob("*.csv"))


def test_missing_data_dir_names_the_folder_and_the_rule_that_makes_it(data_dir, tmp_path, capsys):
    from suite.experiments.niah import run as niah
    from suite.train import run

    missing = tmp_path / "no_data"
    err = _refused(run.main, ["--arch", "orthros", "--size", "1M", "--data-dir", str(missing), "--out-dir",
                              str(tmp_path / "o")], capsys)
    assert f"error: data folder {missing} not found: the DAG's `tokenizer` rule" in err
    assert "snakemake --cores all tokenizer" in err and f"python -m suite.data.tokenizer --data-dir {missing}" in err
    err = _refused(niah.main, ["--arch", "orthros", "--size", "1M", "--data-dir", str(missing), "--haystack",
                               str(data_dir / "test.txt"), "--out", str(tmp_path / "n.csv")], capsys)
    assert f"error: data folder {missing} not found" in err and "Repo id" not in err
    partial = tmp_path / "partial"
    shutil.copytree(data_dir, partial)
    (partial / "tokenizer" / "tokenizer_config.json").unlink()
    (partial / "tokens" / "val.npy").unlink()
    err = _refused(run.main, ["--arch", "orthros", "--size", "1M", "--data-dir", str(partial), "--out-dir",
                              str(tmp_path / "o")], capsys)
    assert f"error: data folder {partial} lacks tokenizer/tokenizer_config.json, tokens/val.npy: " in err
    err = _refused(niah.main, ["--arch", "orthros", "--size", "1M", "--data-dir", str(partial), "--haystack",
                               str(data_dir / "test.txt"), "--out", str(tmp_path / "n.csv")], capsys)
    assert "lacks tokenizer/tokenizer_config.json: " in err  # NIAH reads the train split only
    empty = tmp_path / "empty.txt"
    empty.write_text(" \n")
    err = _refused(niah.main, ["--arch", "orthros", "--size", "1M", "--data-dir", str(data_dir), "--haystack",
                               str(empty), "--out", str(tmp_path / "n.csv")], capsys)
    assert f"error: haystack file is empty: {empty}" in err  # refused before any training
    assert not (tmp_path / "o").exists() and not (tmp_path / "n.csv").exists()


def _results_copy(tmp_path: Path) -> tuple[Path, Path]:
    shutil.copytree(FIX, tmp_path / "in")
    return tmp_path / "in" / "default", tmp_path / "in" / "gpu"


def test_render_cli_prints_a_schema_error_and_exits_2(tmp_path, capsys):
    from suite import render

    res, gpu = _results_copy(tmp_path)
    pd.read_csv(res / "niah.csv").drop(columns="status").to_csv(res / "niah.csv", index=False)
    args = ["--results", str(res), "--gpu-results", str(gpu), "--out-tables", str(tmp_path / "t"),
            "--out-figures", str(tmp_path / "f")]
    err = _refused(render.main, args, capsys)
    assert f"error: {res / 'niah.csv'}: missing column(s) ['status']" in err
    with pytest.raises(ValueError, match="missing column"):  # the library function still raises
        render.render(res, gpu, tmp_path / "t", tmp_path / "f")
    shutil.copy(FIX / "default" / "niah.csv", res / "niah.csv")
    prefill = pd.read_csv(gpu / "prefill.csv", dtype=str)
    prefill.loc[1, "ms"] = "fast"
    prefill.to_csv(gpu / "prefill.csv", index=False)
    err = _refused(render.main, args, capsys)
    assert f"error: {gpu / 'prefill.csv'} row 2: column 'ms' holds 'fast', not a number" in err
    assert not (tmp_path / "t").exists() and not (tmp_path / "f").exists()
    err = _refused(render.main, ["--results", str(res.parent / "defualt"), *args[2:]], capsys)
    assert f"error: argument --results: {res.parent / 'defualt'}: no such folder" in err
    assert not (tmp_path / "t").exists() and not (tmp_path / "f").exists()


PROGRESS_FLAGS = """
import sys
{before}
from suite.common import quiet_hf_progress_bars
done = {call}
import datasets, huggingface_hub.utils, transformers.utils.logging
print(done, huggingface_hub.utils.are_progress_bars_disabled(), datasets.is_progress_bar_enabled(),
      transformers.utils.logging.is_progress_bar_enabled())
"""


def _clean_env() -> dict:
    return {k: v for k, v in os.environ.items() if not k.endswith("DISABLE_PROGRESS_BARS")}


@pytest.mark.parametrize("before, call, expected", [
    ("", "None", "None False True True"),  # the control: without the call the bars are on
    ("", "quiet_hf_progress_bars()", "[] True False False"),  # none imported yet: the variables cover them
    ("import datasets, transformers", "quiet_hf_progress_bars()",
     "['huggingface_hub', 'transformers', 'datasets'] True False False"),  # imported already: their switches
], ids=["control", "before-import", "after-import"])
def test_hf_progress_bars_are_switched_off(before, call, expected):
    code = PROGRESS_FLAGS.format(before=before, call=call)
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_clean_env(), capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip() == expected


def test_no_progress_silences_the_checkpoint_loading_bar(tmp_path):
    """`niah --checkpoint DIR --no-progress`: no "Loading weights" bar of transformers (shown without the flag)."""
    from tests.tiny import make_tiny_checkpoint, stdlib_text

    ckpt = make_tiny_checkpoint(tmp_path / "ckpt", max_position_embeddings=256)
    hay = tmp_path / "hay.txt"
    hay.write_text("\n\n".join(stdlib_text(10)), encoding="utf-8")
    base = [sys.executable, "-m", "suite.experiments.niah.run", "--checkpoint", str(ckpt), "--haystack", str(hay),
            "--lengths", "128", "--depths", "0.5", "--trials", "1"]
    stderr = {}
    for flag in ("", "--no-progress"):
        run = subprocess.run(base + ["--out", str(tmp_path / f"n{flag}.csv")] + ([flag] if flag else []), cwd=ROOT,
                             env=_clean_env(), capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stderr[-3000:]
        stderr[flag] = run.stderr
    assert "Loading weights" in stderr[""]  # the control: the bar is there without the flag
    assert "Loading weights" not in stderr["--no-progress"] and "it/s]" not in stderr["--no-progress"]



@pytest.mark.parametrize("option", ["--repeats", "--threads", "--window", "--seq-len"])
def test_prefill_cpu_refuses_a_count_below_one(option, tmp_path, capsys):
    from benchmarks import prefill_cpu

    err = _refused(prefill_cpu.main, ["--lengths", "32", option, "0", "--out", str(tmp_path / "p.csv")], capsys)
    assert f"error: argument {option}: must be an integer >= 1, got 0" in err and "Traceback" not in err
    assert not (tmp_path / "p.csv").exists()


def test_bad_input_found_by_a_new_user_is_a_usage_error(data_dir, tmp_path, capsys):
    """Each of these printed a traceback (or, for --max-files -3 and --limit -5, ran on): now exit status 2 with
    the option, file, key or value named, and nothing written."""
    from benchmarks import prefill_cpu
    from suite.data import corpus, tokenizer
    from suite.eval import harness
    from suite.experiments.mqar import run as mqar
    from suite.experiments.niah import run as niah
    from suite.train import run
    from tests.tiny import make_tiny_checkpoint

    cut = make_tiny_checkpoint(tmp_path / "cut")
    weights = cut / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-64])
    out = tmp_path / "out"
    train = ["--data-dir", str(data_dir), "--out-dir", str(out), "--steps", "1", "--batch-size", "1", "--seq-len", "8"]
    cases = [
        (run.main, ["--config", "defualt", "--arch", "orthros", "--size", "1M", *train], "no study config"),
        (run.main, ["--arch", "orthros", "--size", "1M", "--override", "foo=1", *train],
         "foo=1 is not a field of OrthrosConfig"),
        (run.main, ["--arch", "orthros", *train], "give --size or a --config whose main_size sets it"),
        (run.main, ["--arch", "orthros", "--size", "1M", "--init-from", str(cut), *train],
         f"--init-from: corrupt checkpoint file {weights}"),
        (run.main, ["--arch", "llama", "--model", str(cut), *train], f"--model: corrupt checkpoint file {weights}"),
        (niah.main, ["--checkpoint", str(cut), "--haystack", str(data_dir / "test.txt"), "--lengths", "64",
                     "--out", str(out / "n.csv")], f"corrupt checkpoint file {weights}"),
        (harness.main, ["--checkpoint", str(cut), "--out", str(out / "q.csv")], f"corrupt checkpoint file {weights}"),
        (harness.main, ["--checkpoint", str(data_dir), "--tasks", "val_pl", "--out", str(out / "q.csv")],
         "unknown task 'val_pl'"),
        (harness.main, ["--checkpoint", str(data_dir), "--limit", "-5", "--out", str(out / "q.csv")],
         "argument --limit: must be a number > 0, got -5"),
        (corpus.main, ["--data-dir", str(out), "--max-files", "-3"], "argument --max-files: must be an integer >= 1"),
        (corpus.main, ["--data-dir", str(out), "--source", "files"], "source 'files' needs file globs"),
        (corpus.main, ["--data-dir", str(out), "--config", "defualt"], "no study config"),
        (tokenizer.main, ["--data-dir", str(data_dir), "--vocab-size", "-5"], "argument --vocab-size: must be an "
                                                                                "integer >= 1, got -5"),
        (tokenizer.main, ["--data-dir", str(data_dir), "--vocab-size", "100"], "vocab_size 100 out of range"),
        (mqar.main, ["--arch", "transformer", "--size", "1M", "--lr", "-1", "--out", str(out / "m.csv")],
         "argument --lr: must be a number > 0, got -1"),
        (prefill_cpu.main, ["--lengths", "-1024", "--out", str(out / "p.csv")],
         "argument --lengths: values must be integers >= 1"),
    ]
    for main, argv, message in cases:
        err = _refused(main, argv, capsys)
        assert message in err and "Traceback" not in err, (argv, err)
        assert not out.exists(), argv


# -- every command line, every option ------------------------------------------------------------------------------
# The module CLIs (python -m suite.<...> or benchmarks.<...> with a main) refuse bad input one way: argparse types of
# suite.cli (and the model-aware ones of suite.common), and usage_errors for a check in main. Every option of every CLI
# is either a flag, a choice, typed with a checking type, or listed in FREE_TEXT with what checks it (or why any text
# is fine).

def _module_clis() -> list[str]:
    names = []
    for path in sorted([*(ROOT / "suite").rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py")]):
        if 'if __name__ == "__main__":' in path.read_text():
            names.append(".".join(path.relative_to(ROOT).with_suffix("").parts))
    return names


MODULE_CLIS = _module_clis()
PASS_THROUGH = {"suite.eval.lm_eval_cli"}  # lm-eval's own command line: its arguments are lm-eval's to check

FREE_TEXT = {  # (module, option) -> what checks it, or why any value is fine
    ("benchmarks.e2e_gpu", "--compile-backend"): "torch.compile's backend name: torch names a wrong one",
    ("benchmarks.compile_check", "--backends"): "torch.compile's backend names: torch names a wrong one, the variant's "
                                                "row says so",
    ("benchmarks.compile_check", "--mode"): "torch.compile's mode: torch names a wrong one, the variant's row says so",
    ("benchmarks.decode_load", "--compile-backend"): "torch.compile's backend name: torch names a wrong one",
    ("benchmarks.prefill_1m", "--compile-backend"): "torch.compile's backend name: torch names a wrong one",
    ("benchmarks.prefill_gpu", "--compile-backend"): "torch.compile's backend name: torch names a wrong one",
    ("benchmarks.prefill_1m", "--prefill-csv"): "written by the step before, which may have failed: the row it "
                                                 "would give then reads 'not run'",
    ("benchmarks.multi_gpu_train", "--one"): "a run folder a failed run never wrote: its row reads 'not run'",
    ("benchmarks.multi_gpu_train", "--many"): "a run folder a failed run never wrote: its row reads 'not run'",
    ("benchmarks.prefill_gpu", "--keep-methods"): "method labels of the rows carried over",
    ("benchmarks.prefill_cpu", "--profile"): "a label (provenance column)",
    ("benchmarks.fp8_kv_real", "--profile"): "a label (provenance column)",
    ("benchmarks.seq_parallel_gpu", "--profile"): "a label (provenance column)",
    ("suite.experiments.conversion.collect", "--variants"): "labels, one per --evals: main checks the counts "
                                                            "(BAD_IN_MAIN)",
    ("suite.data.corpus", "--files"): "globs: build_corpus names one that matches nothing",
    ("suite.data.corpus", "--hf-path"): "a Hugging Face dataset, named when it cannot be reached",
    ("suite.data.corpus", "--hf-name"): "a Hugging Face dataset config, named when it cannot be reached",
    ("suite.eval.controls", "--mqar-size"): "a size label of the MQAR rows (a grid's d256)",
    ("suite.eval.controls", "--main-size"): "the size label of the LM rows",
    ("suite.eval.harness", "--checkpoint"): "checkpoint_folder in main (BAD_IN_MAIN)",
    ("suite.eval.harness", "--tasks"): "task_names in main (BAD_IN_MAIN)",
    ("suite.eval.harness", "--profile"): "a label (provenance column)",
    ("suite.eval.harness", "--arch"): "a label of the rows (a conversion variant too)",
    ("suite.eval.harness", "--size"): "a label of the rows",
    ("suite.experiments.mqar.run", "--profile"): "a label (provenance column)",
    ("suite.experiments.niah.run", "--checkpoint"): "checkpoint_folder in main (BAD_IN_MAIN)",
    ("suite.experiments.niah.run", "--data-dir"): "check_data_dir in main, naming the rule that makes it (BAD_IN_MAIN)",
    ("suite.experiments.niah.run", "--profile"): "a label (provenance column)",
    ("suite.experiments.niah.run", "--label-arch"): "a label of the rows",
    ("suite.experiments.mqar.run", "--label-arch"): "a label of the rows (required with --override, checked in main)",
    ("suite.experiments.mqar.run", "--override"): "the model config in main, built once before training",
    ("suite.train.run", "--data-dir"): "check_data_dir in main, naming the rule that makes it (BAD_IN_MAIN)",
    ("suite.train.run", "--arch"): "arch_name in main: with --model only a label (BAD_IN_MAIN)",
    ("suite.train.run", "--model"): "checkpoint_folder per seed in main ('{seed}' patterns; BAD_IN_MAIN)",
    ("suite.train.run", "--init-from"): "checkpoint_folder per seed in main ('{seed}' patterns; BAD_IN_MAIN)",
    ("suite.train.run", "--override"): "the model config in main (BAD_IN_MAIN)",
    ("suite.train.run", "--profile"): "a label (provenance column)",
    ("suite.deps", "MODULE"): "module_files in main (BAD_IN_MAIN)",
    ("suite.config", "config"): "load_config in main, worded as suite.cli.study_config (BAD_IN_MAIN; the config "
                                "module imports no suite.cli)",
    ("suite.eval.identity", "--profile"): "a label (provenance column)",
    ("suite.eval.ppl_buckets", "--profile"): "a label (provenance column)",
    ("suite.eval.ppl_buckets", "--variant"): "a label of the rows (the arm)",
    ("suite.data.vocab_compare", "--profile"): "a label (provenance column)",
    ("suite.eval.prompt_lengths", "--tasks"): "task_names in main (BAD_IN_MAIN)",
    ("suite.eval.prompt_lengths", "--profile"): "a label (provenance column)",
}

LOCAL_BAD = {  # (module, option) -> a bad value of a CLI's own argparse type
    ("benchmarks.e2e_gpu", "--configs"): "131072",
    ("benchmarks.decode_load", "--archs"): "gdn",
    ("benchmarks.decode_load", "--batches"): "0",
    ("benchmarks.decode_load", "--paths"): "jit",
    ("benchmarks.decode_load", "--decode-attn"): "flash",
    ("benchmarks.prefill_cpu", "--checkpoint"): "transformer",
    ("benchmarks.prefill_gpu", "--lengths"): "0",
    ("benchmarks.prefill_gpu", "--layer-lengths"): "1M",
    ("benchmarks.prefill_gpu", "--compare-lens"): "-1",
    ("benchmarks.prefill_gpu", "--paths"): "fast",
    ("benchmarks.seq_parallel_gpu", "--archs"): "gla",
    ("benchmarks.seq_parallel_gpu", "--layer-wise-from"): "orthros",
    ("suite.collect", "--not-run"): "gdn",
    ("suite.collect", "--runs"): "conversion",
    ("suite.collect", "--labels"): "budget",
    ("suite.eval.ppl_buckets", "--tag"): "arch",
    ("suite.eval.harness", "--num-fewshot"): "-1",
    ("suite.eval.prompt_lengths", "--num-fewshot"): "-1",
    ("suite.eval.prompt_lengths", "--tokenizer"): "base",
    ("suite.eval.controls", "--mqar-cell"): "64",
    ("suite.experiments.mqar.run", "--seq-len"): "64,63",
    ("suite.experiments.mqar.run", "--train-kv"): "4,x",
    ("suite.experiments.niah.run", "--curriculum"): "48:0.3",
    ("suite.experiments.niah.run", "--depths"): "0,1.5",
    ("suite.train.run", "--seed"): "-1",
}


def _type_bad_values(tmp: Path) -> dict:
    """A bad value for each shared argparse type (the file ``tmp/a_file`` exists)."""
    from suite import cli, common

    under_file = str(tmp / "a_file" / "x")
    return {cli.positive_int: "0", cli.nonnegative_int: "-1", cli.positive_float: "0", cli.nonnegative_float: "-1",
            cli.fraction: "1.5", cli.positive_ints: "8,0", cli.in_file: str(tmp / "missing.csv"),
            cli.in_folder: "", cli.in_path: str(tmp / "missing"), cli.out_file: under_file,
            cli.out_folder: under_file, cli.device_name: "cuda:99", cli.study_config: "defualt", cli.study: "defualt",
            common.size_name: "1X", common.size_names: "12M,1X", common.arch_name: "orthos",
            common.arch_names: "orthros,orthos", common.kernel_names: "warp-attn"}


def _name(action) -> str:
    return argparse._get_action_name(action)


def _bad_options(module: str, parser: argparse.ArgumentParser, tmp: Path) -> tuple[list, list]:
    """``([(option, value), ...] to refuse, [options nothing checks])`` of one CLI's parser."""
    shared = _type_bad_values(tmp)
    cases, unchecked = [], []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction) or action.nargs == 0:
            continue
        name, kind = _name(action), action.type
        kind = kind.func if hasattr(kind, "func") else kind  # functools.partial(positive_int, minimum=2), ...
        opt = action.option_strings[:1]
        if action.choices is not None:
            cases.append((opt + ["no-such-choice"], name))
        elif kind in shared:
            cases.append((opt + [shared[kind]], name))
        elif (module, name) in LOCAL_BAD:
            cases.append((opt + [LOCAL_BAD[module, name]], name))
        elif (module, name) not in FREE_TEXT:
            unchecked.append(name)
    return cases, unchecked


def test_the_walk_covers_every_module_cli():
    assert len(MODULE_CLIS) >= 26 and "suite.render" in MODULE_CLIS and "suite.config" in MODULE_CLIS
    assert "benchmarks.prefill_gpu" in MODULE_CLIS and "benchmarks.merge_results" in MODULE_CLIS
    stale = {m for m, _ in FREE_TEXT | LOCAL_BAD} - set(MODULE_CLIS)
    assert not stale, stale


@pytest.mark.parametrize("module", [m for m in MODULE_CLIS if m not in PASS_THROUGH])
def test_every_option_of_every_cli_refuses_a_bad_value(module, tmp_path, capsys, monkeypatch):
    """Each option's bad value (0 for a count, a missing input file, an output path under a file, a device this
    machine lacks, a misspelt study config, size or architecture, ...) stops the CLI while parsing: exit status 2,
    a message naming the option, no traceback, and nothing written (the CLI runs in an empty folder)."""
    import importlib

    main = importlib.import_module(module).main
    parser = _parser_of(main, monkeypatch)
    work = tmp_path / "cwd"
    work.mkdir()
    (tmp_path / "a_file").write_text("x")
    cases, unchecked = _bad_options(module, parser, tmp_path)
    assert not unchecked, f"{module}: options neither typed, choices nor in FREE_TEXT: {unchecked}"
    monkeypatch.chdir(work)
    for argv, name in cases:
        err = _refused(main, argv, capsys)
        assert f"error: argument {name}: " in err and "Traceback" not in err, (module, argv, err)
    assert not list(work.iterdir()) and sorted(p.name for p in tmp_path.iterdir()) == ["a_file", "cwd"], module


def test_bad_input_checked_in_main_is_a_usage_error(data_dir, tmp_path, capsys):
    """What a type cannot see (BAD_IN_MAIN in FREE_TEXT, options that depend on each other, an input's content, what
    the run would meet later) is checked in main before any work: exit status 2 naming it, nothing written."""
    import importlib

    import torch
    import yaml

    from tests.tiny import make_tiny_checkpoint

    ckpt = make_tiny_checkpoint(tmp_path / "ckpt")
    a_file, missing, out = tmp_path / "a_file.csv", tmp_path / "missing", tmp_path / "out"
    a_file.write_text("x\n1\n")
    train = ["--data-dir", str(data_dir), "--out-dir", str(out)]
    hay = ["--haystack", str(data_dir / "test.txt"), "--out", str(out / "n.csv")]
    cases = [
        ("benchmarks.prefill_cpu", ["--size", "1X", "--lengths", "32", "--out", str(out / "p.csv")],
         "argument --size: unknown size '1X'"),
        ("benchmarks.prefill_cpu", ["--archs", "orthros", "--checkpoint", f"transformer={ckpt}", "--lengths", "32",
                                     "--out", str(out / "p.csv")], "--checkpoint given for arch(s) not in --archs"),
        ("suite.render", ["--results", "", "--out-tables", str(out / "t"), "--out-figures", str(out / "f")],
         "argument --results: give a folder, got ''"),
        ("suite.experiments.mqar.run", ["--arch", "transformer", "--size", "1M", "--vocab-size", "4", "--out",
                                        str(out / "m.csv")],
         "--vocab-size 4 is too small for 64 distinct keys"),
        ("suite.experiments.mqar.run", ["--arch", "transformer", "--size", "1M", "--seq-len", "64,63", "--out",
                             str(out / "m.csv")], "argument --seq-len: lengths must be even"),
        ("suite.train.run", ["--config", "defualt", "--arch", "orthros", "--size", "1M", *train],
         "argument --config: no study config"),
        ("suite.experiments.niah.run", ["--config", "defualt", "--arch", "orthros", "--size", "1M", "--data-dir",
                                        str(data_dir), *hay], "argument --config: no study config"),
        ("suite.train.run", ["--arch", "orthros", "--size", "1M", "--override", "window_sise=16", *train],
         "window_sise=16 is not a field of OrthrosConfig"),
        ("suite.train.run", ["--arch", "orthos", "--size", "1M", *train], "unknown architecture 'orthos'"),
        ("suite.train.run", ["--arch", "orthros", "--size", "1M", "--data-dir", str(missing), "--out-dir", str(out)],
         f"data folder {missing} not found"),
        ("suite.train.run", ["--arch", "llama", "--model", str(missing), *train], "--model: checkpoint not found"),
        # ci trains with retrieval rows; 24 tokens cannot hold one (the run once failed at its first retrieval batch)
        ("suite.train.run", ["--config", "ci", "--arch", "orthros", "--size", "1M", "--seq-len", "24", *train],
         "seq_len 24 (--seq-len or train.seq_len) cannot hold a retrieval row"),
        ("suite.train.run", ["--arch", "orthros", "--size", "1M", "--steps", "1", "--batch-size", "1", "--seq-len",
                             "100000000", *train], "tokens, too few for seq_len 100000000"),
        ("suite.eval.harness", ["--checkpoint", str(missing), "--out", str(out / "q.csv")],
         f"checkpoint not found: {missing}"),
        ("suite.eval.harness", ["--checkpoint", str(ckpt), "--tasks", "val_ppl", "--out", str(out / "q.csv")],
         "task val_ppl needs --ppl-data"),
        ("suite.eval.harness", ["--checkpoint", str(ckpt), "--tasks", "val_pl", "--out", str(out / "q.csv")],
         "unknown task 'val_pl'"),
        ("suite.experiments.niah.run", ["--checkpoint", str(missing), *hay], f"checkpoint not found: {missing}"),
        ("suite.experiments.niah.run", ["--arch", "orthros", "--size", "1M", "--data-dir", str(missing), *hay],
         f"data folder {missing} not found"),
        ("suite.experiments.conversion.collect", ["conversion", "--evals", str(a_file), "--metrics", str(a_file),
                                                  str(a_file), "--variants", "base", "--out", str(out / "c.csv")],
         "need one eval CSV and one metrics CSV"),
        ("suite.experiments.conversion.collect", ["pretrained", "--evals", str(a_file), "--variants", "base",
                                                  "--out", str(out / "p.csv")], "pretrained needs --base-record"),
        ("suite.eval.controls", ["--mqar", str(a_file), "--out", str(out / "c.csv")], "--mqar needs --mqar-cell"),
        ("benchmarks.merge_results", ["--into", str(out), str(a_file)], "is neither a folder nor a .tar.gz archive"),
        ("benchmarks.prefill_1m", ["--device", "cpu", "--chunk", "100", "--fp8-block", "64", "--out-dir", str(out)],
         "--chunk 100 must be a multiple of --fp8-block 64"),
        ("benchmarks.prefill_gpu", ["--device", "cpu", "--lengths", "", "--out-dir", str(out)],
         "--lengths '' needs --rates"),
        ("suite.deps", ["suite.nope"], "'suite.nope' is not a module"),
    ]
    if not torch.cuda.is_available():  # a CPU machine: CUDA asked for, by an option or by the study config
        cuda_config = tmp_path / "cuda.yaml"
        cuda_config.write_text(yaml.safe_dump({**yaml.safe_load((ROOT / "profiles" / "ci.yaml").read_text()),
                                               "device": "cuda"}))
        cases += [
            ("suite.experiments.mqar.run", ["--arch", "transformer", "--size", "1M", "--device", "cuda", "--out",
                                 str(out / "m.csv")], "argument --device: 'cuda': no CUDA device on this machine"),
            ("suite.train.run", ["--config", str(cuda_config), "--arch", "orthros", *train],
             "device (--device or the config's): 'cuda': no CUDA device on this machine"),
            ("benchmarks.fla_vs_naive", ["--out-dir", str(out)], "no CUDA device: run on the GPU machine"),
        ]
    for module, argv, message in cases:
        err = _refused(importlib.import_module(module).main, argv, capsys)
        assert message in err and "Traceback" not in err, (module, argv, err)
        assert not out.exists(), (module, argv)


def test_the_config_cli_and_the_lm_eval_pass_through_refuse_bad_input(capsys, monkeypatch, tmp_path):
    from suite import config
    from suite.eval import lm_eval_cli

    assert "argument config: no study config" in _refused(config.main, ["defualt"], capsys)
    monkeypatch.setattr(sys, "argv", ["lm_eval", "--model", "hf", "--model_args", f"pretrained={tmp_path / 'none'}",
                                      "--tasks", "arc_easy"])
    with pytest.raises(SystemExit) as stop:
        lm_eval_cli.main()
    assert stop.value.code == 2 and "--model_args pretrained: checkpoint not found" in capsys.readouterr().err


@pytest.mark.parametrize("name, damage, message", [
    ("mqar.csv", "header only", "mqar.csv: a header and no rows"),
    ("ablation.csv", "header only", "ablation.csv: a header and no rows"),
    ("controls.csv", "passed=maybe", "controls.csv row 1: column 'passed' holds 'maybe'; a control either passed or "
                                     "failed: expected true or false"),
    ("niah.csv", "accuracy=NaN", "niah.csv row 1: column 'accuracy' is empty (or NaN) in a row with status 'ok'"),
])
def test_render_refuses_a_damaged_input_before_writing_anything(name, damage, message, tmp_path, capsys):
    """A header-only mqar.csv or ablation.csv crashed the figures after the tables were written; a control that
    neither passed nor failed was read as failed; a NaN accuracy in an ok NIAH row rendered as a blank. Each is
    refused, naming the file, and nothing is written."""
    from suite import render

    res, gpu = _results_copy(tmp_path)
    frame = pd.read_csv(res / name, dtype=str, keep_default_na=False)
    if damage == "header only":
        frame = frame.iloc[0:0]
    else:
        column, value = damage.split("=")
        frame.loc[0, column] = value
    frame.to_csv(res / name, index=False)
    err = _refused(render.main, ["--results", str(res), "--gpu-results", str(gpu), "--out-tables",
                                 str(tmp_path / "t"), "--out-figures", str(tmp_path / "f")], capsys)
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "t").exists() and not (tmp_path / "f").exists()
