"""The tensor step's backend check and random draws (`rl.agents.tensor.step`).

`check_backend` checks a tensor agent's backend, device and engine together;
the step's arrays live in a `tensorq._backend.ArrayNamespace` (one backend,
one device).

The step asks for two kinds of draw, each for a mask of replicas and in the
order the reference makes them: ``uniform(mask)``, one double in [0, 1) per
replica of ``mask`` (epsilon's test, a continuous action component), and
``integers(mask, high)``, one integer in [0, high) per replica (a discrete
random action, the pick among tied maximizers). Replicas outside the mask
draw nothing. Two sources answer:

- `GeneratorDraws` calls each replica's own generator
  (`rl.seeding.AgentRandom.explore`) as the reference does
  (``Generator.random``, ``Generator.integers``): the NumPy reference engine.
- `BufferedDraws` reads the doubles each generator would give, drawn ``K``
  at a time on the host by `UniformStreams` and read on the device by a
  cursor per replica, so that a step draws with array operations and no loop
  over replicas (the array engine, any backend; ``jax.jit`` traces it). An
  integer is ``floor(u high)``; there it differs from ``Generator.integers``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal, Protocol

import numpy as np

from tensorq._backend import (
    BACKEND_TRAITS,
    SUPPORTED_BACKENDS,
    ArrayNamespace,
    check_available,
)

Array = Any
Backend = Literal["numpy", "pytorch", "jax"]


def check_backend(backend: object, device: object, engine: str = "auto") -> None:
    """Check a tensor agent's ``backend``, ``device`` and ``engine`` together; one-line errors.

    Raises
    ------
    ValueError
        For an unknown backend or device string, a backend whose package is not
        installed or fails to import, a CUDA device where the backend sees none, a device other than
        the CPU for NumPy, the compiled or reference engine with another backend, or the
        scan engine with a backend other than JAX.
    """
    if backend not in SUPPORTED_BACKENDS:
        raise ValueError(
            f"The 'backend' parameter must be one of {list(SUPPORTED_BACKENDS)}. "
            f"Got {backend!r} instead."
        )
    if not isinstance(device, str) or not re.fullmatch(r"cpu|cuda(:\d+)?", device):
        raise ValueError(
            f"The 'device' parameter must be cpu, cuda or cuda:N. Got {device!r} instead."
        )
    traits = BACKEND_TRAITS[str(backend)]
    if engine == "scan" and not traits.functional:
        raise ValueError(
            f"The 'engine' parameter 'scan' runs on JAX only; got backend {backend!r}: set "
            "backend 'jax' (--backend jax; docs/tutorials/backends.md)."
        )
    if traits.host and device != "cpu":
        raise ValueError(
            f"The 'device' parameter {device!r} needs backend pytorch or jax; "
            f"{backend} runs on the cpu."
        )
    if not traits.host and engine in ("compiled", "reference"):
        raise ValueError(
            f"The 'engine' parameter {engine!r} runs on NumPy only; backend {backend!r} needs "
            "engine 'array' or 'auto'."
        )
    check_available(str(backend), device)


class Draws(Protocol):
    """What the tensor step draws (see the module docstring)."""

    def uniform(self, mask: Array) -> Array:
        """One double in [0, 1) per replica of ``mask`` (B,); meaningless elsewhere."""

    def integers(self, mask: Array, high: Any) -> Array:
        """One int64 in [0, high) per replica of ``mask`` (B,); ``high`` an int or (B,)."""

    def result(self) -> tuple[Array, ...]:
        """Return what the source keeps of these draws (the new cursor; nothing for generators)."""


class GeneratorDraws:
    """Draws from each replica's own generator, one call per replica, as the reference makes them.

    Parameters
    ----------
    generators : sequence of numpy.random.Generator
        One per replica (shared, not copied).
    """

    def __init__(self, generators: Sequence[np.random.Generator]) -> None:
        self.generators = generators

    def uniform(self, mask: np.ndarray) -> np.ndarray:  # noqa: D102
        out = np.zeros(len(mask))
        for b in np.flatnonzero(mask).tolist():
            out[b] = self.generators[b].random()
        return out

    def integers(self, mask: np.ndarray, high: Any) -> np.ndarray:  # noqa: D102
        out = np.zeros(len(mask), dtype=np.int64)
        high = np.broadcast_to(high, mask.shape)
        for b in np.flatnonzero(mask).tolist():
            out[b] = self.generators[b].integers(int(high[b]))
        return out

    def result(self) -> tuple[Array, ...]:  # noqa: D102
        return ()


class GeneratorSource:
    """`GeneratorDraws` for the engines: no arrays cross into the step, nothing to keep."""

    def __init__(self, generators: Sequence[np.random.Generator]) -> None:
        self._draws = GeneratorDraws(generators)

    def args(self) -> tuple[Array, ...]:
        """Return the arrays the step's draws read (none)."""
        return ()

    def open(self, space: ArrayNamespace, args: tuple[Array, ...]) -> GeneratorDraws:
        """Return the draws of one step."""
        return self._draws

    def take(self, result: tuple[Array, ...]) -> None:
        """Keep what the step's draws return (nothing)."""

    def sync(self) -> None:
        """Nothing to do: the generators were drawn from directly."""


