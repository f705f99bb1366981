"""Callbacks of `rl.learners` ``learn``: a small protocol shaped like stable-baselines3's.

A callback is told when training starts, after every training episode (all
replicas have finished it) and when training ends. ``on_episode_end`` gets the
learner and an `rl.runs.training.EpisodeLog` (episode, returns and lengths per
replica, greedy returns of an evaluation after it or NaN, wall time); returning
False (any false value but None, ``numpy.False_`` included) stops training:
the replicas finish the episodes they are playing (they may have run ahead up
to the next checkpoint), a checkpoint is written, and a later ``learn``
continues from there.

Example::

    class StopAt(rl.callbacks.Callback):
        def on_episode_end(self, learner, log):
            return log.returns.mean() < 195.0  # False stops

    model.learn(episodes=1000, callback=StopAt())

A plain function ``f(learner, log)`` is an ``on_episode_end``; a list of
callbacks is called in order (`CallbackList`; training stops if any returns
False).

In ``on_episode_end`` the learner is the model being trained: ``predict``,
``evaluate``, ``policy``, ``q_tensor``, ``episodes_done`` and ``config``
show the agent after ``log.episode`` (replicas may have run ahead into the
episodes up to the next checkpoint; ``checkpoint_every=1`` makes every
episode one). ``save`` and ``learn`` cannot be called there (the run is being
written); save after ``learn`` returns.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


class Callback:
    """Base class: override any of the three methods; the defaults do nothing."""

    def on_training_start(self, learner: Any) -> None:
        """Run at the start of every ``learn``."""

    def on_episode_end(self, learner: Any, log: Any) -> bool | None:
        """Run after every training episode with its `rl.runs.training.EpisodeLog`; False stops."""
        return None

    def on_training_end(self, learner: Any) -> None:
        """Run when ``learn`` returns normally (its episodes done, or stopped)."""


class _FunctionCallback(Callback):
    """A function ``f(learner, log)`` as the ``on_episode_end`` of a callback."""

    def __init__(self, function: Callable[[Any, Any], bool | None]) -> None:
        self.function = function

    def on_episode_end(self, learner: Any, log: Any) -> bool | None:
        return self.function(learner, log)


class CallbackList(Callback):
    """Several callbacks called in order; ``on_episode_end`` is False if any returns False.

    Every callback is called, even after one has asked to stop.
    """

    def __init__(self, callbacks: Sequence[Any]) -> None:
        self.callbacks = [as_callback(c) for c in callbacks]

    def on_training_start(self, learner: Any) -> None:
        """Tell every callback, in order."""
        for callback in self.callbacks:
            callback.on_training_start(learner)

    def on_episode_end(self, learner: Any, log: Any) -> bool | None:
        """Tell every callback; return False if any of them does."""
        answers = [callback.on_episode_end(learner, log) for callback in self.callbacks]
        return False if any(asks_to_stop(answer) for answer in answers) else None

    def on_training_end(self, learner: Any) -> None:
        """Tell every callback, in order."""
        for callback in self.callbacks:
            callback.on_training_end(learner)


def asks_to_stop(answer: Any) -> bool:
    """Whether an ``on_episode_end`` answer stops training: a false value other than None."""
    return answer is not None and not bool(answer)


def as_callback(value: Any) -> Callback:
    """Return ``value`` as a `Callback`: None, a Callback, a function or a list of those.

    Raises
    ------
    TypeError
        For anything else, a class included (an instance of it is meant).
    """
    if value is None:
        return Callback()
    if isinstance(value, Callback):
        return value
    if isinstance(value, (list, tuple)):
        return CallbackList(value)
    if isinstance(value, type):
        raise TypeError(
            f"The 'callback' parameter is the class {value.__name__}; pass an instance of it "
            f"({value.__name__}()) or a function f(learner, log)."
        )
    if callable(value):
        return _FunctionCallback(value)
    raise TypeError(
        "The 'callback' parameter must be an rl.callbacks.Callback, a function "
        f"f(learner, log), or a list of those. Got {value!r} instead."
    )
