"""Training configuration: the `TrainConfig` dataclass, config files and validation.

Values are merged in this order, later ones winning:

* run settings: `TrainConfig` defaults <- ``--preset`` (environment, agent,
  reading) <- config file <- command-line flags;
* agent hyperparameters: the agent config's defaults <- the reading's
  overrides for the problem (`rl.agents.readings.READINGS`) <- the problem's own
  discount (exact-model problems: ``gamma``) <- the file's ``agent_params``
  <- ``--set key=value``;
* environment options: the reading's problem options (`rl.agents.readings`) <- the
  file's ``env_options`` <- ``--env-option``.

`TrainConfig` holds the run settings as given and checks only its own values;
`resolve_settings` resolves the rest in one pass, once per run: the agent name
(an alias such as ``teql-released`` becomes the agent and its reading) and the
reading, looked up once; the agent config, built once; the problem options and
the problem. The runner, the executor and ``rl.load_run`` read its `Settings`.
Every mapping is checked against the fields of the frozen dataclass it is meant
for: unknown keys, wrong types and impossible values raise `ConfigError` with a
message that names the key, which the CLI turns into exit code 2.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from rl.runs.documents import DocumentError, parse_json, parse_toml, tomllib
from rl.seeding import MAX_SEED
from rl.validation import check_int

MAX_COUNT = 2**62
"""The largest episode count a configuration takes (``episodes``, ``eval_every``,
``eval_episodes``, ``checkpoint_every``): the compiled loops count episodes in int64, and
a sum of two counts must not overflow."""


class ConfigError(ValueError):
    """A configuration value is unknown, of the wrong type or impossible."""


@dataclass(frozen=True)
class TrainConfig:
    """Settings of one training run (everything except the agent's hyperparameters)."""

    env: str
    """Problem name (cartpole, pendulum, highway, inventory, lowrank) or a full Gymnasium id."""
    agent: str
    """Agent name from `rl.agents.registry.AGENTS` (teql, tlr, ..., random) or an alias
    (``teql-released`` = teql with reading released); `resolve_settings` returns the
    config with the agent's name and the alias's reading in its place."""
    out: str
    """Run directory: metrics.csv, config.json, checkpoint.npz and learning_curve.png go here."""
    seeds: int = 1
    """Number of replicas B trained in lockstep (>= 1); replica i uses seed ``seed + i``.
    No constant caps it: `rl.runs.training.build` refuses more replicas than fit in half of
    the machine's memory (`rl.validation.check_replicas`)."""
    seed: int = 0
    """First integer seed (>= 0); the last, ``seed + seeds - 1``, at most
    `rl.seeding.MAX_SEED` (2**63 - 1)."""
    episodes: int = 1000
    """Number of training episodes of every replica (>= 1)."""
    eval_every: int = 10
    """A greedy evaluation after every training episode whose index is a multiple of this
    (the paper's protocol is 10); 0 disables evaluation."""
    eval_episodes: int = 1
    """Greedy episodes per evaluation; their mean return is recorded (>= 1)."""
    checkpoint_every: int = 50
    """Write a checkpoint after every this many training episodes (>= 1), and on interruption."""
    keep_best: bool = False
    """Keep each replica's agent state after its best greedy evaluation so far in the
    checkpoint (`rl.runs.training.BestStates`; ``python -m rl.evaluate RUN_DIR --best``
    plays it); needs ``eval_every`` >= 1. The replicas then also wait for each other at
    every evaluation."""
    env_options: dict = field(default_factory=dict)
    """Keyword options of `rl.problems.make_problem` (index_rule, state_bins, action_bins, ...)."""
    agent_params: dict = field(default_factory=dict)
    """Overrides of the agent's config fields, applied on top of the reading's settings."""
    backend: str | None = None
    """Array backend of a CP-tensor agent (teql, tlr): ``numpy``, ``pytorch`` or ``jax``
    (the agent's ``backend``; None keeps the agent's, NumPy). Resolved into the agent's
    config by `resolve_settings`; an ``agent_params`` backend that differs is refused."""
    device: str | None = None
    """Device of the agent: ``cpu``, ``cuda`` or ``cuda:N`` (the agent's ``device``; None
    keeps the agent's, the CPU); for teql and tlr it needs backend pytorch or jax."""
    reading: str | None = None
    """Which settings the agent starts from (`rl.agents.readings.READINGS`): ``paper`` (the
    paper's text and tables), ``released`` (the authors' released code) or, for TEQL,
    ``stable``; None takes `rl.agents.readings.default_reading` (TEQL ``stable``, every
    other agent ``paper``); an alias such as ``teql-released`` implies its reading.
    `resolve_settings` checks it and returns the config with the reading in place."""

    def __post_init__(self) -> None:
        for name in ("env", "agent", "out"):
            if not getattr(self, name):
                raise ConfigError(f"The '{name}' parameter must be a non-empty string.")
        bounds = {
            "seeds": (1, None),
            "seed": (0, None),
            "episodes": (1, MAX_COUNT),
            "eval_every": (0, MAX_COUNT),
            "eval_episodes": (1, MAX_COUNT),
            "checkpoint_every": (1, MAX_COUNT),
        }
        for name, (low, high) in bounds.items():
            try:
                check_int(name, getattr(self, name), low, high)
            except ValueError as error:
                raise ConfigError(str(error)) from None
        if self.keep_best and self.eval_every == 0:
            raise ConfigError(
                "The 'keep_best' parameter needs evaluations to choose the best state by; "
                "set 'eval_every' to 1 or more."
            )
        if self.seed + self.seeds - 1 > MAX_SEED:  # the last replica's seed is an int64
            raise ConfigError(
                f"The 'seed' parameter must be <= 2**63 - seeds = {MAX_SEED + 1 - self.seeds} "
                f"with seeds = {self.seeds}. Got {self.seed} instead."
            )


def _type_name(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")


def _coerce(value: Any, hint: Any, key: str) -> Any:
    """Return ``value`` converted to ``hint`` or raise `ConfigError` naming ``key``."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    bad = ConfigError(
        f"The '{key}' parameter must be of type {_type_name(hint)}. "
        f"Got {value!r} ({type(value).__name__}) instead."
    )
    if hint is Any or hint is object:
        return value
    if origin is typing.Literal:
        if value in args:
            return value
        raise ConfigError(
            f"The '{key}' parameter must be one of {list(args)}. Got {value!r} instead."
        )
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for option in (a for a in args if a is not type(None)):
            try:
                return _coerce(value, option, key)
            except ConfigError:
                continue
        raise bad
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise bad
    if hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise bad
    if hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise bad
    if hint is str:
        if isinstance(value, str):
            return value
        raise bad
    if origin is tuple or hint is tuple:
        if not isinstance(value, (list, tuple)):
            raise bad
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_coerce(item, args[0], key) for item in value)
        if args and len(args) != len(value):
            raise bad
        return (
            tuple(_coerce(v, a, key) for v, a in zip(value, args, strict=True))
            if args
            else tuple(value)
        )
    if origin is list or hint is list:
        if not isinstance(value, (list, tuple)):
            raise bad
        return [_coerce(item, args[0], key) for item in value] if args else list(value)
    if origin is dict or hint is dict:
        if not isinstance(value, Mapping):
            raise bad
        return dict(value)
    return value


def checked_values(cls: type, values: Mapping[str, Any], what: str | None = None) -> dict:
    """Check the keys and types of ``values`` against the fields of the dataclass ``cls``.

    Nothing is constructed, so the values' own checks (``cls.__post_init__``) are not
    run: `build_dataclass` runs them.

    Parameters
    ----------
    cls : dataclass type
        A (frozen) config dataclass.
    values : mapping
        Field name -> value; missing fields take their defaults.
    what : str, optional
        How to call the config in messages (default: the class name).

    Returns
    -------
    dict
        The keyword arguments of ``cls``, each value converted to its field's type.

    Raises
    ------
    ConfigError
        Naming the first unknown key, missing required key or wrong type.
    """
    what = what or cls.__name__
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    hints = typing.get_type_hints(cls)
    for key in values:
        if key not in fields:
            known = ", ".join(sorted(fields))
            raise ConfigError(f"Unknown parameter '{key}' for {what}; known parameters: {known}.")
    for name, spec in fields.items():
        no_default = (
            spec.default is dataclasses.MISSING and spec.default_factory is dataclasses.MISSING
        )
        if no_default and name not in values:
            raise ConfigError(f"The '{name}' parameter of {what} is required.")
    return {key: _coerce(value, hints[key], key) for key, value in values.items()}


def build_dataclass(cls: type, values: Mapping[str, Any], what: str | None = None) -> Any:
    """Check ``values`` against the fields of the dataclass ``cls`` and construct it.

    Parameters
    ----------
    cls : dataclass type
        A (frozen) config dataclass; its ``__post_init__`` checks values.
    values : mapping
        Field name -> value; missing fields take their defaults.
    what : str, optional
        How to call the config in messages (default: the class name).

    Returns
    -------
    instance of ``cls``

    Raises
    ------
    ConfigError
        Naming the first unknown key, missing required key, wrong type
        (`checked_values`) or impossible value.
    """
    kwargs = checked_values(cls, values, what)
    try:
        return cls(**kwargs)
    except ConfigError:
        raise
    except (ValueError, TypeError) as error:
        raise ConfigError(f"Invalid {what or cls.__name__}: {error}") from None


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read a TOML (``.toml``) or JSON (``.json``) config file into a dict.

    The top-level keys are `TrainConfig` fields; ``agent_params`` and
    ``env_options`` are tables (TOML) or objects (JSON).

    Raises
    ------
    ConfigError
        If the file is missing, has another suffix, or does not parse, or is
        nested deeper than `rl.runs.documents.MAX_NESTING` levels or holds an
        integer too long (`rl.runs.documents.check_document`).
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"Config file {str(path)!r} does not exist.")
    what = f"Config file {str(path)!r}"
    try:
        if path.suffix == ".toml":
            data = parse_toml(path.read_bytes().decode("utf-8"), what)
        elif path.suffix == ".json":
            data = parse_json(path.read_text(encoding="utf-8"), what)
        else:
            raise ConfigError(f"Config file {str(path)!r} must end in .toml or .json.")
    except DocumentError as error:
        raise ConfigError(str(error)) from None
    except (tomllib.TOMLDecodeError, json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"Cannot parse config file {str(path)!r}: {error}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"Config file {str(path)!r} must hold a table/object at the top level.")
    return data


def parse_assignment(text: str) -> tuple[str, Any]:
    """Split ``key=value`` into the key and a value read as JSON, else kept as a string.

    ``rank=10``, ``alpha=0.5``, ``flag=true`` and ``bins=[10, 20]`` give an int, a
    float, a bool and a list; ``reading=released`` gives the string ``"released"``.

    Raises
    ------
    ConfigError
        If there is no ``=``, the key is empty, or the value is nested too
        deeply or holds an integer too long (`rl.runs.documents.check_document`).
    """
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"Expected KEY=VALUE, got {text!r}.")
    try:
        value = parse_json(raw, f"The value of '{key}'")
    except DocumentError as error:
        raise ConfigError(str(error)) from None
    except json.JSONDecodeError:
        value = raw
    return key, value


def agent_spec(agent: str) -> Any:
    """Return the `rl.agents.registry.AgentSpec` of a registered agent (or alias).

    Raises
    ------
    ConfigError
        If the name is unknown or the agent's module cannot be imported.
    """
    from rl.agents.registry import agent_spec as lookup

    try:
        return lookup(agent)
    except ValueError as error:
        raise ConfigError(f"The 'agent' parameter is invalid: {error}") from None
    except ImportError as error:
        raise ConfigError(f"Agent {agent!r} is not available here: {error}") from None


def recorded_run_config(values: Mapping[str, Any]) -> dict[str, Any]:
    """Return a recorded run's config (its ``config.json``, a checkpoint's) ready to continue.

    A run records every parameter of its agent's config (`effective_config`). A parameter
    added to that config after the run was written is missing from the record: it takes
    its dataclass default, which keeps the behaviour of the code that wrote the run (a
    field is added with the default that does), not the value a reading chooses now.
    Values that are not a recorded run's (an unknown agent, agent parameters that are
    not a table) are returned as they are, for `TrainConfig` to refuse. A run recorded
    without ``keep_best`` kept no best state (False). Likewise a
    Highway run recorded without a simulator (``env_kwargs["engine"]``) ran on
    highway-env, the default of the code that wrote it, and continues there.
    """
    values = _recorded_simulator(dict(values))
    values.setdefault("keep_best", False)  # recorded by runs written before it existed
    params = values.get("agent_params")
    if not isinstance(params, Mapping) or not isinstance(values.get("agent"), str):
        return values
    try:
        spec = agent_spec(values["agent"])
    except ConfigError:
        return values
    defaults = {
        f.name: f.default
        for f in dataclasses.fields(spec.config_class)
        if f.default is not dataclasses.MISSING and f.name not in params
    }
    values["agent_params"] = {**to_jsonable(defaults), **params}
    return values


def _recorded_simulator(values: dict[str, Any]) -> dict[str, Any]:
    """Return ``values`` with ``engine 'reference'`` where a Highway run records no engine."""
    options = values.get("env_options", {})
    if not isinstance(values.get("env"), str) or problem_name(values["env"]) != "highway":
        return values
    if not isinstance(options, Mapping) or not isinstance(options.get("env_kwargs", {}), Mapping):
        return values
    env_kwargs = dict(options.get("env_kwargs", {}))
    env_kwargs.setdefault("engine", "reference")
    return {**values, "env_options": {**options, "env_kwargs": env_kwargs}}


def problem_name(env: str) -> str:
    """Return the short problem name of ``env`` (``rl/ContinuousCartPole-v0`` -> ``cartpole``).

    Readings are keyed by short names; an id that has none is returned unchanged.
    """
    from rl.problems import ENVIRONMENTS

    return next((name for name, entry in ENVIRONMENTS.items() if entry.env_id == env), env)


class Settings(NamedTuple):
    """Everything a run's configuration resolves to, computed once by `resolve_settings`."""

    config: TrainConfig
    """The run settings with the agent's name and reading in place (`resolve_agent`)."""
    spec: Any
    """The agent's `rl.agents.registry.AgentSpec`: its agent and config classes."""
    agent: Any
    """The effective agent config, an instance of ``spec.config_class``."""
    env_options: dict[str, Any]
    """The effective options of `rl.problems.make_problem`."""
    problem: Any
    """The `rl.problems.Problem`, or None when `resolve_settings` was asked not to build it."""


