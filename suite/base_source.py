"""Where ``conversion.base_model`` points: its one source (package, gguf, folder or hub), the file or folder a local
source names, and the transformers config of a gguf or folder source, read without its weights.

Both readers of a base model go through here: the study config's checks (:func:`suite.config.validate`), which read
a local source's config when the config is read, and the base-model job (:mod:`suite.train.base_model`), which reads
any source in full. No torch and no suite module: the study config stands on it.
"""
from __future__ import annotations

import contextlib
from pathlib import Path

SOURCES = ("package", "gguf", "folder", "hub")


@contextlib.contextmanager
def named_failure(what: str):
    """Any failure of a third-party loader inside the block as a ValueError that names the config key and path."""
    try:
        yield
    except Exception as err:
        raise ValueError(f"{what}: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}") from err


def source_kind(spec: dict) -> str:
    """The one key of :data:`SOURCES` that ``spec`` gives; ValueError otherwise."""
    kind = [k for k in SOURCES if k in spec]
    if len(kind) != 1:
        raise ValueError(f"conversion.base_model needs exactly one of {SOURCES}, got {sorted(spec)}")
    return kind[0]


def gguf_path(spec: dict) -> Path:
    path = Path(spec["gguf"]).expanduser()
    if not path.is_file():
        raise ValueError(f"conversion.base_model.gguf: no file {path}")
    return path


def model_folder(spec: dict) -> Path:
    where = Path(spec["folder"]).expanduser()
    if not (where / "config.json").is_file():
        raise ValueError(f"conversion.base_model.folder: {spec['folder']} is not a Hugging Face model folder "
                         "(no config.json)")
    return where


def gguf_config(path: Path, kind: str):
    """The transformers config of a GGUF file, from its header alone (what ``from_pretrained`` will build)."""
    from transformers import AutoConfig

    with named_failure(f"conversion.base_model.{kind}: {path} does not load as a GGUF model"):
        return AutoConfig.from_pretrained(path.parent, gguf_file=path.name)


def local_config(spec: dict):
    """The transformers config of a ``{gguf: PATH}`` or ``{folder: PATH}`` base model, read from the GGUF header or
    config.json without its weights (what the study config's checks read, :func:`suite.config.base_model_problems`);
    None for a package or Hub source, whose config is known only once fetched. Raises ValueError naming the key and
    path of a missing or unreadable file or folder."""
    from transformers import AutoConfig

    kind = source_kind(spec)
    if kind == "gguf":
        return gguf_config(gguf_path(spec), kind)
    if kind == "folder":
        where = model_folder(spec)
        with named_failure(f"conversion.base_model.folder: {spec['folder']} does not load"):
            return AutoConfig.from_pretrained(where)
    return None
