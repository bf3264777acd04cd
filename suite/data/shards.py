"""A prepared data folder packed into checked shards of at most N MiB, for a host without a package index.

``pack`` writes the folder's files (all but ``DEFAULT_EXCLUDE``: the unpacked archives and the train text, which
``tokens/train.npy`` holds encoded) as one tar stream, compressed with xz (``lzma``, preset 6), cut into
``shard-NNN.xz`` files of at most ``--max-mib`` MiB, and ``manifest.json``: every shard's name, size and sha256, every
file's path, size and sha256, and what the folder was built from (``about``: the ``key`` of its ``english.json``).
``unpack`` checks every shard against the manifest first (a missing or corrupt shard is refused by name, before
anything is written), then writes each file through a temporary name and checks it too.

Why xz: on the token ids of the gpu profile's English corpus (uint16) it gave the smallest shards of the standard
library's compressors, 35% of the array against bz2's 42% and gzip's 46%, at about 1 MB/s; a higher preset gave no
smaller shards, splitting the ids into byte planes larger ones (tools/offline_gpu/README.md has the numbers).

CLI: ``python -m suite.data.shards pack DATA_DIR SHARD_DIR [--max-mib 40]``; ``python -m suite.data.shards unpack
SHARD_DIR DATA_DIR``; ``python -m suite.data.shards verify SHARD_DIR``.
"""
from __future__ import annotations

import argparse
import fnmatch
import hashlib
import io
import json
import lzma
import os
import sys
import tarfile
from pathlib import Path
from typing import Iterator

from suite.cli import in_folder, out_folder, positive_float

MANIFEST = "manifest.json"
DEFAULT_EXCLUDE = ("raw/*", "train.txt")
ABOUT = {"english": "english.json"}  # a folder's build record: its "key" goes into the manifest's "about"
MiB = 1 << 20


class ShardError(ValueError):
    """A shard folder is incomplete or damaged, or unpacking would leave the target folder; the message names it."""


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(MiB), b""):
            digest.update(chunk)
    return digest.hexdigest()


def packed_files(folder: Path, exclude=DEFAULT_EXCLUDE) -> list[str]:
    """The paths (relative, '/'-separated, sorted) of the files of ``folder`` that ``pack`` writes."""
    rels = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    return [r for r in rels if not any(fnmatch.fnmatchcase(r, pat) for pat in exclude)]


class _ShardWriter(io.RawIOBase):
    """A write-only stream that cuts what it gets into ``shard-NNN.xz`` files of at most ``limit`` bytes."""

    def __init__(self, out: Path, limit: int):
        self.out, self.limit, self.shards, self.fh = out, limit, [], None

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        view = memoryview(data)
        while view:
            if self.fh is None or self.fh.tell() >= self.limit:
                self._next()
            n = min(len(view), self.limit - self.fh.tell())
            self.fh.write(view[:n])
            view = view[n:]
        return len(data)

    def _next(self) -> None:
        self.close_shard()
        self.shards.append(self.out / f"shard-{len(self.shards):03d}.xz")
        self.fh = open(self.shards[-1], "wb")

    def close_shard(self) -> None:
        if self.fh is not None:
            self.fh.close()
            self.fh = None