def resolve_agent(config: TrainConfig) -> tuple[TrainConfig, Any, Any]:
    """Resolve the agent and reading of ``config``, looking the reading up once.

    An alias (``teql-released``) stands for an agent and a reading
    (`rl.agents.registry.ALIASES`); no reading takes the agent's default
    (`rl.agents.readings.default_reading`).

    Parameters
    ----------
    config : TrainConfig

    Returns
    -------
    config : TrainConfig
        A new config with the agent's registered name and the reading's name in
        place (``config`` itself is not changed).
    spec : rl.agents.registry.AgentSpec
        The agent's classes.
    reading : rl.agents.readings.Reading
        The reading's config overrides and problem options.

    Raises
    ------
    ConfigError
        If the agent is unknown or unavailable, or has no such reading, or the
        reading conflicts with the one an alias means.
    """
    from rl.agents import readings
    from rl.agents.registry import canonical

    agent, implied = canonical(config.agent)
    if implied is not None and config.reading not in (None, implied):
        raise ConfigError(
            f"The 'reading' parameter {config.reading!r} conflicts with agent {config.agent!r}, "
            f"which means reading {implied!r}."
        )
    spec = agent_spec(agent)
    name = config.reading or implied or readings.default_reading(agent)
    try:
        chosen = readings.reading(agent, name)
    except ValueError as error:
        raise ConfigError(str(error)) from None
    return dataclasses.replace(config, agent=agent, reading=name), spec, chosen


