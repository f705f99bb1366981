"""NumPy's reset seeding restated in Numba, bit for bit.

A reset of one environment copy, ``env.reset(seed=episode_seed(base, e))``,
runs three pieces of NumPy: `numpy.random.SeedSequence` turns the integers
into a seed (`rl.loop.runner.episode_seed`), Gymnasium's ``seeding.np_random``
seeds ``Generator(PCG64(SeedSequence(seed)))`` with it, and the environment
draws its initial state with ``rng.uniform(low, high, size=(n,))``. From
Python that costs about 11 microseconds per reset; the kernels here compute
the same numbers inside compiled code, so that a compiled runner can reset
its copies itself without calling back into Python:

- `episode_seed_kernel` is `rl.loop.runner.episode_seed` (``SeedSequence``'s
  entropy mixing, `mix_entropy`, and `generate_state_uint64`);
- `seed_pcg64` is ``PCG64(SeedSequence(seed))``'s state, as four uint64
  halves ``(state_hi, state_lo, inc_hi, inc_lo)`` of its two 128-bit numbers;
- `next_uint64`, `next_double` and `uniform_into` are the generator's
  XSL-RR output, ``Generator.random()`` and ``Generator.uniform``.

SeedSequence works modulo 2**32: every 32-bit quantity is held in a uint64
and masked, so that Numba never mixes signed and unsigned integers (which it
would promote to float64). PCG64's 128-bit arithmetic uses (hi, lo) uint64
pairs and a 64 x 64 -> 128-bit product by 32-bit halves.

``tests/rl/test_seeding_kernels.py`` checks every kernel bit for bit against
NumPy itself. NumPy's stream-compatibility policy keeps ``SeedSequence`` and
``PCG64`` streams fixed across versions; were a release to change them
nonetheless, those tests would fail rather than let the compiled resets drift
from Gymnasium's.

References
----------
NumPy, ``numpy/random/bit_generator.pyx`` (``SeedSequence``: ``hashmix``,
``mix``, ``mix_entropy``, ``generate_state``) and ``numpy/random/src/pcg64``
(``pcg64_set_seed``, ``pcg_setseq_128_srandom_r``, XSL-RR output).
M. E. O'Neill, "PCG: A family of simple fast space-efficient statistically
good algorithms for random number generation", HMC-CS-2014-0905 (2014).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from rl.jit import kernel

# SeedSequence's constants (bit_generator.pyx); all arithmetic is modulo 2**32.
POOL_SIZE = 4
INIT_A = np.uint64(0x43B0D7E5)
MULT_A = np.uint64(0x931E8875)
INIT_B = np.uint64(0x8B51F9DD)
MULT_B = np.uint64(0x58F38DED)
MIX_MULT_L = np.uint64(0xCA01F9DD)
MIX_MULT_R = np.uint64(0x4973F715)
XSHIFT = np.uint64(16)
MASK32 = np.uint64(0xFFFFFFFF)

# PCG64's 128-bit multiplier, as (hi, lo) halves.
PCG_MULT_HI = np.uint64(0x2360ED051FC65DA4)
PCG_MULT_LO = np.uint64(0x4385DF649FCCF645)

_U0 = np.uint64(0)
_U1 = np.uint64(1)
_SHIFT11 = np.uint64(11)
_SHIFT32 = np.uint64(32)
_SHIFT58 = np.uint64(58)
_SHIFT63 = np.uint64(63)
_SIXTY_FOUR = np.uint64(64)
_TWO_POW_MINUS_53 = 1.0 / 9007199254740992.0


# ---------------------------------------------------------------- SeedSequence


@kernel
def int_to_uint32_words(value: int, words: NDArray[np.uint32], start: int) -> int:
    """Write the little-endian uint32 words of a non-negative int, as NumPy does.

    Parameters
    ----------
    value : int
        Non-negative int64; 0 gives the one word ``[0]``, a value below 2**32
        one word, a larger one two.
    words : ndarray of uint32
        Receives the words at ``start`` onwards.
    start : int
        Index of the first word to write.

    Returns
    -------
    int
        Index after the last word written.

    References
    ----------
    ``_int_to_uint32_array`` in ``numpy/random/bit_generator.pyx``.
    """
    bits = np.uint64(value)
    words[start] = np.uint32(bits & MASK32)
    high = bits >> _SHIFT32
    if high == _U0:
        return start + 1
    words[start + 1] = np.uint32(high)
    return start + 2


@kernel
def _hashmix(value, hash_const, mult):
    """SeedSequence's hash step: returns (mixed value, next hash constant).

    ``mult`` is MULT_A in ``hashmix`` (entropy mixing) and MULT_B in
    ``generate_state`` (one output word).
    """
    value = (value ^ hash_const) & MASK32
    hash_const = (hash_const * mult) & MASK32
    value = (value * hash_const) & MASK32
    return value ^ (value >> XSHIFT), hash_const


@kernel
def _mix(x, y):
    """SeedSequence's ``mix`` of two 32-bit words."""
    result = (MIX_MULT_L * x - MIX_MULT_R * y) & MASK32
    return result ^ (result >> XSHIFT)


