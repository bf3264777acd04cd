"""Train the study's tokenizer and encode the corpus splits to flat token arrays.

Two kinds, both byte-level (any UTF-8 text round-trips) and both saved as a
``transformers.PreTrainedTokenizerFast`` folder (``tokenizer.json`` + ``tokenizer_config.json``) so a
checkpoint works with ``AutoTokenizer.from_pretrained(dir)`` and lm-eval:

- ``bpe``: byte-level BPE trained with HF ``tokenizers`` on the train split (``vocab_size`` includes the
  256 byte symbols and the 4 special tokens);
- ``bytes``: the 256 byte symbols plus the special tokens, no merges (fast, vocab 260).

Special tokens: ``<|bos|>``, ``<|endoftext|>`` (EOS, also the document separator), ``<|pad|>``, ``<|unk|>``.

Encoded splits are ``<data_dir>/tokens/{split}.npy`` (uint16 when the vocabulary fits, else int32), a
flat array with the EOS id after every document; ``tokens/meta.json`` caches them against the
tokenizer file and corpus hash. Encoding uses ``encode_batch`` (Rust; ``--threads``, else all cores).

CLI: ``python -m suite.data.tokenizer --data-dir D [--kind bpe] [--vocab-size 4096] [--threads N]`` trains (if needed)
and encodes all splits.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from suite.cli import in_folder, positive_int, study_config, usage_errors
from suite.data.splits import EOS_TOKEN, SPLITS, read_split

BOS_TOKEN, PAD_TOKEN, UNK_TOKEN = "<|bos|>", "<|pad|>", "<|unk|>"
SPECIAL_TOKENS = [BOS_TOKEN, EOS_TOKEN, PAD_TOKEN, UNK_TOKEN]
KINDS = ("bpe", "bytes")
MIN_VOCAB = 256 + len(SPECIAL_TOKENS)
STAMP = "suite_tokenizer.json"  # what the saved tokenizer was trained from (train_tokenizer)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")  # what loaders read (tokenizers, AutoTokenizer)


def train_tokenizer(data_dir: str | Path, kind: str = "bpe", vocab_size: int = 4096,
                    out_dir: str | Path | None = None, overwrite: bool = False) -> Path:
    """Train a byte-level tokenizer on ``<data_dir>/train.txt`` and save it to ``out_dir``
    (default ``<data_dir>/tokenizer``); return the folder. Reuses a saved tokenizer unless ``overwrite``: only when
    its stamp (``suite_tokenizer.json``: kind, vocabulary size and the sha256 of the corpus it was trained on)
    matches and its files (``TOKENIZER_FILES``) are all there, so a folder whose tokenizer.json was deleted (as
    Snakemake deletes a job's outputs before rerunning it) or whose corpus changed is trained again.

    Raises ValueError for an unknown kind or ``vocab_size`` below 260 (bpe) / above 65536.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown tokenizer kind {kind!r}; expected one of {KINDS}")
    if kind == "bpe" and not MIN_VOCAB <= vocab_size <= 65536:
        raise ValueError(f"vocab_size {vocab_size} out of range [{MIN_VOCAB}, 65536] for a byte-level BPE")
    out_dir = Path(out_dir or Path(data_dir) / "tokenizer")
    stamp = {"kind": kind, "vocab_size": vocab_size if kind == "bpe" else MIN_VOCAB,
             "corpus_sha256": _corpus_sha256(data_dir)}
    stamp_path = out_dir / STAMP
    if not overwrite and _read_stamp(stamp_path) == stamp and all((out_dir / f).is_file() for f in TOKENIZER_FILES):
        return out_dir
    stamp_path.unlink(missing_ok=True)  # no stamp while the folder is being rewritten
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=stamp["vocab_size"], special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
                                  min_frequency=2)
    docs = read_split(data_dir, "train")
    if kind == "bytes":
        docs = ["".join(chr(c) for c in range(256))]  # alphabet only: no merges are possible at this size
    tok.train_from_iterator(docs, trainer=trainer, length=len(docs))
    save_hf_tokenizer(tok, out_dir)
    stamp_path.write_text(json.dumps(stamp))
    return out_dir


