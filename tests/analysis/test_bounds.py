import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from analysis import bounds

finite = st.floats(0.0, 100.0, allow_nan=False, allow_infinity=False)
gammas = st.floats(0.01, 0.99)


def theorem1_reference(e0, gamma, b_r, noise, tight=False):
    """eq. (A.1) term by term, as printed."""
    out = []
    for t in range(1, len(noise) + 1):
        bias = b_r * (1 - gamma**t) / (1 - gamma) if tight else b_r / (1 - gamma)
        accumulated = sum(gamma**k * noise[t - 1 - k] for k in range(t))
        out.append(gamma**t * e0 + bias + accumulated)
    return np.array(out)


def test_v_max_and_limit_by_hand():
    assert bounds.v_max(1.0, 0.9) == pytest.approx(10.0)
    assert bounds.v_max(0, 0.5) == 0.0
    assert isinstance(bounds.v_max(1, 0.5), float)
    np.testing.assert_allclose(bounds.v_max([1.0, 2.0], [0.5, 0.75]), [2.0, 8.0])
    assert bounds.theorem1_limit(0.9, 0.5, 0.5) == pytest.approx(10.0)
    np.testing.assert_allclose(bounds.theorem1_limit(0.5, [0.0, 1.0], 1.0), [2.0, 4.0])


def test_theorem1_bound_by_hand():
    # t=1: 0.5*2 + 1/0.5 + 1 = 4; t=2: 0.25*2 + 2 + (0 + 0.5*1) = 3; t=3: 0.25 + 2 + (2 + 0 + 0.25)
    np.testing.assert_allclose(bounds.theorem1_bound(2.0, 0.5, 1.0, [1.0, 0.0, 2.0]), [4, 3, 4.5])
    tight = bounds.theorem1_bound(2.0, 0.5, 1.0, [1.0, 0.0, 2.0], tight=True)
    np.testing.assert_allclose(tight, [3.0, 2.5, 4.25])


def test_theorem1_bound_matches_reference():
    rng = np.random.default_rng(0)
    noise = rng.uniform(0, 1, 50)
    for tight in (False, True):
        np.testing.assert_allclose(
            bounds.theorem1_bound(3.0, 0.9, 0.2, noise, tight=tight),
            theorem1_reference(3.0, 0.9, 0.2, noise, tight),
            rtol=1e-12,
        )
    long = bounds.theorem1_bound(1.0, 0.9, 0.1, np.full(2000, 0.05))
    assert long[-1] == pytest.approx(bounds.theorem1_limit(0.9, 0.1, 0.05))


def test_prop2_bound_by_hand_and_vectorized():
    # base = 0.01 * 2 * 3 * 2 * 2^4 * 10 = 19.2; regularizer = 19.2 * 0.5 / (4 + 1) = 1.92
    kw = dict(step_size=0.01, order=3, rank=2, f_max=2.0, v_max=10.0, lam=0.5, eps=1.0)
    assert bounds.prop2_bound(visits=4, **kw) == pytest.approx(21.12)
    assert bounds.prop2_bound(visits=4, inner_steps=5, **kw) == pytest.approx(105.6)
    visits = np.arange(1000)
    step = 0.01 / (1 + 0.001 * np.arange(1000))
    many = bounds.prop2_bound(**{**kw, "step_size": step}, visits=visits)
    assert many.shape == (1000,)
    one = [
        bounds.prop2_bound(**{**kw, "step_size": float(s)}, visits=int(v))
        for s, v in zip(step[:5], visits[:5], strict=True)
    ]
    np.testing.assert_allclose(many[:5], one)
    assert bounds.prop2_bound(**{**kw, "lam": 0.0}, visits=0) == pytest.approx(19.2)


def test_prop3_bound_by_hand():
    assert bounds.prop3_bound(t0=10, c=1.0, delta=0.5, horizon=100) == pytest.approx(
        10 + 64 * math.log(100)
    )
    assert bounds.prop3_bound(t0=10, c=1.0, delta=0.5, horizon=100, tight=True) == pytest.approx(
        10 + 64 / 9 * math.log(100)
    )
    assert bounds.prop3_bound(t0=3, c=2.0, delta=1.0, horizon=1) == 3.0
    out = bounds.prop3_bound(t0=1, c=1.0, delta=1.0, horizon=np.array([1, 10, 100]))
    np.testing.assert_allclose(out, 1 + 16 * np.log([1, 10, 100]))


@given(
    e0=finite, gamma=gammas, b1=finite, b2=finite, noise=st.lists(finite, min_size=1, max_size=30)
)
def test_theorem1_non_decreasing_in_b_r(e0, gamma, b1, b2, noise):
    low, high = sorted((b1, b2))
    assert np.all(
        bounds.theorem1_bound(e0, gamma, low, noise)
        <= bounds.theorem1_bound(e0, gamma, high, noise)
    )


