# From scratch at one size (the study config's `scratch` section; issue 48): Orthros against the Transformer, SWA-w and
# the linear baselines, trained from scratch on a pinned corpus with its own tokenizer.
#   scratch_data       the corpus (English documentation and Python sources of pinned packages) and its BPE
#   scratch_lr_sweep   each arch at each swept rate, one seed, a short budget (a diverged run is recorded)
#   scratch_lr_pick    each arch's rate, by final held-out loss; a pick at an end of the range is refused
#   scratch_train      equal tokens: every arch, every seed, scratch.steps steps at its picked rate
#   scratch_budget     equal GPU time: the steps each equal_time arch needs for the reference's GPU-seconds
#   scratch_train      equal time: those archs, every seed, the derived steps (budget "time")
#   scratch_ppl        held-out loss by position bucket of every long run
#   scratch_niah       NIAH within the training length of every long run (scratch.niah)
#   scratch_controls   the study's LM controls (the Transformer below the corpus's unigram, untrained at chance) and
#                      NIAH controls (the Transformer within seq_len, SWA beyond its reach)
# An opt-in target (`snakemake --cores all scratch --resources gpu=1 --config profile=gpu`): a few GPU-hours, run in
# time-capped parts (README.md beside this file); its results, under <results>/scratch*, feed the audit where they
# exist.

from suite.train.lr_pick import sweep_rates

SCRATCH = STUDY["scratch"]
SCR_DATA = f"{DATA}/scratch"
SCR_RES = f"{RES}/scratch"
SCR_RUN = f"{WORK}/scratch"
SCR_ARCHS = SCRATCH["archs"]
SCR_SEEDS = SCRATCH["seeds"]
SCR_SWEEP = SCRATCH["lr_sweep"]
SCR_TIMED = SCRATCH["equal_time"]
SCR_PICK = f"{RES}/scratch_lr.csv"
SCR_BUDGET = f"{RES}/scratch_budget.csv"
# (budget, arch) of every long run: every arch at equal tokens, the equal_time archs at equal GPU time
SCR_LONG = [("tokens", a) for a in SCR_ARCHS] + [("time", a) for a in SCR_TIMED["archs"]]
SCR_WINDOWED = ("orthros", "swa")  # the archs whose window is scratch.window (SWA-w: Orthros's base stream alone)
# what every run of an arch shares, swept or long: model, shape, optimizer, data order, dtype
SCR_SHARED = (f"--size {SCRATCH['size']} --batch-size {SCRATCH['batch_size']} --seq-len {SCRATCH['seq_len']} "
              f"--min-lr-ratio {SCRATCH.get('min_lr_ratio', 0.1)} --weight-decay {SCRATCH.get('weight_decay', 0.1)} "
              f"--dtype {SCRATCH.get('dtype', STUDY['dtype'])} --order {SCRATCH.get('order', 'epoch')} "
              f"--device {STUDY['device']} --profile {PROFILE}")
SCR_WINDOW = {a: f" --override window_size={SCRATCH['window']}" if a in SCR_WINDOWED else "" for a in SCR_ARCHS}
SCR_COMPILE = {a: " --compile" if a in SCRATCH.get("compile", []) else "" for a in SCR_ARCHS}
SCR_SAVE = f" --save-every {SCRATCH['save_every']}" if "save_every" in SCRATCH else ""  # checkpoints: not a study value
SCR_STEPS = SCRATCH["steps"]
SCR_WARMUP = scratch_warmup(SCRATCH, SCR_STEPS)
SCR_NIAH = SCRATCH.get("niah", {})  # NIAH within the training length: no jobs without it


rule scratch_data:
    """The from-scratch corpus: the sources of scratch.corpus split by document, a BPE trained on its train split,
    every split encoded (suite.data.english --corpus scratch); what each source gave: scratch_corpus.csv."""
    input:
        code=sources("suite.data.english"),
    output:
        summary=f"{SCR_DATA}/english.json",
        tokenizer=f"{SCR_DATA}/tokenizer/tokenizer.json",
        train=f"{SCR_DATA}/tokens/train.npy",
        val=f"{SCR_DATA}/tokens/val.npy",
        test=f"{SCR_DATA}/tokens/test.npy",
        haystack=f"{SCR_DATA}/test.txt",  # the held-out split's text: NIAH's haystack
        sources=f"{RES}/scratch_corpus.csv",
    params:
        cfg=rule_config("scratch_data"),
        study=STUDY_ARG,
        data=lambda w, output: folder(output.summary),
        cache=lambda w: f"{DATA}/archives",
    threads: THREADS
    log:
        f"{WORK}/logs/scratch_data.log",
    conda:
        CONDA_ENV
    shell:
        "python -m suite.data.english --config {params.study} --corpus scratch --data-dir {params.data} "
        "--cache {params.cache} --results {output.sources} --threads {threads} > {log} 2>&1"


