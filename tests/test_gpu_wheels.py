"""The wheels that travel to the offline GPU machine (scripts/gpu_wheels.py): complete, minimal, one version each.

Runs without network. With .whl/ and .whl_tilelang/ present (after scripts/gpu_wheels.sh) the wheels themselves are
checked as well; without them, the committed locks and Requires-Dist snapshot are.
"""
import json
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import gpu_wheels as gw  # noqa: E402

IMAGE = gw.read_image()
SNAPSHOT = gw.snapshot_dists()                        # every locked wheel, fallbacks included
CARRIED = gw.snapshot_dists(groups=gw.ALWAYS)         # what is always installed
FALLBACK = gw.snapshot_dists(groups=[".whl_fallback"])
LOCKED = {group: gw.read_lock(path) for group, path in gw.LOCKS.items()}
TOPS = gw.all_top_requirements()
WHEEL_DIRS = [ROOT / ".whl", ROOT / ".whl_tilelang"]


def _carried_sets():
    """The committed snapshot always; the downloaded wheels too where scripts/gpu_wheels.sh left them here."""
    sets = [("committed snapshot", CARRIED)]
    if all(d.is_dir() and any(d.glob("*.whl")) for d in WHEEL_DIRS):
        sets.append(("wheels", gw.wheels_in(WHEEL_DIRS)))
    return sets


def test_image_list_parses_with_known_versions():
    assert len(IMAGE) > 150 and len(set(IMAGE)) == len(IMAGE)
    assert IMAGE["torch"].startswith("2.11.0") and IMAGE["triton"] == "3.6.0" and IMAGE["transformers"] == "5.17.0"
    assert IMAGE["numpy"] == "2.5.2" and "pandas" in IMAGE and "pyarrow" in IMAGE
    for absent in ("flash-linear-attention", "snakemake", "lm-eval", "datasets", "tilelang"):
        assert absent not in IMAGE


def test_locks_match_snapshot_and_one_version_each():
    both = {n: v for lock in LOCKED.values() for n, v in lock.items()}
    assert len(both) == sum(len(lock) for lock in LOCKED.values())  # no package in two groups
    assert both == {n: d.version for n, d in SNAPSHOT.items()}
    raw = json.loads(gw.REQUIRES_FILE.read_text())
    for group, lock in LOCKED.items():
        assert {n for n, d in raw.items() if d["group"] == group} == set(lock), group
    for name, version in {"flash-linear-attention": "0.6.0", "fla-core": "0.6.0", "transformers": "5.24.0",
                          "snakemake": "9.27.1", "lm-eval": "0.4.13", "tilelang": "0.1.15",
                          "apache-tvm-ffi": "0.1.12", "torch-c-dlpack-ext": "0.1.5"}.items():
        assert both[name] == version, name
    project = (ROOT / "pyproject.toml").read_text()
    assert '"lm-eval>=0.4.9,<0.5"' in project and "datasets" in both and "jsonschema" in both


def test_resolution_reproduces_the_committed_locks():
    """The script's package-list logic, run on the committed Requires-Dist, gives exactly the committed locks."""
    groups = gw.resolve_groups(lambda name: SNAPSHOT.get(gw.norm(name)), IMAGE)
    for group, dists in groups.items():
        assert {n: d.version for n, d in dists.items()} == LOCKED[group], group


@pytest.mark.parametrize("label,carried", _carried_sets())
def test_every_requirement_is_met(label, carried):
    rep = gw.check(TOPS, carried, IMAGE)
    assert rep.missing == [] and rep.needless == [], (label, rep)
    # the image's heavy packages stay the image's: no second numpy/pandas/torch
    for heavy in ("torch", "triton", "numpy", "pandas", "pyarrow", "scipy", "scikit-learn", "tokenizers",
                  "huggingface-hub", "safetensors", "accelerate", "matplotlib"):
        assert heavy not in carried, heavy
    if label == "wheels":
        assert {n: d.version for n, d in carried.items()} == {n: d.version for n, d in CARRIED.items()}
        for n, d in carried.items():
            assert sorted(d.requires) == sorted(CARRIED[n].requires), n


def test_fallbacks_cover_unlisted_bounded_image_packages_and_still_fit():
    """A fallback travels for each FALLBACK package whose image version is not listed, and installed over the image's
    package it still meets every requirement."""
    assert set(FALLBACK) == {n for n in gw.FALLBACK if IMAGE.get(n, "x") is None}
    assert {"typing-extensions", "packaging"} <= set(FALLBACK)
    rep = gw.check(TOPS, {**CARRIED, **FALLBACK}, IMAGE, over=set(FALLBACK) | set(gw.OVER_IMAGE))
    assert rep.missing == [] and rep.needless == []
    assert set(FALLBACK) <= gw.check(TOPS, CARRIED, IMAGE).unverified_names  # each bounded by a carried package


def _dist(name, version, *requires, requires_python=""):
    return gw.Dist(name, version, list(requires), requires_python)


