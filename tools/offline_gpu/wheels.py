"""Wheels for a GPU host without internet access, built on a machine with a package index, and their check there.

The host has its own Python with torch, Triton and whatever else its image holds (``pip list --format=freeze`` on the
host, copied here: ``--host``). Starting from the suite's requirements (pyproject.toml), a package the host holds at
a version that meets every requirement on it stays the host's; any other travels as a wheel at the version this
venv runs (the versions the tests ran with), and so do its own requirements, recursively.

    python tools/offline_gpu/wheels.py build --host host_packages.txt     # here: .whl/ and .whl.tar
    python3 tools/offline_gpu/wheels.py check                              # on the host, after installing them

``build`` downloads each wheel for the host's interpreter (``--python-version``, manylinux x86_64; a package with
only a source distribution is built here into a pure-Python wheel), writes ``.whl/MANIFEST.txt`` and packs the
folder into one file, ``.whl.tar``. ``--extra NAME==VERSION`` adds a wheel the venv does not hold (no dependencies
followed: list them too), e.g. tilelang for GatedDeltaNet's backward on Hopper with Triton < 3.7.1. ``check`` walks
the same requirements through what imports on the host and prints what is missing or at a wrong version.
"""
from __future__ import annotations

import argparse
import importlib.metadata as md
import re
import subprocess
import sys
import tarfile
import tempfile
import tomllib
from pathlib import Path
from typing import Callable

from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
PLATFORMS = ["manylinux1_x86_64", "manylinux2010_x86_64", "manylinux2014_x86_64",
             *(f"manylinux_2_{n}_x86_64" for n in range(5, 40))]


def norm(name: str) -> str:
    """PEP 503 normalised name: 'Flash_Linear.Attention' -> 'flash-linear-attention'."""
    return re.sub(r"[-_.]+", "-", name).lower()


def top_requirements() -> list[Requirement]:
    return [Requirement(r) for r in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]]


def marker_env(python_version: str) -> dict[str, str]:
    """The host's environment markers (Linux x86_64, CPython ``python_version``)."""
    return {"python_version": python_version, "python_full_version": f"{python_version}.0",
            "implementation_name": "cpython", "implementation_version": f"{python_version}.0",
            "platform_python_implementation": "CPython", "os_name": "posix", "sys_platform": "linux",
            "platform_system": "Linux", "platform_machine": "x86_64", "platform_release": "", "platform_version": ""}


def requirements_of(dist: md.Distribution, env: dict, extras=()) -> list[Requirement]:
    """The requirements of ``dist`` (with ``extras``) that apply on the host."""
    reqs = [Requirement(line) for line in dist.requires or []]
    return [r for r in reqs if r.marker is None or any(r.marker.evaluate({**env, "extra": e}) for e in ("", *extras))]


def read_freeze(text: str) -> dict[str, str]:
    """``pip list --format=freeze`` lines -> {normalised name: version}; ValueError naming a malformed line."""
    out = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*(\S+)", line)
        if m is None:
            raise ValueError(f"not a NAME==VERSION line: {line!r}")
        out[norm(m.group(1))] = m.group(2)
    return out


Lookup = Callable[[str], "md.Distribution | None"]


def _installed(name: str) -> md.Distribution | None:
    try:
        return md.distribution(name)
    except md.PackageNotFoundError:
        return None


def resolve(top: list[Requirement], host: dict[str, str], env: dict, lookup: Lookup = _installed,
            always: set[str] = frozenset()) -> dict[str, str]:
    """{name: version} of the distributions to ship so that ``top`` and everything it needs is met on the host.

    A host package stays unless a requirement rules its version out or ``always`` names it; a shipped one comes at
    the version ``lookup`` (this venv) has, with its own requirements. SystemExit naming a requirement that neither
    the host nor this venv meets.
    """
    always = {norm(n) for n in always}
    while True:
        out: dict[str, str] = {}
        bad: set[str] = set()
        todo = [(r, "pyproject.toml") for r in top if r.marker is None or r.marker.evaluate(env)]
        seen: set[tuple[str, frozenset]] = set()
        while todo:
            req, who = todo.pop()
            name, key = norm(req.name), (norm(req.name), frozenset(req.extras))
            on_host = name in host and name not in always
            if on_host and not req.specifier.contains(Version(host[name]), prereleases=True):
                bad.add(name)
            if key in seen:
                if not on_host and not req.specifier.contains(Version(out[name]), prereleases=True):
                    raise SystemExit(f"{req} (needed by {who}): this venv has {name} {out[name]}")
                continue
            seen.add(key)
            dist = lookup(name)
            if on_host:
                if req.extras and dist is not None:  # the host's package must bring the extra's requirements
                    base = {str(r) for r in requirements_of(dist, env)}
                    todo += [(r, name) for r in requirements_of(dist, env, req.extras) if str(r) not in base]
                continue
            if dist is None or not req.specifier.contains(Version(dist.version), prereleases=True):
                raise SystemExit(f"{req} (needed by {who}): the host does not have it and this venv has "
                                 f"{dist.version if dist else 'nothing'}; install it here first")
            out[name] = dist.version
            todo += [(r, name) for r in requirements_of(dist, env, req.extras)]
        if bad <= always:
            return out
        always |= bad