def resolve_settings(
    config: TrainConfig, *, build_problem: bool = True, import_env_module: bool = True
) -> Settings:
    """Resolve a run's agent, agent config and problem options, in one place and once.

    The agent and reading first (`resolve_agent`), then the agent config: the
    agent config's defaults <- the reading's overrides for the problem
    (`rl.agents.readings.READINGS`; those that depend on the problem's shape,
    `Reading.one_state_mode`, and on its reward bound, `Reading.per_reward_bound`, once
    it is built) <- the problem's own discount
    (``gamma``, exact-model problems only, so only when the problem is built)
    <- ``config.agent_params`` (the config file's, then ``--set``), built once.
    Problem options: the reading's problem options (LoRa-VI's coarse grid, for
    example) <- ``config.env_options`` (the file's, then ``--env-option``). The
    agent parameters' names and types are checked before the problem is built,
    so that a typo is reported before a slow environment is made; their values
    when the config is built.

    Parameters
    ----------
    config : TrainConfig
    build_problem : bool, default True
        Whether to build the problem (and apply its discount); False resolves
        the settings alone, without touching the environment.
    import_env_module : bool, default True
        Passed to `rl.problems.make_problem` (False for a configuration read
        from a run directory whose environment the user did not name).

    Returns
    -------
    Settings

    Raises
    ------
    ConfigError
        If the agent, its reading, its parameters, the environment or its
        options are invalid.
    rl.problems.from_gymnasium.EnvModuleRefused
        If ``import_env_module`` is False and the id's module is not imported yet.
    """
    from rl.problems import make_problem
    from rl.problems.from_gymnasium import EnvModuleRefused

    config, spec, chosen = resolve_agent(config)
    name = problem_name(config.env)
    fields = {f.name for f in dataclasses.fields(spec.config_class)}
    _refuse_problem_options(config.agent, config.agent_params, fields)
    values = {**chosen.agent_params(name), **_placement(config, fields)}
    what = f"agent {config.agent!r}"
    checked_values(spec.config_class, {**values, **config.agent_params}, what)
    env_options = {**chosen.problem_options(name), **config.env_options}
    problem = None
    if build_problem:
        try:
            problem = make_problem(config.env, import_env_module=import_env_module, **env_options)
        except EnvModuleRefused:
            raise
        except (ValueError, TypeError, ImportError) as error:
            raise ConfigError(f"The 'env' or 'env_options' parameter is invalid: {error}") from None
        shaped = chosen.agent_params(
            name, len(problem.state_dims), problem.reward_bound, problem.reward_size
        )
        values.update(shaped)  # by the problem's shape, reward bound and reward size
        if problem.discount is not None and "gamma" in fields:  # the problem's own discount
            values["gamma"] = float(problem.discount)
    agent = build_dataclass(spec.config_class, {**values, **config.agent_params}, what)
    return Settings(config, spec, agent, env_options, problem)


