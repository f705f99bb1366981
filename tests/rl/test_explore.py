"""The compiled epsilon-greedy over replicas draws what the Python reference draws."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rl.agents._explore import epsilon_greedy
from rl.agents._explore_compiled import epsilon_greedy_rows, typed_generators


@settings(max_examples=60, deadline=None)
@given(
    replicas=st.integers(1, 6),
    actions=st.integers(1, 5),
    seed=st.integers(0, 2**32 - 1),
    nan=st.booleans(),
)
def test_epsilon_greedy_rows_equals_the_reference(replicas, actions, seed, nan):
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 3, size=(replicas, actions)).astype(float)  # many ties
    if nan:
        values[0, rng.integers(actions)] = np.nan
    epsilon = rng.choice([0.0, 0.3, 1.0], size=replicas)
    active = rng.random(replicas) < 0.7
    reference = [np.random.default_rng([seed, b]) for b in range(replicas)]
    compiled = [np.random.default_rng([seed, b]) for b in range(replicas)]
    for _ in range(5):  # several calls: the streams advance alike
        expected = epsilon_greedy(values, epsilon, active, reference)
        got = epsilon_greedy_rows(values, epsilon, active, typed_generators(compiled))
        np.testing.assert_array_equal(got, expected)
    # the same draws, so the same states after
    assert [g.random() for g in compiled] == [g.random() for g in reference]
