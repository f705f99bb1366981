"""A population of trials trained as one batch, pruned slots refilled (``rl.tune --population P``).

P slots, each a trial of S seeds: P * S replicas of one agent in lockstep
(`rl.runs.batch.staggered`), in batches of at most
`rl.runs.batch.training.MAX_BATCH_REPLICAS` replicas that train each
segment one after another. Every trial comes from ``study.ask()`` (the
TPE sampler of the study, `rl.tune.study.load_study`), trains into its own run
directory ``OUT/trials/NNNN/`` and, at every evaluation point, reports the
score of the window ending there (`rl.tune.study.report`) to the study's
pruner. The population trains a segment of `segment_length` episodes at a
time; at the end of a segment every trial at a pruning point reports, a
pruned trial stops there (as a lone pruned trial, with its checkpoint of that
episode) and a trial at its last episode is scored and told complete; each
slot so freed is refilled at once with a new ``study.ask()`` trial, which
starts at episode 1 from a fresh agent seeded with its own seeds while the
others go on. Slots stay empty only once the study has as many trials as
``--n-trials`` (or after ``--timeout``, which starts no new trial).

The pruner. ``halving`` (the default of this mode) is Optuna's
``SuccessiveHalvingPruner``, asynchronous successive halving: a trial at a
rung is compared with the trials that reached that rung before it, so it
needs no generation of trials to end together, and a refilled slot's trial
is judged as soon as it reaches the first rung. Its first rung is the first
evaluation point (``min_resource``; the pruner's automatic choice would wait
for a first trial to finish, which lets a whole first population run to its
end unpruned). ``median`` and ``none`` work as well.

The study stays the record: trials are asked, reported and told on the
SQLite study as in the one-after-another mode, every live trial records a
heartbeat, and an interruption (Ctrl-C) marks the live trials failed and
queues their parameters again; after a kill -9 their heartbeats go stale and
the next run (`rl.tune.study.claim`) does the same. A trial cut short thus
reruns from its first episode under a new number, and the study ends with
`rl.tune.study.Search.n_trials` complete or pruned trials.

Failure. If a segment fails (a replica diverged, an environment failed), every
member replays it alone from its state at the segment's start; the one that
fails again fails alone, as in the other mode.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from rl.runs.batch.staggered import StaggeredMember, train_segment
from rl.runs.batch.training import MAX_BATCH_REPLICAS, batch_key, resolve_members
from rl.runs.config import ConfigError, TrainConfig
from rl.tune.space import Param, with_values
from rl.tune.study import (
    HEARTBEAT_SECONDS,
    TRIAL_ERRORS,
    Scores,
    Search,
    claim,
    final_score,
    heartbeat,
    one_line,
    report,
    require_optuna,
    retry,
    tell,
    trial_config,
    trial_dir,
)


def segment_length(search: Search) -> int:
    """Episodes of one segment: the largest that divides the pruning interval and the episodes."""
    return math.gcd(search.report_every, search.base.episodes)


def check_population(search: Search) -> None:
    """Refuse a population whose trials could not share one batch, in one line.

    Every probe of the search space (both ends of a range, every choice) must
    give a configuration of the same batch (`rl.runs.batch.training.batch_key`):
    the space may vary only the agent's per-replica settings, within one batch
    group (`rl.agents.base.Agent.batch_group`).

    Raises
    ------
    ConfigError
        Naming the parameter and the fix.
    """
    base, params = search.base, list(search.params)
    first = {p.name: p.probes()[0] for p in params}

    def key(values: dict[str, Any]) -> str:
        ((settings, effective),) = resolve_members([with_values(base, params, values)])
        agent_class = settings.spec.agent_class
        group = agent_class.batch_group(settings.agent)
        return batch_key(effective, agent_class.per_replica, group=group)

    shared = key(first)
    for param in params:
        for value in param.probes():
            if key(first | {param.name: value}) != shared:
                raise ConfigError(_refusal(base, param, value))


def _refusal(base: TrainConfig, param: Param, value: Any) -> str:
    ((settings, _),) = resolve_members([base])
    fields = ", ".join(sorted(settings.spec.agent_class.per_replica)) or "none"
    return (
        f"The search space parameter '{param.name}' (= {value!r}) cannot vary within one "
        f"batch of --population: {base.agent!r} varies only {fields} per replica (and keeps "
        "its batch group); fix it with --set or --env-option, or drop --population."
    )


class _Slot(NamedTuple):
    """A live trial of the population: the Optuna trial, its run and its scores."""

    trial: Any
    member: StaggeredMember
    scores: Scores


def optimize_population(
    study: Any,
    storage: Any,
    search: Search,
    out: Path,
    *,
    timeout: float | None = None,
    on_trial: Callable[[Any, str | None], None] | None = None,
) -> int:
    """Run `Search.population` trials at a time until the study is done (module doc).

    Parameters and return as `rl.tune.study.optimize`: the number of this
    call's trials that failed; it stops when as many as `Search.n_trials`
    have.

    Raises
    ------
    KeyboardInterrupt
        After marking the live trials failed and queuing them again.
    """
    optuna = require_optuna()
    state = optuna.trial.TrialState
    deadline = None if timeout is None else time.monotonic() + timeout
    length = segment_length(search)
    live: list[_Slot] = []
    failures = 0

    def end(slot: _Slot, value: float | None, ended: Any, error: str | None) -> None:
        nonlocal failures
        live.remove(slot)
        with contextlib.suppress(OSError):
            slot.member.close()
        failures += tell(study, slot.trial, value, ended, error, on_trial)

    def refill() -> bool:
        """Fill the free slots; return whether to wait for a dead process's trial."""
        nonlocal failures
        open_ = failures < search.n_trials and (deadline is None or time.monotonic() < deadline)
        while open_ and len(live) < search.population:
            trial, wait = claim(study, storage, search, out)
            if trial is None:
                return wait
            try:
                config = trial_config(trial, search, trial_dir(out, trial.number))
                member = StaggeredMember(config)
            except TRIAL_ERRORS as error:
                failures += tell(study, trial, None, state.FAIL, one_line(error), on_trial)
                continue
            live.append(_Slot(trial, member, Scores(list(member.seeds), search.column)))
        return False

    try:
        with heartbeat(storage, lambda: [slot.trial._trial_id for slot in live]):
            while True:
                wait = refill()
                if not live:
                    if not wait:
                        return failures
                    time.sleep(HEARTBEAT_SECONDS)
                    continue
                for slot, logs in _play(live, length, end, state.FAIL):
                    for log in logs:
                        slot.scores.add(log)
                    member = slot.member
                    pruned = report(slot.trial, search, slot.scores, member.age)
                    if pruned or member.checkpoint_due(length):
                        member.checkpoint()
                    if pruned:
                        end(slot, None, state.PRUNED, None)
                    elif member.done:
                        member.close()
                        end(slot, final_score(search, member.run_dir), state.COMPLETE, None)
    except KeyboardInterrupt:
        for slot in list(live):
            with contextlib.suppress(OSError):
                slot.member.close()
            retry(study, slot.trial)
        raise


