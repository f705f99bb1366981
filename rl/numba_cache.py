"""Keep Numba's on-disk cache honest about kernels compiled from other modules.

Numba (``cache=True``) stores a module's compiled functions in its
``__pycache__`` and reuses them while that module's own source file is
unchanged; it does not look at the modules whose functions were compiled into
them. A kernel that calls another module's ``@njit`` functions (the fused
runner compiles in the agent kernels, the physics and the seeding) would then
keep running the old code after an edit of one of those modules.
`drop_stale` removes such a module's cache files when a dependency is newer,
so that Numba compiles it again. Fresh clones and CI start without a cache and
are not affected.
"""

from __future__ import annotations

from pathlib import Path


def drop_stale(module_file: str, dependencies: list[str]) -> None:
    """Delete ``module_file``'s Numba cache files if any dependency was modified after them.

    Parameters
    ----------
    module_file : str
        ``__file__`` of the module whose kernels call into ``dependencies``.
    dependencies : list of str
        Source files of the modules whose ``@njit`` functions it compiles in.
    """
    source = Path(module_file)
    cached = list((source.parent / "__pycache__").glob(f"{source.stem}.*.nb[ic]"))
    if not cached:
        return
    newest = max(Path(path).stat().st_mtime for path in dependencies)
    if min(path.stat().st_mtime for path in cached) >= newest:
        return
    for path in cached:
        path.unlink(missing_ok=True)
