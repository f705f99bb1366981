"""The search space file of ``python -m rl.tune``: the parameters a trial draws and their ranges.

The file is TOML with one table per parameter under ``[params]``::

    [params.c]                          # an agent parameter (a field of the agent's config)
    type = "float"                      # float | int | categorical
    low = 0.5
    high = 20.0
    log = true                          # optional: draw on a log scale (low > 0)

    [params."env_options.state_bins"]   # an option of the problem (rl.problems.make_problem)
    type = "int"
    low = 4
    high = 8
    step = 2                            # optional, int and float: the grid's spacing

    [params.update]
    type = "categorical"
    choices = ["stable", "paper"]       # strings, numbers or booleans

A name is an agent parameter, as ``--set NAME=VALUE`` of ``rl.train`` takes
(``agent_params.NAME`` is the same), or ``env_options.NAME``, as
``--env-option NAME=VALUE``. `check_space` builds the
run with each end of every range and with every choice, so that a parameter the
agent or problem does not have, or a value of the wrong type, is refused before
anything runs.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from rl.runs.config import ConfigError, TrainConfig
from rl.runs.documents import DocumentError, parse_toml, tomllib
from rl.runs.training import build

KINDS = ("float", "int", "categorical")
"""Types of parameter a search space may hold."""

_KEYS = {
    "float": ("type", "low", "high", "log", "step"),
    "int": ("type", "low", "high", "log", "step"),
    "categorical": ("type", "choices"),
}

ENV_OPTIONS = "env_options."
"""Prefix of a parameter name that sets an option of the problem instead of the agent."""

AGENT_PARAMS = "agent_params."
"""Optional prefix of an agent parameter's name (as in a grid file of ``rl.sweep``)."""


class Param(NamedTuple):
    """One parameter of a search space.

    Attributes
    ----------
    name : str
        As in the file: ``c`` (agent) or ``env_options.state_bins`` (problem).
    kind : str
        One of `KINDS`.
    low, high : float or int or None
        The range, both ends included (None for a categorical).
    log : bool
        Draw on a log scale.
    step : float or int or None
        Spacing of the values drawn (None: any value in the range).
    choices : tuple or None
        The values of a categorical.
    """

    name: str
    kind: str
    low: float | int | None = None
    high: float | int | None = None
    log: bool = False
    step: float | int | None = None
    choices: tuple | None = None

    @property
    def table(self) -> str:
        """The `TrainConfig` table the parameter goes into: ``agent_params`` or ``env_options``."""
        return "env_options" if self.name.startswith(ENV_OPTIONS) else "agent_params"

    @property
    def key(self) -> str:
        """The parameter's key in `table`."""
        return self.name.removeprefix(ENV_OPTIONS).removeprefix(AGENT_PARAMS)

    def probes(self) -> tuple:
        """Values `check_space` builds the run with: both ends, or every choice."""
        return self.choices if self.kind == "categorical" else (self.low, self.high)

    def describe(self) -> dict[str, Any]:
        """Return the parameter as a dict that a JSON round trip keeps (recorded in the study)."""
        return {
            k: list(v) if isinstance(v, tuple) else v
            for k, v in self._asdict().items()
            if v is not None
        }


def _number(value: Any, integer: bool) -> bool:
    kinds = int if integer else (int, float)
    return isinstance(value, kinds) and not isinstance(value, bool)


