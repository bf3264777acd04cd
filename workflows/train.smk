# Training: every arch of the study at the main size (the LM comparison) and the SO ablation's variants at every
# ablation size, each for every seed of the study; the conversion experiment's continued runs start from these
# (suite/experiments/conversion/rules.smk). One job trains all seeds of one (arch, size) one after the other (one
# process start instead of one per seed). Checkpoints live under work_dir (git-ignored) and are not rule outputs, so an
# interrupted job resumes from its last checkpoint on the next run (docs/reproducing.md); results/ gets the metrics and
# loss curves. A job that Snakemake reruns because its code, inputs or config values changed starts its runs afresh
# (--restart-if-changed: the run folder's run_config.json differs).

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
