# Evaluation: held-out perplexity (and, at the main size, the commonsense and recall tasks) through lm-eval for
# every trained model, NIAH and MQAR (each a dedicated training run per arch), and the controls that decide
# whether an experiment can say anything at all (suite.eval.controls).

LM_EVAL_CODE = sources("suite.eval.harness") + code("suite/eval/tasks")
NIAH_CODE = sources("suite.experiments.niah.run")
MQAR_CODE = sources("suite.experiments.mqar.run")
COLLECT_CODE = sources("suite.collect")
ABL_VARIANTS = ["orthros", "orthros_noso", "transformer"]
ABL_SIZES = STUDY["ablation_sizes"]
LM = STUDY["lm_eval"]
NIAH = STUDY["niah"]
MQAR = STUDY["mqar"]
TRAIN_LEN = STUDY["train"]["seq_len"]
QUALITY = f"{RES}/eval/quality/{{arch}}/{{size}}/seed{{seed}}.csv"
QUALITY_DOCS = QUALITY.replace(".csv", "_docs.csv")  # each document's outcome (suite.eval.harness.documents_path)
METRICS = f"{RES}/train/{{arch}}/{{size}}/seed{{seed}}/metrics.csv"


BENCH = f"{DATA}/benchmarks"               # the benchmark datasets (rule benchmark_data), where lm_eval.data is set
BENCH_INPUT = [f"{BENCH}/source.json"] if LM.get("data") else []


GPU_JOB = 1 if STUDY["device"].startswith("cuda") else 0   # resources: one GPU job at a time (--resources gpu=1)
SINGLE_RUN = dict(seed=SEED, device=STUDY["device"], dtype=STUDY["dtype"], profile=PROFILE)  # NIAH's, MQAR's
LM_ARGS = (f"--tokenizer {DATA}/tokenizer --ppl-data {DATA}/val.txt --max-length {TRAIN_LEN} --boundary-token eos "
           f"--profile {PROFILE} --batch-size {LM.get('batch_size', 1)} --device {STUDY['device']}"
           + (f" --limit {LM['limit']}" if LM["limit"] is not None else "")
           + (f" --ppl-limit {LM['ppl_limit']}" if LM.get("ppl_limit") is not None else ""))
BENCH_ARGS = (f"--num-fewshot {csv_list(LM.get('num_fewshot', [0]))}"
              + (f" --benchmark-data {BENCH}" if LM.get("data") else ""))


rule lm_eval:
    """Held-out perplexity (rolling windows of the training length, EOS boundary as in training) and the paper's
    benchmarks (a slice of lm_eval.limit documents per task, the whole split where it is null; from the local data
    of lm_eval.data), for every seed."""
    input:
        runs=per_seed(METRICS.replace("{arch}", "{{arch}}").replace("{size}", "{{size}}"), SEEDS),
        val=f"{DATA}/val.txt",
        bench=BENCH_INPUT,
        code=LM_EVAL_CODE,
    output:
        quality=per_seed(QUALITY.replace("{arch}", "{{arch}}").replace("{size}", "{{size}}"), SEEDS),
        docs=per_seed(QUALITY_DOCS.replace("{arch}", "{{arch}}").replace("{size}", "{{size}}"), SEEDS),
    threads: THREADS
    resources:
        gpu=GPU_JOB,
    log:
        f"{WORK}/logs/lm_eval_{{arch}}_{{size}}.log",
    params:
        cfg=rule_config("lm_eval"),
        checkpoints=lambda w: " ".join(f"{RUN.format(arch=w.arch, size=w.size, seed=s)}/checkpoint" for s in SEEDS),
        seeds=SEEDS,
        tasks=lambda w: lm_tasks(LM, MAIN, w.size),
        lm_args=LM_ARGS,
        bench_args=BENCH_ARGS,
    conda:
        CONDA_ENV
    shell:
        "python -m suite.eval.harness --checkpoint {params.checkpoints} --out {output.quality} --seed {params.seeds} "
        "--tasks {params.tasks} {params.lm_args} {params.bench_args} --arch {wildcards.arch} --size {wildcards.size} "
        "> {log} 2>&1"


# Prompt length against the window (suite.eval.prompt_lengths): the suite tokenizer's, and the base model's where the
# study converts a pretrained model (conversion.pretrained; its folder comes from workflows/pretrained.smk)
PROMPT_TOKENIZERS = {"suite": f"{DATA}/tokenizer"} | (
    {"base": f"{WORK}/models/base"} if STUDY["conversion"].get("pretrained") else {})
