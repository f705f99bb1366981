"""Microseconds per `tensorq.bcd_update` on CartPole's shape (10, 10, 20, 20, 10), rank 10.

Run with ``python benchmarks/bench_tensorq.py``. Reports the best of 5 repeats
of this process's CPU time (``time.process_time``, so other processes on a
busy machine disturb it less than wall time) for B = 1 and B = 100 replicas,
both variants, NumPy backend; the PyTorch backend at B = 100 for information.
I_max and tau follow the released CartPole settings (5, 0.01), plus I_max = 1
and tau = 0 with I_max = 5 (every step taken).

A second table times one batched update (the stable variant, I_max = 5,
tau = 0.01, inputs already on the device) on each installed backend, NumPy,
PyTorch and JAX, side by side, for B = 100 and 10,000 replicas (``--replicas``):
best of 5 repeats of wall time, the device synchronized after each repeat.
``--device cuda`` puts PyTorch and JAX on the GPU (NumPy stays on the CPU).
"""

from __future__ import annotations

import argparse
import importlib.util
import time
import timeit
from typing import Any

import numpy as np
import tensorly as tl

from tensorq import OnlineCP, bcd_update
from tensorq._backend import ops_for_backend

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


def _synchronize(array: Any) -> None:
    """Wait for the device work that produces ``array`` (no-op for NumPy)."""
    if hasattr(array, "block_until_ready"):
        array.block_until_ready()
    elif hasattr(array, "is_cuda") and array.is_cuda:
        import torch

        torch.cuda.synchronize(array.device)


def time_batched(backend: str, device: str | None, replicas: int, number: int) -> float:
    """Return the best wall time of one batched stable update over 5 repeats, in microseconds."""
    rng = np.random.default_rng(0)
    q = OnlineCP.random(
        SHAPE, RANK, replicas=replicas, scale=0.5, rng=rng, backend=backend, device=device
    )
    ops = ops_for_backend(backend)
    on_device = q._asarray if backend != "numpy" else (lambda x, dtype: x)
    indices = [
        on_device(rng.integers(0, SHAPE, size=(replicas, len(SHAPE))), ops.int64) for _ in range(16)
    ]
    target = on_device(rng.uniform(-1.0, 1.0, size=replicas), ops.float64)
    visits = on_device(rng.integers(1, 10, size=replicas).astype(float), ops.float64)
    counter = iter(range(10**9))

    def one() -> Any:
        return bcd_update(
            q, indices[next(counter) % 16], target, visits, step_size=0.5, lam=1e-3,
            eps=1e-4, tol=0.01, max_inner=5, variant="stable",
        ).after  # fmt: skip

    _synchronize(one())  # compile (JAX) and warm up

    def repeat() -> None:
        for _ in range(number):
            last = one()
        _synchronize(last)

    best = min(timeit.repeat(repeat, number=1, repeat=5, timer=time.perf_counter))
    return best / number * 1e6


def batched_table(replica_counts: list[int], device: str | None, number: int) -> None:
    """Print microseconds per batched update on each installed backend."""
    modules = {"numpy": "numpy", "pytorch": "torch", "jax": "jax"}
    backends = [b for b, m in modules.items() if importlib.util.find_spec(m) is not None]
    where = "cpu" if device is None else device
    print(f"\nbatched stable update, I_max 5, tau 0.01; wall microseconds per update "
          f"(NumPy on the CPU, PyTorch and JAX on {where})")  # fmt: skip
    print("{:>7} ".format("B") + " ".join(f"{b:>10}" for b in backends))
    for replicas in replica_counts:
        times = []
        for backend in backends:
            calls = max(1, number // 10 if replicas >= 1000 else number)
            times.append(time_batched(backend, None if backend == "numpy" else device,
                                      replicas, calls))  # fmt: skip
        print(f"{replicas:>7} " + " ".join(f"{t:>10.1f}" for t in times))


def main(argv: list[str] | None = None) -> None:
    """Print a table of microseconds per update, then the per-backend batched table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=2000, help="NumPy calls per repeat")
    parser.add_argument(
        "--replicas", type=int, nargs="+", default=[100, 10_000], help="B of the batched table"
    )
    parser.add_argument("--device", help="PyTorch and JAX device of the batched table (cuda)")
    parser.add_argument("--batched-only", action="store_true", help="print the batched table only")
    args = parser.parse_args(argv)
    if args.batched_only:
        batched_table(args.replicas, args.device, max(1, args.number // 10))
        return
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
    batched_table(args.replicas, args.device, max(1, args.number // 10))


if __name__ == "__main__":
    main()
