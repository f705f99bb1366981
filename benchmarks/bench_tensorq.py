"""Microseconds per `tensorq.bcd_update` on CartPole's shape (10, 10, 20, 20, 10), rank 10.

Run with ``python benchmarks/bench_tensorq.py``. Reports the best of 5 repeats
of this process's CPU time (``time.process_time``, so other processes on a
busy machine disturb it less than wall time) for B = 1 and B = 100 replicas,
both variants, NumPy backend; the PyTorch backend at B = 100 for information.
I_max and tau follow the released CartPole settings (5, 0.01), plus I_max = 1
and tau = 0 with I_max = 5 (every step taken).
"""

from __future__ import annotations

import argparse
import time
import timeit

import numpy as np
import tensorly as tl

from tensorq import OnlineCP, bcd_update

SHAPE = (10, 10, 20, 20, 10)
RANK = 10
SETTINGS = [(1, 0.01), (5, 0.01), (5, 0.0)]  # (max_inner, tol)


def time_update(
    backend: str, replicas: int, variant: str, max_inner: int, tol: float, number: int
) -> float:
    """Return the best CPU time of one update over 5 repeats, in microseconds."""
    rng = np.random.default_rng(0)
    with tl.backend_context(backend):
        q = OnlineCP.random(SHAPE, RANK, replicas=replicas, scale=0.5, rng=rng)
    indices = [rng.integers(0, SHAPE, size=(replicas, len(SHAPE))) for _ in range(64)]
    target = rng.uniform(-1.0, 1.0, size=replicas)
    visits = rng.integers(1, 10, size=replicas).astype(float)
    counter = iter(range(10**9))

    def one() -> None:
        bcd_update(
            q,
            indices[next(counter) % 64],
            target,
            visits,
            step_size=0.005,
            lam=1e-3,
            eps=1e-4,
            tol=tol,
            max_inner=max_inner,
            variant=variant,
        )

    best = min(timeit.repeat(one, number=number, repeat=5, timer=time.process_time))
    return best / number * 1e6


def main(argv: list[str] | None = None) -> None:
    """Print a table of microseconds per update."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=2000, help="NumPy calls per repeat")
    args = parser.parse_args(argv)
    print(f"shape {SHAPE}, rank {RANK}; best of 5 repeats, CPU microseconds per call")
    header = ("backend", "B", "variant", "I_max", "tau", "us/update", "us/replica")
    print("{:8} {:>4} {:9} {:>5} {:>5} {:>10} {:>11}".format(*header))
    runs = [("numpy", b, v) for b in (1, 100) for v in ("paper", "released")]
    runs += [("pytorch", 100, v) for v in ("paper", "released")]
    for backend, replicas, variant in runs:
        for max_inner, tol in SETTINGS:
            number = args.number if backend == "numpy" else max(1, args.number // 10)
            us = time_update(backend, replicas, variant, max_inner, tol, number)
            print(
                f"{backend:8} {replicas:>4} {variant:9} {max_inner:>5} {tol:>5} "
                f"{us:>10.1f} {us / replicas:>11.2f}"
            )


if __name__ == "__main__":
    main()
