# Table 2 on a real pretrained LM (conversion.base_model, conversion.pretrained): four arms on the same tokens.
#   base       the pretrained model, untouched
#   converted  Orthros converted from it with identity scale-offset and window w, no training
#   base_cpt   base, continued on N tokens of English text (paper Table 6's recipe, scaled down)
#   conversion converted, continued on the same N tokens in the same order with the same recipe
# plus random_init (a randomly initialised model of the same shape: the benchmarks' negative control). Every arm is
# scored on the paper's benchmarks (suite.eval.harness), held-out perplexity by position bucket and NIAH within the
# model's context; the conversion identity (w >= T reproduces Base) is measured in the run.

PRE = CONV.get("pretrained")
MODELS = f"{WORK}/models"
ENGLISH = f"{DATA}/english"
PRE_RES = f"{RES}/pretrained"
PRE_ARMS = PRE["arms"] if PRE else []
TRAINED_ARMS = [a for a in PRE_ARMS if a in ("base_cpt", "conversion")]
PRE_SEEDS = PRE.get("seeds", [SEED]) if PRE else []
START = {"base_cpt": "base", "conversion": "converted"}   # the model folder a continued arm starts from

# (variant, seed) of every evaluated model: untrained arms once (seed 0), trained arms per data-order seed
PRE_EVAL = [(v, s) for v in (PRE_ARMS + ["random_init"]) for s in (PRE_SEEDS if v in TRAINED_ARMS else [0])]
PRE_HELD_OUT = [(v, s) for v, s in PRE_EVAL if v != "random_init"]
# each evaluated model's folder, and the file that marks it complete (base_model.json, or a trained run's
# metrics.csv), by (variant, seed) as the wildcards spell them
PRE_MODEL = {(v, str(s)): f"{WORK}/pretrained/{v}/seed{s}/checkpoint" if v in TRAINED_ARMS else f"{MODELS}/{v}"
             for v, s in PRE_EVAL}
PRE_MODEL_INPUT = {(v, str(s)): f"{PRE_RES}/train/{v}/seed{s}/metrics.csv" if v in TRAINED_ARMS
                   else f"{MODELS}/{v}/base_model.json" for v, s in PRE_EVAL}


rule base_model:
    """The base model as a plain HF folder (dequantized from its GGUF), and a random-init model of its shape."""
    input:
        sources("suite.train.base_model"),
        model=PATH_INPUTS["base_model"],
    output:
        base=f"{MODELS}/base/base_model.json",
        random=f"{MODELS}/random_init/base_model.json",
    params:
        cfg=rule_config("base_model"),
        study=STUDY_ARG,
        out=lambda w, output: folder(output.base),
        random=lambda w, output: folder(output.random),
    log:
        f"{WORK}/logs/base_model.log",
    conda:
        CONDA_ENV
    shell:
        "python -m suite.train.base_model --config {params.study} --out {params.out} --random-init {params.random} "
        "> {log} 2>&1"


rule english_data:
    """English prose, split by document and encoded with the base model's tokenizer (suite.data.english); per source,
    where it came from and what was kept (pretrained_corpus.csv)."""
    input:
        base=rules.base_model.output.base,
        code=sources("suite.data.english"),
        files=PATH_INPUTS["english_data"],
    output:
        summary=f"{ENGLISH}/english.json",
        train=f"{ENGLISH}/tokens/train.npy",
        val=f"{ENGLISH}/tokens/val.npy",
        test=f"{ENGLISH}/tokens/test.npy",
        haystack=f"{ENGLISH}/test.txt",
        sources=f"{RES}/pretrained_corpus.csv",
    params:
        cfg=rule_config("english_data"),
        study=STUDY_ARG,
        base=lambda w, input: folder(input.base),
        data=lambda w, output: folder(output.summary),
    log:
        f"{WORK}/logs/english_data.log",
    conda:
        CONDA_ENV
    shell:
        "python -m suite.data.english --config {params.study} --base-model {params.base} --data-dir {params.data} "
        "--results {output.sources} > {log} 2>&1"