def _placement(config: TrainConfig, fields: set[str]) -> dict[str, str]:
    """Return the run's ``backend`` and ``device`` as agent parameters (those that are set).

    Raises
    ------
    ConfigError
        If one is set and the agent has no such parameter, or ``agent_params``
        sets it to another value.
    """
    placement = {}
    for key in ("backend", "device"):
        value = getattr(config, key)
        if value is None:
            continue
        if key not in fields:
            raise ConfigError(
                f"The '{key}' parameter does not apply to agent {config.agent!r}; "
                "the CP-tensor agents (teql, tlr) take backend and device."
            )
        if config.agent_params.get(key, value) != value:
            raise ConfigError(
                f"The '{key}' parameter is set twice, to {value!r} (--{key} or the config's "
                f"'{key}') and to {config.agent_params[key]!r} (--set {key}=... or the config's "
                f"agent_params); give it once, with --{key}."
            )
        placement[key] = value
    return placement


def _refuse_problem_options(agent: str, params: Mapping[str, Any], fields: set[str]) -> None:
    """Refuse an agent parameter that is an option of the problem, saying where it goes."""
    from rl.problems import make_problem

    signature = inspect.signature(make_problem).parameters.values()
    options = {p.name for p in signature if p.kind is p.KEYWORD_ONLY} - {"import_env_module"}
    for key, value in params.items():
        if key in options and key not in fields:
            shown = json.dumps(value, separators=(",", ":"))
            raise ConfigError(
                f"The '{key}' parameter belongs to the problem, not to agent {agent!r}: pass it "
                f"with --env-option {key}={shown} (env_options={{'{key}': {value!r}}} in Python)."
            )


def to_jsonable(value: Any) -> Any:
    """Convert dataclasses, tuples and numpy scalars to plain JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item):
        return value.item()
    return value


def effective_config(settings: Settings, env_options: Mapping[str, Any] | None = None) -> dict:
    """Return the dict written to ``config.json``.

    It is the run's `TrainConfig` with the full agent config and problem
    options in place of the overrides, so that ``--config config.json`` reruns
    the run. ``env_options`` replaces ``settings.env_options`` when given (the
    runner adds the options a problem chose itself, such as an estimated
    reward bound).
    """
    options = settings.env_options if env_options is None else env_options
    resolved = dataclasses.replace(
        settings.config,
        agent_params=to_jsonable(settings.agent),
        env_options=to_jsonable(dict(options)),
    )
    return to_jsonable(resolved)