@kernel
def mix_entropy(entropy: NDArray[np.uint32], pool: NDArray[np.uint32]) -> None:
    """Mix entropy words into a SeedSequence pool, as ``SeedSequence.__init__`` does.

    Parameters
    ----------
    entropy : ndarray of uint32
        The assembled entropy: each int's words, concatenated (no spawn key).
    pool : ndarray of uint32, shape (4,)
        Receives the pool (``SeedSequence(...).pool``).

    References
    ----------
    ``SeedSequence.mix_entropy`` in ``numpy/random/bit_generator.pyx``.
    """
    hash_const = INIT_A
    n_pool = pool.shape[0]
    n_entropy = entropy.shape[0]
    for i in range(n_pool):
        word = np.uint64(entropy[i]) if i < n_entropy else _U0
        mixed, hash_const = _hashmix(word, hash_const, MULT_A)
        pool[i] = np.uint32(mixed)
    for i_src in range(n_pool):
        for i_dst in range(n_pool):
            if i_src != i_dst:
                mixed, hash_const = _hashmix(np.uint64(pool[i_src]), hash_const, MULT_A)
                pool[i_dst] = np.uint32(_mix(np.uint64(pool[i_dst]), mixed))
    for i_src in range(n_pool, n_entropy):
        for i_dst in range(n_pool):
            mixed, hash_const = _hashmix(np.uint64(entropy[i_src]), hash_const, MULT_A)
            pool[i_dst] = np.uint32(_mix(np.uint64(pool[i_dst]), mixed))


@kernel
def generate_state_uint64(pool: NDArray[np.uint32], out: NDArray[np.uint64]) -> None:
    """Fill out as ``SeedSequence.generate_state(len(out), np.uint64)`` does.

    Each uint64 is two consecutive uint32 words of the uint32 stream, the first
    one low (NumPy views the words as little-endian).

    Parameters
    ----------
    pool : ndarray of uint32, shape (4,)
        The pool, from `mix_entropy`.
    out : ndarray of uint64
        Receives the words.

    References
    ----------
    ``SeedSequence.generate_state`` in ``numpy/random/bit_generator.pyx``.
    """
    hash_const = INIT_B
    n_pool = pool.shape[0]
    for i in range(out.shape[0]):
        low, hash_const = _hashmix(np.uint64(pool[(2 * i) % n_pool]), hash_const, MULT_B)
        high, hash_const = _hashmix(np.uint64(pool[(2 * i + 1) % n_pool]), hash_const, MULT_B)
        out[i] = low | (high << _SHIFT32)