def download(spec: str, dest: Path, python_version: str) -> None:
    """A wheel of ``spec`` for the host into ``dest``; a package with only an sdist is built here, pure Python."""
    target = ["--only-binary=:all:", "--python-version", python_version, "--implementation", "cp",
              *(a for p in PLATFORMS for a in ("--platform", p))]
    pip = [sys.executable, "-m", "pip"]
    if subprocess.run([*pip, "download", "-q", "--no-deps", *target, "-d", str(dest), spec]).returncode == 0:
        return
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([*pip, "wheel", "-q", "--no-deps", "-w", tmp, spec], check=True)
        built = list(Path(tmp).glob("*.whl"))
        if not all(w.name.endswith("-none-any.whl") for w in built):
            raise SystemExit(f"{spec}: no wheel for the host, and the one built here is not pure Python: {built}")
        for w in built:
            w.rename(dest / w.name)


def pack(folder: Path, out: Path) -> Path:
    """Every file of ``folder`` in one tar (wheels are compressed already), written whole, then renamed."""
    tmp = out.with_name(out.name + ".part")
    with tarfile.open(tmp, "w") as tar:
        for path in sorted(folder.iterdir()):
            tar.add(path, arcname=path.name)
    return tmp.replace(out)


def build(args: argparse.Namespace) -> int:
    env = marker_env(args.python_version)
    host = read_freeze(args.host.read_text())
    wanted = resolve(top_requirements(), host, env, always=set(args.always))
    wanted.update({norm(e.split("==")[0]): e.split("==", 1)[1] for e in args.extra})
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    have = {norm(w.name.split("-")[0]): w for w in out.glob("*.whl")}
    for name, version in sorted(wanted.items()):
        old = have.pop(norm(name), None)
        if old is not None and old.name.split("-")[1] == version:
            continue
        if old is not None:
            old.unlink()
        print(f"  {name}=={version}")
        download(f"{name}=={version}", out, args.python_version)
    for stale in have.values():  # one version of each, nothing the host does not need
        stale.unlink()
    wheels = sorted(out.glob("*.whl"))
    (out / "MANIFEST.txt").write_text("".join(f"{w.name} {w.stat().st_size}\n" for w in wheels))
    archive = pack(out, out.with_name(out.name + ".tar"))
    print(f"{len(wheels)} wheels in {out}/, packed into {archive} ({archive.stat().st_size / 1e6:.1f} MB)")
    return 0


def check(args: argparse.Namespace) -> int:
    """Every requirement, followed through what imports here, is met; prints what is not. Exit 1 if any."""
    env = marker_env(f"{sys.version_info.major}.{sys.version_info.minor}")
    problems, todo, seen = [], [(r, "pyproject.toml") for r in top_requirements()], set()
    todo += [(Requirement(e), "--extra") for e in args.extra]
    while todo:
        req, who = todo.pop()
        if (str(req), who) in seen or (req.marker is not None and not req.marker.evaluate(env)):
            continue
        seen.add((str(req), who))
        dist = _installed(req.name)
        if dist is None or not req.specifier.contains(Version(dist.version), prereleases=True):
            problems.append(f"{who}: {req}, found {dist.version if dist else 'nothing'}")
        else:
            todo += [(r, norm(req.name)) for r in requirements_of(dist, env, req.extras)]
    print("\n".join(problems) or f"every requirement met ({len(seen)} checked)")
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 epilog=__doc__.split("\n", 2)[2], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["build", "check"])
    ap.add_argument("--host", type=Path, help="build: the host's `pip list --format=freeze`")
    ap.add_argument("--python-version", default="3.12", help="build: the host's Python (default 3.12)")
    ap.add_argument("--always", nargs="*", default=[], metavar="NAME",
                    help="build: ship these at this venv's version even where the host's would do")
    ap.add_argument("--extra", nargs="*", default=[], metavar="NAME==VERSION",
                    help="wheels this venv does not hold (build: downloaded without dependencies; check: checked)")
    ap.add_argument("--out", type=Path, default=ROOT / ".whl", help="build: the wheel folder (default .whl)")
    args = ap.parse_args(argv)
    bad = [e for e in args.extra if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*==\S+", e)]
    if bad:
        ap.error(f"--extra takes NAME==VERSION, got {bad[0]!r}")
    if args.command == "check":
        return check(args)
    if args.host is None or not args.host.is_file():
        ap.error(f"build needs --host FILE, the host's `pip list --format=freeze` (got {args.host})")
    try:
        read_freeze(args.host.read_text())
    except ValueError as err:
        ap.error(f"--host {args.host}: {err}")
    return build(args)


if __name__ == "__main__":
    sys.exit(main())
