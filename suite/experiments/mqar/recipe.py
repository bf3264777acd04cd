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
