"""A built corpus's layout, shared by every reader of its splits: the splits' names, the document separator (the
end-of-text token on a line of its own, between documents of ``{train,val,test}.txt``) and :func:`read_split`.

Apart from the corpus builders (:mod:`suite.data.corpus` and the sources it reads), so that a job that only reads a
corpus (the tokenizer, training, evaluation) does not depend on how one is built (``suite.deps``).
"""
from __future__ import annotations

from pathlib import Path

EOS_TOKEN = "<|endoftext|>"
DOC_SEPARATOR = f"\n{EOS_TOKEN}\n"
SPLITS = ("train", "val", "test")


def read_split(data_dir: str | Path, split: str) -> list[str]:
    """The documents of one split of a built corpus. Raises ValueError naming a missing split file."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
    path = Path(data_dir) / f"{split}.txt"
    if not path.exists():
        raise ValueError(f"{path} does not exist: build the corpus first (python -m suite.data.corpus)")
    text = path.read_text(encoding="utf-8")
    return [d for d in text.split(DOC_SEPARATOR) if d] if text else []
