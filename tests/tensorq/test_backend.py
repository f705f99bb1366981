"""tensorq on PyTorch and JAX equals the NumPy reference (float64 to 1e-10, float32 to 1e-4)."""

import numpy as np
import pytest
import tensorly as tl

from tensorq import FactorBound, OnlineCP, bcd_update, normalized_step
from tensorq._backend import backend_name_of, ops_for_backend

torch = pytest.importorskip("torch")
jax = pytest.importorskip("jax")

SHAPE = (4, 3, 5, 2)
BACKENDS = ["pytorch", "jax"]
#: float32 factors and arithmetic: agreement with float64 NumPy over 30 updates
#: (documented in docs/tutorials/backends.md).
FLOAT32_TOL = 1e-4


def make(backend, replicas=3, device=None):
    return OnlineCP.random(
        SHAPE, 3, replicas=replicas, rng=np.random.default_rng(7), backend=backend, device=device
    )


def host(array):
    """A NumPy copy of a NumPy, PyTorch or JAX array (from any device)."""
    if hasattr(array, "detach"):
        return array.detach().cpu().numpy()
    return np.asarray(array)


def native(backend, array, q=None):
    """``array`` as the backend's own array, on the device of ``q``."""
    if backend == "numpy":
        return array
    return ops_for_backend(backend).asarray(array, None, None if q is None else q.device)


@pytest.mark.parametrize("backend", BACKENDS)
def test_random_gives_same_numbers_on_every_backend(backend):
    q_np, q = make("numpy"), make(backend)
    assert q.backend == backend and backend_name_of(q.factors[0]) == backend
    for a, b in zip(q_np.factors, q.factors, strict=True):
        assert str(b.dtype).endswith("float64")
        np.testing.assert_array_equal(a, host(b))
    with tl.backend_context(backend):  # the default backend is TensorLy's current one
        assert OnlineCP.random(SHAPE, 3, rng=0).backend == backend


@pytest.mark.parametrize("backend", BACKENDS)
def test_reading_agrees(backend):
    q_np, q = make("numpy"), make(backend)
    index = np.random.default_rng(0).integers(0, SHAPE, size=(3, 4))
    np.testing.assert_allclose(host(q.entries(index)), q_np.entries(index), rtol=1e-12)
    np.testing.assert_allclose(host(q.entries(native(backend, index, q))), q_np.entries(index))
    for k in range(5):
        expected = q_np.subtensor(index[:, :k])
        np.testing.assert_allclose(host(q.subtensor(index[:, :k])), expected, rtol=1e-12)
        lead = native(backend, index[:, :k], q)
        np.testing.assert_allclose(host(q.subtensor(lead)), expected, rtol=1e-12)
    np.testing.assert_allclose(host(q.to_dense()), q_np.to_dense(), rtol=1e-12)
    with tl.backend_context(backend):
        dense = tl.cp_to_tensor(q.to_cp_tensor(2))
    np.testing.assert_allclose(host(dense), q_np.to_dense()[2], rtol=1e-12)


def test_cp_tensor_view_on_pytorch():
    q = make("pytorch")
    cp = q.to_cp_tensor(1)
    q.factors[2][1, 0, 0] = 5.0
    assert cp.factors[2][0, 0].item() == 5.0


def _updates(backend, q_np, q, update, steps=30, step_scale=1.0, **settings):
    """Apply the same random updates to ``q_np`` and ``q``; return the max abs difference."""
    rng = np.random.default_rng(1)
    worst = 0.0
    for t in range(steps):
        index = rng.integers(0, SHAPE, size=(3, 4))
        target = rng.normal(scale=3.0, size=3)
        visits = rng.integers(0, 5, size=3).astype(float)
        step = step_scale * rng.uniform(0.05, 0.5, size=3)
        mask = rng.random(3) < 0.3
        vectors = (target, visits) if update is bcd_update else (target,)
        a = update(q_np, index, *vectors, step_size=step, mask=mask, **settings)
        if t % 2:  # alternately NumPy inputs and the backend's own arrays
            index, mask = native(backend, index, q), native(backend, mask, q)
            vectors = tuple(native(backend, v, q) for v in vectors)
            step = native(backend, step, q)
        b = update(q, index, *vectors, step_size=step, mask=mask, **settings)
        for x, y in ((a.before, b.before), (a.after, b.after)):
            worst = max(worst, float(np.abs(host(y) - x).max()))
        np.testing.assert_array_equal(host(b.iterations), a.iterations)
    for f_np, f in zip(q_np.factors, q.factors, strict=True):
        worst = max(worst, float(np.abs(host(f) - f_np).max()))
    return worst


BCD_SETTINGS = [
    pytest.param(variant, tol, max_inner, id=f"{variant}-{tol}-{max_inner}")
    for variant in ("paper", "released", "stable")
    for tol, max_inner in ((0.0, 1), (2e-2, 5))
]
#: JAX compiles once per setting (about a second each): the tol = 0 branch once.
JAX_SETTINGS = [BCD_SETTINGS[0], BCD_SETTINGS[3], BCD_SETTINGS[5]]


@pytest.mark.parametrize(("variant", "tol", "max_inner"), BCD_SETTINGS)
def test_pytorch_bcd_update_agrees_in_float64(variant, tol, max_inner):
    _check_bcd_update("pytorch", variant, tol, max_inner)


@pytest.mark.parametrize(("variant", "tol", "max_inner"), JAX_SETTINGS)
def test_jax_bcd_update_agrees_in_float64(variant, tol, max_inner):
    _check_bcd_update("jax", variant, tol, max_inner)


