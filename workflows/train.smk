# Training: six architectures at the main size, the SO ablation at >= 3 sizes, and the conversion experiment
# (Table 2 in miniature), each for every seed of the study. One job trains all seeds of one (arch, size) one after
# the other (one process start instead of one per seed). Checkpoints live under work_dir (git-ignored) and are not
# rule outputs, so an interrupted job resumes from its last checkpoint on the next run (docs/reproducing.md);
# results/ gets the metrics and loss curves. A job that Snakemake reruns because its code, inputs
# or config values changed starts its runs afresh (--restart-if-changed: the run folder's run_config.json differs).

RUN = f"{WORK}/runs/{{arch}}/{{size}}/seed{{seed}}"
TRAIN_CODE = sources("suite.train.run")
SEED_LIST = ",".join(map(str, SEEDS))

# train.gpus > 1 (cuda profiles): data-parallel training, one torchrun process per GPU of one host (FSDP2)
TRAIN_GPUS = STUDY["train"].get("gpus", 1) if STUDY["device"] == "cuda" else 0


rule train:
    input:
        rules.tokenizer.output,
        TRAIN_CODE,
    output:
        metrics=per_seed("{res}/train/{{arch}}/{{size}}/seed{seed}/metrics.csv", SEEDS, res=RES),
        loss=per_seed("{res}/train/{{arch}}/{{size}}/seed{seed}/loss.csv", SEEDS, res=RES),
    params:
        cfg=lambda w: rule_config("train", w.arch),
        study=STUDY_ARG,
        data=lambda w: DATA,
        seeds=SEED_LIST,
        out=lambda w: f"{WORK}/runs/{w.arch}/{w.size}/seed{{seed}}",
        copy_back=lambda w: copy_results(f"{WORK}/runs/{w.arch}/{w.size}/seed{{seed}}",
                                         f"{RES}/train/{w.arch}/{w.size}/seed{{seed}}", SEEDS),
        launch=train_launch,
    threads: THREADS
    resources:
        gpu=TRAIN_GPUS,
    log:
        f"{WORK}/logs/train_{{arch}}_{{size}}.log",
    conda:
        CONDA_ENV
    shell:
        "{params.launch} suite.train.run --config {params.study} --data-dir {params.data} --out-dir '{params.out}' "
        "--arch {wildcards.arch} --size {wildcards.size} --seed {params.seeds} --restart-if-changed --no-progress "
        "> {log} 2>&1 && {params.copy_back}"


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
        study=STUDY_ARG,
        data=lambda w: DATA,
        size=CONV["size"],
        seeds=CONV_SEED_LIST,
        model=lambda w: CONV_BASE,  # "{seed}": filled in by the command, per seed
        out=lambda w: CONV_DIR.format(variant="base_cpt"),
        copy_back=lambda w: copy_results(CONV_DIR.format(variant="base_cpt"), CONV_RES.format(variant="base_cpt"),
                                         CONV_SEEDS),
        launch=train_launch,
    threads: THREADS
    resources:
        gpu=TRAIN_GPUS,
    log:
        f"{WORK}/logs/conversion_base_cpt.log",
    conda:
        CONDA_ENV
    shell:
        "{params.launch} suite.train.run --config {params.study} --recipe conversion --data-dir {params.data} "
        "--out-dir '{params.out}' --model '{params.model}' --size {params.size} --seed {params.seeds} "
        "--restart-if-changed --no-progress > {log} 2>&1 && {params.copy_back}"


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
        study=STUDY_ARG,
        data=lambda w: DATA,
        size=CONV["size"],
        seeds=CONV_SEED_LIST,
        model=lambda w: CONV_BASE,  # "{seed}": filled in by the command, per seed
        out=lambda w: CONV_DIR.format(variant="conversion"),
        copy_back=lambda w: copy_results(CONV_DIR.format(variant="conversion"), CONV_RES.format(variant="conversion"),
                                         CONV_SEEDS),
        launch=train_launch,
    threads: THREADS
    resources:
        gpu=TRAIN_GPUS,
    log:
        f"{WORK}/logs/conversion_orthros.log",
    conda:
        CONDA_ENV
    shell:
        "{params.launch} suite.train.run --config {params.study} --recipe conversion --data-dir {params.data} "
        "--out-dir '{params.out}' --arch orthros --size {params.size} --init-from '{params.model}' "
        "--seed {params.seeds} --restart-if-changed --no-progress > {log} 2>&1 && {params.copy_back}"
