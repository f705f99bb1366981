#!/usr/bin/env bash
# The deep agents' GPU checks, in under 3 minutes on one GPU: the tests marked
# `gpu` (skipped without CUDA), then the deep benchmark with the batched agents
# on the GPU beside the looped CPU agent at B = 1. (--noconftest: the suite's session
# fixture would compile every Numba kernel, which these tests do not use.)
# Run from the repository root: bash benchmarks/gpu_check_deep.sh (PYTHON names
# the interpreter, python3 by default). Both steps run; the exit status says whether both passed.
set -uo pipefail
PYTHON=${PYTHON:-python3}
status=0
"$PYTHON" -m pytest -q -p no:cacheprovider --noconftest -n 0 -m gpu -s tests/rl/test_deep_gpu.py || status=1
"$PYTHON" -m benchmarks deep --device cuda --impls looped batched --number 200 --looped-max-replicas 1 || status=1
exit $status