rule convert_base:
    """Arm 2: Orthros converted from the base model (identity scale-offset, window w), no training."""
    input:
        base=rules.base_model.output.base,
        code=sources("suite.train.convert_base"),
    output:
        converted=f"{MODELS}/converted/base_model.json",
    params:
        cfg=rule_config("convert_base"),
        base=lambda w, input: folder(input.base),
        out=lambda w, output: folder(output.converted),
        window=PRE["window"] if PRE else 0,
    log:
        f"{WORK}/logs/convert_base.log",
    conda:
        CONDA_ENV
    shell:
        "python -m suite.train.convert_base --base {params.base} --window {params.window} --out {params.out} "
        "> {log} 2>&1"


rule conversion_identity:
    """The conversion identity control: Orthros at w >= T reproduces Base's logits on held-out text (float32)."""
    input:
        base=rules.base_model.output.base,
        val=rules.english_data.output.val,
        code=sources("suite.eval.identity"),
    output:
        f"{RES}/pretrained_identity.csv",
    params:
        cfg=rule_config("conversion_identity"),
        tokens=PRE.get("identity_len", IDENTITY_LEN) if PRE else 0,
        base=lambda w, input: folder(input.base),
        data=lambda w: ENGLISH,
        window=PRE["window"] if PRE else 0,
        device=STUDY["device"],
        profile=PROFILE,
    resources:
        gpu=GPU_JOB,
    log:
        f"{WORK}/logs/conversion_identity.log",
    conda:
        CONDA_ENV
    shell:
        "python -m suite.eval.identity --base {params.base} --data-dir {params.data} --tokens {params.tokens} "
        "--window {params.window} --device {params.device} --profile {params.profile} --out {output} > {log} 2>&1"


SWEEP = PRE.get("lr_sweep") if PRE else None   # the continued-training rate, picked before the long runs
LR_PICK = f"{RES}/pretrained_lr.csv"
LR_ARG = (f"--lr-from {LR_PICK}" if SWEEP else f"--lr {PRE['lr']}") if TRAINED_ARMS else ""
EVAL_POINTS = PRE.get("eval_points", 0) if PRE else 0
# what every continued-training run of an arm shares, long or swept: shape, optimizer, data order, dtype, compile
SHARED_RECIPE = (f"--batch-size {PRE['batch_size']} --seq-len {PRE['seq_len']} "
                 f"--min-lr-ratio {PRE.get('min_lr_ratio', 0.1)} --weight-decay {PRE.get('weight_decay', 0.1)} "
                 f"--dtype {PRE.get('dtype', 'float32')} --order {PRE.get('order', 'random')}") if TRAINED_ARMS else ""

COMPILE_FLAG = {arm: " --compile" if arm in PRE.get("compile", []) else "" for arm in TRAINED_ARMS}


