# Evaluation that the experiments share: held-out perplexity (and, at the main size, the commonsense and recall tasks)
# through lm-eval for every trained model (rule lm_eval; its rows are collected by the LM comparison and the SO
# ablation, suite/experiments/{quality,so_ablation}/), and the prompt lengths against the window.

LM_EVAL_CODE = sources("suite.eval.harness") + code("suite/eval/tasks")
COLLECT_CODE = sources("suite.collect")
LM = STUDY["lm_eval"]
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
# study converts a pretrained model (conversion.pretrained; its folder: suite/experiments/conversion/pretrained.smk)
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
