import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tensorq_reference import (
    paper_update,
    released_update,
    replica,
    stable_update,
    tlr_gauss_seidel_update,
    tlr_jacobi_update,
)

from tensorq import FactorBound, OnlineCP, UpdateResult, bcd_update, loss, normalized_step

SETTINGS = {"lam": 1e-3, "eps": 1e-4}


@st.composite
def problems(draw, max_replicas=3):
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=4)))
    rank = draw(st.integers(1, 3))
    replicas = draw(st.integers(1, max_replicas))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    q = OnlineCP.random(shape, rank, replicas=replicas, rng=rng)
    index = rng.integers(0, shape, size=(replicas, len(shape)))
    target = rng.normal(scale=2.0, size=replicas)
    visits = rng.integers(0, 20, size=replicas).astype(float)
    step = rng.uniform(0.01, 0.3, size=replicas)
    # lam / (visits + eps) up to 10: beyond that the paper's loss (concave in Q when
    # 2 lam / (N + eps) > 1) overflows within a few steps and comparisons mean nothing.
    lam, eps = draw(st.sampled_from([(0.0, 1e-4), (1e-3, 1e-4), (0.1, 1.0)]))
    return q, index, target, visits, step, lam, eps


def check_against_reference(reference, variant, case, tol, max_inner, f_max=None):
    q, index, target, visits, step, lam, eps = case
    bound = None if f_max is None else FactorBound(f_max)
    expected = [
        reference(
            replica(q, b), index[b], target[b], visits[b], step[b], lam, eps, tol, max_inner, f_max
        )
        for b in range(q.replicas)
    ]
    res = bcd_update(
        q,
        index,
        target,
        visits,
        step_size=step,
        lam=lam,
        eps=eps,
        tol=tol,
        max_inner=max_inner,
        bound=bound,
        variant=variant,
    )
    _assert_matches_reference(q, res, expected)


def _assert_close_or_both_overflowed(got, want, rtol, atol):
    """Equal where the reference is finite; non-finite exactly where it is.

    The paper's loss is concave on a first visit (2 lam / eps > 1), so a few steps
    can overflow: whether an entry ends as inf or nan depends on the order of
    the operations, not on the update.
    """
    got, want = np.asarray(got), np.asarray(want)
    finite = np.isfinite(want)
    np.testing.assert_array_equal(np.isfinite(got), finite)
    np.testing.assert_allclose(got[finite], want[finite], rtol=rtol, atol=atol)


