"""Merge the CSVs that several GPU commands wrote (each into its own ``$OUT``) into one results folder.

The DAG's rule perf (``benchmarks/perf_all.sh``) runs its main part (``results/gpu/perf/main``: prefill, decode
step, ...) and, optionally, Table 4 as further parts (``results/gpu/perf/table4``, ``.../hybrids``), each a command
of its own into its own folder; each writes an ``e2e.csv`` and a ``targets.csv``. For
every CSV name found in the sources, rows are merged in source order: a later source's rows replace the
earlier rows of the same key (``e2e.csv``: ``(arch, batch, input_len, output_len)``; ``prefill.csv``:
``(arch, gpus, seq_len, method)``, so a re-measured length replaces the older row whatever path either ran on;
``decode_load.csv``: ``(arch, context, batch, path, decode_attn)``; ``targets.csv``: ``(source, arch, method,
path, decode_attn)``; ``pretrained.csv``: ``(variant, seed, task, metric, num_fewshot)``, so an arm scored in a later
part joins the others; ``controls.csv``: ``(experiment, control)`` (recompute the controls of the merged rows first);
other files: the later file replaces the earlier one whole).
``rates.json`` and ``attn_choice.json`` are copied from the last source that has them.

A source is a folder or a ``.tar.gz`` archive of one.

The ``--into`` folder's own CSVs are the first source (its rows are kept unless a source replaces them), unless
it is listed among the sources, where it then takes its listed place.

Usage: ``python -m benchmarks.merge_results --into results/gpu results/gpu/perf/main [results/gpu/perf/table4
[results/gpu/perf/hybrids]]``
"""
from __future__ import annotations

import argparse
import shutil
import tarfile
import tempfile
from pathlib import Path

import pandas as pd

from suite.cli import in_path, out_folder, usage_errors
from suite.provenance import read_csv, write_csv

KEYS = {"e2e.csv": ("arch", "batch", "input_len", "output_len"), "prefill.csv": ("arch", "gpus", "seq_len", "method"),
        "decode_load.csv": ("arch", "context", "batch", "path", "decode_attn"),
        "targets.csv": ("source", "arch", "method", "path", "decode_attn"),
        # Table 2's arms scored in several parts (an arm's benchmarks in one command, another's in the next)
        "pretrained.csv": ("variant", "seed", "task", "metric", "num_fewshot"),
        # per-document counts of two arms: a recomputed cell (more seeds, or an arm scored again) replaces all its rows
        "pretrained_pairs.csv": ("key", "arm_a", "arm_b", "size", "task", "num_fewshot", "metric"),
        "controls.csv": ("experiment", "control")}


def _text(value) -> str:
    """A key cell as text; 131072.0 (written as a float because another row of its file was empty) reads as 131072."""
    text = str(value)
    try:
        number = float(text)
    except ValueError:
        return text
    return str(int(number)) if number.is_integer() else text


def _as_written(path: Path) -> pd.DataFrame:
    """A results CSV's cells as the file writes them (checked whole first), so that a merge rewrites the rows it keeps
    unchanged: no integer column turned float by an empty cell, no commit hash read as a number."""
    read_csv(path)
    return pd.read_csv(path, dtype=str, keep_default_na=False)


def _key(frame: pd.DataFrame, cols) -> pd.Series:
    return frame.reindex(columns=list(cols)).map(_text).agg("|".join, axis=1)


def merge(sources: list[Path], into: Path) -> list[Path]:
    """Merge the CSVs of ``sources`` (folders, in order) into ``into``; returns the written files.

    Every CSV is read and checked before any is written, so a bad one leaves ``into`` as it was. Raises ValueError
    when a source folder does not exist, or naming a CSV that is damaged or lacks a key column another file of its
    name has.
    """
    for src in sources:
        if not src.is_dir():
            raise ValueError(f"{src} is not a folder")
    others = [src for src in sources if src.resolve() != into.resolve()]  # the into folder alone changes nothing
    names = sorted({p.name for src in others for p in src.glob("*.csv")})
    frames = {name: {src / name: _as_written(src / name) for src in sources if (src / name).exists()}
              for name in names}
    for name, found in frames.items():
        present = {c for frame in found.values() for c in KEYS.get(name, ()) if c in frame.columns}
        for path, frame in found.items():
            missing = sorted(present - set(frame.columns))
            if missing:  # its rows would key as another file's never do: appended beside them, not replacing
                raise ValueError(f"{path} lacks the key column(s) {missing} that the other {name} files have")
    into.mkdir(parents=True, exist_ok=True)
    written = []
    for name, by_path in frames.items():
        found = list(by_path.values())
        merged = found[0]
        for frame in found[1:]:
            if name not in KEYS:
                merged = frame
                continue
            keys = _key(frame, KEYS[name])
            merged = pd.concat([merged[~_key(merged, KEYS[name]).isin(set(keys))], frame], ignore_index=True)
        write_csv(merged, into / name)
        written.append(into / name)
    for name in ("rates.json", "attn_choice.json"):
        found = [src / name for src in sources if (src / name).exists()]
        if found and found[-1].resolve() != (into / name).resolve():
            shutil.copyfile(found[-1], into / name)
            written.append(into / name)
    return written


def _unpacked(source: Path, scratch: Path) -> Path:
    """``source`` itself when it is a folder; a ``.tar.gz`` archive is extracted under ``scratch`` first.
    Raises ValueError for a path that is neither."""
    if source.is_dir():
        return source
    if source.is_file() and source.name.endswith(".tar.gz"):
        folder = scratch / f"{len(list(scratch.iterdir()))}_{source.name[:-7]}"
        try:
            with tarfile.open(source) as tar:
                tar.extractall(folder, filter="data")
        except (tarfile.TarError, OSError) as err:
            raise ValueError(f"{source} is not a readable .tar.gz archive: {err}") from None
        return folder
    raise ValueError(f"{source} is neither a folder nor a .tar.gz archive")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--into", required=True, type=out_folder, help="results folder to write (e.g. results/gpu)")
    ap.add_argument("sources", nargs="+", type=in_path, help="folders or .tar.gz archives, in order; later rows win")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        with usage_errors(ap, ValueError, tarfile.TarError):  # neither folder nor archive, or a damaged archive
            sources = [_unpacked(Path(s), Path(scratch)) for s in args.sources]
        into = Path(args.into)
        if into.is_dir() and not any(s.resolve() == into.resolve() for s in sources):
            sources.insert(0, into)  # a merge adds to the results there, it does not start them over
        with usage_errors(ap):  # a damaged CSV or one without its key columns, named; nothing written
            written = merge(sources, Path(args.into))
        for path in written:
            print(f"wrote {path}")


if __name__ == "__main__":
    main()
