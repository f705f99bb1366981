"""Per-slot episode bookkeeping of the lockstep runners, compiled once for both.

Each replica's slot plays training episode 1, 2, ..., and after every training
episode whose index is a multiple of ``eval_every`` its ``eval_episodes``
greedy evaluation episodes (see `rl.loop.runner`). `Slots` holds, per replica,
where it is in that sequence, and a buffer of *events*: one row per episode a
replica has finished together with its evaluation (replica, episode, length,
return, mean greedy return or NaN). `end_episode` is the one rule that moves a
slot on when its episode ends; the step-by-step runner (`rl.loop.runner.Runner`)
calls it through `end_episodes` after a lockstep step, the fused runner
(`rl.loop.fused`) from inside its compiled loop, so both book the same events.

References
----------
The TEQL paper's experimental protocol: one greedy episode after every 10th
training episode.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numpy.typing import NDArray

# Columns of `Slots.ints` (per replica).
EPISODE, EVAL_INDEX, LENGTH, LAST_LENGTH, OFFSET = range(5)
# Columns of `Slots.floats` (per replica).
RETURN, GREEDY_SUM, LAST_RETURN = range(3)
# Columns of the event buffers.
EV_REPLICA, EV_EPISODE, EV_LENGTH = range(3)
EV_RETURN, EV_GREEDY = range(2)


class Slots:
    """Where every replica's slot is in its episode sequence, and the events not yet booked.

    Parameters
    ----------
    start : int
        Training episodes already completed by every replica; each starts
        episode ``start + 1``.
    replicas : int
        Number of replicas B.
    capacity : int
        Rows of the event buffers (at least B: one lockstep step ends at most B episodes).
    offsets : ndarray of int, shape (B,), optional
        Episodes each replica is ahead of the others (default 0 for all):
        replica b starts its episode ``offsets[b] + start + 1`` and waits after
        ``offsets[b] + stop``.

    Attributes
    ----------
    ints : ndarray of int64, shape (B, 5)
        Columns EPISODE (current training episode), EVAL_INDEX (-1 on a
        training episode, else the evaluation episode k), LENGTH (steps of the
        episode in progress), LAST_LENGTH (of the last training episode),
        OFFSET (the replica's offset).
    floats : ndarray of float64, shape (B, 3)
        Columns RETURN (of the episode in progress), GREEDY_SUM (greedy returns
        of the evaluation so far), LAST_RETURN (of the last training episode).
    running : ndarray of bool, shape (B,)
        False once the replica waits at the barrier.
    event_ints : ndarray of int64, shape (capacity, 3)
        Columns EV_REPLICA, EV_EPISODE, EV_LENGTH of the booked events.
    event_floats : ndarray of float64, shape (capacity, 2)
        Columns EV_RETURN, EV_GREEDY (NaN: no evaluation after that episode).
    """

    def __init__(
        self, start: int, replicas: int, capacity: int, offsets: NDArray | None = None
    ) -> None:
        self.ints = np.zeros((replicas, 5), dtype=np.int64)
        if offsets is not None:
            self.ints[:, OFFSET] = offsets
        self.ints[:, EPISODE] = self.ints[:, OFFSET] + start + 1
        self.ints[:, EVAL_INDEX] = -1
        self.floats = np.zeros((replicas, 3))
        self.running = np.ones(replicas, dtype=bool)
        self.event_ints = np.zeros((max(capacity, replicas), 3), dtype=np.int64)
        self.event_floats = np.zeros((max(capacity, replicas), 2))

    @property
    def episode(self) -> NDArray[np.int64]:
        """Current training episode of every replica (a view)."""
        return self.ints[:, EPISODE]

    @property
    def eval_index(self) -> NDArray[np.int64]:
        """-1 where a replica plays a training episode, else its evaluation episode (a view)."""
        return self.ints[:, EVAL_INDEX]


@njit(cache=True)
def end_episode(
    b, ints, floats, running, eval_every, eval_episodes, stop, event_ints, event_floats, n_events
):  # fmt: skip
    """Move replica ``b``'s slot on after its episode ended; returns (restart, n_events).

    A training episode's return and length are kept; if an evaluation is due
    (``episode % eval_every == 0``) the slot starts it. An evaluation episode
    adds its return to the greedy sum and the next one starts until
    ``eval_episodes`` are done. When the training episode and its evaluation
    are both done, one event is booked at row ``n_events``; the slot then
    waits if the episode is the barrier ``stop`` (past its offset), else
    starts the next training episode. ``restart`` says whether the slot must be reset for a
    new episode.
    """
    episode = ints[b, EPISODE]
    greedy = np.nan
    if ints[b, EVAL_INDEX] < 0:
        floats[b, LAST_RETURN] = floats[b, RETURN]
        ints[b, LAST_LENGTH] = ints[b, LENGTH]
        restart = eval_every > 0 and episode % eval_every == 0
        if restart:
            ints[b, EVAL_INDEX] = 0
            floats[b, GREEDY_SUM] = 0.0
    else:
        floats[b, GREEDY_SUM] += floats[b, RETURN]
        ints[b, EVAL_INDEX] += 1
        restart = ints[b, EVAL_INDEX] < eval_episodes
        if not restart:
            greedy = floats[b, GREEDY_SUM] / eval_episodes
            ints[b, EVAL_INDEX] = -1
    floats[b, RETURN] = 0.0
    ints[b, LENGTH] = 0
    if restart:
        return True, n_events
    event_ints[n_events, EV_REPLICA] = b
    event_ints[n_events, EV_EPISODE] = episode
    event_ints[n_events, EV_LENGTH] = ints[b, LAST_LENGTH]
    event_floats[n_events, EV_RETURN] = floats[b, LAST_RETURN]
    event_floats[n_events, EV_GREEDY] = greedy
    if episode - ints[b, OFFSET] >= stop:
        running[b] = False
        return False, n_events + 1
    ints[b, EPISODE] = episode + 1
    return True, n_events + 1


@njit(cache=True)
def end_episodes(
    ended, rewards, ints, floats, running, eval_every, eval_episodes, stop, event_ints,
    event_floats, restart,
):  # fmt: skip
    """Add one step's ``rewards`` of the running slots, then `end_episode` every ``ended`` slot.

    ``restart`` (B,) is set where a slot must be reset for its next episode.
    Returns the number of events booked (from row 0).
    """
    n_events = 0
    for b in range(ended.shape[0]):
        restart[b] = False
        if not running[b]:
            continue
        floats[b, RETURN] += rewards[b]
        ints[b, LENGTH] += 1
        if ended[b]:
            restart[b], n_events = end_episode(
                b, ints, floats, running, eval_every, eval_episodes, stop, event_ints,
                event_floats, n_events,
            )  # fmt: skip
    return n_events
