"""Run every benchmark in turn and print their tables."""

import importlib
import importlib.util
import sys

MODULES = ["bench_tensorq", "bench_envs", "bench_agents", "bench_deep"]


def main() -> None:
    """Run each benchmark module's ``main`` (the torch one only when torch is installed)."""
    sys.argv = sys.argv[:1]
    for name in MODULES:
        if name == "bench_deep" and importlib.util.find_spec("torch") is None:
            continue
        print(f"\n== {name}")
        importlib.import_module(f"benchmarks.{name}").main()


if __name__ == "__main__":
    main()