def _param(name: str, table: Any, where: str) -> Param:
    """Return the `Param` of one ``[params.NAME]`` table; raise `ConfigError` naming the fault."""
    where = f"[params.{json.dumps(name) if '.' in name else name}] in {where}"
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where} must be a table (type = ..., low = ..., high = ...).")
    kind = table.get("type")
    if kind not in KINDS:
        raise ConfigError(f"{where}: 'type' must be one of {', '.join(KINDS)}. Got {kind!r}.")
    unknown = sorted(set(table) - set(_KEYS[kind]))
    if unknown:
        raise ConfigError(
            f"{where}: unknown key '{unknown[0]}' for a {kind}; allowed: {', '.join(_KEYS[kind])}."
        )
    if kind == "categorical":
        choices = table.get("choices")
        if not isinstance(choices, list) or not choices:
            raise ConfigError(f"{where}: 'choices' must be a non-empty list of values.")
        for choice in choices:
            if not isinstance(choice, (str, int, float, bool)):
                raise ConfigError(
                    f"{where}: every choice must be a string, number or boolean. "
                    f"Got {choice!r} ({type(choice).__name__})."
                )
        if len({json.dumps(c) for c in choices}) < len(choices):
            raise ConfigError(f"{where}: 'choices' holds a value twice.")
        return Param(name, kind, choices=tuple(choices))
    integer = kind == "int"
    for end in ("low", "high"):
        if not _number(table.get(end), integer):
            raise ConfigError(
                f"{where}: '{end}' must be {'an integer' if integer else 'a number'}. "
                f"Got {table.get(end)!r}."
            )
    low, high, log, step = table["low"], table["high"], table.get("log", False), table.get("step")
    if not low < high:
        raise ConfigError(f"{where}: the range is empty: low ({low}) must be below high ({high}).")
    if not isinstance(log, bool):
        raise ConfigError(f"{where}: 'log' must be true or false. Got {log!r}.")
    if log and low <= 0:
        raise ConfigError(f"{where}: a log range needs low > 0. Got low = {low}.")
    if step is not None:
        if not _number(step, integer) or step <= 0:
            raise ConfigError(f"{where}: 'step' must be a positive {kind}. Got {step!r}.")
        if log:
            raise ConfigError(f"{where}: 'step' and 'log' cannot be combined; drop one.")
    if integer:
        return Param(name, kind, int(low), int(high), log, step)
    return Param(name, kind, float(low), float(high), log, None if step is None else float(step))


def read_space(path: str | Path) -> list[Param]:
    """Read and check the form of a search space file (its values are checked by `check_space`).

    Raises
    ------
    ConfigError
        If the file is missing or not TOML, or a table is malformed: an unknown
        key, a type other than `KINDS`, an empty range, ``log`` with low <= 0,
        choices that are not a non-empty list of strings, numbers or booleans.
    """
    path = Path(path)
    where = f"the search space file {str(path)!r}"
    if not path.is_file():
        raise ConfigError(f"The search space file {str(path)!r} does not exist.")
    try:
        data = parse_toml(path.read_bytes().decode("utf-8"), where)
    except DocumentError as error:
        raise ConfigError(str(error)) from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"Cannot parse {where}: {error}") from None
    unknown = sorted(set(data) - {"params"})
    if unknown:
        raise ConfigError(f"Unknown section '{unknown[0]}' in {where}; expected [params.NAME].")
    params = data.get("params")
    if not isinstance(params, Mapping) or not params:
        raise ConfigError(f"{where} names no parameter; add a table [params.NAME].")
    return [_param(name, table, where) for name, table in params.items()]


def with_values(base: TrainConfig, params: list[Param], values: Mapping[str, Any]) -> TrainConfig:
    """Return ``base`` with each parameter's value set in its table.

    Parameters
    ----------
    base : TrainConfig
        The run settings shared by every trial.
    params : list of Param
    values : mapping
        Parameter name -> value (as Optuna's ``trial.params``).
    """
    tables = {"agent_params": dict(base.agent_params), "env_options": dict(base.env_options)}
    for param in params:
        tables[param.table][param.key] = values[param.name]
    return dataclasses.replace(base, **tables)


def check_space(base: TrainConfig, params: list[Param]) -> None:
    """Build the run (agent and environment, no training) with each probe of every parameter.

    Raises
    ------
    ConfigError
        Naming the parameter and value: an agent parameter the agent does not
        have, a problem option the problem does not take, a value of the wrong
        type or out of the parameter's bounds.
    """
    for param in params:
        for value in param.probes():
            values = {p.name: p.probes()[0] for p in params} | {param.name: value}
            try:
                runner, _ = build(with_values(base, params, values))
                runner.close()
            except (ConfigError, ValueError, TypeError, ImportError) as error:
                raise ConfigError(
                    f"The search space parameter '{param.name}' = {value!r} is refused: {error}"
                ) from None
