# Evaluation: held-out perplexity through lm-eval for every trained model, the commonsense and recall tasks
# (run when their datasets are local, else a "not run" row), NIAH and MQAR.

EVAL_CODE = MODEL_CODE + code("suite/eval")
ARCHS = STUDY["archs"]
ARCH_LIST = ",".join(ARCHS)
MAIN = STUDY["main_size"]
ABL_VARIANTS = ["orthros", "orthros_noso", "transformer"]
ABL_SIZES = STUDY["ablation_sizes"]
LM = STUDY["lm_eval"]
NIAH = STUDY["niah"]
MQAR = STUDY["mqar"]


def csv_list(values):
    return ",".join(str(v) for v in values)


rule val_ppl:
    """Held-out perplexity of one trained model, through lm-eval on a local loglikelihood_rolling task."""
    input:
        checkpoint=RUN + "/checkpoint",
        val=f"{DATA}/val.txt",
        code=EVAL_CODE,
    output:
        RES + "/eval/val_ppl/{arch}/{size}/seed{seed}.csv",
    threads: THREADS
    log:
        WORK + "/logs/val_ppl_{arch}_{size}_seed{seed}.log",
    shell:
        "{PY} suite.eval.harness --checkpoint {input.checkpoint} --tokenizer {DATA}/tokenizer --tasks val_ppl "
        "--ppl-data {input.val} --limit {LM[limit]} --profile {PROFILE} --arch {wildcards.arch} --size {wildcards.size} "
        "--seed {wildcards.seed} --out {output} > {log} 2>&1"


rule conversion_val_ppl:
    input:
        checkpoint=WORK + "/conversion/{variant}/checkpoint",
        val=f"{DATA}/val.txt",
        code=EVAL_CODE,
    output:
        RES + "/eval/val_ppl/conversion_{variant}.csv",
    threads: THREADS
    log:
        WORK + "/logs/val_ppl_conversion_{variant}.log",
    shell:
        "{PY} suite.eval.harness --checkpoint {input.checkpoint} --tokenizer {DATA}/tokenizer --tasks val_ppl "
        "--ppl-data {input.val} --limit {LM[limit]} --profile {PROFILE} --arch {wildcards.variant} "
        "--size {CONV[size]} --seed {SEED} --out {output} > {log} 2>&1"


rule downstream:
    """Commonsense (Tables 1, 2, 7) and recall (Table 3) tasks: real numbers when the datasets are local."""
    input:
        checkpoint=RUN + "/checkpoint",
        code=EVAL_CODE,
    output:
        RES + "/eval/downstream/{arch}/{size}/seed{seed}.csv",
    threads: THREADS
    log:
        WORK + "/logs/downstream_{arch}_{size}_seed{seed}.log",
    shell:
        "{PY} suite.eval.harness --checkpoint {input.checkpoint} --tokenizer {DATA}/tokenizer --tasks commonsense,recall "
        "--limit {LM[limit]} --profile {PROFILE} --arch {wildcards.arch} --size {wildcards.size} "
        "--seed {wildcards.seed} --out {output} > {log} 2>&1"


rule niah:
    """Needle in a haystack (Fig. 3): context length x depth grid on held-out (test split) text."""
    input:
        checkpoint=RUN + "/checkpoint",
        haystack=f"{DATA}/test.txt",
        code=EVAL_CODE,
    output:
        RES + "/eval/niah/{arch}/{size}/seed{seed}.csv",
    threads: THREADS
    log:
        WORK + "/logs/niah_{arch}_{size}_seed{seed}.log",
    params:
        lengths=csv_list(NIAH["lengths"]),
        depths=csv_list(NIAH["depths"]),
    shell:
        "{PY} suite.eval.niah --checkpoint {input.checkpoint} --tokenizer {DATA}/tokenizer --haystack {input.haystack} "
        "--lengths {params.lengths} --depths {params.depths} --trials {NIAH[trials]} --profile {PROFILE} "
        "--arch {wildcards.arch} --size {wildcards.size} --seed {wildcards.seed} --out {output} > {log} 2>&1"


rule mqar:
    """Multi-query associative recall (Zoology recipe): each architecture trained and tested on MQAR."""
    input:
        EVAL_CODE,
    output:
        RES + "/eval/mqar/{arch}/{size}/seed{seed}.csv",
    threads: THREADS
    log:
        WORK + "/logs/mqar_{arch}_{size}_seed{seed}.log",
    params:
        seq=csv_list(MQAR["seq_lens"]),
        kv=csv_list(MQAR["num_kv_pairs"]),
        vocab=MQAR.get("vocab_size", 8192),
    shell:
        "{PY} suite.eval.mqar --arch {wildcards.arch} --size {wildcards.size} --seq-len {params.seq} "
        "--kv-pairs {params.kv} --vocab-size {params.vocab} --steps {MQAR[steps]} --batch-size {MQAR[batch_size]} --lr {MQAR[lr]} "
        "--seed {wildcards.seed} --profile {PROFILE} --out {output} > {log} 2>&1"


def per_run(pattern, archs, sizes):
    return [pattern.format(arch=a, size=s, seed=SEED) for a in archs for s in sizes]


VAL_PPL = RES + "/eval/val_ppl/{arch}/{size}/seed{seed}.csv"
METRICS = RES + "/train/{arch}/{size}/seed{seed}/metrics.csv"


rule collect_quality:
    input:
        evals=per_run(VAL_PPL, ARCHS, [MAIN]) + per_run(RES + "/eval/downstream/{arch}/{size}/seed{seed}.csv", ARCHS, [MAIN]),
        metrics=per_run(METRICS, ARCHS, [MAIN]),
        code=code("suite/collect.py"),
    output:
        RES + "/quality.csv",
    shell:
        "{PY} suite.collect quality --evals {input.evals} --metrics {input.metrics} --out {output}"


rule collect_ablation:
    input:
        evals=per_run(VAL_PPL, ABL_VARIANTS, ABL_SIZES),
        metrics=per_run(METRICS, ABL_VARIANTS, ABL_SIZES),
        code=code("suite/collect.py"),
    output:
        RES + "/ablation.csv",
    shell:
        "{PY} suite.collect ablation --evals {input.evals} --metrics {input.metrics} --out {output}"


rule collect_conversion:
    input:
        evals=[VAL_PPL.format(arch="transformer", size=CONV["size"], seed=SEED),
               RES + "/eval/val_ppl/conversion_base_cpt.csv", RES + "/eval/val_ppl/conversion_conversion.csv"],
        metrics=[METRICS.format(arch="transformer", size=CONV["size"], seed=SEED),
                 RES + "/conversion/base_cpt/metrics.csv", RES + "/conversion/conversion/metrics.csv"],
        code=code("suite/collect.py"),
    output:
        RES + "/conversion.csv",
    shell:
        "{PY} suite.collect conversion --evals {input.evals} --metrics {input.metrics} "
        "--variants base base_cpt conversion --out {output}"


rule collect_niah:
    input:
        per_run(RES + "/eval/niah/{arch}/{size}/seed{seed}.csv", ARCHS, [MAIN]),
    output:
        RES + "/niah.csv",
    shell:
        "{PY} suite.collect concat --inputs {input} --out {output}"


rule collect_mqar:
    input:
        per_run(RES + "/eval/mqar/{arch}/{size}/seed{seed}.csv", ARCHS, [MQAR.get("size", MAIN)]),
    output:
        RES + "/mqar.csv",
    shell:
        "{PY} suite.collect concat --inputs {input} --out {output}"
