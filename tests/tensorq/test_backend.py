import numpy as np
import pytest
import tensorly as tl

from tensorq import FactorBound, OnlineCP, bcd_update
from tensorq._backend import backend_name_of, ops_for_backend

torch = pytest.importorskip("torch")

SHAPE = (4, 3, 5, 2)


def make(backend, replicas=3):
    with tl.backend_context(backend):
        return OnlineCP.random(SHAPE, 3, replicas=replicas, rng=np.random.default_rng(7))


def test_random_gives_same_numbers_on_both_backends():
    q_np, q_pt = make("numpy"), make("pytorch")
    assert (q_np.backend, q_pt.backend) == ("numpy", "pytorch")
    for a, b in zip(q_np.factors, q_pt.factors, strict=True):
        assert isinstance(b, torch.Tensor) and b.dtype == torch.float64
        np.testing.assert_array_equal(a, b.numpy())


def test_reading_agrees():
    q_np, q_pt = make("numpy"), make("pytorch")
    index = np.random.default_rng(0).integers(0, SHAPE, size=(3, 4))
    np.testing.assert_allclose(q_pt.entries(index).numpy(), q_np.entries(index), rtol=1e-12)
    np.testing.assert_allclose(q_pt.entries(torch.as_tensor(index)).numpy(), q_np.entries(index))
    for k in range(5):
        np.testing.assert_allclose(
            q_pt.subtensor(index[:, :k]).numpy(), q_np.subtensor(index[:, :k]), rtol=1e-12
        )
    np.testing.assert_allclose(q_pt.to_dense().numpy(), q_np.to_dense(), rtol=1e-12)
    with tl.backend_context("pytorch"):
        dense = tl.cp_to_tensor(q_pt.to_cp_tensor(2))
    np.testing.assert_allclose(dense.numpy(), q_np.to_dense()[2], rtol=1e-12)


def test_cp_tensor_view_on_pytorch():
    q = make("pytorch")
    cp = q.to_cp_tensor(1)
    q.factors[2][1, 0, 0] = 5.0
    assert cp.factors[2][0, 0].item() == 5.0


@pytest.mark.parametrize("variant", ["paper", "released", "stable"])
@pytest.mark.parametrize(("tol", "max_inner"), [(0.0, 1), (2e-2, 5)])
def test_updates_agree(variant, tol, max_inner):
    q_np, q_pt = make("numpy"), make("pytorch")
    rng = np.random.default_rng(1)
    bound = FactorBound(1.5)
    for _ in range(30):
        index = rng.integers(0, SHAPE, size=(3, 4))
        target = rng.normal(scale=3.0, size=3)
        visits = rng.integers(0, 5, size=3).astype(float)
        step = rng.uniform(0.05, 0.5, size=3)
        mask = rng.random(3) < 0.3
        kwargs = {
            "step_size": step,
            "lam": 1e-2,
            "eps": 1.0,
            "tol": tol,
            "max_inner": max_inner,
            "bound": bound,
            "mask": mask,
            "variant": variant,
        }
        a = bcd_update(q_np, index, target, visits, **kwargs)
        b = bcd_update(q_pt, torch.as_tensor(index), torch.as_tensor(target), visits, **kwargs)
        np.testing.assert_allclose(b.before.numpy(), a.before, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(b.after.numpy(), a.after, rtol=1e-10, atol=1e-10)
        np.testing.assert_array_equal(b.iterations.numpy(), a.iterations)
    for f_np, f_pt in zip(q_np.factors, q_pt.factors, strict=True):
        np.testing.assert_allclose(f_pt.numpy(), f_np, rtol=1e-10, atol=1e-10)


def test_backend_resolution():
    assert backend_name_of(np.zeros(1)) == "numpy"
    assert backend_name_of(torch.zeros(1)) == "pytorch"
    assert ops_for_backend("numpy") is ops_for_backend("numpy")
    with pytest.raises(ValueError, match="'factors'"):
        OnlineCP([[[[1.0]]]])
    with pytest.raises(ValueError, match="'backend'"):
        ops_for_backend("jax")