if SWEEP and TRAINED_ARMS:

    rule pretrained_lr_sweep:
        """One swept rate of one trained arm: lr_sweep.steps steps at lr_sweep.lrs[i], the data-order seed
        lr_sweep.seed (every rate and both arms read the same batches); a run that diverges is recorded as such (it
        bounds the range from above) rather than failing the job."""
        input:
            start=lambda w: f"{MODELS}/{START[w.arm]}/base_model.json",
            tokens=rules.english_data.output.train,
            code=TRAIN_CODE,
        output:
            metrics=f"{PRE_RES}/lr_sweep/{{arm}}/lr{{i}}/metrics.csv",
            loss=f"{PRE_RES}/lr_sweep/{{arm}}/lr{{i}}/loss.csv",
        wildcard_constraints:
            arm="base_cpt|conversion",
            i=r"\d+",
        params:
            cfg=rule_config("pretrained_lr_sweep"),
            out=lambda w: f"{WORK}/pretrained/lr_sweep/{w.arm}/lr{w.i}",
            start=lambda w: f"{MODELS}/{START[w.arm]}",
            # not compiled even where the long runs are: at a few minutes a run, compiling costs more than it saves
            recipe=lambda w: (f"--steps {SWEEP['steps']} --warmup {SWEEP['warmup']} --lr {SWEEP['lrs'][int(w.i)]} "
                              f"--seed {SWEEP['seed']} {SHARED_RECIPE}"),
            data=lambda w: ENGLISH,
            device=STUDY["device"],
            profile=PROFILE,
        threads: THREADS
        resources:
            gpu=GPU_JOB,
        log:
            f"{WORK}/logs/pretrained_lr_sweep_{{arm}}_lr{{i}}.log",
        conda:
            CONDA_ENV
        shell:
            "python -m suite.train.run --model {params.start} --arch {wildcards.arm} --data-dir {params.data} "
            "--out-dir {params.out} {params.recipe} --device {params.device} --profile {params.profile} "
            "--restart-if-changed --record-divergence --no-progress > {log} 2>&1 && "
            "cp {params.out}/metrics.csv {output.metrics} && cp {params.out}/loss.csv {output.loss}"

    rule pretrained_lr_pick:
        """Each trained arm's rate, picked from the sweep by held-out loss (suite.train.lr_pick.RULE): the long
        runs read it."""
        input:
            runs=[f"{PRE_RES}/lr_sweep/{a}/lr{i}/metrics.csv" for a in TRAINED_ARMS
                  for i in range(len(SWEEP["lrs"]))],
            code=sources("suite.train.lr_pick"),
        output:
            LR_PICK,
        log:
            f"{WORK}/logs/pretrained_lr_pick.log",
        conda:
            CONDA_ENV
        shell:
            "python -m suite.train.lr_pick --runs {input.runs} --out {output} 2>&1 | tee {log}"


rule pretrained_train:
    """Arms 3 and 4: the base model (base_cpt) and its conversion (conversion) continue on the same English tokens,
    batch for batch (same data-order seed, same recipe; the rate the sweep picked for the arm where lr_sweep is set);
    one job per (arm, seed), so that on one GPU the six runs share it."""
    input:
        start=lambda w: f"{MODELS}/{START[w.arm]}/base_model.json",
        tokens=rules.english_data.output.train,
        lr=LR_PICK if SWEEP else [],
        code=TRAIN_CODE,
    output:
        metrics=f"{PRE_RES}/train/{{arm}}/seed{{seed}}/metrics.csv",
        loss=f"{PRE_RES}/train/{{arm}}/seed{{seed}}/loss.csv",
        evals=f"{PRE_RES}/train/{{arm}}/seed{{seed}}/evals.csv" if EVAL_POINTS else [],
    wildcard_constraints:
        arm="base_cpt|conversion",
    params:
        cfg=rule_config("pretrained_train"),
        out=lambda w: f"{WORK}/pretrained/{w.arm}/seed{w.seed}",
        start=lambda w: f"{MODELS}/{START[w.arm]}",
        recipe=lambda w: (f"--steps {PRE['steps']} --warmup {PRE.get('warmup', 0)} {LR_ARG} "
                          f"--eval-points {EVAL_POINTS} {SHARED_RECIPE}{COMPILE_FLAG[w.arm]}"),
        data=lambda w: ENGLISH,
        device=STUDY["device"],
        profile=PROFILE,
    threads: THREADS
    resources:
        gpu=GPU_JOB,
    log:
        f"{WORK}/logs/pretrained_train_{{arm}}_seed{{seed}}.log",
    conda:
        CONDA_ENV
    shell:
        "python -m suite.train.run --model {params.start} --arch {wildcards.arm} --data-dir {params.data} "
        "--out-dir {params.out} --seed {wildcards.seed} {params.recipe} --device {params.device} "
        "--profile {params.profile} --restart-if-changed --no-progress > {log} 2>&1 && "
        "cp {params.out}/metrics.csv {output.metrics} && cp {params.out}/loss.csv {output.loss}"
        + (" && cp {params.out}/evals.csv {output.evals}" if EVAL_POINTS else "")


PRE_EVAL_CFG = PRE["eval"] if PRE else {}


