import os

from rl.numba_cache import drop_stale


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
