"""Multi-query associative recall (MQAR, Zoology recipe): train, then evaluate at every cell; ``mqar.csv`` rows.

The modules beside this one: the data generator (:mod:`.data`: sequence layout, labels, shared query slots), the
accuracy (:mod:`.eval`: near and far answers, the latter beyond a sliding-window model's receptive field), training
(:mod:`.train`) and the grid (:mod:`.grid`); a study config's recipe as options of this command: :mod:`.recipe`.

Training (Zoology's recipe): one model per (arch, size) is trained on a mixture of cells ``(seq_len, pairs)``, one
cell per step in turn, and evaluated at every cell of the grid; without ``--train-kv`` one model is trained per cell.

CLI (the default profile's cell: train at 4 pairs, evaluate at 2-16)::

    python -m suite.experiments.mqar.run --arch orthros --size 1M --seq-len 64 --train-kv 4 --kv-pairs 2,4,8,16 \\
        --window 8 --vocab-size 256 --steps 800 --lr 3e-3 --out results/default/eval/mqar/orthros/1M/seed42.csv

A grid (the gpu profile): ``--size d64 --seq-len 128,256,512,1024 --kv-pairs 8,16,32,64,128,256 --train-kv
8/16,32,64/16,32,64,128/16,32,64,128,256`` trains one model on those 13 cells and evaluates it at all 18 cells with
``4 * pairs <= seq_len``.
"""
from __future__ import annotations

import argparse
import functools

from suite.archs import WINDOWED_ARCHS
from suite.cli import (
    config_values,
    device_name,
    fraction,
    int_list,
    nonnegative_float,
    nonnegative_int,
    out_file,
    positive_float,
    positive_int,
    positive_ints,
    usage_errors,
)
from suite.common import arch_name, size_name
from suite.config import warmup_problem
from suite.experiments.mqar.grid import run_grid, train_kv_per_seq_len
from suite.experiments.mqar.train import llama_factory
from suite.provenance import write_csv


def _flat(groups: list) -> list[int]:
    return [kv for g in groups for kv in (g if isinstance(g, list) else [g])]


def kv_groups(text: str) -> list[int] | list[list[int]]:
    """``--train-kv``: ``"4,8"`` (the same pair counts at every seq_len) -> [4, 8]; ``"16,32/32,64"`` (one
    comma-separated group per seq_len, ``/`` between groups, a group may be empty) -> [[16, 32], [32, 64]]."""
    if "/" not in text:
        return _int_list(text)
    return [_int_list(group) for group in text.split("/")]


def _int_list(text: str) -> list[int]:
    return int_list(text, allow_empty=True, error=argparse.ArgumentTypeError)


