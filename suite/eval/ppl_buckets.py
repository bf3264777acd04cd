"""Held-out perplexity by position bucket: where in a long document a model's loss lies.

An Orthros window can only matter past w tokens: below it both streams see every key, and a converted model computes
the Transformer's function there. So the loss of each scored token is filed by the token's position in its document
(1-based: the first predicted token is position 2, having seen one token) into buckets ``<= 128``, ``129-1K`` and
``1K-8K`` (:data:`BUCKETS`; ``--buckets`` gives others by their upper ends, e.g. ``128,512,2048``: ``<=128``,
``129-512``, ``513-2048``), on the held-out documents of the English data folder (:mod:`suite.data.english`) that
are longest, each read from its start up to ``max_len`` tokens in one forward pass (no striding, so every token sees
its whole prefix).

One row per bucket: mean NLL (nats per token) over the bucket's tokens, its perplexity, and the token and document
counts; plus the provenance columns and any ``--tag KEY=VALUE`` columns (e.g. the from-scratch study's arch and
budget). Each row names its ``domain``: ``all`` for the longest documents of the split; with ``--by-domain``, also
the longest ``--docs`` documents of each domain, a document's domain being its source's ``check`` (``prose`` or
``code``) in the data folder's ``corpus.json`` (a corpus built from sources by :mod:`suite.data.english`).

CLI: ``python -m suite.eval.ppl_buckets --checkpoint DIR --data-dir work_dirs/gpu/data/english --max-len 8192
--docs 8 --variant base --out results/gpu/pretrained/eval/base/seed0/ppl.csv``
"""
from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np
import torch

from suite.cli import device_name, in_folder, nonnegative_int, out_file, positive_int, positive_ints, usage_errors
from suite.common import DTYPES, autocast
from suite.provenance import provenance, write_csv

BUCKETS = ((2, 128, "<=128"), (129, 1024, "129-1K"), (1025, 8192, "1K-8K"))


def buckets_of(ends: list[int]) -> tuple[tuple[int, int, str], ...]:
    """Buckets ``(lo, hi, name)`` from their rising upper ends: the first from position 2 (``<=END``), each next one
    from the previous end + 1 (``LO-HI``). ValueError for ends that do not rise or a first end below 2."""
    if not ends or ends[0] < 2 or any(b <= a for a, b in zip(ends, ends[1:])):
        raise ValueError(f"bucket ends must rise from at least 2 (value {list(ends)})")
    los = [2] + [e + 1 for e in ends[:-1]]
    return tuple((lo, hi, f"<={hi}" if i == 0 else f"{lo}-{hi}") for i, (lo, hi) in enumerate(zip(los, ends)))
WHOLE = "all"  # the domain of rows over the whole split (suite.report.measured.whole_split reads it)
COLUMNS = ["variant", "domain", "bucket", "pos_min", "pos_max", "nll", "ppl", "n_tokens", "n_docs", "max_len", "split"]


def documents(tokens: np.ndarray, eos_id: int) -> list[np.ndarray]:
    """The non-empty documents of a flat token array with ``eos_id`` after each (as :mod:`suite.data.tokenizer`
    writes)."""
    return [d for d in every_document(tokens, eos_id) if len(d)]


def domains(data_dir: str | Path, split: str) -> list[str]:
    """Each document's domain in ``split``, in the order of its token array: its source's ``check`` (``prose`` unless
    the source says ``code``), from ``corpus.json`` (a package source's documents are named ``package:member``, a
    local one's by path). ValueError naming the file where it records no sources or a document of none."""
    from suite.data.doc_sources import label_of

    path = Path(data_dir) / "corpus.json"
    try:
        meta = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ValueError(f"{path} cannot be read: {err}") from None
    specs = (meta.get("settings") or {}).get("sources") if isinstance(meta, dict) else None
    if not isinstance(specs, list) or not specs:
        raise ValueError(f"{path} records no sources (settings.sources): --by-domain needs a corpus built from "
                         "sources (python -m suite.data.english)")
    names = (meta.get("docs") or {}).get(split) if isinstance(meta.get("docs"), dict) else None
    if not isinstance(names, list):
        raise ValueError(f"{path} lists no documents of split {split} (docs.{split})")
    check: dict[str, str] = {}
    for spec in specs:
        label, kind = label_of(spec), spec.get("check", "prose")
        if check.setdefault(label, kind) != kind:
            raise ValueError(f"{path}: sources labelled {label!r} have both checks {check[label]!r} and {kind!r}")
    out = []
    for name in names:
        label = name.partition(":")[0] if ":" in name and name.partition(":")[0] in check else "files"
        if label not in check:
            raise ValueError(f"{path}: document {name!r} of split {split} belongs to no recorded source")
        out.append(check[label])
    return out


def every_document(tokens: np.ndarray, eos_id: int) -> list[np.ndarray]:
    """Every document of a flat token array with ``eos_id`` after each, empty ones too (one per corpus.json name)."""
    ends = np.flatnonzero(np.asarray(tokens) == eos_id)
    starts = np.concatenate([[0], ends[:-1] + 1])
    return [np.asarray(tokens[s:e]) for s, e in zip(starts, ends)]


def longest(docs: list[np.ndarray], n: int) -> list[np.ndarray]:
    """The ``n`` longest documents, longest first (ties by position: deterministic)."""
    order = sorted(range(len(docs)), key=lambda i: (-len(docs[i]), i))
    return [docs[i] for i in order[:n]]