@given(
    e0=finite,
    gamma=gammas,
    b_r=finite,
    noise=st.lists(finite, min_size=1, max_size=30),
    data=st.data(),
    bump=st.floats(0.0, 10.0),
)
def test_theorem1_non_decreasing_in_every_noise_term(e0, gamma, b_r, noise, data, bump):
    k = data.draw(st.integers(0, len(noise) - 1))
    more = list(noise)
    more[k] += bump
    assert np.all(
        bounds.theorem1_bound(e0, gamma, b_r, noise) <= bounds.theorem1_bound(e0, gamma, b_r, more)
    )


@given(
    step=st.floats(0.0, 1.0),
    order=st.integers(1, 6),
    rank=st.integers(1, 30),
    f_max=st.floats(0.0, 3.0),
    v=finite,
    lam=st.floats(0.0, 10.0),
    visits=st.lists(st.floats(0.0, 1e6), min_size=2, max_size=2),
    eps=st.floats(1e-6, 1.0),
)
def test_prop2_non_increasing_in_visits(step, order, rank, f_max, v, lam, visits, eps):
    few, many = sorted(visits)
    kw = dict(step_size=step, order=order, rank=rank, f_max=f_max, v_max=v, lam=lam, eps=eps)
    assert bounds.prop2_bound(visits=few, **kw) >= bounds.prop2_bound(visits=many, **kw)


PROP2 = dict(step_size=0.1, order=2, rank=1, f_max=1.0, v_max=1.0, lam=0.1, visits=1, eps=0.1)
PROP3 = dict(t0=1, c=1.0, delta=1.0, horizon=10)


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: bounds.v_max(1.0, 1.0), "gamma"),
        (lambda: bounds.v_max(1.0, 0.0), "gamma"),
        (lambda: bounds.v_max(1.0, float("nan")), "gamma"),
        (lambda: bounds.v_max(1.0, [0.5, 1.5]), "gamma"),
        (lambda: bounds.v_max(-1.0, 0.5), "r_max"),
        (lambda: bounds.v_max("1", 0.5), "r_max"),
        (lambda: bounds.theorem1_bound(-1.0, 0.5, 0.0, [0.0]), "e0"),
        (lambda: bounds.theorem1_bound(1.0, 1.2, 0.0, [0.0]), "gamma"),
        (lambda: bounds.theorem1_bound(1.0, 0.5, -0.1, [0.0]), "b_r"),
        (lambda: bounds.theorem1_bound(1.0, 0.5, 0.0, []), "noise"),
        (lambda: bounds.theorem1_bound(1.0, 0.5, 0.0, [[0.0]]), "noise"),
        (lambda: bounds.theorem1_bound(1.0, 0.5, 0.0, [0.1, -0.1]), "noise"),
        (lambda: bounds.theorem1_bound([1.0], 0.5, 0.0, [0.1]), "e0"),
        (lambda: bounds.theorem1_limit(0.5, 0.0, -1.0), "noise_bar"),
        (lambda: bounds.prop2_bound(**{**PROP2, "step_size": -0.1}), "step_size"),
        (lambda: bounds.prop2_bound(**{**PROP2, "order": 0}), "order"),
        (lambda: bounds.prop2_bound(**{**PROP2, "order": 2.5}), "order"),
        (lambda: bounds.prop2_bound(**{**PROP2, "rank": 0}), "rank"),
        (lambda: bounds.prop2_bound(**{**PROP2, "rank": True}), "rank"),
        (lambda: bounds.prop2_bound(**{**PROP2, "f_max": -1.0}), "f_max"),
        (lambda: bounds.prop2_bound(**{**PROP2, "v_max": -1.0}), "v_max"),
        (lambda: bounds.prop2_bound(**{**PROP2, "lam": -1.0}), "lam"),
        (lambda: bounds.prop2_bound(**{**PROP2, "visits": [1, -1]}), "visits"),
        (lambda: bounds.prop2_bound(**{**PROP2, "eps": 0.0}), "eps"),
        (lambda: bounds.prop2_bound(**PROP2, inner_steps=0), "inner_steps"),
        (lambda: bounds.prop3_bound(**{**PROP3, "t0": 0}), "t0"),
        (lambda: bounds.prop3_bound(**{**PROP3, "c": 0.0}), "c"),
        (lambda: bounds.prop3_bound(**{**PROP3, "delta": -1.0}), "delta"),
        (lambda: bounds.prop3_bound(**{**PROP3, "horizon": 0}), "horizon"),
    ],
)
def test_bad_arguments_name_the_argument(call, name):
    with pytest.raises(ValueError, match=f"The '{name}' parameter must be"):
        call()
