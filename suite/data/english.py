"""English prose for the pretrained base model's continued training and held-out tests, offline.

The base model of the conversion arms (SmolLM2) is an English model: continued training on Python source alone would
move both arms away from the benchmarks. The default text is the Python documentation (tutorial, library reference,
HOWTOs, FAQs, "What's New": about 11 MB of reST prose in ~500 long documents), taken from Debian's ``python3.11-doc``
package as a data archive (:mod:`suite.data.packages`; PSF licence). ``conversion.pretrained.corpus`` names it:
``{package: NAME==VERSION, kind: deb, sha256: HEX, files: [PREFIX, ...]}`` (the archive members that are text), or
``{files: [GLOB, ...]}`` for local text files.

The data folder it writes has the layout every training and evaluation CLI of the suite reads
(:func:`suite.data.tokenizer.check_data_dir`): ``{train,val,test}.txt`` and ``corpus.json``
(:func:`suite.data.corpus.build_corpus`, split by document), ``tokenizer/`` (the base model's own tokenizer files)
and ``tokens/{split}.npy`` encoded with it, its end-of-text token between documents.

CLI: ``python -m suite.data.english --config gpu --base-model work_dirs/gpu/models/base --data-dir
work_dirs/gpu/data/english``
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from suite.cli import in_folder, out_folder, study_config
from suite.data import packages
from suite.data.corpus import EOS_TOKEN, build_corpus
from suite.data.tokenizer import TOKENIZER_FILES, encode_splits, load_tokenizer

RAW = "raw"


def prepare(corpus: dict, base_model: str | Path, data_dir: str | Path, cache: str | Path,
            val_fraction: float = 0.05, test_fraction: float = 0.05) -> dict:
    """Build the English data folder ``data_dir`` from ``corpus`` with the tokenizer of ``base_model``.

    Returns ``{"corpus": corpus.json record, "tokens": {split: n_tokens}}``. Raises ValueError naming the base
    model's tokenizer when it has no ``<|endoftext|>`` token (the document separator every split is encoded with),
    PackageError when the archive cannot be fetched or fails its sha256, ValueError when no file matches.
    """
    data_dir, base_model = Path(data_dir), Path(base_model)
    tok = load_tokenizer(base_model)
    if tok.token_to_id(EOS_TOKEN) is None:
        raise ValueError(f"{base_model}/tokenizer.json has no {EOS_TOKEN} token to separate documents with")
    if "package" in corpus:
        raw = data_dir / RAW
        packages.clear(raw)
        record = packages.unpack(corpus, list(corpus["files"]), raw, cache)
        globs = [str(raw / prefix / "**" / "*") for prefix in corpus["files"]]
    else:
        record, globs = {"files": list(corpus["files"])}, list(corpus["files"])
    meta = build_corpus(data_dir, source="files", files=globs, val_fraction=val_fraction,
                        test_fraction=test_fraction, overwrite=True)
    tok_dir = data_dir / "tokenizer"
    tok_dir.mkdir(parents=True, exist_ok=True)
    for name in TOKENIZER_FILES:
        shutil.copyfile(base_model / name, tok_dir / name)
    paths = encode_splits(data_dir, tok_dir)
    counts = json.loads((data_dir / "tokens" / "meta.json").read_text())
    summary = {"corpus": {"archive": record, "n_docs": meta["n_docs"], "bytes": meta["bytes"],
                          "sha256": meta["sha256"]},
               "tokens": {split: counts[split]["n_tokens"] for split in paths}}
    (data_dir / "english.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True, type=study_config,
                    help="profile name or study-config path (conversion.pretrained)")
    ap.add_argument("--base-model", required=True, type=in_folder,
                    help="the base model folder (python -m suite.train.base_model)")
    ap.add_argument("--data-dir", required=True, type=out_folder, help="output data folder")
    ap.add_argument("--cache", type=out_folder,
                    help="where fetched archives are kept (default: <data-dir>/../archives)")
    args = ap.parse_args(argv)
    from suite.config import load_config

    cfg = load_config(args.config)  # study_config validated it
    spec = cfg["conversion"].get("pretrained", {}).get("corpus")
    if spec is None:
        ap.error(f"the study config {args.config!r} has no conversion.pretrained.corpus")
    if not (Path(args.base_model) / "tokenizer.json").is_file():
        ap.error(f"--base-model {args.base_model}: no tokenizer.json (prepare it with python -m "
                 f"suite.train.base_model)")
    data = cfg["data"]
    try:
        summary = prepare(spec, args.base_model, args.data_dir, args.cache or Path(args.data_dir).parent / "archives",
                          data.get("val_fraction", 0.05), data.get("test_fraction", 0.05))
    except (packages.PackageError, ValueError) as err:
        sys.exit(f"error: {err}")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
