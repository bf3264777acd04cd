"""Which wheels an offline GPU host (no package index) lacks to run the DAG, and a check that what is shipped is
complete.

The GPU image (scripts/gpu_image_packages.txt) has torch, Triton, transformers, numpy, pandas and ~190 more packages,
but neither FLA, snakemake, lm-eval nor datasets, and no index to install them from. Starting from the project's own
requirements (pyproject.toml), a package the image holds at a version that meets every requirement on it stays the
image's; any other one is shipped as a wheel, and so are its own requirements, recursively. Two groups are shipped:

    .whl/           the DAG (pyproject.toml's dependencies): FLA, transformers, snakemake, lm-eval, datasets, ...
    .whl_tilelang/  tilelang and what it needs beyond the image and .whl/ (GatedDeltaNet's backward on Hopper with
                    Triton < 3.7.1; README: GPU runs)
    .whl_fallback/  small wheels of image packages whose version is not listed but bounded by a shipped package
                    (FALLBACK): installed on the machine only where its own version fails (scripts/gpu_run.sh)

Versions come from where the requirements are resolved: the local venv's installed distributions
(importlib.metadata) for the DAG group, the pins below for tilelang's. The committed outputs are the locks
(scripts/gpu_wheels{,_tilelang,_fallback}.lock: NAME==VERSION lines) and every locked wheel's
Requires-Dist (scripts/gpu_wheels.requires.json), so the check runs without the wheels too (tests/test_gpu_wheels.py).

    python scripts/gpu_wheels.py resolve --wheel-dir .whl_tilelang     # print the groups (lookup: venv + wheels)
    python scripts/gpu_wheels.py lock --wheel-dir .whl --wheel-dir .whl_tilelang --wheel-dir .whl_fallback
    python scripts/gpu_wheels.py check [--wheel-dir .whl ...]           # completeness (committed snapshot or wheels)
    python scripts/gpu_wheels.py check --installed [--fallback-dir D]   # on the GPU machine, against what imports
    python scripts/gpu_wheels.py image --freeze work_dirs/gpu/logs/gpu_run/image_pip_freeze.txt  # image versions
"""
from __future__ import annotations

import argparse
import base64
import hashlib
import importlib.metadata as md
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
import zipfile
from dataclasses import dataclass, field
from email.parser import HeaderParser
from pathlib import Path
from typing import Callable, Iterable

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
IMAGE_FILE = ROOT / "scripts" / "gpu_image_packages.txt"
REQUIRES_FILE = ROOT / "scripts" / "gpu_wheels.requires.json"
# group (the folder its wheels are shipped in) -> its lock file
LOCKS = {".whl": ROOT / "scripts" / "gpu_wheels.lock", ".whl_tilelang": ROOT / "scripts" / "gpu_wheels_tilelang.lock",
         ".whl_fallback": ROOT / "scripts" / "gpu_wheels_fallback.lock"}

# The GPU machine's interpreter: markers are evaluated for it, not for the machine this runs on.
TARGET_ENV = {
    "python_version": "3.12", "python_full_version": "3.12.3", "implementation_name": "cpython",
    "implementation_version": "3.12.3", "platform_python_implementation": "CPython", "os_name": "posix",
    "sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64", "platform_release": "",
    "platform_version": "", "extra": "",
}
TARGET_PYTHON = Version(TARGET_ENV["python_full_version"])

