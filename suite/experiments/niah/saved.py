"""A NIAH run's trained model kept on disk, so that an evaluation a time cap cut resumes without training again.

``python -m suite.experiments.niah.run --save-model DIR`` writes the trained model (``save_pretrained``:
``config.json`` + ``model.safetensors``, float32) and ``niah_trained.json`` into ``DIR``: the training arguments, a
digest of the code that trained it (:func:`suite.deps.source_digest`) and the training's summary columns (tokens,
final loss, train_s, ...). A later run with the same ``--save-model DIR`` loads that model instead of training, but
only when its training arguments and code digest equal the run's: a model trained with other settings or other code
is trained again, and the folder is replaced. The folder is written under ``DIR.tmp`` and swapped in, so a cut run
leaves no half-written model that a later run could take.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

TRAINED_JSON = "niah_trained.json"


def training_stamp(args: dict, vocab_size: int, train_tokens: int) -> dict:
    """What a saved model must match to be reused: ``args`` (the CLI's training arguments), the tokenizer's
    ``vocab_size``, the number of training tokens and the digest of the code ``suite.experiments.niah.run`` runs."""
    from suite.deps import source_digest

    stamp = {"args": args, "vocab_size": int(vocab_size), "train_tokens": int(train_tokens),
             "code_sha256": source_digest("suite.experiments.niah.run")}
    return json.loads(json.dumps(stamp, default=str))  # as it reads back (tuples become lists)


def check_folder(folder: str | Path) -> None:
    """Raise ValueError unless ``folder`` is absent, empty, or a model this module saved (which it may replace):
    nothing else is ever deleted."""
    folder = Path(folder)
    if folder.exists() and not (folder / TRAINED_JSON).is_file() and (not folder.is_dir() or any(folder.iterdir())):
        raise ValueError(f"--save-model {folder}: exists and holds no {TRAINED_JSON}; name a new or empty folder "
                         f"(a saved model is replaced, nothing else is deleted)")


def save_trained(model, folder: str | Path, stamp: dict, summary: dict) -> Path:
    """Write ``model`` and ``{stamp, summary}`` into ``folder`` (replacing a model saved there) via
    ``folder.tmp``; returns folder. Raises ValueError (:func:`check_folder`) for any other existing folder."""
    folder = Path(folder)
    check_folder(folder)
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    (tmp / TRAINED_JSON).write_text(json.dumps({"stamp": stamp, "summary": summary}, indent=2, default=str))
    if folder.exists():
        shutil.rmtree(folder)
    os.replace(tmp, folder)
    return folder


def load_trained(folder: str | Path, stamp: dict, device: str):
    """``(model, summary, None)`` of the model saved in ``folder`` when its stamp equals ``stamp``, else
    ``(None, None, why)`` (no folder, other training arguments or code, an unreadable record or model): the
    caller trains afresh and says why."""
    path = Path(folder) / TRAINED_JSON
    if not path.is_file():
        return None, None, f"no trained model in {folder}"
    try:
        record = json.loads(path.read_text())
        saved, summary = record["stamp"], dict(record["summary"])
        changed = sorted(k for k in set(saved["args"]) | set(stamp["args"])
                         if saved["args"].get(k) != stamp["args"].get(k))
        changed += [k for k in ("vocab_size", "train_tokens", "code_sha256") if saved.get(k) != stamp[k]]
    except (ValueError, KeyError, TypeError, AttributeError) as err:  # not a record this module wrote
        return None, None, f"{path} unreadable ({type(err).__name__}: {err})"
    if changed:
        return None, None, f"{folder} was trained with other {', '.join(changed)}"
    from suite.train.checkpoint import load_model

    try:
        model, _ = load_model(folder, dtype="float32", device=device, tokenizer=False)
    except (ValueError, OSError) as err:
        return None, None, f"{folder}: model unreadable ({err})"
    return model, summary, None
