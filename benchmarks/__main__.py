"""Run the benchmarks: ``python -m benchmarks [NAME ...] [--quick] [--json DIR] [FLAGS]``.

Every benchmark module has a ``main(argv)`` with flags of its own; this entry
point runs the selected ones in turn (all by default) and passes each the flags
that ``--quick`` (a tiny run, used by the test suite) and ``--json`` imply.
Other flags go to the benchmark when exactly one is named
(``python -m benchmarks paper_scale --episodes 1000``); its own ``--help``
lists them.

Run it from the repository root, or from anywhere with the ``.venv`` that
``bin/setup`` makes (it puts the repository on that environment's path).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
from pathlib import Path

from tensorq.version import add_version_option

MODULES = {
    "tensorq": "bench_tensorq",
    "envs": "bench_envs",
    "agents": "bench_agents",
    "deep": "bench_deep",
    "step": "bench_step",
    "analysis": "bench_analysis",
    "paper_scale": "bench_paper_scale",
    "classics": "bench_classics",
    "classics_why": "bench_classics_why",
    "sparse_grid": "bench_sparse_grid",
    "highway": "bench_highway",
    "backends": "bench_backends",
    "metrics": "bench_metrics",
    "tensorboard": "bench_tensorboard",
    "against": "bench_against",
    "sweep_batch": "bench_sweep_batch",
    "visits_hashed": "bench_visits_hashed",
    "tune_population": "bench_tune_population",
}
QUICK = {
    "sweep_batch": ["--configs", "2", "--seeds", "2", "--episodes", "3", "--workers", "1"],
    "tensorq": ["--number", "20", "--replicas", "4"],
    "envs": ["--steps", "200", "--num-envs", "4", "--no-highway"],
    "agents": ["--episodes", "2", "--replicas", "4"],
    "deep": ["--number", "4", "--replicas", "1", "2"],
    "step": [
        "--seconds",
        "0.05",
        "--replicas",
        "1",
        "4",
        "--agents",
        "teql-released",
        "--inline",
        "--grids",
        "cartpole",
        "cartpole-step",
        "highway-grid",
    ],  # fmt: skip
    "analysis": ["--quick"],
    "paper_scale": ["--seeds", "4", "--episodes", "3"],
    "classics": ["--seeds", "1", "--scale", "0.005", "--envs", "FrozenLake-v1"],
    "classics_why": ["--seeds", "1", "--scale", "0.01", "--envs", "CartPole-v1"],
    "sparse_grid": ["--seeds", "1", "--scale", "0.005", "--settings", "default", "tabular"],
    "highway": ["--batches", "1", "2", "--reference-steps", "2", "--seconds", "0.01"],
    "backends": ["--replicas", "1", "4", "--seconds", "0.2", "--engines", "compiled", "pytorch"],
    "metrics": ["--seeds", "3", "--episodes", "40", "--repeat", "1"],
    "visits_hashed": ["--episodes", "3", "--seeds", "2"],
    "tune_population": ["--trials", "3", "--population", "2", "--seeds", "2", "--episodes", "10"],
    "tensorboard": ["--seeds", "3", "--episodes", "6", "--checkpoint-every", "3", "--repeat", "1"],
    "against": [
        "--rev",
        "HEAD",
        "--agents",
        "teql-released",
        "--replicas",
        "2",
        "--episodes",
        "1",
        "--repeat",
        "1",
    ],
}
WRITES_JSON = ("step", "backends", "against", "visits_hashed")


def build_parser() -> argparse.ArgumentParser:
    """Return the command-line parser of ``python -m benchmarks``."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help=f"benchmarks to run, any of: {', '.join(MODULES)} (default: all)",
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a smoke test)")
    parser.add_argument("--json", metavar="DIR", help="write NAME.json tables into DIR")
    return add_version_option(parser)


def main(argv: list[str] | None = None) -> int:
    """Run each selected benchmark module's ``main`` (torch ones only when torch is installed)."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    unknown = [name for name in args.names if name not in MODULES]
    if unknown:
        parser.error(f"unknown benchmark {unknown[0]!r}; choose from: {', '.join(MODULES)}")
    if extra and len(args.names) != 1:
        parser.error(f"flags {' '.join(extra)} need exactly one benchmark named before them")
    for name in args.names or list(MODULES):
        if name == "deep" and importlib.util.find_spec("torch") is None:
            continue
        module = importlib.import_module(f"benchmarks.{MODULES[name]}")
        flags = [*(QUICK[name] if args.quick else []), *extra]
        if args.json and name in WRITES_JSON:
            Path(args.json).mkdir(parents=True, exist_ok=True)
            flags += ["--json", str(Path(args.json) / f"{name}.json")]
        print(f"\n== {name}", flush=True)
        module.main(flags)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
