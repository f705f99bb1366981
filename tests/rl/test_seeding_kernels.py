"""The compiled seeding kernels against NumPy's SeedSequence, PCG64 and Generator, bit for bit."""

import numpy as np
import pytest
from gymnasium.utils import seeding
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit

from rl.envs.seeding_kernels import (
    INIT_B,
    MULT_B,
    POOL_SIZE,
    _hashmix,
    bounded_uint32,
    episode_seed_kernel,
    generate_state_uint64,
    int_to_uint32_words,
    mix_entropy,
    next_double,
    next_uint64,
    seed_pcg64,
    uniform_into,
)
from rl.loop.runner import episode_seed

INT64_MAX = 2**63 - 1
one_word = st.integers(0, 2**32 - 1)
two_words = st.integers(2**32, INT64_MAX)
entropy_int = st.one_of(st.just(0), one_word, two_words)
seeds = st.one_of(one_word, two_words)

CARTPOLE_BOUNDS = (-0.05, 0.05)


@njit(cache=True)
def generate_state_uint32(pool, out):
    """Fill out as ``SeedSequence.generate_state(len(out), np.uint32)`` does (test-only twin)."""
    hash_const = INIT_B
    n_pool = pool.shape[0]
    for i in range(out.shape[0]):
        word, hash_const = _hashmix(np.uint64(pool[i % n_pool]), hash_const, MULT_B)
        out[i] = np.uint32(word)


PENDULUM_BOUNDS = (0.0, 0.01)


def entropy_words(values):
    """The assembled entropy of ``SeedSequence(values)``, through the kernel."""
    words = np.empty(2 * len(values), dtype=np.uint32)
    n_words = 0
    for value in values:
        n_words = int_to_uint32_words(value, words, n_words)
    return words[:n_words]


def seeded_state(seed):
    state = np.empty(4, dtype=np.uint64)
    seed_pcg64(seed, state)
    return state


def as_int128(hi, lo):
    return (int(hi) << 64) | int(lo)


# ---------------------------------------------------------------- SeedSequence


@settings(max_examples=400, deadline=None)
@given(
    base=one_word,
    episode=st.integers(0, 2**31 - 1),
    k=st.one_of(st.just(-1), st.integers(0, 999)),
)
def test_episode_seed_kernel_equals_episode_seed(base, episode, k):
    indices = (episode,) if k < 0 else (episode, k)
    assert episode_seed_kernel(base, episode, k) == episode_seed(base, *indices)


@settings(max_examples=200, deadline=None)
@given(
    base=st.integers(2**32, 2**62),
    episode=st.integers(0, 2**31 - 1),
    k=st.one_of(st.just(-1), st.integers(0, 999)),
)
def test_episode_seed_kernel_two_word_base(base, episode, k):
    indices = (episode,) if k < 0 else (episode, k)
    assert episode_seed_kernel(base, episode, k) == episode_seed(base, *indices)


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (0, [0]),
        (1, [1]),
        (2**32 - 1, [2**32 - 1]),
        (2**32, [0, 1]),
        (INT64_MAX, [2**32 - 1, 2**31 - 1]),
    ],
)
def test_int_to_uint32_words_little_endian(value, words):
    np.testing.assert_array_equal(entropy_words([value]), np.array(words, dtype=np.uint32))


@settings(max_examples=300, deadline=None)
@given(values=st.lists(entropy_int, min_size=1, max_size=6), n_words=st.integers(1, 12))
def test_generate_state_equals_seed_sequence(values, n_words):
    reference = np.random.SeedSequence(values)
    pool = np.empty(POOL_SIZE, dtype=np.uint32)
    mix_entropy(entropy_words(values), pool)
    np.testing.assert_array_equal(pool, reference.pool)
    words32 = np.empty(n_words, dtype=np.uint32)
    generate_state_uint32(pool, words32)
    np.testing.assert_array_equal(words32, reference.generate_state(n_words, np.uint32))
    words64 = np.empty(n_words, dtype=np.uint64)
    generate_state_uint64(pool, words64)
    np.testing.assert_array_equal(words64, reference.generate_state(n_words, np.uint64))


def test_generate_state_covers_more_words_than_the_pool():
    values = [0, 2**32, 2**63 - 1, 7]  # 1 + 2 + 2 + 1 = 6 entropy words, pool of 4
    assert len(entropy_words(values)) > POOL_SIZE
    pool = np.empty(POOL_SIZE, dtype=np.uint32)
    mix_entropy(entropy_words(values), pool)
    np.testing.assert_array_equal(pool, np.random.SeedSequence(values).pool)