def _assert_matches_reference(q, res, expected):
    """Every replica's factors, entry before and after, and step count against the reference."""
    for b, (factors, before, after, steps) in enumerate(expected):
        for got, want in zip(replica(q, b), factors, strict=True):
            _assert_close_or_both_overflowed(got, want, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(res.before[b], before, rtol=1e-12, atol=1e-14)
        _assert_close_or_both_overflowed(res.after[b], after, rtol=1e-10, atol=1e-12)
        assert res.iterations[b] == steps


@given(problems())
def test_one_step_equals_gauss_seidel_reference(case):
    check_against_reference(paper_update, "paper", case, tol=0.0, max_inner=1)


@given(problems(), st.integers(1, 4))
def test_tol_zero_takes_exactly_k_steps_per_mode(case, k):
    q = case[0]
    n_modes = len(q.shape)
    res = bcd_update(
        q, *case[1:3], case[3], step_size=case[4], lam=case[5], eps=case[6], tol=0.0, max_inner=k
    )
    np.testing.assert_array_equal(res.iterations, np.full(q.replicas, k * n_modes))


@given(problems(), st.integers(2, 4))
def test_several_steps_equal_reference(case, k):
    check_against_reference(paper_update, "paper", case, tol=0.0, max_inner=k)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("variant", ["paper", "released"])
def test_convergence_test_equals_reference(seed, variant):
    # Step 0.5 and tau 0.02 make replicas stop after different numbers of steps.
    rng = np.random.default_rng(seed)
    q = OnlineCP.random((3, 4, 5), 3, replicas=4, rng=rng)
    index = rng.integers(0, (3, 4, 5), size=(4, 3))
    target, visits = rng.normal(size=4), rng.integers(0, 5, size=4).astype(float)
    case = (q, index, target, visits, np.full(4, 0.5), 1e-2, 1.0)
    reference = paper_update if variant == "paper" else released_update
    check_against_reference(reference, variant, case, tol=2e-2, max_inner=6)


@given(problems(), st.integers(1, 3), st.sampled_from([0.0, 1e-3]))
def test_released_equals_reference(case, k, tol):
    check_against_reference(released_update, "released", case, tol=tol, max_inner=k)


@given(problems(), st.integers(1, 3))
def test_bounded_update_equals_clipping_reference(case, k):
    FactorBound(0.7).project(case[0])
    check_against_reference(paper_update, "paper", case, tol=0.0, max_inner=k, f_max=0.7)


@given(problems(), st.integers(1, 3), st.sampled_from([0.0, 1e-2]), st.booleans())
def test_stable_equals_reference(case, k, tol, bounded):
    f_max = 0.7 if bounded else None
    if bounded:
        FactorBound(f_max).project(case[0])
    case = (*case[:4], case[4] * 5.0, *case[5:])  # steps in (0.05, 1.5)
    check_against_reference(stable_update, "stable", case, tol=tol, max_inner=k, f_max=f_max)


@given(
    st.integers(0, 2**32 - 1),
    st.floats(-1e9, 1e9),
    st.integers(1, 10**6),
    st.floats(0.01, 1.99),
    st.sampled_from([0.0, 1e-3, 0.1, 0.49]),
    st.integers(1, 4),
    st.booleans(),
)
def test_stable_update_is_a_descent_step(seed, target, visits, step, lam, max_inner, bounded):
    """The per-entry loss of eq. (loss_function) never increases across a stable update.

    Allowed range: step in (0, 2) and 2 lam / (N + eps) < 1 (here N >= 1, lam < 1/2),
    where the loss is a convex quadratic in Q; with or without the factor bound
    (a projected gradient step of step size eta / ||g||^2 on a function whose
    gradient is (1 - 2 w) ||g||^2 Lipschitz, so eta (1 - 2 w) < 2 gives descent).
    """
    rng = np.random.default_rng(seed)
    shape = tuple(rng.integers(1, 5, size=rng.integers(1, 5)))
    q = OnlineCP.random(shape, int(rng.integers(1, 4)), replicas=2, scale=2.0, rng=rng)
    bound = FactorBound(1.5) if bounded else None
    if bound is not None:
        bound.project(q)
    index = rng.integers(0, shape, size=(2, len(shape)))
    targets = np.array([target, -0.5 * target])
    res = bcd_update(
        q, index, targets, float(visits), step_size=step, lam=lam, eps=1e-4,
        tol=0.0, max_inner=max_inner, bound=bound, variant="stable",
    )  # fmt: skip
    before = loss(res.before, targets, float(visits), lam, 1e-4)
    after = loss(res.after, targets, float(visits), lam, 1e-4)
    scale = 1.0 + targets**2 + res.before**2 + res.after**2
    assert (after <= before + 1e-12 * scale).all()
    minimizer = targets / (1.0 - 2.0 * lam / (visits + 1e-4))  # L = (1-2w)/2 (Q - Q*)^2 + const
    gap_before, gap_after = np.abs(res.before - minimizer), np.abs(res.after - minimizer)
    assert (gap_after <= gap_before + 1e-9 * np.sqrt(scale)).all()


def test_stable_exact_step_reaches_the_minimizer_in_one_row_step():
    """eta = 1 / (1 - 2 w) without a bound: the first row step lands on Q* = y / (1 - 2 w).

    Q - Q* shrinks by 1 - eta (1 - 2 w) per row step: the exact minimization of
    the per-row quadratic, after which the other modes do not move the entry.
    """
    q = OnlineCP.random((3, 4, 5), 2, replicas=2, rng=3)
    index = np.array([[0, 1, 2], [2, 3, 4]])
    target, visits, lam = np.array([4.0, -7.0]), np.array([1.0, 5.0]), 0.1
    slope = 1 - 2 * lam / (visits + 1e-4)
    res = bcd_update(
        q, index, target, visits, step_size=1 / slope, lam=lam, eps=1e-4, tol=0.0, max_inner=1,
        variant="stable",
    )  # fmt: skip
    np.testing.assert_allclose(res.after, target / slope, rtol=1e-12)


def test_mode_scale_closes_rho_n_eta_of_the_gap_per_mode():
    """Footprint steps: mode n's row step moves Q by rho_n eta of the way to Q* (no bound).

    The row step changes the entry by -rho_n eta dL/dQ = -rho_n eta (1 - 2 w) (Q - Q*),
    so after the modes in turn Q - Q* = (Q_0 - Q*) prod_n (1 - rho_n eta (1 - 2 w)).
    """
    q = OnlineCP.random((5, 2, 3), 3, replicas=2, rng=4)
    index = np.array([[0, 1, 2], [4, 0, 1]])
    target, visits, lam, step = np.array([3.0, -2.0]), np.array([2.0, 7.0]), 0.1, 0.8
    shares = (1.0, 0.16, 0.36)
    slope = 1 - 2 * lam / (visits + 1e-4)
    minimizer = target / slope
    res = bcd_update(
        q, index, target, visits, step_size=step, lam=lam, eps=1e-4, tol=0.0, max_inner=1,
        variant="stable", mode_scale=shares,
    )  # fmt: skip
    shrink = np.prod([1 - share * step * slope for share in shares], axis=0)
    np.testing.assert_allclose(res.after - minimizer, (res.before - minimizer) * shrink, rtol=1e-10)


def test_mode_scale_of_ones_is_the_stable_rule_bitwise():
    plain, ones = (OnlineCP.random((4, 3, 2), 2, replicas=3, rng=1) for _ in range(2))
    index = np.array([[0, 1, 1], [3, 2, 0], [1, 0, 1]])
    options = {"step_size": 0.5, "tol": 0.0, "max_inner": 2, "variant": "stable", **SETTINGS}
    bcd_update(plain, index, 2.0, 3.0, **options)
    bcd_update(ones, index, 2.0, 3.0, mode_scale=(1.0, 1.0, 1.0), **options)
    for a, b in zip(plain.factors, ones.factors, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(("variant", "shares"), [("paper", (1.0, 1.0)), ("stable", (1.0,))])
def test_mode_scale_needs_the_stable_rule_and_one_share_per_mode(variant, shares):
    q = OnlineCP.random((3, 2), 2, replicas=1, rng=0)
    with pytest.raises(ValueError, match="'mode_scale' parameter needs variant 'stable' and 2"):
        bcd_update(q, [[0, 1]], 1.0, 1.0, step_size=0.5, tol=0.0, max_inner=1, variant=variant,
                   mode_scale=shares, **SETTINGS)  # fmt: skip


def test_stable_skips_rows_with_zero_direction():
    q = OnlineCP.random((3, 4, 5), 2, replicas=1, rng=0)
    index = np.array([[1, 2, 3]])
    q.factors[1][0, 2] = 0.0  # g_0 = 0: mode 0 does not move; modes 1, 2 then do
    old = [f.copy() for f in q.factors]
    res = bcd_update(
        q, index, 1.0, 3.0, step_size=0.5, tol=0.0, max_inner=1, variant="stable", **SETTINGS
    )
    np.testing.assert_array_equal(q.factors[0], old[0])
    assert not np.array_equal(q.factors[1], old[1])
    assert not np.array_equal(q.factors[2], old[2])
    assert np.isfinite(res.after).all()


def test_released_skips_rows_with_zero_direction():
    q = OnlineCP.random((3, 4, 5), 2, replicas=1, rng=0)
    index = np.array([[1, 2, 3]])
    q.factors[0][0, 1] = 0.0  # g_1 = g_2 = 0: only mode 0 moves
    old = [f.copy() for f in q.factors]
    res = bcd_update(
        q, index, 1.0, 3.0, step_size=0.1, tol=0.0, max_inner=1, variant="released", **SETTINGS
    )
    np.testing.assert_array_equal(q.factors[1], old[1])
    np.testing.assert_array_equal(q.factors[2], old[2])
    assert not np.array_equal(q.factors[0], old[0])
    assert np.isfinite(res.after).all()


@given(problems(), st.sampled_from(["paper", "released", "stable"]))
def test_only_indexed_rows_change(case, variant):
    q, index, target, visits, step, lam, eps = case
    old = [f.copy() for f in q.factors]
    bcd_update(
        q,
        index,
        target,
        visits,
        step_size=step,
        lam=lam,
        eps=eps,
        tol=0.0,
        max_inner=2,
        variant=variant,
    )
    for n, (new, before) in enumerate(zip(q.factors, old, strict=True)):
        untouched = np.ones(new.shape[:2], dtype=bool)
        untouched[np.arange(q.replicas), index[:, n]] = False
        np.testing.assert_array_equal(new[untouched], before[untouched])


@pytest.mark.parametrize("variant", ["paper", "released", "stable"])
@pytest.mark.parametrize(("tol", "max_inner"), [(0.0, 1), (1e-2, 5), (0.0, 3)])
def test_batched_equals_single_replicas_bitwise(variant, tol, max_inner):
    rng = np.random.default_rng(42)
    replicas, shape = 7, (10, 10, 20, 20, 10)
    batch = OnlineCP.random(shape, 10, replicas=replicas, scale=0.5, rng=rng)
    singles = [OnlineCP([f[b : b + 1].copy() for f in batch.factors]) for b in range(replicas)]
    bound = FactorBound(0.9)
    for _ in range(20):
        index = rng.integers(0, shape, size=(replicas, 5))
        target = rng.normal(size=replicas)
        visits = rng.integers(0, 4, size=replicas).astype(float)
        step = rng.uniform(0.001, 0.05, size=replicas)
        mask = rng.random(replicas) < 0.3
        kwargs = {"tol": tol, "max_inner": max_inner, "variant": variant, "bound": bound}
        res = bcd_update(
            batch, index, target, visits, step_size=step, mask=mask, **kwargs, **SETTINGS
        )
        for b, single in enumerate(singles):
            if mask[b]:
                continue
            one = bcd_update(
                single,
                index[b : b + 1],
                target[b : b + 1],
                visits[b : b + 1],
                step_size=step[b : b + 1],
                **kwargs,
                **SETTINGS,
            )
            assert one.after[0] == res.after[b] and one.iterations[0] == res.iterations[b]
    for b, single in enumerate(singles):
        for f_batch, f_single in zip(batch.factors, single.factors, strict=True):
            assert np.array_equal(f_batch[b], f_single[0])


@pytest.mark.parametrize("variant", ["paper", "released", "stable"])
def test_masked_replicas_are_untouched(variant):
    q = OnlineCP.random((3, 4, 5), 2, replicas=4, rng=0)
    index = np.array([[0, 1, 2], [1, 2, 3], [2, 3, 4], [0, 0, 0]])
    mask = np.array([True, False, True, False])
    old = [f.copy() for f in q.factors]
    res = bcd_update(
        q,
        index,
        np.full(4, 5.0),
        np.ones(4),
        step_size=0.1,
        tol=0.0,
        max_inner=2,
        mask=mask,
        variant=variant,
        **SETTINGS,
    )
    for new, before in zip(q.factors, old, strict=True):
        np.testing.assert_array_equal(new[mask], before[mask])
        assert not np.array_equal(new[~mask], before[~mask])
    np.testing.assert_array_equal(res.before[mask], res.after[mask])
    np.testing.assert_array_equal(res.iterations, [0, 6, 0, 6])
    assert (res.after[~mask] != res.before[~mask]).all()


def test_result_is_in_place_and_consistent():
    q = OnlineCP.random((3, 4, 5), 2, replicas=3, rng=0)
    index = np.array([[0, 1, 2], [1, 2, 3], [2, 3, 4]])
    before = q.entries(index)
    res = bcd_update(
        q,
        index,
        np.array([1.0, 2.0, 3.0]),
        np.array([1.0, 2.0, 3.0]),
        step_size=0.1,
        tol=1e-6,
        max_inner=3,
        **SETTINGS,
    )
    assert isinstance(res, UpdateResult)
    np.testing.assert_array_equal(res.before, before)
    np.testing.assert_array_equal(res.after, q.entries(index))
    assert res.iterations.shape == (3,)
    assert (np.abs(res.after - 2.0) < np.abs(res.before - 2.0))[1]


def test_moves_toward_target():
    q = OnlineCP.random((4, 4, 4), 3, replicas=2, rng=1)
    index = np.array([[0, 1, 2], [3, 3, 3]])
    target = np.array([3.0, -1.0])
    for _ in range(300):
        res = bcd_update(
            q, index, target, np.full(2, 100.0), step_size=0.05, tol=0.0, max_inner=1, **SETTINGS
        )
    np.testing.assert_allclose(res.after, target, atol=1e-3)


@given(
    st.integers(0, 2**32 - 1),
    st.lists(st.floats(-1e9, 1e9), min_size=1, max_size=8),
    st.sampled_from([0.5, 10.0, 1e3]),
    st.sampled_from(["paper", "released", "stable"]),
    st.sampled_from([0.0, 1e-3, 10.0]),
)
def test_bound_holds_for_adversarial_targets(seed, targets, step, variant, lam):
    rng = np.random.default_rng(seed)
    shape, rank, v_max = (3, 2, 4), 2, 5.0
    bound = FactorBound.from_value_bound(v_max, rank, len(shape))
    q = OnlineCP.random(shape, rank, replicas=2, scale=2.0, rng=rng)
    bound.project(q)
    for t in targets:
        index = rng.integers(0, shape, size=(2, 3))
        res = bcd_update(
            q,
            index,
            np.array([t, -t]),
            rng.integers(0, 3, size=2).astype(float),
            step_size=step,
            lam=lam,
            eps=1e-4,
            tol=0.0,
            max_inner=3,
            bound=bound,
            variant=variant,
        )
        assert np.abs(res.after).max() <= v_max * (1 + 1e-12)
        assert np.abs(q.to_dense()).max() <= v_max * (1 + 1e-12)


BAD_INPUTS = [  # the one per-step check: targets must be finite (and one per replica)
    ({"target": np.array([1.0, np.nan])}, "target"),
    ({"target": np.array([1.0, np.inf])}, "target"),
    ({"target": np.ones(3)}, "target"),
    ({"target": float("nan")}, "target"),
    ({"variant": "authors"}, "variant"),
]


@pytest.mark.parametrize(("change", "name"), BAD_INPUTS)
def test_bad_input_raises_and_changes_nothing(change, name):
    q = OnlineCP.random((3, 4, 5), 2, replicas=2, rng=0)
    old = [f.copy() for f in q.factors]
    kwargs = {
        "index": np.array([[0, 1, 2], [2, 3, 4]]),
        "target": np.ones(2),
        "visits": np.ones(2),
        "step_size": 0.1,
        "lam": 1e-3,
        "eps": 1e-4,
        "tol": 0.0,
        "max_inner": 2,
    }
    kwargs.update(change)
    with pytest.raises(ValueError, match=f"'{name}'"):
        bcd_update(q, kwargs.pop("index"), kwargs.pop("target"), kwargs.pop("visits"), **kwargs)
    for new, before in zip(q.factors, old, strict=True):
        np.testing.assert_array_equal(new, before)


def test_scalar_inputs_broadcast():
    q = OnlineCP.random((3, 4), 2, replicas=3, rng=0)
    r = OnlineCP([f.copy() for f in q.factors])
    index = np.array([[0, 1], [1, 2], [2, 3]])
    a = bcd_update(q, index, 1.0, 2.0, step_size=0.1, tol=0.0, max_inner=1, **SETTINGS)
    b = bcd_update(
        r,
        index,
        np.ones(3),
        np.full(3, 2.0),
        step_size=np.full(3, 0.1),
        tol=0.0,
        max_inner=1,
        **SETTINGS,
    )
    np.testing.assert_array_equal(a.after, b.after)


@given(problems(), st.sampled_from(["jacobi", "gauss-seidel", None]))
def test_normalized_step_equals_tlr_reference(case, sweep):
    """Jacobi (the default, as released) and the sequential option against plain loops."""
    q, index, target, _, step, _, _ = case
    reference = tlr_gauss_seidel_update if sweep == "gauss-seidel" else tlr_jacobi_update
    expected = [reference(replica(q, b), index[b], target[b], step[b]) for b in range(q.replicas)]
    kwargs = {} if sweep is None else {"sweep": sweep}
    res = normalized_step(q, index, target, step_size=step, **kwargs)
    _assert_matches_reference(q, res, expected)


def test_normalized_step_mask_and_validation():
    q = OnlineCP.random((3, 4, 5), 2, replicas=3, rng=0)
    index = np.array([[0, 1, 2], [1, 2, 3], [2, 3, 4]])
    old = [f.copy() for f in q.factors]
    with pytest.raises(ValueError, match="'target'"):
        normalized_step(q, index, np.array([1.0, np.nan, 0.0]), step_size=0.1)
    with pytest.raises(ValueError, match="'sweep'"):
        normalized_step(q, index, np.ones(3), step_size=0.1, sweep="sequential")
    for new, before in zip(q.factors, old, strict=True):
        np.testing.assert_array_equal(new, before)
    res = normalized_step(q, index, np.full(3, 2.0), step_size=0.1, mask=np.array([0, 1, 0], bool))
    np.testing.assert_array_equal(res.iterations, [3, 0, 3])
    assert res.before[1] == res.after[1]
    assert (np.abs(res.after - 2.0) < np.abs(res.before - 2.0))[[0, 2]].all()