@torch.no_grad()
def token_nll(model, ids: np.ndarray, device: str, dtype: str) -> np.ndarray:
    """NLL (nats) of tokens 2..len(ids) of one document given their prefix: shape [len(ids) - 1]."""
    x = torch.as_tensor(np.asarray(ids, dtype=np.int64), device=device)[None]
    with autocast(device, dtype):
        logits = model(input_ids=x).logits[0, :-1].float()
    return torch.nn.functional.cross_entropy(logits, x[0, 1:], reduction="none").cpu().numpy()


def bucket_rows(nlls: list[np.ndarray], max_len: int, buckets=BUCKETS) -> list[dict]:
    """One row per bucket of ``buckets`` from per-document NLL arrays (entry i is the NLL of the token at position
    i + 2)."""
    rows = []
    for lo, hi, name in buckets:
        hi = min(hi, max_len)
        if lo > hi:
            continue
        part = [d[lo - 2:hi - 1] for d in nlls if len(d) >= lo - 1]
        n = sum(len(p) for p in part)
        nll = float(np.concatenate(part).mean()) if n else math.nan
        rows.append({"bucket": name, "pos_min": lo, "pos_max": hi, "nll": nll,
                     "ppl": math.exp(nll) if n else math.nan, "n_tokens": n, "n_docs": len(part)})
    return rows


def by_domain(tokens: np.ndarray, eos_id: int, labels: list[str], name: str) -> dict[str, list[np.ndarray]]:
    """The non-empty documents of ``tokens`` per domain (``labels``: one per document, :func:`domains`); ValueError
    naming the array when it holds another number of documents than there are labels."""
    docs = every_document(tokens, eos_id)
    if len(docs) != len(labels):
        raise ValueError(f"{name} holds {len(docs)} documents, corpus.json names {len(labels)}")
    out: dict[str, list[np.ndarray]] = {}
    for doc, label in zip(docs, labels):
        if len(doc):
            out.setdefault(label, []).append(doc)
    return dict(sorted(out.items()))


def _tag(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key, value


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", required=True, type=in_folder, help="HF model folder")
    ap.add_argument("--data-dir", required=True, type=in_folder,
                    help="English data folder (tokens/<split>.npy, tokenizer/)")
    ap.add_argument("--split", default="val", choices=["val", "test"])
    ap.add_argument("--max-len", type=positive_int, default=8192, help="tokens read from each document's start")
    ap.add_argument("--docs", type=positive_int, default=8, help="the longest N held-out documents")
    ap.add_argument("--variant", required=True, help="arm label (base, converted, base_cpt, conversion, ...)")
    ap.add_argument("--seed", type=nonnegative_int, default=0)
    ap.add_argument("--device", type=device_name, default="cpu")
    ap.add_argument("--dtype", default="float32", choices=list(DTYPES))
    ap.add_argument("--profile", default="smoke")
    ap.add_argument("--buckets", type=positive_ints, help="the buckets' upper ends, rising (default: 128,1024,8192)")
    ap.add_argument("--by-domain", action="store_true",
                    help="also score the longest --docs documents of each domain (its source's check: prose, code)")
    ap.add_argument("--tag", nargs="*", default=[], type=_tag, help="KEY=VALUE columns added to every row")
    ap.add_argument("--out", required=True, type=out_file)
    args = ap.parse_args(argv)
    with usage_errors(ap):
        buckets = buckets_of(args.buckets) if args.buckets else BUCKETS
    from suite.data.splits import EOS_TOKEN
    from suite.data.tokenizer import check_data_dir, load_tokenizer, load_tokens
    from suite.train.checkpoint import checkpoint_folder, load_model

    with usage_errors(ap, FileNotFoundError, NotADirectoryError, ValueError):
        check_data_dir(args.data_dir, (args.split,))
        checkpoint_folder(args.checkpoint)
        eos = load_tokenizer(Path(args.data_dir) / "tokenizer").token_to_id(EOS_TOKEN)
        tokens = load_tokens(args.data_dir, args.split)
        groups = {WHOLE: documents(tokens, eos)}
        if args.by_domain:
            groups |= by_domain(tokens, eos, domains(args.data_dir, args.split),
                                f"{args.data_dir}/tokens/{args.split}.npy")
    start = time.time()
    model, _ = load_model(args.checkpoint, None, "float32", args.device)
    limit = getattr(model.config, "max_position_embeddings", args.max_len)
    if args.max_len > limit:
        ap.error(f"--max-len {args.max_len} exceeds the model's {limit} positions")
    nlls = {name: [token_nll(model, d[:args.max_len], args.device, args.dtype) for d in longest(docs, args.docs)]
            for name, docs in groups.items()}
    from models.kernels import describe

    prov = provenance(profile=args.profile, device=args.device, dtype=args.dtype, seed=args.seed,
                      backend=describe(args.device), wall_s=time.time() - start)
    rows = [{"variant": args.variant, **dict(args.tag), "domain": name, **row, "max_len": args.max_len,
             "split": args.split, **prov}
            for name, group in nlls.items() for row in bucket_rows(group, args.max_len, buckets)]
    write_csv(rows, args.out)
    for row in rows:
        print(row["domain"], row["bucket"], round(row["nll"], 4), row["n_tokens"])


if __name__ == "__main__":
    main()