# ---------------------------------------------------------------- PCG64


def assert_pcg64_state(seed):
    state = seeded_state(seed)
    reference = np.random.PCG64(np.random.SeedSequence(seed)).state["state"]
    assert as_int128(state[0], state[1]) == reference["state"]
    assert as_int128(state[2], state[3]) == reference["inc"]


@settings(max_examples=300, deadline=None)
@given(seed=one_word)
def test_seed_pcg64_equals_numpy(seed):
    assert_pcg64_state(seed)


@pytest.mark.parametrize("seed", [2**32, 2**32 + 1, 2**40 + 12345, 2**62, INT64_MAX])
def test_seed_pcg64_large_seeds(seed):
    assert_pcg64_state(seed)


@settings(max_examples=100, deadline=None)
@given(seed=seeds)
def test_next_uint64_equals_random_raw(seed):
    state = seeded_state(seed)
    draws = np.array([next_uint64(state) for _ in range(10)], dtype=np.uint64)
    np.testing.assert_array_equal(draws, np.random.PCG64(seed).random_raw(10))


@settings(max_examples=100, deadline=None)
@given(seed=seeds)
def test_next_double_equals_generator_random(seed):
    state = seeded_state(seed)
    draws = np.array([next_double(state) for _ in range(20)])
    assert (draws == np.random.Generator(np.random.PCG64(seed)).random(20)).all()
    assert (draws == seeding.np_random(seed)[0].random(20)).all()


# ---------------------------------------------------------------- uniform


@pytest.mark.parametrize("bounds", [CARTPOLE_BOUNDS, PENDULUM_BOUNDS])
@settings(max_examples=50, deadline=None)
@given(seed=seeds, n=st.integers(1, 6))
def test_uniform_into_reset_bounds(bounds, seed, n):
    assert_uniform(seed, *bounds, n)


@settings(max_examples=150, deadline=None)
@given(
    seed=seeds,
    low=st.floats(-1e6, 1e6),
    width=st.floats(0.0, 1e6),
    n=st.integers(1, 6),
)
def test_uniform_into_random_bounds(seed, low, width, n):
    assert_uniform(seed, low, low + width, n)


def assert_uniform(seed, low, high, n):
    state = seeded_state(seed)
    rng = seeding.np_random(seed)[0]
    for _ in range(2):  # a second call continues the same stream
        out = np.empty(n)
        uniform_into(state, low, high, out)
        assert (out == rng.uniform(low, high, size=(n,))).all()


# ---------------------------------------------------------------- a compiled reset loop


@njit
def compiled_resets(base, episodes, k, low, high, out):
    state = np.empty(4, dtype=np.uint64)
    for episode in range(episodes):
        seed_pcg64(episode_seed_kernel(base, episode, k), state)
        uniform_into(state, low, high, out[episode])


@pytest.mark.parametrize(("base", "k"), [(12345, -1), (2**40 + 3, 7)])
def test_compiled_reset_equals_gymnasium_reset_draws(base, k):
    out = np.empty((50, 4))
    compiled_resets(base, 50, k, *CARTPOLE_BOUNDS, out)
    for episode in range(50):
        indices = (episode,) if k < 0 else (episode, k)
        rng = seeding.np_random(episode_seed(base, *indices))[0]
        assert (out[episode] == rng.uniform(*CARTPOLE_BOUNDS, size=(4,))).all()


@settings(max_examples=200, deadline=None)
@given(seed=seeds, sizes=st.lists(st.integers(1, 2**31), min_size=1, max_size=12))
def test_bounded_uint32_interleaved_with_doubles_is_numpys_choice(seed, sizes):
    """``Generator.choice(n)`` (32-bit Lemire, buffered half-words) then ``random()``, in turn."""
    rng = np.random.default_rng(seed)
    state, buffer = seeded_state(seed), np.zeros(2, dtype=np.uint64)
    for n in sizes:
        expected = rng.choice(n) if n > 1 else 0  # choice(1) draws nothing
        got = bounded_uint32(state, buffer, n) if n > 1 else 0
        assert got == expected
        assert next_double(state) == rng.random()
    numpy_state = rng.bit_generator.state
    assert as_int128(state[0], state[1]) == numpy_state["state"]["state"]
    assert int(buffer[0]) == numpy_state["has_uint32"]
    if buffer[0]:
        assert int(buffer[1]) == numpy_state["uinteger"]