@kernel
def episode_seed_kernel(base: int, episode: int, k: int) -> int:
    """Seed of one environment reset: `rl.loop.runner.episode_seed`, compiled.

    Parameters
    ----------
    base : int
        The replica's stream seed, a non-negative int64.
    episode : int
        Training episode index, a non-negative int64.
    k : int
        Evaluation episode index, or -1 (any negative value) for a training
        reset.

    Returns
    -------
    int
        ``episode_seed(base, episode)`` when ``k < 0``, else
        ``episode_seed(base, episode, k)``: an int64 holding the first uint32
        word of ``SeedSequence([base, episode(, k)]).generate_state(1)``.
    """
    words = np.empty(POOL_SIZE + 6, dtype=np.uint32)  # one allocation: pool, then entropy
    n_words = int_to_uint32_words(base, words, POOL_SIZE)
    n_words = int_to_uint32_words(episode, words, n_words)
    if k >= 0:
        n_words = int_to_uint32_words(k, words, n_words)
    pool = words[:POOL_SIZE]
    mix_entropy(words[POOL_SIZE:n_words], pool)
    word, _ = _hashmix(np.uint64(pool[0]), INIT_B, MULT_B)
    return np.int64(word)


# ---------------------------------------------------------------- PCG64


@kernel
def _mul_64x64(a, b):
    """Full 128-bit product of two uint64, as (hi, lo), by 32-bit halves."""
    a_lo, a_hi = a & MASK32, a >> _SHIFT32
    b_lo, b_hi = b & MASK32, b >> _SHIFT32
    p_ll = a_lo * b_lo
    p_lh = a_lo * b_hi
    p_hl = a_hi * b_lo
    middle = (p_ll >> _SHIFT32) + (p_lh & MASK32) + (p_hl & MASK32)
    lo = (middle << _SHIFT32) | (p_ll & MASK32)
    hi = a_hi * b_hi + (p_lh >> _SHIFT32) + (p_hl >> _SHIFT32) + (middle >> _SHIFT32)
    return hi, lo


@kernel
def _pcg_step(state):
    """Step PCG64 in place: state = state * MULT + inc modulo 2**128."""
    hi, lo = _mul_64x64(state[1], PCG_MULT_LO)
    hi = hi + state[0] * PCG_MULT_LO + state[1] * PCG_MULT_HI
    new_lo = lo + state[3]
    carry = _U1 if new_lo < lo else _U0
    state[0] = hi + state[2] + carry
    state[1] = new_lo


@kernel
def seed_pcg64(seed: int, state: NDArray[np.uint64]) -> None:
    """Seed a PCG64 state as ``PCG64(SeedSequence(seed))`` does.

    Parameters
    ----------
    seed : int
        A non-negative int64.
    state : ndarray of uint64, shape (4,)
        Receives ``(state_hi, state_lo, inc_hi, inc_lo)``, the halves of
        ``PCG64(SeedSequence(seed)).state["state"]``'s ``state`` and ``inc``.

    References
    ----------
    ``PCG64.__init__`` (``generate_state(4, np.uint64)``), ``pcg64_set_seed``
    (the first word of each pair is the high half) and
    ``pcg_setseq_128_srandom_r``.
    """
    words = np.empty(POOL_SIZE + 2, dtype=np.uint32)  # one allocation: pool, then entropy
    n_words = int_to_uint32_words(seed, words, POOL_SIZE)
    pool = words[:POOL_SIZE]
    mix_entropy(words[POOL_SIZE:n_words], pool)
    generate_state_uint64(pool, state)
    init_hi, init_lo = state[0], state[1]
    seq_hi, seq_lo = state[2], state[3]
    state[0] = _U0
    state[1] = _U0
    state[2] = (seq_hi << _U1) | (seq_lo >> _SHIFT63)
    state[3] = (seq_lo << _U1) | _U1
    _pcg_step(state)
    lo = state[1] + init_lo
    carry = _U1 if lo < init_lo else _U0
    state[0] = state[0] + init_hi + carry
    state[1] = lo
    _pcg_step(state)


