"""Shared test settings."""
import pytest
import torch

from tests.tiny import stdlib_data


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
def ci_run():
    """The ci profile of the study DAG, run once from scratch (work_dirs/ci) and shared by the tests that need a
    finished run (several minutes on 2 cores)."""
    import shutil

    from tests.dag import ROOT, snakemake

    shutil.rmtree(ROOT / "work_dirs" / "ci", ignore_errors=True)
    run = snakemake("--cores", "2", "--config", "profile=ci", timeout=1800)
    assert run.returncode == 0, (run.stdout + run.stderr)[-4000:]
    return ROOT / "work_dirs" / "ci"
