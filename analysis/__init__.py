"""Offline diagnostics for Q-tensors and calculators for the TEQL paper's theory.

Spectral-energy rank diagnostics, the approximation error B_R versus rank,
the bounds of Theorem 1 and Propositions 2-3, and parameter matching across
agent architectures.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from analysis import bounds
    from analysis.bounds.runs import record_bound_run
    from analysis.qstar import QTensor, q_star, qtensor_from_run
    from analysis.rank import rank_profile
    from analysis.spectral import spectral_energy

# Lazy exports (PEP 562): importing the package stays cheap, and ``python -m
# analysis.rank`` / ``python -m analysis.bounds`` do not find their own module
# already imported by the package (which makes runpy warn).
_EXPORTS = {
    "bounds": ("analysis.bounds", None),
    "rank_profile": ("analysis.rank", "rank_profile"),
    "spectral_energy": ("analysis.spectral", "spectral_energy"),
    "QTensor": ("analysis.qstar", "QTensor"),
    "q_star": ("analysis.qstar", "q_star"),
    "qtensor_from_run": ("analysis.qstar", "qtensor_from_run"),
    "record_bound_run": ("analysis.bounds.runs", "record_bound_run"),
    "__version__": ("tensorq.version", "__version__"),  # of the teql distribution
}

__all__ = [
    "bounds",
    "rank_profile",
    "spectral_energy",
    "QTensor",
    "q_star",
    "qtensor_from_run",
    "record_bound_run",
]


def __getattr__(name: str) -> Any:
    try:
        module_name, attribute = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'analysis' has no attribute {name!r}") from None
    module = importlib.import_module(module_name)
    return module if attribute is None else getattr(module, attribute)
