"""How a corpus's BPE compresses at several vocabulary sizes: the evidence behind a study's tokenizer size.

For each size, a byte-level BPE (:func:`suite.data.tokenizer.train_tokenizer`, as the study trains its own) is trained
on a deterministic sample of the train split's documents (every k-th) and encodes the same share of the held-out
split; a row gives the bytes per token on all of it and on its prose and code documents apart (a document is code
when its name ends ``.py``), and the embedding and output-head parameters the size costs at ``--hidden``. More
bytes a token means more text in a fixed token budget; the parameters are the price.

CLI: ``python -m suite.data.vocab_compare --data-dir work_dirs/gpu/data/scratch --sizes 8192,16384,32768 --every 20
--hidden 512 --out results/gpu/scratch_tokenizer.csv``
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from suite.cli import in_folder, out_file, positive_int, positive_ints, usage_errors
from suite.data.splits import DOC_SEPARATOR, read_split
from suite.data.tokenizer import load_tokenizer, train_tokenizer


def sample(docs: list, every: int) -> list:
    """Every ``every``-th item of ``docs``, from the first."""
    return docs[::every]


def compare(data_dir: str | Path, sizes: list[int], every: int, hidden: int) -> list[dict]:
    """One row per vocabulary size (module docstring). ValueError naming the folder when it has no corpus.json."""
    data_dir = Path(data_dir)
    meta_path = data_dir / "corpus.json"
    if not meta_path.is_file():
        raise ValueError(f"{meta_path} not found: build the corpus first")
    names = json.loads(meta_path.read_text())["docs"]
    train = sample(read_split(data_dir, "train"), every)
    held = list(zip(sample(names["val"], every), sample(read_split(data_dir, "val"), every)))
    kinds = {"all": [t for _, t in held], "code": [t for n, t in held if n.endswith(".py")],
             "prose": [t for n, t in held if not n.endswith(".py")]}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "train.txt").write_text(DOC_SEPARATOR.join(train), encoding="utf-8")
        for size in sizes:
            start = time.perf_counter()
            tok = load_tokenizer(train_tokenizer(tmp, "bpe", size, Path(tmp) / f"tok{size}", overwrite=True))
            row = {"vocab_size": size, "train_docs": len(train), "train_bytes": sum(len(t.encode()) for t in train),
                   "held_docs": len(held)}
            for kind, texts in kinds.items():
                n_bytes = sum(len(t.encode()) for t in texts)
                n_tokens = sum(len(e.ids) for e in tok.encode_batch(texts, add_special_tokens=False))
                row |= {f"bytes_{kind}": n_bytes, f"tokens_{kind}": n_tokens,
                        f"bytes_per_token_{kind}": n_bytes / n_tokens if n_tokens else float("nan")}
            row |= {"embedding_params": 2 * size * hidden, "hidden": hidden,
                    "wall_s": round(time.perf_counter() - start, 1)}
            rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", required=True, type=in_folder, help="a built corpus (corpus.json, train/val text)")
    ap.add_argument("--sizes", required=True, type=positive_ints, help="vocabulary sizes, e.g. 8192,16384,32768")
    ap.add_argument("--every", type=positive_int, default=20, help="read every k-th document of each split")
    ap.add_argument("--hidden", type=positive_int, default=512, help="hidden size, for the embedding parameters")
    ap.add_argument("--profile", default="gpu", help="profile label for the provenance columns")
    ap.add_argument("--out", required=True, type=out_file)
    args = ap.parse_args(argv)
    with usage_errors(ap):
        rows = compare(args.data_dir, args.sizes, args.every, args.hidden)
    from suite.provenance import provenance, write_csv

    wall = sum(r["wall_s"] for r in rows)
    write_csv([{**r, **provenance(args.profile, None, "none", "tokenizers", "cpu", wall)} for r in rows], args.out)
    for r in rows:
        print(r["vocab_size"], round(r["bytes_per_token_all"], 3), round(r["bytes_per_token_prose"], 3),
              round(r["bytes_per_token_code"], 3))


if __name__ == "__main__":
    main()