@kernel
def next_uint64(state: NDArray[np.uint64]) -> np.uint64:
    """Advance a PCG64 state and return its next uint64 (XSL-RR of the new state).

    Parameters
    ----------
    state : ndarray of uint64, shape (4,)
        ``(state_hi, state_lo, inc_hi, inc_lo)``, from `seed_pcg64`.

    Returns
    -------
    numpy.uint64
        What ``PCG64().random_raw()`` returns.
    """
    _pcg_step(state)
    hi, lo = state[0], state[1]
    rotation = hi >> _SHIFT58
    value = hi ^ lo
    return (value >> rotation) | (value << ((_SIXTY_FOUR - rotation) & _SHIFT63))


@kernel
def next_double(state: NDArray[np.uint64]) -> float:
    """Advance a PCG64 state and return what ``Generator.random()`` returns.

    Parameters
    ----------
    state : ndarray of uint64, shape (4,)
        ``(state_hi, state_lo, inc_hi, inc_lo)``, from `seed_pcg64`.

    Returns
    -------
    float
        ``(next_uint64 >> 11) * 2**-53``, in [0, 1).
    """
    return np.float64(next_uint64(state) >> _SHIFT11) * _TWO_POW_MINUS_53


@kernel
def uniform_into(
    state: NDArray[np.uint64], low: float, high: float, out: NDArray[np.float64]
) -> None:
    """Fill out as ``Generator.uniform(low, high, size=out.shape)`` does.

    Parameters
    ----------
    state : ndarray of uint64, shape (4,)
        ``(state_hi, state_lo, inc_hi, inc_lo)``, advanced by ``len(out)``.
    low, high : float
        The bounds; each draw is ``low + (high - low) * next_double``.
    out : ndarray of float64, shape (n,)
        Receives the draws, in order.
    """
    span = high - low
    for i in range(out.shape[0]):
        out[i] = low + span * next_double(state)


@kernel
def next_uint32(state: NDArray[np.uint64], buffer: NDArray[np.uint64]) -> np.uint64:
    """Return PCG64's next uint32, buffering the upper half of a uint64 as NumPy does.

    Parameters
    ----------
    state : ndarray of uint64, shape (4,)
        ``(state_hi, state_lo, inc_hi, inc_lo)``, from `seed_pcg64`.
    buffer : ndarray of uint64, shape (2,)
        ``(has_uint32, uinteger)`` of ``PCG64().state``: a pending upper half
        is returned (and the flag cleared) before a new uint64 is drawn.

    Returns
    -------
    numpy.uint64
        The 32-bit word, held in a uint64.

    References
    ----------
    ``pcg64_next32`` in ``numpy/random/src/pcg64/pcg64.h``.
    """
    if buffer[0] != _U0:
        buffer[0] = _U0
        return buffer[1]
    value = next_uint64(state)
    buffer[0] = _U1
    buffer[1] = value >> _SHIFT32
    return value & MASK32


@kernel
def bounded_uint32(state: NDArray[np.uint64], buffer: NDArray[np.uint64], n: int) -> int:
    """Draw an int in [0, n) as ``Generator.integers(n)`` and ``Generator.choice(n)`` do.

    Lemire's multiply-and-reject on 32-bit words (NumPy uses it whenever
    ``n - 1 < 2**32 - 1``), drawing through `next_uint32`.

    Parameters
    ----------
    state, buffer : ndarray of uint64
        The generator's state and its uint32 buffer (see `next_uint32`).
    n : int
        Number of values, 2 <= n < 2**32 (n = 1 draws nothing in NumPy).

    Returns
    -------
    int

    References
    ----------
    ``buffered_bounded_lemire_uint32`` in ``numpy/random/src/distributions/distributions.c``.
    """
    bound = np.uint64(n)
    product = next_uint32(state, buffer) * bound
    leftover = product & MASK32
    if leftover < bound:
        threshold = (MASK32 - (bound - _U1)) % bound
        while leftover < threshold:
            product = next_uint32(state, buffer) * bound
            leftover = product & MASK32
    return np.int64(product >> _SHIFT32)