MMLU_SHARE = PRE_EVAL_CFG.get("mmlu_share")  # share of every MMLU subject scored; None: MMLU is not run
MMLU_LIMIT = "" if MMLU_SHARE in (None, 1) else f" --limit {MMLU_SHARE}"  # below 1: lm-eval's fractional limit
# suite.eval.harness options shared by an arm's commonsense and MMLU runs (then the arm's --arch, --seed, --profile)
HARNESS_ARGS = (f"--benchmark-data {DATA}/benchmarks --num-fewshot {csv_list(PRE_EVAL_CFG.get('num_fewshot', [0]))} "
                f"--batch-size {PRE_EVAL_CFG.get('batch_size', 1)} --dtype {PRE_EVAL_CFG.get('dtype', 'float32')} "
                f"--device {STUDY['device']}")


rule pretrained_benchmarks:
    """The paper's benchmarks (suite.eval.harness on the local task data) for one arm: the commonsense tasks with
    eval.limit documents each, then MMLU on the share eval.mmlu_share of every subject's documents."""
    input:
        model=lambda w: PRE_MODEL_INPUT[(w.variant, w.seed)],
        data=f"{DATA}/benchmarks/source.json",
        code=LM_EVAL_CODE,
    output:
        quality=f"{PRE_RES}/eval/{{variant}}/seed{{seed}}/quality.csv",
        mmlu=f"{PRE_RES}/eval/{{variant}}/seed{{seed}}/mmlu.csv" if MMLU_SHARE else [],
        # each document's outcome, beside each (suite.eval.harness.documents_path)
        docs=[f"{PRE_RES}/eval/{{variant}}/seed{{seed}}/{name}_docs.csv"
              for name in (["quality", "mmlu"] if MMLU_SHARE else ["quality"])],
    params:
        cfg=rule_config("pretrained_benchmarks"),
        model=lambda w: PRE_MODEL[(w.variant, w.seed)],
        tasks=csv_list(PRE_EVAL_CFG.get("tasks", [])),
        limit=f"--limit {PRE_EVAL_CFG['limit']}" if PRE_EVAL_CFG.get("limit") else "",
        common=HARNESS_ARGS,
        profile=PROFILE,
        mmlu=lambda w, output: (f" && python -m suite.eval.harness --checkpoint {PRE_MODEL[(w.variant, w.seed)]} "
                                f"--tasks mmlu{MMLU_LIMIT} {HARNESS_ARGS} --arch {w.variant} --seed {w.seed} "
                                f"--profile {PROFILE} --out {output.mmlu}") if MMLU_SHARE else "",
    threads: THREADS
    resources:
        gpu=GPU_JOB,
    log:
        f"{WORK}/logs/pretrained_benchmarks_{{variant}}_seed{{seed}}.log",
    conda:
        CONDA_ENV
    shell:
        "(python -m suite.eval.harness --checkpoint {params.model} --tasks {params.tasks} {params.limit} "
        "{params.common} --arch {wildcards.variant} --seed {wildcards.seed} --profile {params.profile} "
        "--out {output.quality}{params.mmlu}) > {log} 2>&1"


rule pretrained_ppl:
    """Held-out perplexity by position bucket (<= 128, 129-1K, 1K-8K) of one arm."""
    input:
        model=lambda w: PRE_MODEL_INPUT[(w.variant, w.seed)],
        tokens=rules.english_data.output.val,
        code=sources("suite.eval.ppl_buckets"),
    output:
        f"{PRE_RES}/eval/{{variant}}/seed{{seed}}/ppl.csv",
    params:
        cfg=rule_config("pretrained_ppl"),
        model=lambda w: PRE_MODEL[(w.variant, w.seed)],
        data=lambda w: ENGLISH,
        ppl=PRE["ppl"] if PRE else {},
        device=STUDY["device"],
        profile=PROFILE,
    threads: THREADS
    resources:
        gpu=GPU_JOB,
    log:
        f"{WORK}/logs/pretrained_ppl_{{variant}}_seed{{seed}}.log",
    conda:
        CONDA_ENV
    shell:
        "python -m suite.eval.ppl_buckets --checkpoint {params.model} --data-dir {params.data} "
        "--max-len {params.ppl[max_len]} --docs {params.ppl[docs]} --variant {wildcards.variant} "
        "--seed {wildcards.seed} --device {params.device} --profile {params.profile} --out {output} > {log} 2>&1"