rule scratch_lr_sweep:
    """One arch at one swept rate: lr_sweep.steps steps at its i-th rate (lrs, then its extend list), the data-order
    seed lr_sweep.seed (every rate and arch reads the same batches); a run that diverges is recorded as such (it bounds
    the range)."""
    input:
        tokens=rules.scratch_data.output.train,
        code=TRAIN_CODE,
    output:
        metrics=f"{SCR_RES}/lr_sweep/{{arch}}/lr{{i}}/metrics.csv",
        loss=f"{SCR_RES}/lr_sweep/{{arch}}/lr{{i}}/loss.csv",
    wildcard_constraints:
        arch="|".join(SCR_ARCHS),
        i=r"\d+",
    params:
        cfg=lambda w: rule_config("scratch_lr_sweep"),
        out=lambda w: f"{SCR_RUN}/lr_sweep/{w.arch}/lr{w.i}",
        # eager: at a few minutes a run, compiling costs more than it saves
        recipe=lambda w: (f"--steps {SCR_SWEEP['steps']} --warmup {SCR_SWEEP['warmup']} "
                          f"--lr {sweep_rates(SCR_SWEEP, w.arch)[int(w.i)]} --seed {SCR_SWEEP['seed']} {SCR_SHARED}"
                          f"{SCR_WINDOW[w.arch]}"),
        data=lambda w, input: folder(input.tokens, 2),
    threads: THREADS
    resources:
        gpu=GPU_JOB,
    log:
        f"{WORK}/logs/scratch_lr_sweep_{{arch}}_lr{{i}}.log",
    conda:
        CONDA_ENV
    shell:
        "python -m suite.train.run --arch {wildcards.arch} --data-dir {params.data} --out-dir {params.out} "
        "{params.recipe} --restart-if-changed --record-divergence --no-progress > {log} 2>&1 && "
        "cp {params.out}/metrics.csv {output.metrics} && cp {params.out}/loss.csv {output.loss}"


rule scratch_lr_pick:
    """Each arch's rate, picked from the sweep by final held-out loss (suite.train.lr_pick.RULE): the long runs read
    it, and refuse a pick at an end of the swept range."""
    input:
        runs=[f"{SCR_RES}/lr_sweep/{a}/lr{i}/metrics.csv" for a in SCR_ARCHS
              for i in range(len(sweep_rates(SCR_SWEEP, a)))],
        code=sources("suite.train.lr_pick"),
    output:
        SCR_PICK,
    log:
        f"{WORK}/logs/scratch_lr_pick.log",
    conda:
        CONDA_ENV
    shell:
        "python -m suite.train.lr_pick --runs {input.runs} --out {output} 2>&1 | tee {log}"


rule scratch_budget:
    """The equal-GPU-time steps of each equal_time arch: the reference's equal-token GPU-seconds over the arch's own
    measured step time (suite.train.budget), derived before any equal-time run starts."""
    input:
        ref=[f"{SCR_RES}/tokens/{SCR_TIMED['reference']}/seed{s}/loss.csv" for s in SCR_SEEDS],
        timed=[f"{SCR_RES}/tokens/{a}/seed{s}/loss.csv" for a in SCR_TIMED["archs"] for s in SCR_SEEDS],
        tokens=rules.scratch_data.output.train,
        code=sources("suite.train.budget"),
    output:
        SCR_BUDGET,
    params:
        cfg=rule_config("scratch_budget"),
        loss=lambda w, input: " ".join(f"{p.split('/')[-3]}={p}" for p in input.ref + input.timed),
        data=lambda w, input: folder(input.tokens, 2),
        recipe=(f"--reference {SCR_TIMED['reference']} --ref-steps {SCR_STEPS} --batch-size {SCRATCH['batch_size']} "
                f"--seq-len {SCRATCH['seq_len']} --warmup-frac {SCRATCH['warmup_frac']} "
                f"--max-epochs {SCR_TIMED.get('max_epochs', 1.0)}"),
    log:
        f"{WORK}/logs/scratch_budget.log",
    conda:
        CONDA_ENV
    shell:
        "python -m suite.train.budget derive --loss {params.loss} {params.recipe} --data-dir {params.data} "
        "--out {output} 2>&1 | tee {log}"