def _seq_lens(text: str) -> list[int]:
    """argparse ``type=`` of ``--seq-len``: lengths >= 2, each even (a sequence is key-value pairs)."""
    lengths = int_list(text, minimum=2, error=argparse.ArgumentTypeError)
    odd = [t for t in lengths if t % 2]
    if odd:
        raise argparse.ArgumentTypeError(f"lengths must be even (a sequence is key-value pairs), got {odd}")
    return lengths


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--arch", required=True, type=functools.partial(arch_name, extra=("llama",)),
                   help="registry arch (orthros, transformer, swa, gdn, gla, retnet) or 'llama' for the built-in "
                        "small Llama reference")
    p.add_argument("--size", type=size_name, required=True, help="model size name (models.sizes)")
    p.add_argument("--override", nargs="+", default=[], metavar="KEY=VALUE",
                   help="model config values (read as YAML), e.g. gla_short_conv=true; needs --label-arch")
    p.add_argument("--label-arch", default=None,
                   help="arch column of the rows (default --arch); required with --override, so that a variant's "
                        "rows never read as the arch's own")
    p.add_argument("--seq-len", type=_seq_lens, default=[64, 128, 256])
    p.add_argument("--kv-pairs", type=positive_ints, default=[4, 8, 16, 32, 64], help="pair counts evaluated")
    p.add_argument("--train-kv", type=kv_groups, default=None,
                   help="train one model on the mixture of these cells, evaluated at every cell: pair counts used at "
                        "every seq_len where they fit ('4,8'), or one group per seq_len ('16,32/32,64/64'); default: "
                        "one model per cell")
    p.add_argument("--window", type=positive_int, default=None,
                   help="sliding window w of orthros/orthros_noso/swa (default: the arch's own); also sets the "
                        "near/far split at num_layers * (w - 1) for every arch")
    p.add_argument("--tie-embeddings", action="store_true",
                   help="share the input embedding and the output head (Zoology's models do; default: untied)")
    p.add_argument("--steps", type=positive_int, default=2000)
    p.add_argument("--vocab-size", type=positive_int, default=8192)
    p.add_argument("--batch-size", type=positive_int, default=64)
    p.add_argument("--lr", type=positive_float, default=1e-3)
    p.add_argument("--first-cell-frac", type=fraction, default=0.0,
                   help="train the first FRAC of the steps on the mixture's first cell alone (the first --seq-len with "
                        "its first --train-kv count: the controls' cell), then cycle through the mixture (default 0)")
    p.add_argument("--constant-tokens", action="store_true",
                   help="rows a step scale as 1/seq_len: --batch-size rows at the mixture's shortest seq_len "
                        "(Zoology's batch sizes); default: --batch-size rows at every seq_len")
    p.add_argument("--weight-decay", type=nonnegative_float, default=0.1)
    p.add_argument("--warmup", type=nonnegative_int, default=0,
                   help="linear learning-rate warmup over the first N steps, then the cosine decay (default 0)")
    p.add_argument("--stop-after", type=positive_int, default=None,
                   help="train only the first N steps of the --steps schedule, then evaluate (calibration of the "
                        "schedule's early phase; default: all --steps)")
    p.add_argument("--num-test", type=positive_int, default=1000)
    p.add_argument("--seed", type=nonnegative_int, default=0)
    p.add_argument("--device", type=device_name, default="cpu")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"],
                   help="autocast dtype (weights stay float32)")
    p.add_argument("--profile", default="smoke")
    p.add_argument("--log-every", type=nonnegative_int, default=0,
                   help="print the training loss every N steps (0: never)")
    p.add_argument("--out", required=True, type=out_file,
                   help="CSV path, e.g. results/<profile>/eval/mqar/<arch>/<size>/seed<s>.csv")
    a = p.parse_args(argv)
    if a.first_cell_frac >= 1.0:
        p.error(f"--first-cell-frac {a.first_cell_frac} must be in [0, 1)")
    if a.stop_after is not None and a.stop_after > a.steps:
        p.error(f"--stop-after {a.stop_after} must be <= --steps {a.steps}")
    if warmup_problem(a.warmup, a.steps, "--warmup", "--steps"):
        p.error(warmup_problem(a.warmup, a.steps, "--warmup", "--steps"))
    try:
        if a.train_kv is not None:
            train_kv_per_seq_len(a.seq_len, a.train_kv)
    except ValueError as err:
        p.error(f"--train-kv: {err}")
    counts = [kv for kv in a.kv_pairs + _flat(a.train_kv or []) if 4 * kv <= max(a.seq_len)]  # cells that run
    if counts and max(counts) >= a.vocab_size // 2 - 1:  # keys and values are drawn from halves of the vocabulary
        p.error(f"--vocab-size {a.vocab_size} is too small for {max(counts)} distinct keys (pairs must be below "
                f"vocab_size / 2 - 1)")
    if a.override and not a.label_arch:
        p.error(f"--override {' '.join(a.override)} changes the {a.arch} model: name the variant with --label-arch")
    with usage_errors(p):
        extra = config_values(a.override)
    layers = None
    if a.arch == "llama":
        if extra:
            p.error("--override: the built-in llama reference takes no config values")
        if a.tie_embeddings:
            p.error("--tie-embeddings: the built-in llama reference is untied")
        factory = llama_factory(max_len=max(a.seq_len))
    else:
        from models.registry import build, make_config
        from models.sizes import get_size

        layers = get_size(a.size).num_hidden_layers
        overrides = {"window_size": a.window} if a.window and a.arch in WINDOWED_ARCHS else {}
        if a.tie_embeddings:
            overrides["tie_word_embeddings"] = True
        overrides.update(extra)
        with usage_errors(p):  # a key no config field reads is refused here, before any training
            make_config(a.arch, a.size, vocab_size=a.vocab_size, **overrides)
        factory = functools.partial(build, a.arch, a.size, **overrides)  # factory(vocab_size=...)
    rows = run_grid(factory, a.seq_len, a.kv_pairs, a.steps, arch=a.label_arch or a.arch, size=a.size,
                    profile=a.profile, seed=a.seed, device=a.device, dtype=a.dtype, train_kv=a.train_kv,
                    window=a.window, num_layers=layers, vocab_size=a.vocab_size, batch_size=a.batch_size, lr=a.lr,
                    weight_decay=a.weight_decay, num_test=a.num_test, log_every=a.log_every,
                    first_cell_frac=a.first_cell_frac, constant_tokens=a.constant_tokens, warmup=a.warmup,
                    stop_after=a.stop_after)
    write_csv(rows, a.out)
    for row in rows:
        print(row["seq_len"], row["num_kv_pairs"], row["accuracy"], row.get("accuracy_far"), row["status"])


if __name__ == "__main__":
    main()
