# NIAH (suite/experiments/niah/README.md): needle in a haystack, the paper's Fig. 3. A dedicated retrieval run per arch
# of niah.archs and seed of niah.seeds (default: the study's first seed), then the context length x depth grid on
# held-out text; their rows in one CSV, the other archs 'not run'.
from suite.config import curriculum_arg

NIAH = STUDY["niah"]
NIAH_CODE = sources("suite.experiments.niah.run")
NIAH_SEEDS = NIAH.get("seeds", [SEED])
NIAH_OUT = f"{RES}/eval/niah/{{arch}}/{NIAH['size']}/seed{{seed}}.csv"


rule niah:
    """Needle in a haystack (Fig. 3): a dedicated retrieval run per arch and seed, then the context length x depth
    grid on held-out (test split) text."""
    input:
        tokens=rules.tokenizer.output,
        haystack=f"{DATA}/test.txt",
        code=NIAH_CODE,
    output:
        NIAH_OUT,
    wildcard_constraints:
        seed=r"\d+",
    threads: THREADS
    resources:
        gpu=GPU_JOB,
    log:
        f"{WORK}/logs/niah_{{arch}}_seed{{seed}}.log",
    params:
        cfg=lambda w: rule_config("niah", w.arch),
        study=STUDY_ARG,
        data=lambda w: DATA,
        niah={key: NIAH[key] for key in ("size", "format", "train_len", "steps", "batch_size", "lr", "trials")},
        run=SINGLE_RUN,
        lengths=csv_list(NIAH["lengths"]),
        depths=csv_list(NIAH["depths"]),
        curriculum=f"--curriculum {curriculum_arg(NIAH['curriculum'])}" if NIAH.get("curriculum") else "",
        queries=NIAH.get("queries", 3),
        replay=NIAH.get("replay", 0.0),
        rope_theta=f"--rope-theta {NIAH['rope_theta']}" if "rope_theta" in NIAH else "",
        schedule=f"--schedule {NIAH['schedule']}" if "schedule" in NIAH else "",
        lm_weight=f"--lm-weight {NIAH['lm_weight']}" if NIAH.get("lm_weight") else "",
        value_digits=f"--value-digits {NIAH['value_digits']} " if "value_digits" in NIAH else "",
        # the trained model, kept so that a rerun after a cut evaluation does not train again (suite.experiments.niah.saved)
        saved=lambda w: f"{WORK}/niah_models/{w.arch}/{NIAH['size']}/seed{w.seed}",
    conda:
        CONDA_ENV
    shell:
        "python -m suite.experiments.niah.run --arch {wildcards.arch} --size {params.niah[size]} --config {params.study} "
        "--data-dir {params.data} --haystack {input.haystack} --format {params.niah[format]} {params.value_digits}"
        "--train-len {params.niah[train_len]} --steps {params.niah[steps]} --batch-size {params.niah[batch_size]} "
        "--lr {params.niah[lr]} --queries {params.queries} --replay {params.replay} {params.rope_theta} "
        "{params.schedule} {params.lm_weight} {params.curriculum} --lengths {params.lengths} --depths {params.depths} "
        "--trials {params.niah[trials]} --seed {wildcards.seed} --device {params.run[device]} "
        "--dtype {params.run[dtype]} --profile {params.run[profile]} --no-progress --save-model {params.saved} "
        "--out {output} > {log} 2>&1"


NIAH_ARCHS = [a for a in ARCHS if a in NIAH["archs"]]
NIAH_SKIPPED = " ".join(f"'{a}=not run: not in niah.archs of the {PROFILE} profile'" for a in ARCHS
                        if a not in NIAH_ARCHS)


rule collect_niah:
    input:
        csvs=[NIAH_OUT.format(arch=a, seed=s) for a in NIAH_ARCHS for s in NIAH_SEEDS],
        code=COLLECT_CODE,
    output:
        f"{RES}/niah.csv",
    params:
        skipped=f"--not-run {NIAH_SKIPPED}" if NIAH_SKIPPED else "",
    log:
        f"{WORK}/logs/collect_niah.log",
    conda:
        CONDA_ENV
    shell:
        "python -m suite.collect concat --inputs {input.csvs} {params.skipped} --out {output} 2>&1 | tee {log}"
