import os

from rl.jit import drop_stale


def _touch(path, mtime):
    path.write_text("x")
    os.utime(path, (mtime, mtime))


def test_cache_files_older_than_a_dependency_are_dropped_and_others_kept(tmp_path):
    module, dependency = tmp_path / "fused.py", tmp_path / "kernels.py"
    cache = tmp_path / "__pycache__"
    cache.mkdir()
    index, data = cache / "fused.run_steps-10.py311.nbi", cache / "fused.run_steps-10.py311.1.nbc"
    other = cache / "kernels.act-5.py311.nbi"
    for path in (module, index, data, other):
        _touch(path, 1_000)
    _touch(dependency, 500)
    drop_stale(str(module), [str(dependency)])
    assert index.exists() and data.exists()  # the dependency is older: the cache is current
    _touch(dependency, 2_000)
    drop_stale(str(module), [str(dependency)])
    assert not index.exists() and not data.exists() and other.exists()
    drop_stale(str(module), [str(dependency)])  # nothing cached: nothing to do


def test_a_kernel_runs_from_python_and_from_other_kernels_as_its_python_source_does():
    import numpy as np
    from numba import njit

    from rl.envs.cartpole import cartpole_row
    from rl.jit import Kernel

    assert isinstance(cartpole_row, Kernel)
    state = np.array([0.1, -0.2, 0.05, 0.3])
    compiled, python = np.empty(4), np.empty(4)
    reward, done = cartpole_row(state, 1.0, compiled)
    assert (reward, done) == cartpole_row.py_func(state, 1.0, python)
    np.testing.assert_allclose(compiled, python, rtol=0, atol=1e-15)

    @njit
    def twice(state, out):  # a plain njit caller sees the kernel's dispatcher type
        cartpole_row(state, 1.0, out)
        return cartpole_row(out.copy(), 1.0, out)

    twice(state, compiled)
    cartpole_row.py_func(python.copy(), 1.0, python)
    np.testing.assert_allclose(compiled, python, rtol=0, atol=1e-15)
    assert len(cartpole_row.signatures) >= 1