PROMPT_SHOTS = sorted({0, 5} | set(LM.get("num_fewshot", [0])))

if LM.get("data"):

    rule prompt_lengths:
        """Per benchmark task and shot count, the tokens of the scored sequences against the window w."""
        input:
            bench=BENCH_INPUT,
            tokenizer=f"{DATA}/tokenizer/tokenizer.json",
            base=[f"{d}/base_model.json" for k, d in PROMPT_TOKENIZERS.items() if k == "base"],
            code=sources("suite.eval.prompt_lengths"),
        output:
            f"{RES}/prompt_lengths.csv",
        params:
            cfg=rule_config("prompt_lengths"),
            tokenizers=" ".join(f"{k}={d}" for k, d in PROMPT_TOKENIZERS.items()),
            shots=csv_list(PROMPT_SHOTS),
            limit=f"--limit {LM['limit']}" if LM["limit"] is not None else "",
            bench=lambda w, input: folder(input.bench[0]),
            window=STUDY["window"],
            profile=PROFILE,
        log:
            f"{WORK}/logs/prompt_lengths.log",
        conda:
            CONDA_ENV
        shell:
            "python -m suite.eval.prompt_lengths --benchmark-data {params.bench} --tokenizer {params.tokenizers} "
            "--tasks commonsense,mmlu,recall --num-fewshot {params.shots} {params.limit} --window {params.window} "
            "--profile {params.profile} --out {output} > {log} 2>&1"


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


NIAH_OUT = f"{RES}/eval/niah/{{arch}}/{NIAH['size']}/seed{SEED}.csv"


rule niah:
    """Needle in a haystack (Fig. 3): a dedicated retrieval run per arch, then the context length x depth grid on
    held-out (test split) text."""
    input:
        tokens=rules.tokenizer.output,
        haystack=f"{DATA}/test.txt",
        code=NIAH_CODE,
    output:
        NIAH_OUT,
    threads: THREADS
    resources:
        gpu=GPU_JOB,
    log:
        f"{WORK}/logs/niah_{{arch}}.log",
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
        saved=lambda w: f"{WORK}/niah_models/{w.arch}/{NIAH['size']}/seed{SEED}",
    conda:
        CONDA_ENV
    shell:
        "python -m suite.experiments.niah.run --arch {wildcards.arch} --size {params.niah[size]} --config {params.study} "
        "--data-dir {params.data} --haystack {input.haystack} --format {params.niah[format]} {params.value_digits}"
        "--train-len {params.niah[train_len]} --steps {params.niah[steps]} --batch-size {params.niah[batch_size]} "
        "--lr {params.niah[lr]} --queries {params.queries} --replay {params.replay} {params.rope_theta} "
        "{params.schedule} {params.lm_weight} {params.curriculum} --lengths {params.lengths} --depths {params.depths} "
        "--trials {params.niah[trials]} --seed {params.run[seed]} --device {params.run[device]} "
        "--dtype {params.run[dtype]} --profile {params.run[profile]} --no-progress --save-model {params.saved} "
        "--out {output} > {log} 2>&1"


MQAR_SIZES = mqar_sizes(MQAR)
MQAR_OUT = f"{RES}/eval/mqar/{{arch}}/{{size}}/seed{SEED}.csv"


rule mqar:
    """Multi-query associative recall (Zoology recipe): one model per (arch, size), trained on the mixture of the
    configured cells and tested at every (seq_len, pairs) cell."""
    input:
        MQAR_CODE,
    output:
        MQAR_OUT,
    wildcard_constraints:
        size="|".join(re.escape(s) for s in MQAR_SIZES),
    threads: THREADS
    resources:
        gpu=GPU_JOB,
    log:
        f"{WORK}/logs/mqar_{{arch}}_{{size}}.log",
    params:
        cfg=rule_config("mqar"),
        recipe=" ".join(mqar_cli_args(MQAR)),
        run=SINGLE_RUN,
    conda:
        CONDA_ENV
    shell:
        "python -m suite.experiments.mqar.run --arch {wildcards.arch} --size {wildcards.size} {params.recipe} "
        "--seed {params.run[seed]} --device {params.run[device]} --dtype {params.run[dtype]} "
        "--profile {params.run[profile]} --out {output} > {log} 2>&1"


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