rule scratch_train:
    """One long run: an arch at its picked rate for one seed, at equal tokens (scratch.steps) or at equal GPU time
    (the steps scratch_budget derived); held-out loss at eval_points steps along it (evals.csv)."""
    input:
        tokens=rules.scratch_data.output.train,
        lr=SCR_PICK,
        budget=lambda w: SCR_BUDGET if w.budget == "time" else [],
        code=TRAIN_CODE + sources("suite.train.budget"),
    output:
        metrics=f"{SCR_RES}/{{budget}}/{{arch}}/seed{{seed}}/metrics.csv",
        loss=f"{SCR_RES}/{{budget}}/{{arch}}/seed{{seed}}/loss.csv",
        evals=f"{SCR_RES}/{{budget}}/{{arch}}/seed{{seed}}/evals.csv",
    wildcard_constraints:
        budget="tokens|time",
        arch="|".join(SCR_ARCHS),
        seed=r"\d+",
    params:
        cfg=lambda w: rule_config("scratch_train"),
        out=lambda w: f"{SCR_RUN}/{w.budget}/{w.arch}/seed{w.seed}",
        schedule=lambda w, input: budget_schedule(w.budget, w.arch, SCR_STEPS, SCR_WARMUP, input.budget),
        recipe=lambda w, input: (f"--lr-from {input.lr} --eval-points {SCRATCH.get('eval_points', 0)} "
                                 f"--seed {w.seed} {SCR_SHARED}{SCR_WINDOW[w.arch]}{SCR_COMPILE[w.arch]}{SCR_SAVE}"),
        data=lambda w, input: folder(input.tokens, 2),
    threads: THREADS
    resources:
        gpu=GPU_JOB,
    log:
        f"{WORK}/logs/scratch_train_{{budget}}_{{arch}}_seed{{seed}}.log",
    conda:
        CONDA_ENV
    shell:
        "schedule={params.schedule} && python -m suite.train.run --arch {wildcards.arch} --data-dir {params.data} "
        "--out-dir {params.out} $schedule {params.recipe} --restart-if-changed --no-progress > {log} 2>&1 && "
        "cp {params.out}/metrics.csv {output.metrics} && cp {params.out}/loss.csv {output.loss} && "
        "cp {params.out}/evals.csv {output.evals}"


rule scratch_ppl:
    """Held-out loss by position in the document (scratch.buckets) of one long run: the longest ppl.docs documents of
    the held-out split, each from its start up to seq_len tokens; with ppl.domains, also those of each domain (prose,
    code)."""
    input:
        run=f"{SCR_RES}/{{budget}}/{{arch}}/seed{{seed}}/metrics.csv",
        tokens=rules.scratch_data.output.val,
        code=sources("suite.eval.ppl_buckets"),
    output:
        f"{SCR_RES}/{{budget}}/{{arch}}/seed{{seed}}/ppl.csv",
    wildcard_constraints:
        budget="tokens|time",
        arch="|".join(SCR_ARCHS),
        seed=r"\d+",
    params:
        cfg=rule_config("scratch_ppl"),
        model=lambda w: f"{SCR_RUN}/{w.budget}/{w.arch}/seed{w.seed}/checkpoint",
        data=lambda w, input: folder(input.tokens, 2),
        recipe=(f"--split {SCRATCH['ppl'].get('split', 'val')} --max-len {SCRATCH['seq_len']} "
                f"--docs {SCRATCH['ppl']['docs']} --buckets {csv_list(SCRATCH['buckets'])} "
                f"{'--by-domain ' if SCRATCH['ppl'].get('domains') else ''}"
                f"--device {STUDY['device']} --dtype {SCRATCH.get('dtype', STUDY['dtype'])} --profile {PROFILE}"),
    threads: THREADS
    resources:
        gpu=GPU_JOB,
    log:
        f"{WORK}/logs/scratch_ppl_{{budget}}_{{arch}}_seed{{seed}}.log",
    conda:
        CONDA_ENV
    shell:
        "python -m suite.eval.ppl_buckets --checkpoint {params.model} --data-dir {params.data} {params.recipe} "
        "--variant {wildcards.arch} --seed {wildcards.seed} --tag arch={wildcards.arch} budget={wildcards.budget} "
        "--out {output} > {log} 2>&1"


rule scratch_niah:
    """NIAH within the training length of one long run (scratch.niah): RULER's English needle in the held-out split's
    text, read from the run's checkpoint; the controls read the Transformer (positive) and SWA beyond its reach
    (negative)."""
    input:
        run=f"{SCR_RES}/{{budget}}/{{arch}}/seed{{seed}}/metrics.csv",
        haystack=rules.scratch_data.output.haystack,
        tokenizer=rules.scratch_data.output.tokenizer,
        code=sources("suite.experiments.niah.run"),
    output:
        f"{SCR_RES}/{{budget}}/{{arch}}/seed{{seed}}/niah.csv",
    wildcard_constraints:
        budget="tokens|time",
        arch="|".join(SCR_ARCHS),
        seed=r"\d+",
    params:
        cfg=rule_config("scratch_niah"),
        model=lambda w: f"{SCR_RUN}/{w.budget}/{w.arch}/seed{w.seed}/checkpoint",
        tokenizer=lambda w, input: folder(input.tokenizer),
        recipe=(f"--format ruler --train-len {SCRATCH['seq_len']} --lengths {csv_list(SCR_NIAH.get('lengths', []))} "
                f"--depths {csv_list(SCR_NIAH.get('depths', []))} --trials {SCR_NIAH.get('trials', 0)} "
                f"--device {STUDY['device']} --dtype {SCRATCH.get('dtype', STUDY['dtype'])} --profile {PROFILE}"),
    threads: THREADS
    resources:
        gpu=GPU_JOB,
    log:
        f"{WORK}/logs/scratch_niah_{{budget}}_{{arch}}_seed{{seed}}.log",
    conda:
        CONDA_ENV
    shell:
        "python -m suite.experiments.niah.run --checkpoint {params.model} --tokenizer {params.tokenizer} "
        "--haystack {input.haystack} {params.recipe} --seed {wildcards.seed} --label-arch {wildcards.arch} "
        "--no-progress --out {output} > {log} 2>&1"


