# Corpus (real text, offline by default: the Python standard library's sources) and tokenizer.

rule corpus:
    input:
        code("suite/data/corpus.py"),
    output:
        train=f"{DATA}/train.txt",
        val=f"{DATA}/val.txt",
        test=f"{DATA}/test.txt",
        meta=f"{DATA}/corpus.json",
    log:
        f"{WORK}/logs/corpus.log",
    shell:
        "{PY} suite.data.corpus {CFG} --data-dir {DATA} --overwrite > {log} 2>&1"


rule tokenizer:
    input:
        rules.corpus.output,
        code("suite/data/tokenizer.py"),
    output:
        tokenizer=f"{DATA}/tokenizer/tokenizer.json",
        train=f"{DATA}/tokens/train.npy",
        val=f"{DATA}/tokens/val.npy",
        test=f"{DATA}/tokens/test.npy",
    log:
        f"{WORK}/logs/tokenizer.log",
    shell:
        "{PY} suite.data.tokenizer {CFG} --data-dir {DATA} > {log} 2>&1"