rule collect_ablation:
    input:
        evals=runs(QUALITY, ABL_VARIANTS, ABL_SIZES, SEEDS),
        metrics=runs(METRICS, ABL_VARIANTS, ABL_SIZES, SEEDS),
        code=COLLECT_CODE,
    output:
        f"{RES}/ablation.csv",
    log:
        f"{WORK}/logs/collect_ablation.log",
    conda:
        CONDA_ENV
    shell:
        "python -m suite.collect ablation --evals {input.evals} --metrics {input.metrics} --out {output} "
        "2>&1 | tee {log}"


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


CONV_VARIANTS = ["base", "base_cpt", "conversion"]


rule collect_conversion:
    input:
        evals=[QUALITY.format(arch="transformer", size=CONV["size"], seed=s) for s in CONV_SEEDS]
              + [f"{RES}/eval/quality/conversion_{v}/seed{s}.csv" for v in CONV_VARIANTS[1:] for s in CONV_SEEDS],
        metrics=[METRICS.format(arch="transformer", size=CONV["size"], seed=s) for s in CONV_SEEDS]
                + [f"{RES}/conversion/{v}/seed{s}/metrics.csv" for v in CONV_VARIANTS[1:] for s in CONV_SEEDS],
        code=COLLECT_CODE,
    output:
        f"{RES}/conversion.csv",
    params:
        variants=" ".join(v for v in CONV_VARIANTS for _ in CONV_SEEDS),
    log:
        f"{WORK}/logs/collect_conversion.log",
    conda:
        CONDA_ENV
    shell:
        "python -m suite.collect conversion --evals {input.evals} --metrics {input.metrics} "
        "--variants {params.variants} --out {output} 2>&1 | tee {log}"


NIAH_ARCHS = [a for a in ARCHS if a in NIAH["archs"]]
NIAH_SKIPPED = " ".join(f"'{a}=not run: not in niah.archs of the {PROFILE} profile'" for a in ARCHS
                        if a not in NIAH_ARCHS)


rule collect_niah:
    input:
        csvs=[NIAH_OUT.format(arch=a) for a in NIAH_ARCHS],
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


rule collect_mqar:
    input:
        csvs=[MQAR_OUT.format(arch=a, size=s) for a in ARCHS for s in MQAR_SIZES],
        code=COLLECT_CODE,
    output:
        f"{RES}/mqar.csv",
    log:
        f"{WORK}/logs/collect_mqar.log",
    conda:
        CONDA_ENV
    shell:
        "python -m suite.collect concat --inputs {input.csvs} --out {output} 2>&1 | tee {log}"


# the MQAR control cell; a grid of sizes reads its largest (suite.eval.controls), a single-size study its one size
MQAR_CONTROL = "--mqar-cell " + ":".join(map(str, mqar_control_cell(MQAR))) + \
    (f" --mqar-size {mqar_control_size(MQAR)}" if "sizes" in MQAR else "")


# the pretrained models' benchmark rows (workflows/pretrained.smk): the benchmarks' positive and negative controls
PRETRAINED_CSV = [f"{RES}/pretrained.csv"] if STUDY["conversion"].get("pretrained") else []
IDENTITY_CSV = [f"{RES}/pretrained_identity.csv"] if STUDY["conversion"].get("pretrained") else []  # conversion


rule controls:
    """Positive and negative control of every quality experiment (suite.eval.controls)."""
    input:
        mqar=f"{RES}/mqar.csv",
        niah=f"{RES}/niah.csv",
        quality=f"{RES}/quality.csv",
        first=runs(f"{RES}/train/{{arch}}/{{size}}/seed{{seed}}/loss.csv", ["transformer"], [MAIN], SEEDS),
        tokens=[rules.tokenizer.output.tokenizer, rules.tokenizer.output.train, rules.tokenizer.output.val],  # unigram
        pretrained=PRETRAINED_CSV,
        identity=IDENTITY_CSV,
        code=sources("suite.eval.controls"),
    output:
        f"{RES}/controls.csv",
    params:
        cfg=rule_config("controls"),
        pretrained=(f"--pretrained {PRETRAINED_CSV[0]} --identity {IDENTITY_CSV[0]}") if PRETRAINED_CSV else "",
        mqar_cell=MQAR_CONTROL,
        main_size=MAIN,
        data=lambda w: DATA,
    log:
        f"{WORK}/logs/controls.log",
    conda:
        CONDA_ENV
    shell:
        "python -m suite.eval.controls --mqar {input.mqar} {params.mqar_cell} --niah {input.niah} "
        "--val-loss {input.quality} --first-loss {input.first} --main-size {params.main_size} "
        "--data-dir {params.data} {params.pretrained} --out {output} 2>&1 | tee {log}"