rule pretrained_niah:
    """NIAH within the model's context: RULER's English needle in held-out English text, for one arm."""
    input:
        model=lambda w: PRE_MODEL_INPUT[(w.variant, w.seed)],
        haystack=rules.english_data.output.haystack,
        code=NIAH_CODE,
    output:
        f"{PRE_RES}/eval/{{variant}}/seed{{seed}}/niah.csv",
    params:
        cfg=rule_config("pretrained_niah"),
        model=lambda w: PRE_MODEL[(w.variant, w.seed)],
        lengths=csv_list(PRE["niah"]["lengths"]) if PRE and "niah" in PRE else "",
        depths=csv_list(PRE["niah"]["depths"]) if PRE and "niah" in PRE else "",
        # every length lies within the base model's context (the niah CLI refuses one past the model's positions),
        # so each cell is one the positive control (Base) reads
        context=max(PRE["niah"]["lengths"]) if PRE and "niah" in PRE else 0,
        trials=PRE["niah"]["trials"] if PRE and "niah" in PRE else 0,
        run=dict(device=STUDY["device"], dtype=STUDY["dtype"], profile=PROFILE),
    threads: THREADS
    resources:
        gpu=GPU_JOB,
    log:
        f"{WORK}/logs/pretrained_niah_{{variant}}_seed{{seed}}.log",
    conda:
        CONDA_ENV
    shell:
        "python -m suite.experiments.niah.run --checkpoint {params.model} --haystack {input.haystack} --format ruler "
        "--train-len {params.context} --lengths {params.lengths} --depths {params.depths} --trials {params.trials} "
        "--seed {wildcards.seed} --device {params.run[device]} --dtype {params.run[dtype]} "
        "--label-arch {wildcards.variant} --profile {params.run[profile]} --no-progress --out {output} > {log} 2>&1"


rule collect_pretrained:
    """The arms' benchmark rows in one tidy CSV, with the base model's name, size and quantization and each arm's
    continued-training tokens."""
    input:
        evals=[f"{PRE_RES}/eval/{v}/seed{s}/{name}.csv" for v, s in PRE_EVAL
               for name in (["quality", "mmlu"] if MMLU_SHARE else ["quality"])],
        metrics=[f"{PRE_RES}/train/{v}/seed{s}/metrics.csv" for v, s in PRE_EVAL if v in TRAINED_ARMS],
        base=rules.base_model.output.base,
        code=CONV_COLLECT_CODE,
    output:
        f"{RES}/pretrained.csv",
    params:
        variants=" ".join(v for v, _ in PRE_EVAL for _ in (["quality", "mmlu"] if MMLU_SHARE else ["quality"])),
    log:
        f"{WORK}/logs/collect_pretrained.log",
    conda:
        CONDA_ENV
    shell:
        "python -m suite.experiments.conversion.collect pretrained --evals {input.evals} --variants {params.variants} "
        "--metrics {input.metrics} --base-record {input.base} --out {output} 2>&1 | tee {log}"


rule collect_pretrained_pairs:
    """Every two arms' outcomes on the same benchmark documents (suite.collect pairs), for per-document tests."""
    input:
        docs=[f"{PRE_RES}/eval/{v}/seed{s}/{name}_docs.csv" for v, s in PRE_EVAL
              for name in (["quality", "mmlu"] if MMLU_SHARE else ["quality"])],
        code=COLLECT_CODE,
    output:
        f"{RES}/pretrained_pairs.csv",
    log:
        f"{WORK}/logs/collect_pretrained_pairs.log",
    conda:
        CONDA_ENV
    shell:
        "python -m suite.collect pairs --inputs {input.docs} --key variant --out {output} 2>&1 | tee {log}"


