"""Seconds for the full CP rank profile of a CartPole-shaped Q-tensor (ranks 1-20, 3 restarts).

Run with ``python benchmarks/bench_analysis.py`` (or ``python -m benchmarks
analysis``). The tensor has CartPole's shape (10, 10, 20, 20, 10): by default
CartPole's Q* on the paper's grid from ``analysis.qstar`` (its model
estimation is timed separately and not counted), or, with ``--source
synthetic`` or when ``analysis.qstar`` is missing, a smooth synthetic Q-like
tensor. Reports wall time and this process's CPU time (``time.process_time``),
which other processes on a busy machine disturb less. The issue's target: the
profile in under 3 minutes on 2 cores. ``--quick`` runs a tiny profile as a
smoke test.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from analysis.rank import LINESEARCH, N_ITER_MAX, TOL, rank_profile

SHAPE = (10, 10, 20, 20, 10)
QUICK_SHAPE = (4, 4, 5, 5, 3)


def synthetic_q(shape: tuple[int, ...] = SHAPE) -> np.ndarray:
    """Return a smooth, not exactly low-rank Q-like tensor on a [-1, 1] grid."""
    grids = [np.linspace(-1.0, 1.0, d) for d in shape]
    x, x_dot, theta, theta_dot, action = np.meshgrid(*grids, indexing="ij")
    return (
        10.0
        + 3.0 * np.tanh(2.0 * (theta + 0.5 * theta_dot - 0.4 * action))
        - 2.0 * (theta + 0.3 * x) ** 2
        + np.exp(-(x**2 + x_dot**2)) * np.cos(3.0 * theta_dot * action)
    )


def cartpole_q(samples: int) -> tuple[np.ndarray, float] | None:
    """Return CartPole's grid Q* and the seconds its estimation took, or None if unavailable."""
    try:
        from analysis.qstar import grid_qstar
    except ImportError:
        return None
    start = time.perf_counter()
    q = grid_qstar("cartpole", samples=samples, rng=np.random.default_rng(0))
    return np.asarray(q.tensor), time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    """Time the rank profile and print the seconds."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny tensor, ranks 1-3, 2 restarts")
    parser.add_argument("--source", choices=("qstar", "synthetic"), default="qstar")
    parser.add_argument("--samples", type=int, default=20, help="samples per cell and action")
    parser.add_argument("--max-rank", type=int, default=20)
    parser.add_argument("--restarts", type=int, default=3)
    parser.add_argument("--center", action="store_true")
    args = parser.parse_args(argv)

    if args.quick:
        tensor, label, ranks, restarts = synthetic_q(QUICK_SHAPE), "synthetic (quick)", 3, 2
    else:
        ranks, restarts = args.max_rank, args.restarts
        loaded = cartpole_q(args.samples) if args.source == "qstar" else None
        if loaded is None:
            tensor, label = synthetic_q(), "synthetic"
        else:
            tensor, seconds = loaded
            label = f"CartPole Q* ({args.samples} samples, estimated in {seconds:.1f} s)"
    wall, cpu = time.perf_counter(), time.process_time()
    profile = rank_profile(
        tensor, range(1, ranks + 1), restarts=restarts, center=args.center, random_state=0
    )
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"tensor: {label}, shape {tensor.shape}, {tensor.size} entries")
    print(
        f"settings: ranks 1-{ranks}, {restarts} restarts, n_iter_max={N_ITER_MAX}, tol={TOL:g}, "
        f"linesearch={LINESEARCH}, center={args.center}"
    )
    for rank in sorted({1, min(5, ranks), min(10, ranks), ranks}):
        row = profile.row(rank)
        print(
            f"  rank {rank:2d}: rel_error {row['rel_error']:.4g}  energy {row['energy']:.6f}"
            f"  sup_error {row['sup_error']:.4g}"
        )
    print(f"rank profile: {wall:.1f} s wall, {cpu:.1f} s CPU")


if __name__ == "__main__":
    main()
