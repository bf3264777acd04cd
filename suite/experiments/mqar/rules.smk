# MQAR (suite/experiments/mqar/README.md): multi-query associative recall, Zoology's recipe. One model per (arch, size)
# trained on the mixture of the configured cells and tested at every (seq_len, pairs) cell; their rows in one CSV.
from suite.config import mqar_control_cell, mqar_control_size, mqar_sizes
from suite.experiments.mqar.recipe import GLA_PROBE_VARIANTS, gla_probe_args, mqar_cli_args

MQAR = STUDY["mqar"]
MQAR_CODE = sources("suite.experiments.mqar.run")
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
        arch="|".join(re.escape(a) for a in ARCHS),
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


# The GLA probe (mqar.gla_probe; table paper_tables/mqar_gla.md): FLA's reference GLA beside GLA with FLA's short
# convolution, trained on the control cell alone at the control size, every (variant, rate, seed).
GLA_PROBE = MQAR.get("gla_probe")
GLA_PROBE_OUT = f"{RES}/eval/mqar_gla/{{variant}}/lr{{i}}/seed{{seed}}.csv"
GLA_PROBE_CSV = [f"{RES}/mqar_gla.csv"] if GLA_PROBE else []


rule mqar_gla_probe:
    """GLA (variant gla: FLA's reference layer; gla_conv: with FLA's short convolution) at the MQAR control cell and
    size, at the probe's i-th rate and one seed."""
    input:
        MQAR_CODE,
    output:
        GLA_PROBE_OUT,
    wildcard_constraints:
        variant="|".join(GLA_PROBE_VARIANTS),
        i=r"\d+",
        seed=r"\d+",
    threads: THREADS
    resources:
        gpu=GPU_JOB,
    log:
        f"{WORK}/logs/mqar_gla_{{variant}}_lr{{i}}_seed{{seed}}.log",
    params:
        cfg=rule_config("mqar_gla_probe"),
        args=lambda w: " ".join(gla_probe_args(MQAR, mqar_control_cell(MQAR), w.variant,
                                               GLA_PROBE["lrs"][int(w.i)])),
        size=mqar_control_size(MQAR),
        run=SINGLE_RUN,
    conda:
        CONDA_ENV
    shell:
        "python -m suite.experiments.mqar.run {params.args} --size {params.size} --seed {wildcards.seed} "
        "--device {params.run[device]} --dtype {params.run[dtype]} --profile {params.run[profile]} --out {output} "
        "> {log} 2>&1"


rule collect_mqar_gla:
    input:
        csvs=[GLA_PROBE_OUT.format(variant=v, i=i, seed=s) for v in GLA_PROBE_VARIANTS
              for i in range(len(GLA_PROBE["lrs"])) for s in GLA_PROBE["seeds"]] if GLA_PROBE else [],
        code=COLLECT_CODE,
    output:
        f"{RES}/mqar_gla.csv",
    log:
        f"{WORK}/logs/collect_mqar_gla.log",
    conda:
        CONDA_ENV
    shell:
        "python -m suite.collect concat --inputs {input.csvs} --out {output} 2>&1 | tee {log}"
