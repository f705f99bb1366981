import os

import pytest
from hypothesis import settings

settings.register_profile("ci", derandomize=True, deadline=None, max_examples=60)
settings.register_profile("dev", deadline=None, max_examples=60)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


@pytest.fixture(scope="session", autouse=True)
def compiled_kernels():
    """Compile the tensor agents' and the environments' Numba kernels once per session.

    Numba's on-disk cache (``cache=True``) then serves them to the subprocesses
    that CLI tests start, instead of each compiling them again.
    """
    from rl.agents._fast_path import warm
    from rl.fused import warm as warm_fused
    from rl.problems import warm_kernels

    warm()
    warm_kernels()
    warm_fused()