# Packages the image has at a version that meets every requirement, shipped anyway, and why.
# (None now: the image's transformers 5.17.0, which the suite once shipped, fails pyproject.toml's >=5.24.0.)
OVER_IMAGE: dict[str, str] = {}
# Image packages whose version the list does not give although a shipped package bounds it: a small wheel of each
# is shipped too (.whl_fallback/); scripts/gpu_run.sh installs it only where the machine's own version fails.
FALLBACK = {
    "typing-extensions": "pydantic 2.14 (snakemake -> sqlmodel) needs >= 4.16.0",
    "packaging": "snakemake 9.27 needs < 26",
    "fsspec": "datasets 5.2 needs <= 2026.9.0",
    "regex": "transformers 5.24 needs >= 2025.10.22",
    "pyyaml": "snakemake-executor-plugin-slurm needs >= 6.0.3",
    "tqdm": "datasets 5.2 needs >= 4.66.3",
    "attrs": "jsonschema and referencing need >= 22.2.0",
    "wrapt": "snakemake-interface-storage-plugins needs >= 1.15.0",
}
# Not a fallback although bounded: python-dateutil (typepy[datetime] needs >=2.8.0,<3.0.0): the image's pandas
# already needs >= 2.8.2 and no 3.x exists.
# Files left out of a downloaded wheel (the wheel is rewritten, RECORD included), and why. Each saves megabytes of the
# 64 MiB that one time-capped command on the host can receive.
SLIM = {
    "z3-solver": (("z3_solver-4.15.4.0.data/data/bin/z3", "z3/lib/libz3.so"),
                  "the z3 command-line binary (22 MB) and the second copy of libz3 (libz3.so == libz3.so.4.15; "
                  "scripts/gpu_run.sh links it back): tilelang uses the Python API and libz3.so.4.15"),
    "pulp": (("pulp/solverdir/cbc/",),
             "the bundled CBC solver binaries of six platforms (16 MB): snakemake runs with --scheduler greedy"),
}
# Requirements of each group beyond pyproject.toml, with the version pins of packages the local venv does not hold.
GROUP_TOP = {".whl": None, ".whl_tilelang": ["tilelang==0.1.15"], ".whl_fallback": None}
PINS = {"tilelang": "0.1.15", "apache-tvm-ffi": "0.1.12", "torch-c-dlpack-ext": "0.1.5", "z3-solver": "4.15.4.0"}


def norm(name: str) -> str:
    """PEP 503 normalised name: 'Flash_Linear.Attention' -> 'flash-linear-attention'."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass
class Dist:
    """One distribution: its version and its Requires-Dist lines (all of them, markers included)."""

    name: str
    version: str
    requires: list[str] = field(default_factory=list)
    requires_python: str = ""
    source: str = ""


def applies(req: Requirement, extra: str = "") -> bool:
    return req.marker is None or req.marker.evaluate({**TARGET_ENV, "extra": extra})


def requirements_of(dist: Dist, extras: Iterable[str] = ()) -> list[Requirement]:
    """The requirements of `dist` (with `extras`) that apply on the GPU machine."""
    out = []
    for line in dist.requires:
        req = Requirement(line)
        if applies(req) or any(applies(req, e) for e in extras):
            out.append(req)
    return out


def satisfied(version: str, spec: SpecifierSet) -> bool:
    return spec.contains(Version(version), prereleases=True)


# -- where package data comes from ---------------------------------------------------------------------------------

def read_image(path: Path = IMAGE_FILE) -> dict[str, str | None]:
    """Image packages: normalised name -> version (None where the list gives none)."""
    image = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            image[norm(name)] = version.strip() or None
    return image


def read_lock(path: Path) -> dict[str, str]:
    lock = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            lock[norm(name)] = version
    return lock


ALWAYS = (".whl", ".whl_tilelang")  # the groups always installed (.whl_fallback: where needed)


def all_top_requirements() -> list[Requirement]:
    return [r for g in ALWAYS for r in top_requirements(g)]


def top_requirements(group: str) -> list[Requirement]:
    if GROUP_TOP[group] is not None:
        return [Requirement(r) for r in GROUP_TOP[group]]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(r) for r in project["dependencies"]]


def wheel_dist(path: Path) -> Dist:
    with zipfile.ZipFile(path) as z:
        meta = next(n for n in z.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n))
        msg = HeaderParser().parsestr(z.read(meta).decode())
    return Dist(msg["Name"], msg["Version"], msg.get_all("Requires-Dist") or [], msg.get("Requires-Python") or "",
                path.name)


def wheels_in(folders: Iterable[Path]) -> dict[str, Dist]:
    dists: dict[str, Dist] = {}
    for folder in folders:
        for path in sorted(Path(folder).glob("*.whl")):
            d = wheel_dist(path)
            if norm(d.name) in dists:
                raise SystemExit(f"two wheels of {d.name}: {dists[norm(d.name)].source} and {path.name}")
            dists[norm(d.name)] = d
    return dists


def installed_dist(name: str) -> Dist | None:
    try:
        d = md.distribution(name)
    except md.PackageNotFoundError:
        return None
    return Dist(d.metadata["Name"], d.version, d.requires or [], d.metadata.get("Requires-Python") or "", "installed")


def snapshot_dists(path: Path = REQUIRES_FILE, groups: Iterable[str] = tuple(LOCKS)) -> dict[str, Dist]:
    """The committed Requires-Dist of the locked wheels of `groups`."""
    data = json.loads(path.read_text())
    return {n: Dist(d["name"], d["version"], d["requires"], d.get("requires_python", ""), "snapshot")
            for n, d in data.items() if d["group"] in groups}


# -- resolution ----------------------------------------------------------------------------------------------------

Lookup = Callable[[str], "Dist | None"]


def resolve(top: list[Requirement], lookup: Lookup, present: dict[str, str | None],
            over: Iterable[str] = ()) -> dict[str, Dist]:
    """The distributions to ship so that `top` and everything it needs is met.

    `present`: what the machine already has (name -> version or None when unknown). A present package stays unless
    a requirement rules its (known) version out or `over` names it; a shipped one brings its own requirements.
    """
    ship_names = {norm(n) for n in over}
    while True:
        ship: dict[str, Dist] = {}
        bad: set[str] = set()
        todo = [(r, "top") for r in top if applies(r)]
        seen: set[tuple[str, frozenset]] = set()
        while todo:
            req, who = todo.pop()
            name = norm(req.name)
            key = (name, frozenset(req.extras))
            if name in present and name not in ship_names:
                version = present[name]
                if version is not None and not satisfied(version, req.specifier):
                    bad.add(name)
                if req.extras and key not in seen:  # the image's package must bring the extra's requirements
                    seen.add(key)
                    dist = lookup(name)
                    if dist is not None:
                        base = {str(r) for r in requirements_of(dist)}
                        todo += [(r, name) for r in requirements_of(dist, req.extras) if str(r) not in base]
                continue
            if key in seen:
                continue
            seen.add(key)
            dist = ship.get(name) or lookup(name)
            if dist is None:
                raise SystemExit(f"{req} (needed by {who}) is neither on the GPU image nor known here: install it in "
                                 f"the local venv or pin it in scripts/gpu_wheels.py")
            if not satisfied(dist.version, req.specifier):
                raise SystemExit(f"{req} (needed by {who}): the version here is {dist.version}")
            ship[name] = dist
            todo += [(r, name) for r in requirements_of(dist, req.extras)]
        if bad <= ship_names:
            return ship
        ship_names |= bad


def default_lookup(wheel_dirs: Iterable[Path]) -> Lookup:
    """Pinned versions from the given wheel folders first, then the local venv's installed distributions."""
    wheels = wheels_in(d for d in wheel_dirs if Path(d).is_dir())

    def lookup(name: str) -> Dist | None:
        name = norm(name)
        if name in PINS:
            d = wheels.get(name)
            if d is None or d.version != PINS[name]:
                return Dist(name, PINS[name], [], "", "pin (wheel not downloaded yet)")
            return d
        return installed_dist(name) or wheels.get(name)

    return lookup