rule collect_pretrained_ppl:
    input:
        ppl=[f"{PRE_RES}/eval/{v}/seed{s}/ppl.csv" for v, s in PRE_HELD_OUT],
        code=COLLECT_CODE,
    output:
        f"{RES}/pretrained_ppl.csv",
    log:
        f"{WORK}/logs/collect_pretrained_ppl.log",
    conda:
        CONDA_ENV
    shell:
        "python -m suite.collect concat --inputs {input.ppl} --out {output} 2>&1 | tee {log}"


if PRE and "niah" in PRE:

    rule collect_pretrained_niah:
        input:
            niah=[f"{PRE_RES}/eval/{v}/seed{s}/niah.csv" for v, s in PRE_HELD_OUT],
            code=COLLECT_CODE,
        output:
            f"{RES}/pretrained_niah.csv",
        log:
            f"{WORK}/logs/collect_pretrained_niah.log",
        conda:
            CONDA_ENV
        shell:
            "python -m suite.collect concat --inputs {input.niah} --out {output} 2>&1 | tee {log}"


if TRAINED_ARMS:

    rule collect_pretrained_loss:
        """The continued-training loss curves of both trained arms (the loss-gap figure)."""
        input:
            loss=[f"{PRE_RES}/train/{a}/seed{s}/loss.csv" for a in TRAINED_ARMS for s in PRE_SEEDS],
            code=COLLECT_CODE,
        output:
            f"{RES}/pretrained_loss.csv",
        params:
            runs=" ".join(f"{a}:{s}" for a in TRAINED_ARMS for s in PRE_SEEDS),
        log:
            f"{WORK}/logs/collect_pretrained_loss.log",
        conda:
            CONDA_ENV
        shell:
            "python -m suite.collect curves --inputs {input.loss} --runs {params.runs} --out {output} 2>&1 | tee {log}"


if TRAINED_ARMS and EVAL_POINTS:

    rule collect_pretrained_evals:
        """The held-out loss along each trained run (eval_points evaluations on the same validation windows): the
        loss-gap curve of the two arms, paired by seed."""
        input:
            evals=[f"{PRE_RES}/train/{a}/seed{s}/evals.csv" for a in TRAINED_ARMS for s in PRE_SEEDS],
            code=COLLECT_CODE,
        output:
            f"{RES}/pretrained_evals.csv",
        params:
            runs=" ".join(f"{a}:{s}" for a in TRAINED_ARMS for s in PRE_SEEDS),
        log:
            f"{WORK}/logs/collect_pretrained_evals.log",
        conda:
            CONDA_ENV
        shell:
            "python -m suite.collect curves --inputs {input.evals} --runs {params.runs} --out {output} 2>&1 | tee {log}"


if TRAINED_ARMS:

    rule collect_pretrained_train:
        """The continued-training runs' metrics rows (held-out loss after training, tokens, throughput)."""
        input:
            metrics=[f"{PRE_RES}/train/{a}/seed{s}/metrics.csv" for a in TRAINED_ARMS for s in PRE_SEEDS],
            code=COLLECT_CODE,
        output:
            f"{RES}/pretrained_train.csv",
        log:
            f"{WORK}/logs/collect_pretrained_train.log",
        conda:
            CONDA_ENV
        shell:
            "python -m suite.collect concat --inputs {input.metrics} --out {output} 2>&1 | tee {log}"


# what the report reads of this experiment
PRETRAINED_OUT = ([f"{RES}/pretrained.csv", f"{RES}/pretrained_pairs.csv", f"{RES}/pretrained_ppl.csv",
                   f"{RES}/pretrained_identity.csv"]
                  + ([f"{RES}/pretrained_niah.csv"] if PRE and "niah" in PRE else [])
                  + ([f"{RES}/pretrained_loss.csv", f"{RES}/pretrained_train.csv"] if TRAINED_ARMS else [])
                  + ([f"{RES}/pretrained_evals.csv"] if TRAINED_ARMS and EVAL_POINTS else [])
                  + ([LR_PICK] if SWEEP and TRAINED_ARMS else [])) if PRE else []