SCR_RUNS = [(b, a, s) for b, a in SCR_LONG for s in SCR_SEEDS]
SCR_LABELS = " ".join(f"arch={a},seed={s},budget={b}" for b, a, s in SCR_RUNS)


SCR_LABELLED = {"niah": "niah.csv", "train": "metrics.csv", "evals": "evals.csv"}  # table -> each run's file


rule collect_scratch_labelled:
    """Every long run's rows of one kind, with arch, seed and budget: scratch_train.csv (its metrics row: held-out
    loss, tokens, GPU-seconds as wall_s), scratch_evals.csv (the held-out loss along the run, the curve per arch and
    budget) and scratch_niah.csv (its NIAH cells)."""
    input:
        runs=lambda wc: [f"{SCR_RES}/{b}/{a}/seed{s}/{SCR_LABELLED[wc.table]}" for b, a, s in SCR_RUNS],
        code=COLLECT_CODE,
    output:
        f"{RES}/scratch_{{table}}.csv",
    wildcard_constraints:
        table="|".join(SCR_LABELLED),
    params:
        labels=SCR_LABELS,
    log:
        f"{WORK}/logs/collect_scratch_{{table}}.log",
    conda:
        CONDA_ENV
    shell:
        "python -m suite.collect labelled --inputs {input.runs} --labels {params.labels} --out {output} 2>&1 | tee {log}"


rule collect_scratch_ppl:
    """Every long run's held-out loss by position bucket (the loss-by-position figure, the audit's proxies)."""
    input:
        ppl=[f"{SCR_RES}/{b}/{a}/seed{s}/ppl.csv" for b, a, s in SCR_RUNS],
        code=COLLECT_CODE,
    output:
        f"{RES}/scratch_ppl.csv",
    log:
        f"{WORK}/logs/collect_scratch_ppl.log",
    conda:
        CONDA_ENV
    shell:
        "python -m suite.collect concat --inputs {input.ppl} --out {output} 2>&1 | tee {log}"


rule scratch_controls:
    """The study's controls (suite.eval.controls). scratch_lm: the Transformer's equal-token runs below the unigram
    cross-entropy of the study's own val split (positive), its untrained step-1 loss at chance (negative); the audit
    voids the study's proxies unless both pass. scratch_niah (with scratch.niah): the equal-token Transformer within
    seq_len (positive), SWA beyond layers x (w - 1) tokens (negative)."""
    input:
        train=f"{RES}/scratch_train.csv",
        niah=f"{RES}/scratch_niah.csv" if SCR_NIAH else [],
        first=[f"{SCR_RES}/tokens/transformer/seed{s}/loss.csv" for s in SCR_SEEDS],
        tokens=[rules.scratch_data.output.tokenizer, rules.scratch_data.output.train, rules.scratch_data.output.val],
        code=sources("suite.eval.controls"),
    output:
        f"{RES}/scratch_controls.csv",
    params:
        data=lambda w, input: folder(input.tokens[1], 2),
        niah=lambda w, input: f"--scratch-niah {input.niah} " if SCR_NIAH else "",
    log:
        f"{WORK}/logs/scratch_controls.log",
    conda:
        CONDA_ENV
    shell:
        "python -m suite.eval.controls --scratch-train {input.train} --scratch-first-loss {input.first} "
        "--scratch-data-dir {params.data} {params.niah}--out {output} 2>&1 | tee {log}"


rule scratch:
    """The from-scratch study (opt-in target: `snakemake --cores all scratch --resources gpu=1 --config profile=gpu`;
    in time-capped parts: suite/experiments/from_scratch/README.md)."""
    input:
        f"{RES}/scratch_train.csv",
        rules.scratch_controls.output,
        f"{RES}/scratch_niah.csv" if SCR_NIAH else [],
        f"{RES}/scratch_evals.csv",
        rules.collect_scratch_ppl.output,
        SCR_PICK,
        SCR_BUDGET,