def read_uniform(space: ArrayNamespace, buffer: Array, cursor: Array, offset: Any = 0) -> Array:
    """Return the double at ``cursor + offset`` of every replica's row of ``buffer``, (B,)."""
    index = space.ops.clip(cursor + offset, 0, buffer.shape[1] - 1)[:, None]
    return space.take_along(buffer, index)[:, 0]


class BufferedDraws:
    """Draws read from `UniformStreams`' buffer by a cursor per replica (array operations).

    Parameters
    ----------
    space : ArrayNamespace
    buffer : float64 array of shape (B, K)
    cursor : int64 array of shape (B,)
        The next unread double of every row.
    """

    def __init__(self, space: ArrayNamespace, buffer: Array, cursor: Array) -> None:
        self.space, self.buffer, self.cursor = space, buffer, cursor
        self.used: Any = 0

    def uniform(self, mask: Array) -> Array:  # noqa: D102
        space = self.space
        value = read_uniform(space, self.buffer, self.cursor, self.used)
        self.used = self.used + space.astype(mask, space.ops.int64)
        return value

    def integers(self, mask: Array, high: Any) -> Array:  # noqa: D102
        space = self.space
        index = space.astype(space.xp.floor(self.uniform(mask) * high), space.ops.int64)
        return space.ops.where(index < high, index, high - 1)

    def result(self) -> tuple[Array, ...]:  # noqa: D102
        return (self.cursor + self.used,)


class UniformStreams:
    """The replicas' exploration doubles, buffered K at a time (see the module docstring).

    ``sync`` rewinds every generator (``bit_generator.advance``) to just after
    the doubles actually used, so that a checkpoint saves the exact streams.

    Parameters
    ----------
    generators : sequence of numpy.random.Generator
        One per replica, each with a PCG64 bit generator (``advance`` rewinds it).
    space : ArrayNamespace
    per_step : int
        The most doubles a replica uses in one step.
    block : int, default 64
        Steps per refill.

    Attributes
    ----------
    buffer : float64 array of shape (B, K)
        The next K doubles of every replica's generator (read by `read_uniform`).
    cursor : int64 array of shape (B,)
        How many of its row each replica has used.
    """

    def __init__(
        self,
        generators: Sequence[np.random.Generator],
        space: ArrayNamespace,
        per_step: int,
        block: int = 64,
    ) -> None:
        if not all(hasattr(g.bit_generator, "advance") for g in generators):
            raise ValueError(
                "The array engine needs exploration generators whose bit generator can "
                "advance (PCG64, as rl.seeding gives)."
            )
        self.generators = list(generators)
        self.space = space
        self.per_step = per_step
        self.width = per_step * block
        replicas = len(self.generators)
        self.buffer = space.zeros((replicas, self.width), np.float64)
        self.cursor = space.put(np.full(replicas, self.width, dtype=np.int64))
        self._steps_left = 0

    def args(self) -> tuple[Array, ...]:
        """Return the buffer and cursor, with ``per_step`` doubles ahead of every replica.

        The refill (every ``block`` steps) draws K doubles from each generator
        on the host, one call per replica, and puts them on the device at once.
        """
        if self._steps_left == 0:
            self.sync()
            rows = np.stack([g.random(self.width) for g in self.generators])
            self.buffer = self.space.put(rows)
            self.cursor = self.space.put(np.zeros(len(self.generators), dtype=np.int64))
            self._steps_left = self.width // self.per_step
        self._steps_left -= 1
        return self.buffer, self.cursor

    def open(self, space: ArrayNamespace, args: tuple[Array, ...]) -> BufferedDraws:
        """Return the draws of one step on ``args`` (`args`' buffer and cursor)."""
        return BufferedDraws(space, *args)

    def take(self, result: tuple[Array, ...]) -> None:
        """Keep the cursor the step's draws returned."""
        (self.cursor,) = result

    def sync(self) -> None:
        """Rewind each generator to just after the doubles used; the buffer is then empty."""
        unused = self.width - self.space.host(self.cursor)
        for generator, count in zip(self.generators, unused.tolist(), strict=True):
            if count:
                generator.bit_generator.advance(-count)
        self.cursor = self.space.put(np.full(len(self.generators), self.width, dtype=np.int64))
        self._steps_left = 0