def resolve_groups(lookup: Lookup, image: dict[str, str | None]) -> dict[str, dict[str, Dist]]:
    """The DAG's group against the image, tilelang's against the image plus the DAG's wheels, then the fallbacks:
    the FALLBACK packages whose image version is not listed (at the version found here) and what they need."""
    present = dict(image)
    groups = {}
    for group in LOCKS:
        if group == ".whl_fallback":
            names = [n for n in FALLBACK if n in image and image[n] is None]
            top = []
            for n in names:
                dist = lookup(n)
                if dist is None:
                    raise SystemExit(f"fallback {n} is not installed here")
                top.append(Requirement(f"{n}=={dist.version}"))
            groups[group] = resolve(top, lookup, present, over=names)
        else:
            groups[group] = resolve(top_requirements(group), lookup, present, OVER_IMAGE if group == ".whl" else ())
            present.update({n: d.version for n, d in groups[group].items()})
    return groups


# -- completeness ---------------------------------------------------------------------------------------------------

@dataclass
class Report:
    missing: list[str] = field(default_factory=list)      # requirement met by nothing: the run would fail
    unverified: list[str] = field(default_factory=list)   # met by an image package whose version is not listed
    needless: list[str] = field(default_factory=list)     # shipped although the image's version would do
    missing_names: set[str] = field(default_factory=set)  # the packages of `missing`
    unverified_names: set[str] = field(default_factory=set)  # the packages of `unverified`

    @property
    def ok(self) -> bool:
        return not self.missing and not self.needless


