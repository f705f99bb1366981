import pytest


@pytest.fixture(scope="module")
def torch_one_thread():
    """Run a module's PyTorch tests on one thread (faster for tiny networks), then restore."""
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
