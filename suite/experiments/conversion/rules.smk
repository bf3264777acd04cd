# The conversion experiment (suite/experiments/conversion/README.md): Table 2 in miniature. The main-size Transformer
# of every conversion seed (rule train) continues on conversion.extra_steps more batches unchanged (Base CPT) and
# converted to Orthros with its scale-offset at identity (conversion); each arm's held-out perplexity, beside the
# Transformer's own (Base), in one CSV. The same on a real pretrained LM: pretrained.smk beside this file.

CONV = STUDY["conversion"]
CONV_SEEDS = CONV.get("seeds", SEEDS)
CONV_SEED_LIST = ",".join(map(str, CONV_SEEDS))
CONV_BASE = f"{WORK}/runs/transformer/{CONV['size']}/seed{{seed}}/checkpoint"
CONV_DIR = f"{WORK}/conversion/{{variant}}/seed{{{{seed}}}}"  # .format(variant=...), then per seed
CONV_RES = f"{RES}/conversion/{{variant}}/seed{{{{seed}}}}"
CONV_COLLECT_CODE = sources("suite.experiments.conversion.collect")  # this experiment's collect steps


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


rule conversion_lm_eval:
    input:
        runs=per_seed("{res}/conversion/{{variant}}/seed{seed}/metrics.csv", CONV_SEEDS, res=RES),
        val=f"{DATA}/val.txt",
        code=LM_EVAL_CODE,
    output:
        per_seed("{res}/eval/quality/conversion_{{variant}}/seed{seed}.csv", CONV_SEEDS, res=RES),
    threads: THREADS
    resources:
        gpu=GPU_JOB,
    log:
        f"{WORK}/logs/lm_eval_conversion_{{variant}}.log",
    params:
        cfg=rule_config("conversion_lm_eval"),
        checkpoints=lambda w: " ".join(f"{WORK}/conversion/{w.variant}/seed{s}/checkpoint" for s in CONV_SEEDS),
        seeds=CONV_SEEDS,
        lm_args=LM_ARGS,
        size=CONV["size"],
    conda:
        CONDA_ENV
    shell:
        "python -m suite.eval.harness --checkpoint {params.checkpoints} --out {output} --seed {params.seeds} "
        "--tasks val_ppl {params.lm_args} --arch {wildcards.variant} --size {params.size} > {log} 2>&1"


CONV_VARIANTS = ["base", "base_cpt", "conversion"]


rule collect_conversion:
    input:
        evals=[QUALITY.format(arch="transformer", size=CONV["size"], seed=s) for s in CONV_SEEDS]
              + [f"{RES}/eval/quality/conversion_{v}/seed{s}.csv" for v in CONV_VARIANTS[1:] for s in CONV_SEEDS],
        metrics=[METRICS.format(arch="transformer", size=CONV["size"], seed=s) for s in CONV_SEEDS]
                + [f"{RES}/conversion/{v}/seed{s}/metrics.csv" for v in CONV_VARIANTS[1:] for s in CONV_SEEDS],
        code=CONV_COLLECT_CODE,
    output:
        f"{RES}/conversion.csv",
    params:
        variants=" ".join(v for v in CONV_VARIANTS for _ in CONV_SEEDS),
    log:
        f"{WORK}/logs/collect_conversion.log",
    conda:
        CONDA_ENV
    shell:
        "python -m suite.experiments.conversion.collect conversion --evals {input.evals} --metrics {input.metrics} "
        "--variants {params.variants} --out {output} 2>&1 | tee {log}"