def _check_bcd_update(backend, variant, tol, max_inner):
    q_np, q = make("numpy"), make(backend)
    settings = {"lam": 1e-2, "eps": 1.0, "tol": tol, "max_inner": max_inner}
    settings |= {"bound": FactorBound(1.5), "variant": variant}
    assert _updates(backend, q_np, q, bcd_update, **settings) <= 1e-10
    assert all(backend_name_of(f) == backend for f in q.factors)


def test_pytorch_footprint_steps_agree_in_float64():
    """The stable rule with per-mode shares rho_n (footprint steps) on PyTorch equals NumPy."""
    q_np, q = make("numpy"), make("pytorch")
    settings = {"lam": 1e-2, "eps": 1.0, "tol": 0.0, "max_inner": 1, "variant": "stable"}
    settings |= {"bound": FactorBound(1.5), "mode_scale": (1.0, 0.36, 0.25, 0.01)}
    assert _updates("pytorch", q_np, q, bcd_update, **settings) <= 1e-10


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("sweep", ["jacobi", "gauss-seidel"])
def test_normalized_step_agrees_in_float64(backend, sweep):
    q_np, q = make("numpy"), make(backend)
    assert _updates(backend, q_np, q, normalized_step, step_scale=0.1, sweep=sweep) <= 1e-10


@pytest.mark.parametrize("backend", BACKENDS)
def test_float32_agrees_within_its_tolerance(backend):
    q_np = make("numpy")
    ops = ops_for_backend(backend)
    q = OnlineCP([ops.asarray(f, ops.tensor(np.zeros(1, np.float32)).dtype) for f in q_np.factors])
    settings = {"lam": 1e-2, "eps": 1.0, "tol": 2e-2, "max_inner": 5, "variant": "stable"}
    worst = _updates(backend, q_np, q, bcd_update, bound=FactorBound(1.5), **settings)
    assert 0 < worst <= FLOAT32_TOL
    assert all(str(f.dtype).endswith("float32") for f in q.factors)


def test_jax_update_is_functional_and_compiled_once():
    from tensorq.update import _jax_update, update_setting

    q = make("jax")
    before = q.factors[0]
    settings = {"step_size": 0.1, "lam": 1e-2, "eps": 1.0, "tol": 0.0, "max_inner": 2}
    index = np.zeros((3, 4), dtype=np.int64)
    bcd_update(q, index, np.ones(3), np.zeros(3), **settings)
    assert q.factors[0] is not before and before.is_deleted()  # donated, replaced
    compiled = _jax_update(update_setting("paper", lam=1e-2, eps=1.0, tol=0.0, max_inner=2))
    for t in range(3):
        bcd_update(q, index + (t % 2), np.ones(3), np.full(3, t), **settings)
    assert compiled._cache_size() == 1
    FactorBound(0.1).project(q)
    assert float(np.abs(host(q.factors[1])).max()) <= 0.1


def test_backend_and_device_errors():
    assert backend_name_of(np.zeros(1)) == "numpy"
    assert backend_name_of(torch.zeros(1)) == "pytorch"
    assert backend_name_of(jax.numpy.zeros(1)) == "jax"
    assert ops_for_backend("jax") is ops_for_backend("jax")
    with pytest.raises(ValueError, match="'factors'"):
        OnlineCP([[[[1.0]]]])
    with pytest.raises(ValueError, match="'backend'"):
        ops_for_backend("cupy")
    with pytest.raises(ValueError, match="'device'"):
        make("numpy", device="cuda")
    with pytest.raises(ValueError, match="'device'"):
        make("jax", device="tpu:0")
    q = make("pytorch")
    with pytest.raises(ValueError, match="'index'"):
        q.entries(torch.zeros((3, 4)))  # a float index
    with pytest.raises(ValueError, match="'target'"):
        bcd_update(q, np.zeros((3, 4), dtype=int), torch.zeros(2), 0.0, step_size=0.1, lam=0.0,
                   eps=1.0, tol=0.0, max_inner=1)  # fmt: skip


def _cuda_backends():
    """(backend, device) pairs with a CUDA device, each skipped where it has none."""
    torch_cuda = torch.cuda.is_available()
    try:
        jax_cuda = bool(jax.devices("gpu"))
    except RuntimeError:
        jax_cuda = False
    return [
        pytest.param("pytorch", marks=pytest.mark.skipif(not torch_cuda, reason="no CUDA torch")),
        pytest.param("jax", marks=pytest.mark.skipif(not jax_cuda, reason="no CUDA JAX")),
    ]


@pytest.mark.gpu
@pytest.mark.parametrize("backend", _cuda_backends())
@pytest.mark.parametrize(("variant", "tol", "max_inner"), BCD_SETTINGS)
def test_cuda_update_agrees_and_stays_on_the_device(backend, variant, tol, max_inner):
    q_np, q = make("numpy"), make(backend, device="cuda")
    settings = {"lam": 1e-2, "eps": 1.0, "tol": tol, "max_inner": max_inner}
    settings |= {"bound": FactorBound(1.5), "variant": variant}
    assert _updates(backend, q_np, q, bcd_update, **settings) <= 1e-10
    assert all("cuda" in str(f.device).lower() or "gpu" in str(f.device).lower() for f in q.factors)
    index = native(backend, np.zeros((3, 4), dtype=np.int64), q)
    assert "cpu" not in str(q.entries(index).device).lower()
    assert (
        _updates(backend, make("numpy"), make(backend, device="cuda:0"), normalized_step) <= 1e-10
    )
