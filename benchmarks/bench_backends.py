"""Microseconds per agent-step of a CartPole run on each engine and backend, B replicas.

``python -m benchmarks backends``: TEQL (released reading, by default) trains
on CartPole end to end (environments, encoding, action selection, update,
bookkeeping; greedy evaluation off) on the compiled engine (NumPy, the fused
loop) and on the array engine with PyTorch and JAX (and NumPy with
``--array-numpy``), and on the scan engine (JAX, `rl.loop.scan`: T whole steps
per compiled call), for B = 1, 100, 1,000 and 10,000 replicas (``--full`` adds
100,000). Each row runs in its own subprocess, which also gives its peak
resident memory (and the device's peak on CUDA). A warm-up (imports, JAX's
compilation, the first allocations, ``--warmup`` seconds) comes before the
timed seconds. It is long because JAX compiles the step again each time the
visit table doubles (about 0.3-1 s each on this CPU): a 1.5 s warm-up and 3
timed seconds gave JAX 26 µs per agent-step at B = 10,000, 20 timed seconds 4.2. PyTorch
and XLA run on one CPU thread by default (``--threads``), as the compiled
engine does: on a small machine shared with other work their thread pools
otherwise spin against it (five times slower on our 2-core machine).
``--device cuda`` runs the array engine on the GPU beside the compiled CPU
engine of the same machine. See docs/tutorials/backends.md for the table.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import time
from typing import Any

from benchmarks.child import measure_in_child

ENGINES = ("compiled", "numpy", "pytorch", "jax", "scan")
"""Rows: the compiled engine, the array engine on each backend, the scan engine (JAX)."""
_BACKENDS = {"compiled": "numpy", "scan": "jax"}
"""The backend of the rows that are not named after theirs."""


def _device_peak_mb(backend: str, device: str) -> float:
    """Peak memory of the device in MB (0 on the CPU)."""
    if device == "cpu":
        return 0.0
    if backend == "pytorch":
        import torch

        return torch.cuda.max_memory_allocated() / 2**20
    import jax

    stats = jax.devices("gpu")[0].memory_stats() or {}
    return stats.get("peak_bytes_in_use", 0) / 2**20


def measure(
    agent: str, engine: str, replicas: int, device: str, seconds: float, warmup: float
) -> dict[str, Any]:
    """Time one configuration in this process; returns a JSON-able row."""
    from rl.runs.config import TrainConfig
    from rl.runs.training import build

    backend = _BACKENDS.get(engine, engine)
    params = {"engine": engine if engine in _BACKENDS else "array", "backend": backend}
    if backend != "numpy":
        params["device"] = device
    config = TrainConfig(
        env="cartpole", agent=agent, seeds=replicas, eval_every=0, out="unused",
        episodes=10**9, agent_params=params,
    )  # fmt: skip
    runner, _ = build(config)

    def play(budget: float) -> tuple[int, float]:
        start, before = time.perf_counter(), runner.agent_steps
        for _ in runner.episodes(0, 10**9, lambda: time.perf_counter() - start > budget):
            pass
        return runner.agent_steps - before, time.perf_counter() - start

    play(warmup)  # compilation, allocation, the first visits and doublings of the visit table
    steps, elapsed = play(seconds)
    runner.close()
    return {
        "agent": agent, "engine": engine, "device": "cpu" if engine == "compiled" else device,
        "B": replicas, "us_per_agent_step": 1e6 * elapsed / max(steps, 1), "agent_steps": steps,
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "device_peak_mb": _device_peak_mb(backend, device),
    }  # fmt: skip


def _thread_environment(threads: int) -> dict[str, str]:
    """Return a row's environment: PyTorch's and XLA's CPU threads at ``threads`` (0: free)."""
    if threads <= 0:
        return dict(os.environ)
    xla = f"--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads={threads}"
    return {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
            "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} {xla}".strip()}  # fmt: skip


def _row(
    agent: str, engine: str, replicas: int, device: str, times: tuple[float, float], threads: int
) -> dict | str:
    """Measure one configuration in a fresh subprocess; a string says why it failed.

    ``times`` holds the timed and the warm-up seconds.
    """
    child = ["-m", "benchmarks.bench_backends", "--seconds", str(times[0])]
    child += ["--warmup", str(times[1])]
    child += ["--one", agent, engine, str(replicas), device]
    return measure_in_child(child, _thread_environment(threads))


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    """Print the table (and write JSON with ``--json``); returns its rows."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agent", default="teql-released", help="agent or alias (tlr, teql)")
    parser.add_argument("--replicas", type=int, nargs="+", default=[1, 100, 1000, 10000])
    parser.add_argument("--full", action="store_true", help="add B = 100,000")
    parser.add_argument(
        "--engines", nargs="+", default=["compiled", "pytorch", "jax", "scan"], choices=ENGINES,
        help="rows; 'numpy' is the array engine on NumPy",
    )  # fmt: skip
    parser.add_argument("--device", default="cpu", help="device of the array engine")
    parser.add_argument("--seconds", type=float, default=3.0, help="timed seconds per row")
    parser.add_argument(
        "--warmup", type=float, default=10.0, help="seconds played before the timed ones"
    )
    parser.add_argument(
        "--threads", type=int, default=1,
        help="CPU threads of PyTorch and XLA per row (1, as the compiled engine; 0: their default)",
    )  # fmt: skip
    parser.add_argument("--json", help="also write the rows to this JSON file")
    parser.add_argument("--one", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:  # child process: one configuration, JSON on stdout
        agent, engine, replicas, device = args.one
        row = measure(agent, engine, int(replicas), device, args.seconds, args.warmup)
        print(json.dumps(row))
        return []
    replicas = [*args.replicas, *([100_000] if args.full else [])]
    engines = [
        e for e in args.engines
        if e in ("compiled", "numpy") or importlib.util.find_spec(
            "torch" if e == "pytorch" else "jax") is not None
    ]  # fmt: skip
    print(f"{args.agent} on CartPole, microseconds per agent-step (peak resident MB)")
    print(f"{'engine':10} {'device':7} " + " ".join(f"{'B=' + str(b):>18}" for b in replicas))
    rows = []
    for engine in engines:
        cells = []
        for b in replicas:
            times = (args.seconds, args.warmup)
            row = _row(args.agent, engine, b, args.device, times, args.threads)
            if isinstance(row, str):
                print(f"  {engine} B={b} failed: {row}", flush=True)
                cells.append(f"{'-':>18}")
                continue
            rows.append(row)
            gpu = f"/{row['device_peak_mb']:.0f}" if row["device_peak_mb"] else ""
            cells.append(f"{row['us_per_agent_step']:9.3f} ({row['peak_mb']:.0f}{gpu})".rjust(18))
        device = "cpu" if engine == "compiled" else args.device
        print(f"{engine:10} {device:7} " + " ".join(cells), flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(rows, handle, indent=2)
    return rows


if __name__ == "__main__":
    main()