def check(top: list[Requirement], shipped: dict[str, Dist], image: dict[str, str | None],
          over: Iterable[str] = OVER_IMAGE) -> Report:
    """Every requirement of `top` and of every shipped distribution (extras followed, markers for the GPU machine)
    is met by a shipped wheel (which shadows the image: /tmp/site comes first on PYTHONPATH) or by the image."""
    rep = Report()
    wanted: dict[str, list[Requirement]] = {}
    todo = [(r, "top") for r in top if applies(r)]
    for name, dist in shipped.items():
        if dist.requires_python and not satisfied(str(TARGET_PYTHON), SpecifierSet(dist.requires_python)):
            rep.missing.append(f"{dist.name} {dist.version} requires Python {dist.requires_python}")
        todo += [(r, name) for r in requirements_of(dist)]
    done = set()
    while todo:
        req, who = todo.pop()
        name = norm(req.name)
        if (str(req), who) in done:
            continue
        done.add((str(req), who))
        wanted.setdefault(name, []).append(req)
        if name in shipped:
            if not satisfied(shipped[name].version, req.specifier):
                rep.missing.append(f"{who}: {req} but {shipped[name].version} is shipped")
                rep.missing_names.add(name)
            todo += [(r, f"{name}[{','.join(sorted(req.extras))}]") for r in requirements_of(shipped[name], req.extras)
                     if req.extras and r not in requirements_of(shipped[name])]
        elif name in image:
            if image[name] is None:
                if str(req.specifier):
                    rep.unverified.append(f"{who}: {req} (image version not listed)")
                    rep.unverified_names.add(name)
            elif not satisfied(image[name], req.specifier):
                rep.missing.append(f"{who}: {req} but the image has {image[name]}")
                rep.missing_names.add(name)
        else:
            rep.missing.append(f"{who}: {req} is neither shipped nor on the image")
            rep.missing_names.add(name)
    over = {norm(n) for n in over}
    for name in shipped:
        version = image.get(name)
        if name in image and name not in over and version is None:
            rep.needless.append(f"{name}: shipped although the image has it")
        elif version is not None and name not in over and all(satisfied(version, r.specifier)
                                                                 for r in wanted.get(name, [])):
            rep.needless.append(f"{name}: shipped although the image's {version} meets every requirement")
    rep.unverified = sorted(set(rep.unverified))
    return rep


def check_installed(image: dict[str, str | None]) -> Report:
    """On the GPU machine, with /tmp/site on the path: the same check against the versions that import there."""
    shipped = {}  # the fallbacks, where installed, count as the image's (they stand in for its package)
    for group in ALWAYS:
        for name in read_lock(LOCKS[group]):
            d = installed_dist(name)
            if d is not None:
                shipped[name] = d
    found = {}
    for name in image:  # an image package that is not there is missing
        d = installed_dist(name)
        if d is not None:
            found[name] = d.version
    tops = top_requirements(".whl") + (top_requirements(".whl_tilelang") if "tilelang" in shipped else [])
    # the image's own versions are now known: a shipped package is then needless only by the committed list's word
    return check(tops, shipped, found, over=set(shipped))


def print_report(rep: Report, title: str) -> None:
    print(f"{title}: {'complete' if rep.ok else 'INCOMPLETE'}")
    for kind in ("missing", "needless", "unverified"):
        for line in getattr(rep, kind):
            print(f"  {kind}: {line}")


