#!/usr/bin/env bash
# The GPU checks of tensorq's backends and the agents' array engine, for a machine
# with a CUDA device; about 6 minutes on an H100.
#
#   bash benchmarks/gpu_check_backends.sh   (PYTHON=... picks the interpreter; JSON_DIR=...
#                                            also writes the agents' table as backends.json)
#
# 1. The gpu-marked tests of tensorq: bcd_update (every variant) and normalized_step with the
#    factors on "cuda" (PyTorch, JAX), equal to NumPy to 1e-10 in float64, results on the device.
# 2. The gpu-marked tests of the agents: TEQL (released, stable) and TLR on "cuda" through the
#    array engine, 4 seeds x 200 CartPole episodes against the compiled CPU engine (-rP prints
#    where runs part); the CartPole copies on the device (rl.loop.device_copies).
# 3. The end-to-end table of `python -m benchmarks backends` with the array engine on cuda
#    beside the compiled CPU engine, then the batched-update table of
#    `python -m benchmarks tensorq` with PyTorch and JAX on cuda.
# Every step runs even if one before it fails; the exit status says whether all passed.
# Fails at once if neither PyTorch nor JAX sees a CUDA device (the tests would only skip).
set -uo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python}
"$python" - <<'PY' || exit 1
import importlib.util

found = []
if importlib.util.find_spec("torch"):
    import torch

    if torch.cuda.is_available():
        found.append(f"torch {torch.__version__}: {torch.cuda.get_device_name()}")
if importlib.util.find_spec("jax"):
    import jax

    try:
        found.append(f"jax {jax.__version__}: {jax.devices('gpu')}")
    except RuntimeError:
        pass
if not found:
    raise SystemExit("gpu_check_backends: neither PyTorch nor JAX sees a CUDA device")
print("gpu_check_backends:", *found, sep="\n  ")
PY
status=0
# --noconftest: these tests need none of the suite's fixtures, and its session fixture would
# compile every Numba kernel in each worker. JAX must not take 75% of the device per process.
export XLA_PYTHON_CLIENT_PREALLOCATE=false
tests=(-m pytest -q -p no:cacheprovider --noconftest -m gpu -rsP)
"$python" "${tests[@]}" -n 2 tests/tensorq/test_backend.py || status=1
"$python" "${tests[@]}" -n 6 tests/rl/test_array_engine.py tests/rl/test_device_copies.py || status=1
unset XLA_PYTHON_CLIENT_PREALLOCATE
"$python" -m benchmarks backends ${JSON_DIR:+--json "$JSON_DIR"} \
    --device cuda --replicas 1000 10000 100000 --seconds 2 --warmup 6 || status=1
"$python" -m benchmarks tensorq --batched-only --device cuda --replicas 100 10000 100000 \
    --number 200 || status=1
exit $status