def test_check_reports_gaps_needless_copies_and_python():
    image = {"numpy": "2.5.2", "packaging": None, "six": "1.0"}
    carried = {"a": _dist("a", "1.0", "b>=2", "numpy>=2", "packaging<26", "six>=1.14",
                          "zzz; extra == 'docs'", "win; sys_platform == 'win32'", "old; python_version < '3.11'"),
               "numpy": _dist("numpy", "2.4.0"),
               "c": _dist("c", "1.0", requires_python=">=3.13")}
    rep = gw.check([Requirement("a"), Requirement("c")], carried, image, over=())
    assert any("b>=2 is neither carried nor on the image" in m for m in rep.missing)
    assert any("six>=1.14 but the image has 1.0" in m for m in rep.missing)
    assert any("requires Python >=3.13" in m for m in rep.missing)
    assert not any("zzz" in m or "win" in m or "old" in m for m in rep.missing)  # extras and other platforms
    assert rep.needless == ["numpy: carried although the image's 2.5.2 meets every requirement"]
    assert rep.unverified == ["a: packaging<26 (image version not listed)"]
    assert not rep.ok


def test_resolve_keeps_image_versions_unless_ruled_out_and_follows_extras():
    index = {"app": _dist("app", "1", "lib[http]>=1", "numpy>=3"),
             "lib": _dist("lib", "1.5", "dep", "aiohttp; extra == 'http'"),
             "dep": _dist("dep", "0.1"), "numpy": _dist("numpy", "3.0"), "aiohttp": _dist("aiohttp", "3.0")}
    image = {"numpy": "2.5.2", "aiohttp": "3.9"}
    carry = gw.resolve([Requirement("app")], lambda n: index.get(gw.norm(n)), image)
    assert set(carry) == {"app", "lib", "dep", "numpy"}  # numpy 2.5.2 < 3: carried; aiohttp (extra): the image's
    assert gw.check([Requirement("app")], carry, image, over=()).ok
    with pytest.raises(SystemExit, match="neither on the GPU image nor known"):
        gw.resolve([Requirement("app")], lambda n: None, image)


def _fake_wheel(path: Path, name: str, version: str, files: dict[str, bytes]) -> Path:
    dist = f"{name.replace('-', '_')}-{version}"
    whl = path / f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w", zipfile.ZIP_DEFLATED) as z:
        for n, b in files.items():
            z.writestr(n, b)
        z.writestr(f"{dist}.dist-info/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                                                 "Requires-Dist: numpy\n")
        z.writestr(f"{dist}.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{dist}.dist-info/RECORD", "")
    return whl


def test_slim_drops_named_files_and_rewrites_record(tmp_path):
    whl = _fake_wheel(tmp_path, "z3-solver", "4.15.4.0", {
        "z3/__init__.py": b"", "z3/lib/libz3.so.4.15": b"x" * 1000, "z3/lib/libz3.so": b"x" * 1000,
        "z3_solver-4.15.4.0.data/data/bin/z3": b"y" * 1000})
    dropped = gw.slim_wheel(whl)
    assert sorted(dropped) == ["z3/lib/libz3.so", "z3_solver-4.15.4.0.data/data/bin/z3"]
    with zipfile.ZipFile(whl) as z:
        names = set(z.namelist())
        record = z.read("z3_solver-4.15.4.0.dist-info/RECORD").decode()
    assert "z3/lib/libz3.so.4.15" in names and "z3/lib/libz3.so" not in names
    assert "z3/lib/libz3.so.4.15,sha256=" in record and "bin/z3" not in record
    assert gw.wheel_dist(whl).requires == ["numpy"] and gw.slim_wheel(whl) == []


def test_pack_is_one_solid_archive_of_stored_wheels(tmp_path):
    src = tmp_path / "w"
    src.mkdir()
    _fake_wheel(src, "alpha", "1.0", {"alpha/__init__.py": b"print('a')\n" * 500})
    _fake_wheel(src, "beta", "2.0", {"beta/__init__.py": b"print('b')\n" * 500})
    out = tmp_path / "x" / "wheels.tar.xz"
    digest = gw.pack([src], out, preset=1)
    assert out.with_suffix(".sha256").read_text().strip() == digest
    before = out.stat().st_mtime_ns
    assert gw.pack([src], out, preset=1) == digest and out.stat().st_mtime_ns == before  # unchanged list: kept
    with tarfile.open(out) as tar:
        tar.extractall(tmp_path / "x" / "un", filter="data")
    got = sorted(p.name for p in (tmp_path / "x" / "un").iterdir())
    assert got == ["alpha-1.0-py3-none-any.whl", "beta-2.0-py3-none-any.whl"]
    with zipfile.ZipFile(tmp_path / "x" / "un" / got[0]) as z:
        assert {i.compress_type for i in z.infolist()} == {zipfile.ZIP_STORED}
        assert z.read("alpha/__init__.py") == b"print('a')\n" * 500


def test_image_list_from_a_pip_freeze():
    text = gw.image_from_freeze("Torch==2.11.0+cu130\npandas==3.0.1\n-e git+https://x#egg=y\nfoo @ file:///z\n", "test")
    lines = text.splitlines()
    assert [line for line in lines if not line.startswith("#")] == ["pandas==3.0.1", "Torch==2.11.0+cu130"]
    assert lines[-3].startswith("#") and lines[-3] == "# Versions updated test"
    with pytest.raises(SystemExit):
        gw.image_from_freeze("nothing here\n", "test")


def test_cli_check_passes_on_the_committed_snapshot():
    run = subprocess.run([sys.executable, "scripts/gpu_wheels.py", "check"], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "committed snapshot: complete" in run.stdout and "fallback wheels installed as well: complete" in run.stdout