def pack(folder: str | Path, out: str | Path, max_mib: float = 40, exclude=DEFAULT_EXCLUDE) -> dict:
    """Pack ``folder`` into shards of at most ``max_mib`` MiB in ``out`` (module docstring); return the manifest.
    Raises ShardError for a folder with nothing to pack or an ``out`` that already holds shards."""
    folder, out = Path(folder), Path(out)
    files = packed_files(folder, exclude)
    if not files:
        raise ShardError(f"{folder}: no file to pack")
    out.mkdir(parents=True, exist_ok=True)
    if any(out.glob("shard-*")) or (out / MANIFEST).exists():
        raise ShardError(f"{out} already holds shards: pack into an empty folder")
    writer = _ShardWriter(out, int(max_mib * MiB))
    with lzma.open(writer, "wb", preset=6) as xz, tarfile.open(fileobj=xz, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for rel in files:
            info = tar.gettarinfo(str(folder / rel), arcname=rel)
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            with open(folder / rel, "rb") as fh:
                tar.addfile(info, fh)
    writer.close_shard()
    about = {}
    for name, record in ABOUT.items():
        if (folder / record).is_file():
            about[name] = json.loads((folder / record).read_text()).get("key")
    manifest = {"format": 1, "compression": "xz", "max_mib": max_mib, "about": about,
                "shards": [{"name": p.name, "bytes": p.stat().st_size, "sha256": _sha256(p)} for p in writer.shards],
                "files": [{"path": rel, "bytes": (folder / rel).stat().st_size, "sha256": _sha256(folder / rel)}
                          for rel in files]}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def read_manifest(shard_dir: str | Path) -> dict:
    path = Path(shard_dir) / MANIFEST
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise ShardError(f"{path} not found: not a shard folder (python -m suite.data.shards pack)") from None
    except json.JSONDecodeError as err:
        raise ShardError(f"{path} is damaged: {err}") from None


def verify(shard_dir: str | Path) -> dict:
    """The manifest of ``shard_dir`` when every shard it lists is there with its size and sha256; else ShardError
    naming each missing or corrupt shard."""
    shard_dir = Path(shard_dir)
    manifest = read_manifest(shard_dir)
    bad = []
    for shard in manifest["shards"]:
        path = shard_dir / shard["name"]
        if not path.is_file():
            bad.append(f"{shard['name']} is missing")
        elif path.stat().st_size != shard["bytes"] or _sha256(path) != shard["sha256"]:
            bad.append(f"{shard['name']} is corrupt (size or sha256 differs from {MANIFEST})")
    if bad:
        raise ShardError(f"{shard_dir}: " + "; ".join(bad) + ": copy those shards again")
    return manifest


class _ShardReader(io.RawIOBase):
    """The shards of a manifest read as one stream."""

    def __init__(self, paths: list[Path]):
        self.paths, self.fh = list(paths), None

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        while True:
            if self.fh is None:
                if not self.paths:
                    return 0
                self.fh = open(self.paths.pop(0), "rb")
            n = self.fh.readinto(buf)
            if n:
                return n
            self.fh.close()
            self.fh = None


def _members(tar: tarfile.TarFile, expected: dict) -> Iterator[tarfile.TarInfo]:
    for info in tar:
        if not info.isfile() or info.name not in expected:
            raise ShardError(f"the shards hold {info.name!r}, which {MANIFEST} does not list")
        yield info


def unpack(shard_dir: str | Path, folder: str | Path) -> dict:
    """Write the files packed in ``shard_dir`` into ``folder`` after :func:`verify`; return the manifest. Each file is
    written through a temporary name and checked against its sha256. Raises ShardError naming a missing or corrupt
    shard, or a file that does not match the manifest."""
    shard_dir, folder = Path(shard_dir), Path(folder)
    manifest = verify(shard_dir)
    expected = {f["path"]: f for f in manifest["files"]}
    for rel in expected:
        if Path(rel).is_absolute() or ".." in Path(rel).parts:
            raise ShardError(f"{shard_dir}/{MANIFEST} lists {rel!r}, outside the target folder")
    reader = io.BufferedReader(_ShardReader([shard_dir / s["name"] for s in manifest["shards"]]), MiB)
    seen = set()
    with lzma.open(reader, "rb") as xz, tarfile.open(fileobj=xz, mode="r|") as tar:
        for info in _members(tar, expected):
            dest = folder / info.name
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
            digest = hashlib.sha256()
            with tar.extractfile(info) as src, open(tmp, "wb") as fh:
                for chunk in iter(lambda: src.read(MiB), b""):
                    digest.update(chunk)
                    fh.write(chunk)
            if digest.hexdigest() != expected[info.name]["sha256"]:
                tmp.unlink()
                raise ShardError(f"{info.name} unpacked from {shard_dir} does not match its sha256 in {MANIFEST}")
            os.replace(tmp, dest)
            seen.add(info.name)
    missing = sorted(set(expected) - seen)
    if missing:
        raise ShardError(f"the shards in {shard_dir} lack {missing}, which {MANIFEST} lists")
    return manifest


def find(cache: str | Path, about: dict) -> Path | None:
    """The shard folder directly under ``cache`` whose manifest's ``about`` equals ``about`` (None when there is
    none): a packed copy of the folder a build would write."""
    for path in sorted(Path(cache).glob(f"*/{MANIFEST}")):
        try:
            if json.loads(path.read_text()).get("about") == about:
                return path.parent
        except (OSError, json.JSONDecodeError):
            continue
    return None


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pack", help="pack DATA_DIR into SHARD_DIR")
    p.add_argument("data_dir", type=in_folder)
    p.add_argument("shard_dir", type=out_folder)
    p.add_argument("--max-mib", type=positive_float, default=40, help="the largest shard, in MiB (default 40)")
    p = sub.add_parser("unpack", help="check the shards of SHARD_DIR and unpack them into DATA_DIR")
    p.add_argument("shard_dir", type=in_folder)
    p.add_argument("data_dir", type=out_folder)
    p = sub.add_parser("verify", help="check the shards of SHARD_DIR against its manifest")
    p.add_argument("shard_dir", type=in_folder)
    args = ap.parse_args(argv)
    try:
        if args.command == "pack":
            manifest = pack(args.data_dir, args.shard_dir, args.max_mib)
        elif args.command == "unpack":
            manifest = unpack(args.shard_dir, args.data_dir)
        else:
            manifest = verify(args.shard_dir)
    except (ShardError, OSError, lzma.LZMAError, tarfile.TarError) as err:
        sys.exit(f"error: {err}")
    print(json.dumps({"shards": len(manifest["shards"]), "bytes": sum(s["bytes"] for s in manifest["shards"]),
                      "files": len(manifest["files"]), "unpacked_bytes": sum(f["bytes"] for f in manifest["files"])}))


if __name__ == "__main__":
    main()
