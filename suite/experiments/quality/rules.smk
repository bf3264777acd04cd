# The LM comparison (suite/experiments/quality/README.md): Table 1 in miniature. Every arch of `archs` trained (rule
# train) and evaluated (rule lm_eval: held-out perplexity and the paper's benchmarks) at the main size for every seed;
# their rows in one CSV with each run's scale, and every two archs' outcomes on the same benchmark documents in another.


rule collect_quality:
    input:
        evals=runs(QUALITY, ARCHS, [MAIN], SEEDS),
        metrics=runs(METRICS, ARCHS, [MAIN], SEEDS),
        code=COLLECT_CODE,
    output:
        f"{RES}/quality.csv",
    log:
        f"{WORK}/logs/collect_quality.log",
    conda:
        CONDA_ENV
    shell:
        "python -m suite.collect quality --evals {input.evals} --metrics {input.metrics} --out {output} "
        "2>&1 | tee {log}"


rule collect_quality_pairs:
    """Every two archs' outcomes on the same benchmark documents (suite.collect pairs), for per-document tests."""
    input:
        docs=runs(QUALITY_DOCS, ARCHS, [MAIN], SEEDS),
        code=COLLECT_CODE,
    output:
        f"{RES}/quality_pairs.csv",
    log:
        f"{WORK}/logs/collect_quality_pairs.log",
    conda:
        CONDA_ENV
    shell:
        "python -m suite.collect pairs --inputs {input.docs} --key arch --out {output} 2>&1 | tee {log}"
