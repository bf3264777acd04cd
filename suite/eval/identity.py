"""The conversion identity control, measured in the run: Orthros converted with w >= T reproduces Base's logits.

With a window at least as long as the sequence, both streams of a converted model see every past key and share every
weight with the source, and identity scale-offset leaves the queries unchanged: the two compute the same function
(:mod:`models.convert`). The check converts the base model at ``w = T`` and compares its logits with Base's on the
first ``T`` tokens of held-out text in float32 (control passes at max |delta logit| <= 1e-3). The same row records
the converted arm's own window (``--window``): how far its held-out loss over those ``T`` tokens lies above Base's
before any training, the gap continued training has to close.

The control compares T tokens only, so it could not see a source window longer than T. No such source reaches it: one
with a sliding window shorter than its positions (Mistral's ``sliding_window``, Qwen2's sliding layers) does not
convert exactly and is refused when the study config or the base model is read
(:func:`models.convert.source_problems`), and ``conversion.pretrained.identity_len`` must fit the base model's
positions (:func:`suite.config.base_model_problems`).

CLI: ``python -m suite.eval.identity --base work_dirs/gpu/models/base --data-dir work_dirs/gpu/data/english
--tokens 2048 --window 128 --out results/gpu/pretrained/identity.csv``
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from suite.cli import device_name, in_folder, out_file, positive_int, usage_errors
from suite.provenance import provenance, write_csv

THRESHOLD = 1e-3


@torch.no_grad()
def compare(base, ids: np.ndarray, window: int, device: str) -> dict:
    """Max |logit difference| between ``base`` and its Orthros conversion at w = len(ids), and the mean next-token
    loss of Base and of the conversion at ``window``, over ``ids`` (float32)."""
    from models.convert import transformer_to_orthros

    x = torch.as_tensor(np.asarray(ids, dtype=np.int64), device=device)[None]
    loss = lambda logits: float(torch.nn.functional.cross_entropy(logits[0, :-1].float(), x[0, 1:]))
    ref = base(input_ids=x).logits
    full = transformer_to_orthros(base, window_size=x.shape[1]).to(device).eval()(input_ids=x).logits
    windowed = transformer_to_orthros(base, window_size=window).to(device).eval()(input_ids=x).logits
    return {"tokens": int(x.shape[1]), "max_abs_dlogit": float((full - ref).abs().max()),
            "loss_base": loss(ref), "loss_w_eq_t": loss(full), "window": window, "loss_window": loss(windowed),
            "max_abs_dlogit_first_w": float((windowed[:, :window] - ref[:, :window]).abs().max())}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, type=in_folder,
                    help="base model folder (python -m suite.train.base_model)")
    ap.add_argument("--data-dir", required=True, type=in_folder, help="English data folder (tokens/val.npy)")
    ap.add_argument("--tokens", type=positive_int, default=2048, help="T: held-out tokens compared")
    ap.add_argument("--window", type=positive_int, default=128, help="the converted arm's own window")
    ap.add_argument("--device", type=device_name, default="cpu")
    ap.add_argument("--profile", default="smoke")
    ap.add_argument("--out", required=True, type=out_file)
    args = ap.parse_args(argv)
    from suite.data.tokenizer import check_data_dir, load_tokens
    from suite.train.base_model import read_record
    from suite.train.convert_base import load_base

    with usage_errors(ap, FileNotFoundError, NotADirectoryError, ValueError):
        check_data_dir(args.data_dir, ("val",))
        record = read_record(args.base)
    ids = load_tokens(args.data_dir, "val")[:args.tokens]
    if len(ids) < args.tokens:
        ap.error(f"--tokens {args.tokens}: the val split holds only {len(ids)}")
    start = time.time()
    row = compare(load_base(args.base).to(args.device), ids, args.window, args.device)
    from models.kernels import describe

    row = {"check": "conversion identity (w >= T vs Base, float32)", "base_model": record["name"], **row,
           "threshold": THRESHOLD, "passed": row["max_abs_dlogit"] <= THRESHOLD,
           **provenance(profile=args.profile, seed=None, dtype="float32", backend=describe(args.device),
                        device=args.device, wall_s=time.time() - start)}
    write_csv([row], args.out)
    print({k: row[k] for k in ("tokens", "max_abs_dlogit", "passed", "loss_base", "loss_window")})


if __name__ == "__main__":
    main()
