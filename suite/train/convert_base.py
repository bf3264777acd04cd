"""Arm 2 of Table 2: the pretrained base model converted to Orthros, no training (identity scale-offset, window w).

The folder written here is what the conversion arm (arm 4) continues training from, and what the benchmarks score as
"Orthros, converted with no training". :mod:`models.convert` does the conversion; this module reads the base
model's folder (:mod:`suite.train.base_model`) and writes an Orthros folder of the same layout, its
``base_model.json`` naming the conversion.

CLI: ``python -m suite.train.convert_base --base work_dirs/gpu/models/base --window 128
--out work_dirs/gpu/models/converted``
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from suite.base_source import named_failure
from suite.cli import in_folder, out_folder, positive_int
from suite.train.base_model import META, read_record, save_folder
from suite.train.checkpoint import load_model


def load_base(base_dir: str | Path, dtype: str = "float32"):
    """The base model of a prepared folder, in eval mode (:func:`suite.train.checkpoint.load_model`)."""
    with named_failure(f"base model folder {base_dir} does not load"):
        return load_model(base_dir, dtype=dtype, tokenizer=False)[0]


def convert(base_dir: str | Path, out_dir: str | Path, window: int) -> dict:
    """Write the Orthros conversion of ``base_dir`` (window ``window``, identity SO) to ``out_dir``; return its
    record. Raises ValueError (from :func:`models.convert.orthros_config_from`) for a source that does not convert."""
    from transformers import AutoTokenizer

    from models.convert import transformer_to_orthros

    base = read_record(base_dir)
    model = transformer_to_orthros(load_base(base_dir), window_size=window)
    record = base | {"name": f"{base['name']} -> Orthros (w={window}, identity scale-offset)", "window": window,
                     "model_type": model.config.model_type, "n_params": sum(p.numel() for p in model.parameters())}
    save_folder(model, AutoTokenizer.from_pretrained(base_dir), out_dir, record)
    return record


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, type=in_folder,
                    help="base model folder (python -m suite.train.base_model)")
    ap.add_argument("--window", required=True, type=positive_int, help="Orthros window w (paper 128)")
    ap.add_argument("--out", required=True, type=out_folder)
    args = ap.parse_args(argv)
    if not (Path(args.base) / META).is_file():
        ap.error(f"--base {args.base}: no {META} (prepare it with python -m suite.train.base_model)")
    try:
        record = convert(args.base, args.out, args.window)
    except ValueError as err:
        sys.exit(f"error: {err}")
    print(json.dumps(record))


if __name__ == "__main__":
    main()
