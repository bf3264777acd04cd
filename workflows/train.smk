# Training: six architectures at the main size, the SO ablation at >= 3 sizes, and the conversion experiment
# (Table 2 in miniature), each for every seed of the study. One job trains all seeds of one (arch, size) one after
# the other (one process start instead of one per seed). Checkpoints live under work_dir (git-ignored) and are not
# rule outputs, so an interrupted job resumes from its last checkpoint on the next run (docs/reproducing.md);
# results/ gets the metrics and loss curves. A job that Snakemake reruns because its code, inputs
# or config values changed starts its runs afresh (--restart-if-changed: the run folder's run_config.json differs).

RUN = f"{WORK}/runs/{{arch}}/{{size}}/seed{{seed}}"
TRAIN_CODE = sources("suite.train.run")
SEED_LIST = ",".join(map(str, SEEDS))


def run_dir(arch, size, seed=SEED):
    return RUN.format(arch=arch, size=size, seed=seed)


def per_seed(pattern, seeds=SEEDS, **fixed):
    return [pattern.format(seed=s, **fixed) for s in seeds]


def copy_results(out_pattern, res_pattern, seeds):
    """Shell that copies each seed's metrics.csv and loss.csv from the run folder into results/."""
    return " && ".join(f"cp {out_pattern.format(seed=s)}/metrics.csv {res_pattern.format(seed=s)}/metrics.csv && "
                       f"cp {out_pattern.format(seed=s)}/loss.csv {res_pattern.format(seed=s)}/loss.csv"
                       for s in seeds)


# train.gpus > 1 (cuda profiles): data-parallel training, one torchrun process per GPU of one host (FSDP2)
TRAIN_GPUS = STUDY["train"].get("gpus", 1) if STUDY["device"] == "cuda" else 0


def train_launch(wildcards, resources):
    return f"{PY} torch.distributed.run --standalone --nproc_per_node {resources.gpu} -m" if resources.gpu > 1 else PY


rule train:
    input:
        rules.tokenizer.output,
        TRAIN_CODE,
    output:
        metrics=per_seed("{res}/train/{{arch}}/{{size}}/seed{seed}/metrics.csv", res=RES),
        loss=per_seed("{res}/train/{{arch}}/{{size}}/seed{seed}/loss.csv", res=RES),
    params:
        cfg=lambda w: rule_config("train", w.arch),
        out=lambda w: f"{WORK}/runs/{w.arch}/{w.size}/seed{{seed}}",
        copy_back=lambda w: copy_results(f"{WORK}/runs/{w.arch}/{w.size}/seed{{seed}}",
                                    f"{RES}/train/{w.arch}/{w.size}/seed{{seed}}", SEEDS),
        launch=train_launch,
    threads: THREADS
    resources:
        gpu=TRAIN_GPUS,
    log:
        f"{WORK}/logs/train_{{arch}}_{{size}}.log",
    shell:
        "{params.launch} suite.train.run {CFG} --data-dir {DATA} --out-dir '{params.out}' --arch {wildcards.arch} "
        "--size {wildcards.size} --seed {SEED_LIST} --restart-if-changed --no-progress > {log} 2>&1 && {params.copy_back}"


CONV = STUDY["conversion"]
CONV_SEEDS = CONV.get("seeds", SEEDS)
CONV_SEED_LIST = ",".join(map(str, CONV_SEEDS))
CONV_BASE = f"{WORK}/runs/transformer/{CONV['size']}/seed{{seed}}/checkpoint"
CONV_DIR = f"{WORK}/conversion/{{variant}}/seed{{{{seed}}}}"  # .format(variant=...), then per seed
CONV_RES = f"{RES}/conversion/{{variant}}/seed{{{{seed}}}}"


rule conversion_cpt:
    """Base CPT: the trained Transformer continues on the same extra tokens, architecture unchanged."""
    input:
        base=per_seed(f"{RES}/train/transformer/{CONV['size']}/seed{{seed}}/metrics.csv", CONV_SEEDS),
        code=TRAIN_CODE,
    output:
        metrics=per_seed(f"{RES}/conversion/base_cpt/seed{{seed}}/metrics.csv", CONV_SEEDS),
        loss=per_seed(f"{RES}/conversion/base_cpt/seed{{seed}}/loss.csv", CONV_SEEDS),
    params:
        cfg=rule_config("conversion"),
        out=lambda w: CONV_DIR.format(variant="base_cpt"),
        copy_back=lambda w: copy_results(CONV_DIR.format(variant="base_cpt"), CONV_RES.format(variant="base_cpt"), CONV_SEEDS),
        launch=train_launch,
    threads: THREADS
    resources:
        gpu=TRAIN_GPUS,
    log:
        f"{WORK}/logs/conversion_base_cpt.log",
    shell:
        "{params.launch} suite.train.run {CFG} --recipe conversion --data-dir {DATA} --out-dir '{params.out}' "
        "--model '{CONV_BASE}' --size {CONV[size]} --seed {CONV_SEED_LIST} --restart-if-changed --no-progress > {log} 2>&1 && {params.copy_back}"


rule conversion_orthros:
    """Conversion: the same trained Transformer converted to Orthros (SO at identity), same extra tokens."""
    input:
        base=per_seed(f"{RES}/train/transformer/{CONV['size']}/seed{{seed}}/metrics.csv", CONV_SEEDS),
        code=TRAIN_CODE,
    output:
        metrics=per_seed(f"{RES}/conversion/conversion/seed{{seed}}/metrics.csv", CONV_SEEDS),
        loss=per_seed(f"{RES}/conversion/conversion/seed{{seed}}/loss.csv", CONV_SEEDS),
    params:
        cfg=rule_config("conversion", "orthros"),
        out=lambda w: CONV_DIR.format(variant="conversion"),
        copy_back=lambda w: copy_results(CONV_DIR.format(variant="conversion"), CONV_RES.format(variant="conversion"),
                                    CONV_SEEDS),
        launch=train_launch,
    threads: THREADS
    resources:
        gpu=TRAIN_GPUS,
    log:
        f"{WORK}/logs/conversion_orthros.log",
    shell:
        "{params.launch} suite.train.run {CFG} --recipe conversion --data-dir {DATA} --out-dir '{params.out}' "
        "--arch orthros --size {CONV[size]} --init-from '{CONV_BASE}' --seed {CONV_SEED_LIST} --restart-if-changed --no-progress "
        "> {log} 2>&1 && {params.copy_back}"
