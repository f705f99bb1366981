#!/usr/bin/env bash
# The GPU checks of tensorq's backends and the agents' array engine (issue 22), for a machine
# with a CUDA device; about 5 minutes.
#
#   bash benchmarks/gpu_check_backends.sh         (PYTHON=... to pick the interpreter)
#
# 1. The gpu-marked tests: bcd_update (every variant) and normalized_step with the
#    factors on "cuda" (PyTorch, JAX), equal to NumPy to 1e-10 in float64, results on the device.
# 2. The batched-update table of `python -m benchmarks tensorq` with PyTorch and JAX on cuda.
# Fails if neither PyTorch nor JAX sees a CUDA device (the tests would only skip).
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python}
"$python" - <<'PY'
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
# --noconftest: the tensorq tests need neither rl nor its compiled kernels.
"$python" -m pytest -q -p no:cacheprovider --noconftest -m gpu -rs tests/tensorq/test_backend.py
"$python" -m benchmarks tensorq --batched-only --device cuda --replicas 100 10000 100000 --number 200
# 3. The agents on the GPU (issue 22): TEQL released on "cuda" through the array engine,
#    returns equal to the compiled CPU engine; then the end-to-end table of
#    `python -m benchmarks backends` with the array engine on cuda beside the compiled CPU engine.
"$python" -m pytest -q -p no:cacheprovider -m gpu -rs tests/rl/test_array_engine.py
"$python" -m benchmarks backends --device cuda --replicas 1000 10000 100000 --seconds 3