def slim_wheel(path: Path) -> list[str]:
    """Rewrite the wheel at `path` without the files SLIM names for it; return what was dropped."""
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        dist = wheel_dist(path)
        prefixes = SLIM.get(norm(dist.name), ((), ""))[0]
        drop = [n for n in names if any(n == p or (p.endswith("/") and n.startswith(p)) for p in prefixes)]
        if not drop:
            return []
        record = next(n for n in names if n.endswith(".dist-info/RECORD"))
        keep = {n: z.read(n) for n in names if n not in drop and n != record}
    rows = [f"{n},sha256={base64.urlsafe_b64encode(hashlib.sha256(b).digest()).rstrip(b'=').decode()},{len(b)}"
            for n, b in keep.items()]
    tmp = path.with_suffix(".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        for n, b in keep.items():
            z.writestr(n, b)
        z.writestr(record, "\n".join(rows + [f"{record},,"]) + "\n")
    tmp.replace(path)
    return drop


def pack(wheel_dirs: list[Path], out: Path, preset: int = 9) -> str:
    """One solid xz tar of every wheel in `wheel_dirs`, each rewritten uncompressed (ZIP_STORED: pip installs it as
    it is) so that xz compresses all of them as one stream: 118 MB of wheels ship as ~56 MB. Returns the digest of
    the wheel list it packed (name and size of each), which is also written beside the archive; an archive with the
    same digest is not packed again."""
    wheels = sorted((p for d in wheel_dirs for p in Path(d).glob("*.whl")), key=lambda p: p.name)
    digest = hashlib.sha256("\n".join(f"{p.name} {p.stat().st_size}" for p in wheels).encode()).hexdigest()
    stamp = out.with_suffix(".sha256")
    if out.exists() and stamp.exists() and stamp.read_text().strip() == digest:
        return digest
    out.parent.mkdir(parents=True, exist_ok=True)
    xz = shutil.which("xz")
    tmp = out.with_suffix(".tmp")
    with tempfile.TemporaryDirectory() as stage:
        for p in wheels:
            with zipfile.ZipFile(p) as zi, zipfile.ZipFile(Path(stage) / p.name, "w", zipfile.ZIP_STORED) as zo:
                for info in zi.infolist():
                    zo.writestr(info, zi.read(info), compress_type=zipfile.ZIP_STORED)
        if xz:  # the xz binary uses both cores; Python's lzma one
            with open(tmp, "wb") as f:
                proc = subprocess.Popen([xz, f"-{preset}", "-T0", "-c"], stdin=subprocess.PIPE, stdout=f)
                with tarfile.open(fileobj=proc.stdin, mode="w|", format=tarfile.PAX_FORMAT) as tar:
                    for p in wheels:
                        tar.add(Path(stage) / p.name, arcname=_arcname(p), filter=_plain)
                proc.stdin.close()
                if proc.wait():
                    raise SystemExit(f"xz failed ({proc.returncode})")
        else:
            with tarfile.open(tmp, "w:xz", preset=preset, format=tarfile.PAX_FORMAT) as tar:
                for p in wheels:
                    tar.add(Path(stage) / p.name, arcname=_arcname(p), filter=_plain)
    tmp.replace(out)
    stamp.write_text(digest + "\n")
    return digest


def _arcname(wheel: Path) -> str:
    """A wheel's name in the pack: fallback wheels (installed only where needed) under fallback/."""
    return f"fallback/{wheel.name}" if wheel.parent.name == ".whl_fallback" else wheel.name


def _plain(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.mtime = 0
    return info


def image_from_freeze(freeze: str, header_note: str) -> str:
    """The text of scripts/gpu_image_packages.txt from the image's own `pip list --format=freeze` (every version
    known; scripts/gpu_run.sh writes it to gpu_run/image_pip_freeze.txt)."""
    header = [line for line in IMAGE_FILE.read_text().splitlines() if line.startswith("#")]
    entries = {}
    for line in freeze.splitlines():
        m = re.fullmatch(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*(\S+)\s*", line)
        if m:
            entries[norm(m.group(1))] = f"{m.group(1)}=={m.group(2)}"
    if not entries:
        raise SystemExit("no NAME==VERSION lines in the freeze")
    header = [h for h in header if not h.startswith("# Versions updated")] + [f"# Versions updated {header_note}"]
    return "\n".join(header + [entries[n] for n in sorted(entries)]) + "\n"


def write_lock(path: Path, dists: dict[str, Dist], group: str) -> None:
    lines = [f"# {group}/: wheels the GPU image lacks (written by scripts/gpu_wheels.sh; scripts/gpu_wheels.py)"]
    lines += [f"{n}=={dists[n].version}" for n in sorted(dists)]
    path.write_text("\n".join(lines) + "\n")


def write_manifest(path: Path, groups: dict[str, dict[str, Dist]], wheel_dirs: list[Path]) -> None:
    """name, version, bytes, wheel file: one line a wheel, then each folder's total and the grand total."""
    files = {p.name: p for d in wheel_dirs for p in Path(d).glob("*.whl")}
    lines = ["# wheels for the offline GPU image (scripts/gpu_wheels.sh); name version bytes file"]
    total = 0
    for group, dists in groups.items():
        size = 0
        for n in sorted(dists):
            f = next(p for p in files.values() if p.parent.name == Path(group).name and wheel_dist(p).version ==
                     dists[n].version and norm(wheel_dist(p).name) == n)
            size += f.stat().st_size
            lines.append(f"{dists[n].name:44s} {dists[n].version:16s} {f.stat().st_size:10d}  {group}/{f.name}")
        lines.append(f"# {group}: {len(dists)} wheels, {size} bytes")
        total += size
    lines.append(f"# total: {total} bytes")
    path.write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["resolve", "slim", "lock", "pack", "check", "image"])
    ap.add_argument("--freeze", type=Path, help="image: the image's `pip list --format=freeze` (gpu_run.sh's)")
    ap.add_argument("--out", type=Path, default=ROOT / ".whl_xz" / "wheels.tar.xz", help="pack: the archive")
    ap.add_argument("--wheel-dir", action="append", type=Path, default=[],
                    help="folder of wheels (repeatable); check: check these wheels instead of the snapshot")
    ap.add_argument("--installed", action="store_true", help="check: against the distributions importable here")
    ap.add_argument("--fallback-dir", type=Path, help="check --installed: print 'fallback: WHEEL ...', the wheels of "
                                                      "this folder that would meet a missing requirement")
    args = ap.parse_args(argv)
    image = read_image()

    if args.command == "resolve":
        for group, dists in resolve_groups(default_lookup(args.wheel_dir), image).items():
            for n in sorted(dists):
                print(f"{group} {n}=={dists[n].version}")
        return 0

    if args.command == "slim":
        for folder in args.wheel_dir:
            for path in sorted(folder.glob("*.whl")):
                dropped = slim_wheel(path)
                if dropped:
                    print(f"  {path.name}: left out {len(dropped)} files ({SLIM[norm(wheel_dist(path).name)][1]})")
        return 0

    if args.command == "image":
        if args.freeze is None:
            ap.error("image needs --freeze FILE")
        note = f"from a pip freeze on the machine ({args.freeze.name})"
        IMAGE_FILE.write_text(image_from_freeze(args.freeze.read_text(), note))
        print(f"{IMAGE_FILE}: {len(read_image())} packages; now run scripts/gpu_wheels.sh")
        return 0

    if args.command == "pack":
        digest = pack(args.wheel_dir, args.out)
        print(f"{args.out}: {args.out.stat().st_size} bytes (wheel list {digest[:12]})")
        return 0

    if args.command == "lock":
        groups = resolve_groups(default_lookup(args.wheel_dir), image)
        wheels = wheels_in(d for d in args.wheel_dir if d.is_dir())
        snapshot = {}
        for group, dists in groups.items():
            for n, d in dists.items():
                w = wheels.get(n)
                if w is None or w.version != d.version:
                    raise SystemExit(f"no wheel of {n}=={d.version} in {[str(d) for d in args.wheel_dir]}")
                snapshot[n] = {"name": w.name, "version": w.version, "requires": w.requires,
                               "requires_python": w.requires_python, "wheel": w.source, "group": group}
            write_lock(LOCKS[group], dists, group)
        REQUIRES_FILE.write_text(json.dumps(dict(sorted(snapshot.items())), indent=1) + "\n")
        write_manifest(args.wheel_dir[0] / "MANIFEST.txt", groups, args.wheel_dir)
        return 0

    if args.installed:
        rep = check_installed(image)
        print_report(rep, "GPU machine: requirements vs what imports here")
        if args.fallback_dir is not None:
            wheels = wheels_in([args.fallback_dir]) if args.fallback_dir.is_dir() else {}
            print("fallback:", " ".join(str(args.fallback_dir / wheels[n].source) for n in sorted(rep.missing_names)
                                        if n in wheels))
        return 0 if not rep.missing else 1
    main_dirs = [d for d in args.wheel_dir if d.name != ".whl_fallback"]
    fallback_dirs = [d for d in args.wheel_dir if d.name == ".whl_fallback"]
    shipped = wheels_in(main_dirs) if args.wheel_dir else snapshot_dists(groups=ALWAYS)
    fallback = wheels_in(fallback_dirs) if args.wheel_dir else snapshot_dists(groups=[".whl_fallback"])
    rep = check(all_top_requirements(), shipped, image)
    print_report(rep, f"wheels in {', '.join(map(str, main_dirs))}" if args.wheel_dir else "committed snapshot")
    # each fallback, where it replaces the image's package, still meets every requirement
    rep_fb = check(all_top_requirements(), {**shipped, **fallback}, image, over=set(fallback) | set(OVER_IMAGE))
    print_report(rep_fb, f"with the {len(fallback)} fallback wheels installed as well")
    return 0 if rep.ok and rep_fb.ok else 1


if __name__ == "__main__":
    sys.exit(main())
