#!/usr/bin/env bash
# The GPU check of the scan engine (rl.loop.scan: T whole lockstep steps of CartPole as one
# compiled JAX program), for a machine with a CUDA device; under 3 minutes.
#
#   bash benchmarks/gpu_check_scan.sh   (PYTHON=... picks the interpreter; JSON_DIR=... also
#                                        writes the tables as scan.json and scan-compiled.json)
#
# 1. The gpu-marked test of tests/rl/test_scan_engine.py: TEQL released on "cuda", 4 seeds x
#    20 CartPole episodes on the host generators' draws, the compiled CPU engine's returns,
#    the chunk's arrays on the device.
# 2. `python -m benchmarks backends` for the scan engine on cuda at B = 10^3, 10^4, 10^5 and
#    10^6 (microseconds per agent-step; peak host / device MB), then the compiled engine on
#    one CPU core of the same machine at B = 10^3 and 10^4 as the yardstick.
# Every step runs even if one before it fails; the exit status says whether all passed.
# Fails at once if JAX sees no CUDA device (the test would only skip).
set -uo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python}
"$python" - <<'PY' || exit 1
import jax

try:
    print("gpu_check_scan: jax", jax.__version__, jax.devices("gpu"))
except RuntimeError:
    raise SystemExit("gpu_check_scan: JAX sees no CUDA device") from None
PY
status=0
export XLA_PYTHON_CLIENT_PREALLOCATE=false  # peak device memory is then what the run holds
"$python" -m pytest -q -p no:cacheprovider --noconftest -m gpu -rsP -n 0 \
    tests/rl/test_scan_engine.py || status=1
"$python" -m benchmarks backends ${JSON_DIR:+--json "$JSON_DIR/scan.json"} --engines scan \
    --device cuda --replicas 1000 10000 100000 1000000 --seconds 2 --warmup 6 || status=1
"$python" -m benchmarks backends ${JSON_DIR:+--json "$JSON_DIR/scan-compiled.json"} \
    --engines compiled --replicas 1000 10000 --seconds 2 --warmup 3 || status=1
exit $status
