# The SO ablation (suite/experiments/so_ablation/README.md): Table 7 and Fig. 2 in miniature. Every variant of
# ablation_variants (Orthros, Orthros without its query scale-offset, the Transformer) trained (rule train) and
# evaluated (rule lm_eval) at every ablation size and seed; their rows in one CSV, and every two variants' outcomes on
# the same benchmark documents in another.

ABL_VARIANTS = STUDY["ablation_variants"]
ABL_SIZES = STUDY["ablation_sizes"]
ABL_COLLECT_CODE = sources("suite.experiments.so_ablation.collect")


rule collect_ablation:
    input:
        evals=runs(QUALITY, ABL_VARIANTS, ABL_SIZES, SEEDS),
        metrics=runs(METRICS, ABL_VARIANTS, ABL_SIZES, SEEDS),
        code=ABL_COLLECT_CODE,
    output:
        f"{RES}/ablation.csv",
    log:
        f"{WORK}/logs/collect_ablation.log",
    conda:
        CONDA_ENV
    shell:
        "python -m suite.experiments.so_ablation.collect --evals {input.evals} --metrics {input.metrics} "
        "--out {output} 2>&1 | tee {log}"


rule collect_ablation_pairs:
    input:
        docs=runs(QUALITY_DOCS, ABL_VARIANTS, ABL_SIZES, SEEDS),
        code=COLLECT_CODE,
    output:
        f"{RES}/ablation_pairs.csv",
    log:
        f"{WORK}/logs/collect_ablation_pairs.log",
    conda:
        CONDA_ENV
    shell:
        "python -m suite.collect pairs --inputs {input.docs} --key arch --out {output} 2>&1 | tee {log}"