def _corpus_sha256(data_dir: str | Path) -> str | None:
    """sha256 recorded in ``<data_dir>/corpus.json`` (None for a folder without one: train.txt written by hand)."""
    path = Path(data_dir) / "corpus.json"
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())["sha256"]
    except (json.JSONDecodeError, KeyError) as err:
        raise ValueError(f"corrupt corpus file {path}: {err!r}") from err


def _read_stamp(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None  # absent or half-written: train again


def save_hf_tokenizer(tok: Tokenizer, out_dir: str | Path) -> None:
    """Save a ``tokenizers.Tokenizer`` as a PreTrainedTokenizerFast folder with bos/eos/pad/unk set."""
    from transformers import PreTrainedTokenizerFast

    hf_tok = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=BOS_TOKEN, eos_token=EOS_TOKEN,
                                     pad_token=PAD_TOKEN, unk_token=UNK_TOKEN)
    hf_tok.model_max_length = 1 << 20
    hf_tok.save_pretrained(str(out_dir))


def load_tokenizer(tokenizer_dir: str | Path) -> Tokenizer:
    """The raw ``tokenizers.Tokenizer`` of a saved folder. Raises ValueError naming a missing/corrupt file."""
    path = Path(tokenizer_dir) / "tokenizer.json"
    try:
        return Tokenizer.from_file(str(path))
    except Exception as err:
        raise ValueError(f"cannot load tokenizer file {path}: {err}") from err


def special_ids(tok: Tokenizer) -> dict[str, int]:
    """{"bos": id, "eos": id, "pad": id, "unk": id} of a tokenizer trained here."""
    return {name: tok.token_to_id(t) for name, t in zip(("bos", "eos", "pad", "unk"), SPECIAL_TOKENS)}


def encode_documents(tok: Tokenizer, docs: list[str], batch: int = 512) -> np.ndarray:
    """Flat token ids of ``docs`` with the EOS id after each document; dtype uint16 if the vocabulary
    fits in 16 bits, else int32. Shape [n_tokens]."""
    eos = tok.token_to_id(EOS_TOKEN)
    dtype = np.uint16 if tok.get_vocab_size() <= 65536 else np.int32
    parts = []
    for i in range(0, len(docs), batch):
        for enc in tok.encode_batch(docs[i:i + batch], add_special_tokens=False):
            parts.append(np.asarray(enc.ids + [eos], dtype=dtype))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)


def encode_splits(data_dir: str | Path, tokenizer_dir: str | Path | None = None,
                  splits: tuple[str, ...] = SPLITS) -> dict[str, Path]:
    """Encode each split to ``<data_dir>/tokens/{split}.npy``; return {split: path}.

    Cached: a split is re-encoded only when the tokenizer file or corpus sha256 changed.
    """
    data_dir = Path(data_dir)
    tokenizer_dir = Path(tokenizer_dir or data_dir / "tokenizer")
    tok = load_tokenizer(tokenizer_dir)
    key = {"tokenizer_sha256": hashlib.sha256((tokenizer_dir / "tokenizer.json").read_bytes()).hexdigest(),
           "corpus_sha256": json.loads((data_dir / "corpus.json").read_text())["sha256"]}
    out = data_dir / "tokens"
    out.mkdir(parents=True, exist_ok=True)
    meta_path = out / "meta.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    paths = {}
    for split in splits:
        path = out / f"{split}.npy"
        cached = meta.get(split, {})
        if any(cached.get(k) != v for k, v in key.items()) or not path.exists():
            arr = encode_documents(tok, read_split(data_dir, split))
            tmp = out / f".{split}.tmp.npy"
            np.save(tmp, arr)
            os.replace(tmp, path)
            meta[split] = {**key, "n_tokens": int(arr.size)}
            meta_path.write_text(json.dumps(meta, indent=2))
        paths[split] = path
    return paths


