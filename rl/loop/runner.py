"""B replicas (one per seed) stepped in lockstep, every slot always busy.

Each replica plays its own sequence of episodes in its own slot of the batch:
training episode 1, 2, ..., and after every training episode whose index is a
multiple of ``eval_every`` its ``eval_episodes`` greedy evaluation episodes
(no exploration, no learning). When a replica's episode ends, the replica is
reset and starts its next episode at the next lockstep step, whatever the other
replicas are doing (Gymnasium's autoreset idea), so no slot idles while
another replica's episode runs long. The only idle slots left are at a
*barrier*: `Runner.episodes` stops every replica at the end of a given episode
(the run's checkpoint boundaries), so that a checkpoint holds the agent alone.

Seeding. Replica i has the integer seed ``seed + i``; `rl.seeding.spawn_replicas`
gives it environment, agent (init, explore) and evaluation streams. Its copy is
reset at the start of training episode e with ``episode_seed(env_seed_i, e)``,
and for greedy evaluation episode k after training episode e with
``episode_seed(eval_seed_i, e, k)``. Every episode's environment randomness is
a pure function of (seed, episode), agents draw only from their own replica's
streams, and a replica's sequence of agent calls does not depend on the others:
a seed's results are bitwise the same whatever B and whatever the barriers.

Per lockstep step: ``actions = agent.act(states, active, greedy)`` (``greedy``
marks the slots on an evaluation episode), the environment steps with
``problem.decode(actions)`` (or, for the replicas in
``agent.continuous_actions_.mask``, the agent's continuous draws), and
``agent.observe`` learns from the slots on a training episode. Termination
stops bootstrapping; a truncation is passed as ``terminated=False`` and keeps
it (the agent applies this rule). When a training episode ends,
``agent.end_episode`` is called with that replica's mask.

The loop. The runner picks one way to play those steps when it is built (a
`rl.loop.lockstep.Loop`, the first that applies; `loop` holds it):

- ``"scan"`` (`rl.loop.scan.ScanLoop`): the scan engine (TEQL and TLR on JAX) on
  CartPole or Pendulum, T whole lockstep steps as one compiled ``jax.lax.scan``;
- ``"fused"`` (`rl.loop.fused.FusedLoop`): where every part of the step has
  compiled code (TEQL and TLR on the compiled engine, on CartPole, Pendulum
  and the Highway twin), whole stretches of steps in one compiled call;
- ``"device copies"`` (`rl.loop.device_copies.DeviceCopies`): the array
  engine on CartPole or Pendulum, whose copies live on the agent's device
  with the states, the actions and the learning; the results equal the
  compiled engine's to the last bits of PyTorch's and JAX's ``sin`` and ``cos``;
- ``"compiled copies"`` (`rl.loop.copies.CompiledCopies`): any other agent on
  those problems (DQN, SAC, the reference engine, ...) stays in Python while
  the copies step, encode and reset in compiled code, which spares a Python
  call per copy and per reset;
- ``"objects"`` (`rl.loop.stepped.ObjectSteps`): the agent and the
  environment objects step by step, for every other problem, and everywhere
  with ``fused=False``.

The results are bitwise the same whichever loop plays (the device copies
aside, as said).

References
----------
Algorithm 3 of the TEQL paper (the episode loop around each agent's step), and
its experimental protocol: one greedy episode after every 10th training episode.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np

from rl.agents.base import Agent
from rl.loop.copies import CompiledCopies, compiled_copies_apply
from rl.loop.device_copies import DeviceCopies, device_copies_apply
from rl.loop.fused import FusedLoop
from rl.loop.lockstep import EpisodeResult, Lockstep, Loop, Segment
from rl.loop.lockstep import episode_seed as episode_seed
from rl.loop.replicas import ReplicaEnvs
from rl.loop.scan import ScanLoop
from rl.loop.stepped import ObjectSteps
from rl.problems import Problem
from rl.seeding import ReplicaStreams


def choose_loop(lockstep: Lockstep, fused: bool, staggered: bool = False) -> Loop:
    """Return the loop that plays the run's steps: the first of the module doc's list that applies.

    Parameters
    ----------
    lockstep : rl.loop.lockstep.Lockstep
        The run's parts.
    fused : bool
        False takes the environment objects (`rl.loop.stepped.ObjectSteps`) whatever applies.
    staggered : bool
        The replicas may be offset (`Runner.episodes`): the scan loop, which
        plays every replica from one episode, is left out.
    """
    if not fused or not compiled_copies_apply(lockstep.problem, lockstep.env.vector):
        return ObjectSteps(lockstep)
    if not staggered and ScanLoop.applies(lockstep):
        return ScanLoop(lockstep)
    if FusedLoop.applies(lockstep):
        return FusedLoop(lockstep)
    if device_copies_apply(lockstep):
        return DeviceCopies(lockstep)
    return CompiledCopies(lockstep)


class Runner:
    """Training and evaluation episodes of B replicas of one agent on one problem.

    Parameters
    ----------
    problem : Problem
        The discretized environment.
    agent : Agent
        An agent with ``len(streams)`` replicas, built from ``[s.agent for s in streams]``.
    streams : sequence of ReplicaStreams
        One per replica (see `rl.seeding.spawn_replicas`).
    eval_every : int
        Evaluate after training episodes whose index is a multiple of this; 0 never.
    eval_episodes : int
        Greedy episodes per evaluation.
    fused : bool
        Play with the fastest loop that applies (the module doc's list); False
        always steps through the agent and environment objects, one lockstep
        step at a time. Results are bitwise the same either way. Setting the
        attribute picks the loop again.
    staggered : bool
        Let `episodes` offset replicas (its ``offsets``); the scan loop is then
        never picked (results are bitwise the same).

    Attributes
    ----------
    loop : rl.loop.lockstep.Loop
        The loop that plays the steps, picked when the runner is built
        (``loop.name`` says which).
    agent_steps : int
        Agent-steps played so far (training and evaluation, summed over replicas).
    """

    def __init__(
        self,
        problem: Problem,
        agent: Agent,
        streams: Sequence[ReplicaStreams],
        *,
        eval_every: int = 10,
        eval_episodes: int = 1,
        fused: bool = True,
        staggered: bool = False,
    ) -> None:
        streams = list(streams)
        env = ReplicaEnvs(problem, len(streams), [s.seed for s in streams])
        self.lockstep = Lockstep(problem, agent, env, streams, eval_every, eval_episodes)
        """The parts the loop reads, fixed here (the attributes below read them)."""
        self.agent_steps = 0
        self._segment: Segment | None = None
        self.staggered = staggered
        self.fused = fused

    @property
    def fused(self) -> bool:
        """Whether the loop may be one of the compiled ones (setting it picks the loop again)."""
        return self._fused

    @fused.setter
    def fused(self, fused: bool) -> None:
        self._fused = fused
        self.loop: Loop = choose_loop(self.lockstep, fused, self.staggered)

    @property
    def problem(self) -> Problem:
        """The discretized environment."""
        return self.lockstep.problem

    @property
    def agent(self) -> Agent:
        """The agent of B replicas."""
        return self.lockstep.agent

    @property
    def env(self) -> ReplicaEnvs:
        """The B environment copies."""
        return self.lockstep.env

    @property
    def streams(self) -> Sequence[ReplicaStreams]:
        """The replicas' random streams."""
        return self.lockstep.streams

    @property
    def seeds(self) -> list[int]:
        """The replicas' seeds."""
        return self.lockstep.seeds

    @property
    def eval_every(self) -> int:
        """Evaluate after training episodes whose index is a multiple of this; 0 never."""
        return self.lockstep.eval_every

    @property
    def eval_episodes(self) -> int:
        """Greedy episodes per evaluation."""
        return self.lockstep.eval_episodes

    @property
    def replicas(self) -> int:
        """Number of replicas B."""
        return len(self.streams)

    def episodes(
        self,
        start: int,
        stop: int,
        abandon: Callable[[], bool] | None = None,
        offsets: Sequence[int] | None = None,
    ) -> Iterator[EpisodeResult]:
        """Play training episodes ``start + 1 .. stop`` of every replica, with their evaluations.

        Replicas run ahead of one another freely; results are yielded in episode
        order, each as soon as every replica has finished that episode (and its
        evaluation). When the iterator is exhausted every replica has finished
        episode ``stop`` (or the lowered barrier, see `request_stop`) and no
        episode is in progress, so the agent's state is a clean checkpoint.

        Parameters
        ----------
        start : int
            Training episodes already completed by every replica.
        stop : int
            The barrier: the last training episode to play (> ``start``).
        abandon : callable, optional
            Asked after every call of the loop (every lockstep step, or every
            compiled stretch of steps, `rl.loop.fused`); when it returns True
            the iterator ends at once and the episodes in progress are
            dropped: their learning stays in the agent, which is then no clean
            checkpoint (a run keeps its last one and replays those episodes on
            resume).
        offsets : sequence of int, optional
            Per replica, training episodes it has completed beyond ``start``
            (a runner built ``staggered`` only): replica b plays its episodes
            ``offsets[b] + start + 1 .. offsets[b] + stop``, and the result
            of episode e holds every replica's episode ``offsets[b] + e``.
            Each replica's episodes are the ones it plays from ``start`` alone.

        Yields
        ------
        EpisodeResult
        """
        if stop <= start:
            raise ValueError(f"The 'stop' parameter must exceed start={start}. Got {stop}.")
        shift = None
        if offsets is not None:
            shift = np.asarray(offsets, dtype=np.int64)
            if not self.staggered or shift.shape != (self.replicas,) or (shift < 0).any():
                raise ValueError(
                    f"The 'offsets' parameter must be {self.replicas} episode counts >= 0, "
                    "for a Runner built with staggered=True."
                )
        segment = Segment(start, stop, self.replicas, self.loop.event_rows, shift)
        advance = self.loop.start(segment)
        self._segment = segment
        pending = start + 1  # the next episode to yield
        try:
            while pending <= segment.stop:
                self.agent_steps += advance()
                if abandon is not None and abandon():
                    return
                while pending <= segment.stop and (result := segment.pop_complete(pending)):
                    yield result
                    pending += 1
        finally:
            self._segment = None

    def request_stop(self) -> None:
        """Lower the barrier of the running `episodes` to the episodes now in progress.

        Replicas finish the episode they are playing (and its evaluation) and
        wait; no new episode starts beyond the furthest one already started.
        """
        if self._segment is not None:
            self._segment.lower_stop()

    def episode(self, episode: int) -> EpisodeResult:
        """Play training episode ``episode`` of every replica (and its evaluation) alone."""
        (result,) = self.episodes(episode - 1, episode)
        return result

    def close(self) -> None:
        """Close the environment copies."""
        self.env.close()
