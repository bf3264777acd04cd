"""Shared test settings."""
import pytest
import torch


@pytest.fixture(autouse=True, scope="session")
def one_thread():
    """Tiny matmuls run far faster on one intra-op thread, above all on a shared 2-core machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
