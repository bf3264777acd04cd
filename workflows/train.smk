# Training: six architectures at the main size, the SO ablation at >= 3 sizes, and the conversion
# experiment (Table 2 in miniature). Checkpoints live under work_dir (git-ignored); results/ gets the
# metrics and loss curves.

RUN = WORK + "/runs/{arch}/{size}/seed{seed}"
TRAIN_CODE = MODEL_CODE + code("suite/train", "suite/data")


def run_dir(arch, size, seed=SEED):
    return RUN.format(arch=arch, size=size, seed=seed)


# train.gpus > 1 (cuda profiles): data-parallel training, one torchrun process per GPU of one host (FSDP2)
TRAIN_GPUS = STUDY["train"].get("gpus", 1) if STUDY["device"] == "cuda" else 0


def train_launch(wildcards, resources):
    return f"{PY} torch.distributed.run --standalone --nproc_per_node {resources.gpu} -m" if resources.gpu > 1 else PY


rule train:
    input:
        rules.tokenizer.output,
        TRAIN_CODE,
    output:
        metrics=RES + "/train/{arch}/{size}/seed{seed}/metrics.csv",
        loss=RES + "/train/{arch}/{size}/seed{seed}/loss.csv",
        checkpoint=directory(RUN + "/checkpoint"),
    params:
        out=RUN,
        launch=train_launch,
    threads: THREADS
    resources:
        gpu=TRAIN_GPUS,
    log:
        WORK + "/logs/train_{arch}_{size}_seed{seed}.log",
    shell:
        "{params.launch} suite.train.run {CFG} --data-dir {DATA} --out-dir {params.out} --arch {wildcards.arch} "
        "--size {wildcards.size} --seed {wildcards.seed} > {log} 2>&1 "
        "&& cp {params.out}/metrics.csv {output.metrics} && cp {params.out}/loss.csv {output.loss}"


CONV = STUDY["conversion"]
CONV_BASE = run_dir("transformer", CONV["size"]) + "/checkpoint"
CONV_DIR = WORK + "/conversion/{variant}"


rule conversion_cpt:
    """Base CPT: the trained Transformer continues on the same extra tokens, architecture unchanged."""
    input:
        base=CONV_BASE,
        code=TRAIN_CODE,
    output:
        metrics=RES + "/conversion/base_cpt/metrics.csv",
        loss=RES + "/conversion/base_cpt/loss.csv",
        checkpoint=directory(CONV_DIR.format(variant="base_cpt") + "/checkpoint"),
    params:
        out=CONV_DIR.format(variant="base_cpt"),
        launch=train_launch,
    threads: THREADS
    resources:
        gpu=TRAIN_GPUS,
    log:
        WORK + "/logs/conversion_base_cpt.log",
    shell:
        "{params.launch} suite.train.run {CFG} --recipe conversion --data-dir {DATA} --out-dir {params.out} "
        "--model {input.base} --size {CONV[size]} > {log} 2>&1 "
        "&& cp {params.out}/metrics.csv {output.metrics} && cp {params.out}/loss.csv {output.loss}"


rule conversion_orthros:
    """Conversion: the same trained Transformer converted to Orthros (SO at identity), same extra tokens."""
    input:
        base=CONV_BASE,
        code=TRAIN_CODE,
    output:
        metrics=RES + "/conversion/conversion/metrics.csv",
        loss=RES + "/conversion/conversion/loss.csv",
        checkpoint=directory(CONV_DIR.format(variant="conversion") + "/checkpoint"),
    params:
        out=CONV_DIR.format(variant="conversion"),
        launch=train_launch,
    threads: THREADS
    resources:
        gpu=TRAIN_GPUS,
    log:
        WORK + "/logs/conversion_orthros.log",
    shell:
        "{params.launch} suite.train.run {CFG} --recipe conversion --data-dir {DATA} --out-dir {params.out} "
        "--arch orthros --size {CONV[size]} --init-from {input.base} > {log} 2>&1 "
        "&& cp {params.out}/metrics.csv {output.metrics} && cp {params.out}/loss.csv {output.loss}"