def load_tokens(data_dir: str | Path, split: str) -> np.ndarray:
    """The encoded split as a read-only memory-mapped array [n_tokens]. Raises ValueError naming a
    missing or corrupt file."""
    path = Path(data_dir) / "tokens" / f"{split}.npy"
    try:
        return np.load(path, mmap_mode="r")
    except FileNotFoundError:
        raise ValueError(f"{path} does not exist: run python -m suite.data.tokenizer --data-dir {data_dir}") from None
    except (ValueError, OSError) as err:
        raise ValueError(f"corrupt token file {path}: {err}") from err


def check_data_dir(data_dir: str | Path, splits: tuple[str, ...] = ("train",), *, tokenizer: bool = True,
                   corpus: bool = False) -> Path:
    """``data_dir`` as a Path when it holds what a training or evaluation CLI reads: the tokenizer files
    (``TOKENIZER_FILES``, unless ``tokenizer`` is False), ``tokens/<split>.npy`` of each of ``splits`` and, with
    ``corpus``, ``corpus.json``. Raises FileNotFoundError naming the folder (or the files it lacks) and how to make
    them: the DAG's ``tokenizer`` rule (``snakemake --cores all tokenizer``, which runs the corpus rule first), or
    the two modules by hand. Checked before a tokenizer load, which would take a missing local folder for a Hub id."""
    data_dir = Path(data_dir)
    make = ("the DAG's `tokenizer` rule makes a profile's data folder (`snakemake --cores all tokenizer`, "
            "`--config profile=NAME` for another profile than default); for this folder by hand: "
            f"python -m suite.data.corpus --data-dir {data_dir} && "
            f"python -m suite.data.tokenizer --data-dir {data_dir}")
    if not data_dir.is_dir():
        raise FileNotFoundError(f"data folder {data_dir} not found: {make}")
    needed = ([f"tokenizer/{name}" for name in TOKENIZER_FILES] if tokenizer else []) + \
        [f"tokens/{split}.npy" for split in splits] + (["corpus.json"] if corpus else [])
    missing = [name for name in needed if not (data_dir / name).is_file()]
    if missing:
        raise FileNotFoundError(f"data folder {data_dir} lacks {', '.join(missing)}: {make}")
    return data_dir


def prepare(data_dir: str | Path, kind: str = "bpe", vocab_size: int = 4096) -> Path:
    """Train (if needed) the tokenizer and encode all splits; return the tokenizer folder."""
    tok_dir = train_tokenizer(data_dir, kind, vocab_size)
    encode_splits(data_dir, tok_dir)
    return tok_dir


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Train the tokenizer and encode the corpus splits.")
    ap.add_argument("--data-dir", required=True, type=in_folder)
    ap.add_argument("--config", type=study_config,
                    help="profile name or study-config path; its data section gives the defaults")
    ap.add_argument("--kind", choices=KINDS)
    ap.add_argument("--vocab-size", type=positive_int)
    ap.add_argument("--threads", type=positive_int, help="threads for training and encoding (default: the tokenizers "
                                                          "library's, all cores unless TOKENIZERS_PARALLELISM=false)")
    args = ap.parse_args(argv)
    if args.threads is not None:
        # read by the Rust side when it first runs in parallel, which is after this
        os.environ["RAYON_NUM_THREADS"] = str(args.threads)
        os.environ["TOKENIZERS_PARALLELISM"] = "true" if args.threads > 1 else "false"
    data = {}
    if args.config:
        from suite.config import load_config

        data = load_config(args.config)["data"]
    with usage_errors(ap):  # a vocab size out of range; no corpus in --data-dir
        kind = args.kind or data.get("tokenizer", "bpe")
        vocab = args.vocab_size if args.vocab_size is not None else data.get("vocab_size", 4096)
        tok_dir = prepare(args.data_dir, kind, vocab)
    meta = json.loads((Path(args.data_dir) / "tokens" / "meta.json").read_text())
    print(json.dumps({"tokenizer": str(tok_dir), **{s: meta[s]["n_tokens"] for s in SPLITS if s in meta}}))


if __name__ == "__main__":
    main()
