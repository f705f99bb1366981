"""``python -m rl.evaluate RUN_DIR``: play greedy episodes of a trained run and summarize them.

Example::

    python -m rl.evaluate runs/teql --episodes 20 --seed 0 --replica 0

loads the run (`rl.runs.load.load_run`), plays ``--episodes`` greedy episodes of
one replica's agent (with ``--best``, its state after its best evaluation, in a
run trained with ``--keep-best``: `rl.runs.training.BestStates`) on a fresh copy of the
environment, and prints the mean ± standard deviation of the undiscounted returns
and their IQM with a 95% percentile-bootstrap interval
(`rl.runs.metrics.summarize`, the statistics the training summary uses). Episode k
is reset with a seed derived from (``--seed``, k), so an evaluation is
reproducible and adding episodes never changes the first ones. ``--video DIR``
records the episodes with ``gymnasium.wrappers.RecordVideo`` for environments that
render ``rgb_array`` (Highway); it needs ``moviepy``.

A run of an environment ``package.module:Env-v0`` is evaluated only with
``--env package.module:Env-v0`` (the recorded id, named again) or
``--trust-env-module``: a run directory never makes this command import a
module on its own (`rl.runs.load.load_run`).

Exit codes: 0 done; 1 the environment raised or returned an observation of the
wrong shape (`rl.problems.EnvFailure`, naming the episode, replica and reset
seed); 2 a run directory that cannot be loaded (no checkpoint, a refused
checkpoint, an environment module not allowed), bad arguments, or a video that
cannot be recorded, each with a one-line message.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import gymnasium
import numpy as np
from numpy.typing import NDArray

from rl.loop.runner import episode_seed
from rl.problems import EnvFailure
from rl.problems.from_gymnasium import EnvModuleRefused
from rl.runs.load import LoadedRun, RunLoadError, load_run
from rl.runs.metrics import Summary, summarize
from rl.validation import check_int
from tensorq.version import add_version_option

MAX_STEPS = 100_000
"""Step cap of one evaluation episode of an environment without a time limit."""


class Evaluation(NamedTuple):
    """Greedy episodes of one replica.

    Attributes
    ----------
    returns : ndarray of float64, shape (episodes,)
        Undiscounted return of every episode.
    lengths : ndarray of int64, shape (episodes,)
        Steps of every episode.
    summary : rl.runs.metrics.Summary
        Mean, std, IQM and its bootstrap interval of ``returns``.
    """

    returns: NDArray[np.float64]
    lengths: NDArray[np.int64]
    summary: Summary


class VideoError(ValueError):
    """Episodes cannot be recorded; one-line message."""


def _video_env(run: LoadedRun, video_dir: Path) -> gymnasium.Env:
    probe = run.problem.make_env()
    modes = list(probe.metadata.get("render_modes", []))
    probe.close()
    if "rgb_array" not in modes:
        raise VideoError(
            f"Environment {run.problem.env_id!r} does not render 'rgb_array' (its render modes: "
            f"{modes}); --video needs one that does (Highway)."
        )
    if importlib.util.find_spec("moviepy") is None:
        raise VideoError("--video needs moviepy to write videos: pip install moviepy")
    from gymnasium.wrappers import RecordVideo

    env = run.problem.make_env(render_mode="rgb_array")
    return RecordVideo(env, str(video_dir), episode_trigger=lambda _: True, disable_logger=True)


class NonFiniteReward(ValueError):
    """An environment returned a reward that is not a finite real number."""


def _check_reward(reward: object, completed: int) -> None:
    """Raise `NonFiniteReward` if ``reward`` is not a finite real number (a string is not)."""
    number = isinstance(reward, (int, float, np.number)) and not isinstance(reward, complex)
    if not (number and np.isfinite(float(reward))):  # type: ignore[arg-type]
        raise NonFiniteReward(
            f"it returned a reward {reward!r} that is not a finite number ({completed} episodes "
            "completed before)"
        )


def evaluate(
    run: LoadedRun,
    *,
    episodes: int = 10,
    seed: int = 0,
    replica: int = 0,
    video_dir: str | Path | None = None,
) -> Evaluation:
    """Play greedy episodes of one replica of a loaded run.

    Parameters
    ----------
    run : LoadedRun
        From `rl.runs.load.load_run`.
    episodes : int, default 10
        Number of episodes (>= 1; a NumPy integer too).
    seed : int, default 0
        Episode k is reset with ``rl.loop.runner.episode_seed(seed, k)``.
    replica : int, default 0
        Which replica (seed of the run) acts.
    video_dir : path-like, optional
        Record every episode there (see the module docstring).

    Returns
    -------
    Evaluation

    Raises
    ------
    rl.problems.EnvFailure
        If the environment raises, returns an observation of the wrong shape
        or a reward that is not a finite number (naming the episode, the
        replica and the reset seed; for a reward, how many episodes were completed).
    """
    episodes, seed = check_int("episodes", episodes, 1), check_int("seed", seed, 0)
    run.greedy_states(np.zeros((0, len(run.problem.state_dims)), np.int64), replica)  # checks
    env = run.problem.make_env() if video_dir is None else _video_env(run, Path(video_dir))
    returns = np.zeros(episodes)
    lengths = np.zeros(episodes, dtype=np.int64)
    try:
        for k in range(episodes):
            call, reset_seed = "reset", episode_seed(seed, k)
            try:
                observation, _ = env.reset(seed=reset_seed)
                call = "step"
                for _ in range(MAX_STEPS):
                    action = run.policy(observation, replica)
                    observation, reward, terminated, truncated, _ = env.step(action)
                    _check_reward(reward, k)
                    returns[k] += float(reward)
                    lengths[k] += 1
                    if terminated or truncated:
                        break
            except Exception as error:  # noqa: BLE001 - any error of the user's code, reported
                where = f"{call}() of evaluation episode {k} (replica {replica}, seed {reset_seed})"
                raise EnvFailure.during(run.problem.env_id, where, error) from error
    finally:
        env.close()
    return Evaluation(returns, lengths, summarize(returns))


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of ``python -m rl.evaluate``."""
    parser = argparse.ArgumentParser(
        prog="python -m rl.evaluate",
        description="Play greedy episodes of a trained run and print their statistics.",
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a run directory of python -m rl.train")
    parser.add_argument("--episodes", type=int, default=10, help="greedy episodes (default 10)")
    parser.add_argument("--seed", type=int, default=0, help="evaluation seed (default 0)")
    parser.add_argument("--replica", type=int, default=0, help="which replica acts (default 0)")
    parser.add_argument("--video", metavar="DIR", help="record the episodes (rgb_array envs)")
    parser.add_argument(
        "--best",
        action="store_true",
        help="play the replica's state after its best evaluation (a run trained with "
        "--keep-best) instead of its last state",
    )
    parser.add_argument(
        "--env",
        help="the run's environment id, named again: allows importing the module of a "
        "'package.module:Env-v0' id (must equal the recorded id)",
    )
    parser.add_argument(
        "--trust-env-module",
        action="store_true",
        help="import the module of the run's 'package.module:Env-v0' id without naming it",
    )
    return add_version_option(parser)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; return the exit code (0 done, 1 the environment failed, 2 refused)."""
    args = build_parser().parse_args(argv)
    try:
        run = load_run(
            args.run_dir, env=args.env, trust_env_module=args.trust_env_module, best=args.best
        )
        result = evaluate(
            run,
            episodes=args.episodes,
            seed=args.seed,
            replica=args.replica,
            video_dir=args.video,
        )
    except EnvModuleRefused as error:
        print(f"error: {error.cli_message()}", file=sys.stderr)
        return 2
    except EnvFailure as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except (RunLoadError, VideoError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    s = result.summary
    run_seed = run.config.seed + args.replica
    when = f"after {run.episode} training episodes"
    if run.best_episodes is not None:
        when = (
            f"its best evaluated state, after training episode "
            f"{run.best_episodes[args.replica]} of {run.episode}"
        )
    print(
        f"{run.config.agent} on {run.config.env}, replica {args.replica} (seed {run_seed}), {when}"
    )
    print(
        f"{len(result.returns)} greedy episodes (evaluation seed {args.seed}), mean length "
        f"{result.lengths.mean():.1f}"
    )
    print(f"return mean ± std: {s.mean:.3f} ± {s.std:.3f}")
    print(f"return IQM [95% CI]: {s.iqm:.3f} [{s.iqm_low:.3f}, {s.iqm_high:.3f}]")
    if args.video:
        print(f"Wrote videos to {args.video}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
