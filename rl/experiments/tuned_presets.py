"""Tuned presets: searched settings per environment and agent, read from data files.

``python -m rl.train --env CartPole-v1 --agent teql --preset tuned`` (and
``rl.TEQL("CartPole-v1", preset="tuned")``) start from the settings in
``rl/presets/tuned/CartPole-v1.toml``: one TOML file per environment, one table per
agent, each holding the `rl.runs.config.TrainConfig` fields a run needs::

    [teql]
    reading = "stable"            # the reading the settings refine
    episodes = 300                # the training budget they were tuned at

    [teql.env_options]            # the grid: options of rl.problems.make_problem
    state_bins = [8, 8, 10, 10]
    low = [-2.4, -3.0, -0.21, -3.5]
    high = [2.4, 3.0, 0.21, 3.5]

    [teql.agent_params]           # step sizes, exploration, discount, rank
    rank = 10
    alpha0 = 0.6

Explicit values (a config file, flags, ``--set``, ``--env-option``, a learner's
arguments) override the file's key by key, as for every preset. The files are
data: they are parsed as TOML (`rl.runs.documents.parse_toml`), never executed.
"""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

from rl.runs.config import ConfigError
from rl.runs.documents import DocumentError, parse_toml, tomllib

TUNED = "tuned"
"""The preset name that selects these settings (``--preset tuned``, ``preset="tuned"``)."""

TUNED_KEYS = ("reading", "episodes", "env_options", "agent_params")
"""The keys an agent's table may hold: `rl.runs.config.TrainConfig` fields."""


def tuned_dir() -> Traversable:
    """Return the directory of the tuned preset files, ``rl/presets/tuned/``."""
    return resources.files("rl").joinpath("presets", "tuned")


def _files() -> dict[str, Traversable]:
    """Return environment id -> its preset file, for every file in `tuned_dir`."""
    found = (entry for entry in tuned_dir().iterdir() if entry.name.endswith(".toml"))
    return {entry.name.removesuffix(".toml"): entry for entry in sorted(found, key=str)}


def _read(env: str, entry: Traversable) -> dict[str, Any]:
    """Parse one preset file into agent -> table, refusing keys that are not `TUNED_KEYS`."""
    what = f"Tuned preset file {entry.name!r}"
    try:
        data = parse_toml(entry.read_text(encoding="utf-8"), what)
    except DocumentError as error:
        raise ConfigError(str(error)) from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"Cannot parse {what}: {error}") from None
    for agent, table in data.items():
        unknown = set(table) - set(TUNED_KEYS) if isinstance(table, dict) else {"a value"}
        if unknown:
            raise ConfigError(
                f"{what}: the table [{agent}] holds {', '.join(sorted(unknown))}; "
                f"an agent's table holds only {', '.join(TUNED_KEYS)}."
            )
    return data


def tuned_presets() -> dict[str, tuple[str, ...]]:
    """Return environment id -> the agents that have a tuned preset on it."""
    return {env: tuple(_read(env, entry)) for env, entry in _files().items()}


def _listing() -> str:
    """Return ``CartPole-v1 (teql, tabular), ...``: every tuned preset, for messages."""
    return ", ".join(f"{env} ({', '.join(agents)})" for env, agents in tuned_presets().items())


def tuned_preset(env: str | None, agent: str | None) -> dict[str, Any]:
    """Return the `rl.runs.config.TrainConfig` fields of the tuned preset of ``agent`` on ``env``.

    Parameters
    ----------
    env : str
        A Gymnasium id with a file in `tuned_dir` (``"CartPole-v1"``).
    agent : str
        An agent with a table in that file (``"teql"``, ``"tlr"``, ``"tabular"``).

    Returns
    -------
    dict
        ``env``, ``agent`` and the table's ``reading``, ``episodes``,
        ``env_options`` and ``agent_params`` (fresh copies).

    Raises
    ------
    rl.runs.config.ConfigError
        In one line naming the tuned presets that exist, if ``env`` or ``agent``
        is missing or has none; or naming the key, if the file is malformed.

    Examples
    --------
    >>> tuned_preset("CliffWalking-v1", "tabular")["reading"]
    'paper'
    """
    if not env or not agent:
        raise ConfigError(
            f"The preset {TUNED!r} needs an environment and an agent (--env and --agent); "
            f"tuned presets exist for {_listing()}."
        )
    files = _files()
    if env not in files:
        raise ConfigError(
            f"No tuned preset for the environment {env!r}; tuned presets exist for {_listing()}."
        )
    tables = _read(env, files[env])
    if agent not in tables:
        raise ConfigError(
            f"No tuned preset for the agent {agent!r} on {env!r}; it has one for "
            f"{', '.join(tables)}."
        )
    fields = {key: dict(v) if isinstance(v, dict) else v for key, v in tables[agent].items()}
    return {"env": env, "agent": agent, **fields}


def override(preset: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """Return ``preset`` with ``values`` winning key by key, inside its two tables too.

    ``env_options`` and ``agent_params`` given in ``values`` replace the preset's
    entries one key at a time, so that ``agent_params={"rank": 4}`` keeps the
    preset's other agent parameters, as ``--set rank=4`` does.
    """
    merged = {**preset, **values}
    for table in ("env_options", "agent_params"):
        if isinstance(preset.get(table), dict) and isinstance(values.get(table), dict):
            merged[table] = {**preset[table], **values[table]}
    return merged
