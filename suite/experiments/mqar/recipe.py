"""A study config's MQAR recipe as options of ``python -m suite.experiments.mqar.run`` (standard library only: the
Snakemake DAG imports it at every parse)."""
from __future__ import annotations


def mqar_cli_args(mqar: dict) -> list[str]:
    """The ``python -m suite.experiments.mqar.run`` options of a study config's recipe (all but --arch, --size, --seed,
    --device, --dtype, --profile, --out), as the DAG's ``mqar`` rule and ``tools/offline_gpu/mqar_control.py`` pass
    them. A per-seq_len ``train_kv`` becomes ``--train-kv 16,32/32,64`` (one group per seq_len); the loss is logged
    every steps / 40 steps."""
    def csv(values):
        return ",".join(map(str, values))

    args = ["--seq-len", csv(mqar["seq_lens"]), "--kv-pairs", csv(mqar["num_kv_pairs"])]
    train = mqar.get("train_kv")
    if train:
        args += ["--train-kv", "/".join(csv(g) for g in train) if isinstance(train[0], list) else csv(train)]
    args += ["--window", str(mqar["window"]), "--vocab-size", str(mqar["vocab_size"]), "--steps", str(mqar["steps"]),
             "--batch-size", str(mqar["batch_size"]), "--lr", str(mqar["lr"]),
             "--weight-decay", str(mqar.get("weight_decay", 0.1)), "--num-test", str(mqar.get("num_test", 1000)),
             # ~40 loss lines a job: a run that misses its control shows in its log whether it was still learning
             "--log-every", str(max(1, mqar["steps"] // 40))]
    if mqar.get("warmup"):
        args += ["--warmup", str(mqar["warmup"])]
    if mqar.get("first_cell_frac"):
        args += ["--first-cell-frac", str(mqar["first_cell_frac"])]
    if mqar.get("tie_embeddings"):
        args.append("--tie-embeddings")
    if mqar.get("constant_tokens"):
        args.append("--constant-tokens")
    return args


# The GLA probe's variants (suite.experiments.mqar.gla_probe): FLA's reference GLA layer, and the same layer with
# FLA's short convolution, the token shift that MQAR needs and that layer lacks (README.md, "GLA on MQAR").
GLA_PROBE_VARIANTS = {"gla": [], "gla_conv": ["gla_short_conv=true"]}


def gla_probe_args(mqar: dict, cell: tuple[int, int], variant: str, lr: float) -> list[str]:
    """The ``python -m suite.experiments.mqar.run`` options of one GLA probe run (all but --size, --seed, --device,
    --dtype, --profile, --out): the study's recipe trained on the control ``cell`` ``(seq_len, pairs)`` alone and
    evaluated at its seq_len's pair counts, at rate ``lr``; ``gla_conv`` adds its override and labels its rows."""
    if variant not in GLA_PROBE_VARIANTS:
        raise ValueError(f"GLA probe variant {variant!r}: expected one of {sorted(GLA_PROBE_VARIANTS)}")
    seq_len, pairs = cell
    evaluated = sorted({pairs, *(k for k in mqar["num_kv_pairs"] if 4 * k <= seq_len)})
    recipe = {**mqar, "seq_lens": [seq_len], "train_kv": [pairs], "num_kv_pairs": evaluated, "lr": lr}
    override = GLA_PROBE_VARIANTS[variant]
    label = ["--override", *override, "--label-arch", variant] if override else []
    return ["--arch", "gla", *label, *mqar_cli_args(recipe)]
