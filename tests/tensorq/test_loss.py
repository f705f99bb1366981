import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tensorq import (
    cp_entry,
    entry_derivative,
    frequency_weight,
    loss,
    loss_gradient,
    other_modes_product,
    released_entry_derivative,
)

torch = pytest.importorskip("torch")


@st.composite
def rows_and_data(draw):
    order = draw(st.integers(1, 5))
    rank = draw(st.integers(1, 6))
    batch = draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    rows = [rng.normal(size=(batch, rank)) for _ in range(order)]
    target = rng.normal(scale=draw(st.sampled_from([0.1, 1.0, 100.0])), size=batch)
    visits = rng.integers(0, 50, size=batch).astype(float)
    lam = draw(st.sampled_from([0.0, 1e-3, 0.1, 1.0]))
    eps = draw(st.sampled_from([1e-4, 1.0]))
    return rows, target, visits, lam, eps


def autograd_gradients(rows, target, visits, lam, eps):
    leaves = [torch.tensor(r, dtype=torch.float64, requires_grad=True) for r in rows]
    q = cp_entry(leaves)
    total = loss(q, torch.tensor(target), torch.tensor(visits), lam, eps).sum()
    total.backward()
    return [leaf.grad.numpy() for leaf in leaves]


@given(rows_and_data())
def test_gradient_equals_autograd(case):
    rows, target, visits, lam, eps = case
    expected = autograd_gradients(rows, target, visits, lam, eps)
    grads = loss_gradient(rows, target, visits, lam, eps)
    assert len(grads) == len(rows)
    for n, (got, want) in enumerate(zip(grads, expected, strict=True)):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
        single = loss_gradient(rows, target, visits, lam, eps, mode=n)
        np.testing.assert_allclose(single, want, rtol=1e-10, atol=1e-10)


@given(rows_and_data())
def test_entry_derivative_equals_autograd(case):
    rows, target, visits, lam, eps = case
    q = torch.tensor(cp_entry(rows), requires_grad=True)
    loss(q, torch.tensor(target), torch.tensor(visits), lam, eps).sum().backward()
    got = entry_derivative(cp_entry(rows), target, frequency_weight(visits, lam, eps))
    np.testing.assert_allclose(got, q.grad.numpy(), rtol=1e-10, atol=1e-10)


def test_loss_formula():
    # eq. (loss_function): 1/2 (y - Q)^2 - lam Q^2 / (N + eps)
    assert loss(2.0, 5.0, 3.0, 0.5, 1.0) == pytest.approx(0.5 * 9 - 0.5 * 4 / 4)
    assert frequency_weight(3.0, 0.5, 1.0) == 0.125


def test_cp_entry_and_other_modes_product():
    rows = [np.array([1.0, 2.0]), np.array([3.0, 4.0]), np.array([5.0, 6.0])]
    assert cp_entry(rows) == 1 * 3 * 5 + 2 * 4 * 6
    np.testing.assert_array_equal(other_modes_product(rows, 1), [5.0, 12.0])
    np.testing.assert_array_equal(other_modes_product(rows[:1], 0), [1.0, 1.0])


def test_released_coefficient_uses_constant_regularizer():
    # -(y - Q) - lam / (N + eps), independent of the sign and size of Q beyond the TD error
    assert released_entry_derivative(2.0, 5.0, 0.25) == pytest.approx(-3.25)


@pytest.mark.parametrize("backend", ["pytorch", "jax"])
@pytest.mark.parametrize(("order", "rank"), [(1, 3), (4, 2)])
def test_gradient_on_each_backend_equals_its_autodiff(backend, order, rank):
    """loss_gradient evaluated on the backend's own arrays equals torch autograd / jax.grad."""
    rng = np.random.default_rng(order)
    rows = [rng.normal(size=(2, rank)) for _ in range(order)]
    target, visits, lam, eps = rng.normal(size=2), np.array([0.0, 3.0]), 0.1, 1e-4
    if backend == "pytorch":
        leaves = [torch.tensor(r, requires_grad=True) for r in rows]
        loss(
            cp_entry(leaves), torch.tensor(target), torch.tensor(visits), lam, eps
        ).sum().backward()
        want = [leaf.grad.numpy() for leaf in leaves]
        got = loss_gradient([torch.tensor(r) for r in rows], torch.tensor(target),
                            torch.tensor(visits), lam, eps)  # fmt: skip
        got = [g.numpy() for g in got]
    else:
        jax = pytest.importorskip("jax")
        jax.config.update("jax_enable_x64", True)
        jnp = jax.numpy
        args = (jnp.asarray(target), jnp.asarray(visits), lam, eps)

        def total(leaves):
            return loss(cp_entry(leaves), *args).sum()

        want = [np.asarray(g) for g in jax.grad(total)([jnp.asarray(r) for r in rows])]
        got = [np.asarray(g) for g in loss_gradient([jnp.asarray(r) for r in rows], *args)]
        assert all(g.dtype == np.float64 for g in got)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