def _play(
    live: list[_Slot], length: int, end: Callable[..., None], failed: Any
) -> list[tuple[_Slot, list[Any]]]:
    """Train one segment of every live trial; return each one's episodes that trained.

    The trials train in batches of at most `MAX_BATCH_REPLICAS` replicas, one
    after another (a trial's numbers do not depend on its batch).
    """
    slots = list(live)
    per_batch = max(1, MAX_BATCH_REPLICAS // len(slots[0].member.seeds))
    played = []
    for start in range(0, len(slots), per_batch):
        played += _play_batch(slots[start : start + per_batch], length, end, failed)
    return played


def _play_batch(
    slots: list[_Slot], length: int, end: Callable[..., None], failed: Any
) -> list[tuple[_Slot, list[Any]]]:
    """Train one segment of ``slots`` as one batch (`_play`).

    If the batch fails, every trial replays the segment alone; one that fails
    then is ended as failed (``end``) and left out.
    """
    try:
        return list(zip(slots, train_segment([s.member for s in slots], length), strict=True))
    except TRIAL_ERRORS as error:
        if len(slots) == 1:
            end(slots[0], None, failed, one_line(error))
            return []
    played = []
    for slot in slots:
        try:
            (logs,) = train_segment([slot.member], length)
        except TRIAL_ERRORS as error:
            end(slot, None, failed, one_line(error))
            continue
        played.append((slot, logs))
    return played
