# The positive and negative controls of every experiment, which decide whether it can say anything at all
# (suite.eval.controls; docs/controls.md): after the experiments, whose outputs and control cells they read.

# the pretrained models' benchmark rows (the conversion experiment on a real LM): the benchmarks' positive and negative
# controls
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
