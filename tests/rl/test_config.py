import dataclasses
import json
from dataclasses import dataclass
from typing import Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rl.runs.config import (
    ConfigError,
    TrainConfig,
    agent_spec,
    build_dataclass,
    effective_config,
    load_config_file,
    parse_assignment,
    resolve_settings,
)


@dataclass(frozen=True)
class Example:
    rank: int = 2
    alpha: float = 0.5
    flag: bool = False
    name: str = "a"
    bins: tuple[int, ...] = (3, 4)
    rule: Literal["paper", "released"] = "paper"
    limit: float | None = None

    def __post_init__(self):
        if self.rank < 1:
            raise ValueError(f"The 'rank' parameter must be an int >= 1. Got {self.rank} instead.")


def test_types_are_checked_and_coerced():
    built = build_dataclass(Example, {"alpha": 1, "bins": [5, 6, 7], "limit": 3, "flag": True})
    assert built.alpha == 1.0 and isinstance(built.alpha, float)
    assert built.bins == (5, 6, 7)
    assert built.limit == 3.0 and built.flag is True
    assert build_dataclass(Example, {"limit": None}).limit is None


@pytest.mark.parametrize(
    ("values", "key"),
    [
        ({"rank": "10"}, "rank"),
        ({"rank": 1.5}, "rank"),
        ({"rank": True}, "rank"),
        ({"alpha": "x"}, "alpha"),
        ({"flag": 1}, "flag"),
        ({"bins": [1, "a"]}, "bins"),
        ({"bins": 3}, "bins"),
        ({"rule": "other"}, "rule"),
        ({"limit": "no"}, "limit"),
        ({"rnak": 3}, "rnak"),
        ({"rank": 0}, "rank"),
    ],
)
def test_bad_values_name_the_key(values, key):
    with pytest.raises(ConfigError, match=f"'{key}'"):
        build_dataclass(Example, values)


def test_train_config_values():
    config = build_dataclass(TrainConfig, {"env": "cartpole", "agent": "random", "out": "x"})
    assert (config.seeds, config.seed, config.eval_every, config.eval_episodes) == (1, 0, 10, 1)
    for key, value in [
        ("seeds", 0),
        ("seed", -1),
        ("episodes", 0),
        ("eval_every", -1),
        ("eval_episodes", 0),
        ("checkpoint_every", 0),
    ]:
        with pytest.raises(ConfigError, match=f"'{key}'"):
            build_dataclass(TrainConfig, {"env": "e", "agent": "a", "out": "o", key: value})
    with pytest.raises(ConfigError, match="'out'"):
        build_dataclass(TrainConfig, {"env": "e", "agent": "a"})
    with pytest.raises(ConfigError, match="'env_options'"):
        build_dataclass(TrainConfig, {"env": "e", "agent": "a", "out": "o", "env_options": 3})


def test_load_toml_and_json(tmp_path):
    toml = tmp_path / "run.toml"
    toml.write_text('env = "cartpole"\nseeds = 4\n[agent_params]\ngamma = 0.9\n')
    assert load_config_file(toml) == {"env": "cartpole", "seeds": 4, "agent_params": {"gamma": 0.9}}
    js = tmp_path / "run.json"
    js.write_text(json.dumps({"env": "pendulum"}))
    assert load_config_file(js) == {"env": "pendulum"}
    broken = tmp_path / "broken.toml"
    broken.write_text("env = \n")
    with pytest.raises(ConfigError, match="broken.toml"):
        load_config_file(broken)
    with pytest.raises(ConfigError, match="does not exist"):
        load_config_file(tmp_path / "missing.json")
    yaml = tmp_path / "run.yaml"
    yaml.write_text("env: cartpole\n")
    with pytest.raises(ConfigError, match=".toml or .json"):
        load_config_file(yaml)


def test_parse_assignment():
    assert parse_assignment("rank=10") == ("rank", 10)
    assert parse_assignment("alpha=0.005") == ("alpha", 0.005)
    assert parse_assignment("bins=[10, 20]") == ("bins", [10, 20])
    assert parse_assignment("rule=released") == ("rule", "released")
    assert parse_assignment("flag=true") == ("flag", True)
    with pytest.raises(ConfigError):
        parse_assignment("rank")


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("[" * 100_000, "is nested deeper than 64 levels"),
        ("[" * 65 + "]" * 65, "is nested deeper than 64 levels"),
        ("9" * 4301, "holds an integer longer than 4300 digits"),
    ],
)
def test_deep_or_huge_set_values_are_config_errors(value, problem):
    with pytest.raises(ConfigError) as refused:
        parse_assignment(f"rank={value}")
    assert str(refused.value) == f"The value of 'rank' {problem}."
    deepest = "[" * 64 + "]" * 64
    assert parse_assignment(f"bins={deepest}") == ("bins", json.loads(deepest))


@pytest.mark.parametrize(
    ("suffix", "text", "problem"),
    [
        (".toml", "env = " + "[" * 100_000 + "]" * 100_000, "is nested deeper than 64 levels"),
        (".toml", "a = " + "{b = " * 5000 + "1" + "}" * 5000, "is nested deeper than 64 levels"),
        (".toml", ".".join(["a"] * 100_000) + " = 1", "is nested deeper than 64 levels"),
        (".toml", "[" + ".".join(["'a'"] * 65) + "]", "is nested deeper than 64 levels"),
        (".toml", "seed = " + "1" * 5000, "holds an integer longer than 4300 digits"),
        (".toml", "seed = 0x" + "f" * 4000, "holds an integer longer than 4300 digits"),
        (
            ".json",
            '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}",
            "is nested deeper than 64 levels",
        ),
        (".json", '{"seed": ' + "1" * 5000 + "}", "holds an integer longer than 4300 digits"),
    ],
)
def test_deep_or_huge_config_files_are_config_errors(tmp_path, suffix, text, problem):
    path = tmp_path / f"config{suffix}"
    path.write_text(text)
    with pytest.raises(ConfigError) as refused:
        load_config_file(path)
    assert str(refused.value) == f"Config file {str(path)!r} {problem}."


def test_dotted_values_and_quoted_dots_are_not_keys(tmp_path):
    path = tmp_path / "config.toml"
    dotted = ".".join(["a"] * 63)
    path.write_text(f'{dotted} = 1\nnote = "{"x." * 500}"\nbins = [{"1.5, " * 100}]\n')
    data = load_config_file(path)
    assert data["note"] == "x." * 500 and data["bins"] == [1.5] * 100
    for _ in range(62):
        data = data["a"]
    assert data == {"a": 1}


def test_agent_config_merges_preset_and_overrides():
    config = TrainConfig(
        env="cartpole", agent="tabular", out="o", agent_params={"gamma": 0.5, "max_entries": 10}
    )
    built = _agent_config(config)
    assert (built.gamma, built.max_entries) == (0.5, 10)
    with pytest.raises(ConfigError, match="'gama'"):
        _agent_config(
            TrainConfig(env="cartpole", agent="random", out="o", agent_params={"gama": 0.5})
        )
    with pytest.raises(ConfigError, match="'gamma'"):
        _agent_config(
            TrainConfig(env="cartpole", agent="random", out="o", agent_params={"gamma": 2.0})
        )
    with pytest.raises(ConfigError, match="'agent'"):
        _agent_config(TrainConfig(env="cartpole", agent="nope", out="o"))


@pytest.mark.parametrize(
    "key,value,shown",
    [("state_bins", 10, "10"), ("low", [-1, -2.5], "[-1,-2.5]"), ("max_episode_steps", 50, "50")],
)
def test_a_problem_option_given_as_an_agent_parameter_points_to_env_options(key, value, shown):
    config = TrainConfig(env="CartPole-v1", agent="teql", out="o", agent_params={key: value})
    with pytest.raises(ConfigError) as error:
        _agent_config(config)
    assert str(error.value) == (
        f"The '{key}' parameter belongs to the problem, not to agent 'teql': pass it with "
        f"--env-option {key}={shown} (env_options={{'{key}': {value!r}}} in Python)."
    )


def test_reading_problem_options_sit_below_user_options(monkeypatch):
    from rl.agents import readings

    reading = readings.Reading(
        "test", env_options={"cartpole": {"state_bins": 5, "index_rule": "round"}}
    )
    monkeypatch.setitem(readings.READINGS["random"], "paper", reading)
    config = TrainConfig(
        env="cartpole", agent="random", out="o", env_options={"index_rule": "floor"}
    )
    assert resolve_settings(config, build_problem=False).env_options == {
        "state_bins": 5,
        "index_rule": "floor",
    }


def test_effective_config_is_plain_json_and_rebuilds():
    config = TrainConfig(env="cartpole", agent="tabular", out="o", seeds=2)
    effective = effective_config(
        resolve_settings(config, build_problem=False), {"state_bins": (3, 3)}
    )
    text = json.dumps(effective)
    rebuilt = build_dataclass(TrainConfig, json.loads(text))
    assert _agent_config(rebuilt) == _agent_config(config)
    assert rebuilt.env_options == {"state_bins": [3, 3]}


# ----------------------------------------------------------------------------- fuzzing

AGENT_NAMES = ["random", "tabular", "teql", "teql-released", "tlr", "lora-vi", "dqn", "sac"]
ENV_NAMES = ["inventory", "lowrank", "cartpole", "pendulum"]
ENV_KWARGS = {
    "inventory": ["n_locations", "max_level", "max_order", "max_demand", "n_seasons",
                  "demand_means", "season_stay", "holding_cost", "gamma"],
    "lowrank": ["state_dims", "action_dims", "rank", "concentration", "model_seed", "gamma"],
    "cartpole": ["max_episode_steps"],
    "pendulum": ["max_episode_steps"],
}  # fmt: skip
TRAIN_KEYS = ["env", "agent", "seeds", "seed", "episodes", "eval_every", "eval_episodes",
              "checkpoint_every", "env_options", "agent_params", "out", "nonsense"]  # fmt: skip
SIZES = [-1, 0, 1, 2, 3, 7, 64, 10**5, 10**9, 2**63, 10**30]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from(SIZES),
    st.integers(-5, 50),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.5, 0.99, 1.5, -0.1, 1e-300, 1e300]),
    st.text(max_size=6),
)
junk = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=5,
)


def _toml_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return {"nan": "nan", "inf": "inf", "-inf": "-inf"}.get(repr(value), repr(value))
    if isinstance(value, (int, str)):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value if v is not None) + "]"
    items = (f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items() if v is not None)
    return "{" + ", ".join(items) + "}"


def _write_config(path, values):
    if path.suffix == ".json":
        path.write_text(json.dumps(values))
    else:
        lines = [f"{json.dumps(k)} = {_toml_value(v)}" for k, v in values.items() if v is not None]
        path.write_text("\n".join(lines) + "\n")


def _keys(value):
    """Every key of every table nested in ``value``, quoted as messages quote them."""
    if isinstance(value, dict):
        return {f"'{k}'" for k in value}.union(*map(_keys, value.values()))
    if isinstance(value, list):
        return set().union(*map(_keys, value))
    return set()


@st.composite
def configs(draw):
    """A valid small config with random keys replaced by junk, and --set overrides."""
    env = draw(st.sampled_from(ENV_NAMES))
    agent = draw(st.sampled_from(AGENT_NAMES))
    values = {"env": env, "agent": agent, "episodes": 3, "seeds": 2}
    mutated = set()
    for key in draw(st.lists(st.sampled_from(TRAIN_KEYS), max_size=2, unique=True)):
        values[key] = draw(junk)
        mutated.add(key)
    fields = [f.name for f in dataclasses.fields(agent_spec(agent).config_class)] + ["rnak"]
    agent_params = {}
    for key in draw(st.lists(st.sampled_from(fields), max_size=3, unique=True)):
        agent_params[key] = draw(st.one_of(junk, st.sampled_from(SIZES)))
        mutated.update({key, "agent_params"})
    env_options = {}
    options = ["state_bins", "action_bins", "index_rule", "normalization", "env_kwargs", "bogus"]
    for key in draw(st.lists(st.sampled_from(options), max_size=2, unique=True)):
        env_options[key] = draw(junk)
        mutated.update({key, "env_options"})
    if draw(st.booleans()):
        env_kwargs = {}
        for key in draw(st.lists(st.sampled_from(ENV_KWARGS[env]), min_size=1, max_size=2)):
            env_kwargs[key] = draw(st.one_of(junk, st.sampled_from(SIZES)))
            mutated.update({key, "env_kwargs", "env_options"})
        env_options["env_kwargs"] = env_kwargs
    if agent_params and not isinstance(values.get("agent_params"), dict | type(None)):
        values["agent_params"] = agent_params
    else:
        values.setdefault("agent_params", agent_params)
    values.setdefault("env_options", env_options)
    sets = []
    if agent_params and draw(st.booleans()):  # pass some through --set instead of the file
        key = draw(st.sampled_from(sorted(agent_params)))
        if isinstance(values["agent_params"], dict):
            value = values["agent_params"].pop(key, agent_params[key])
            sets.append(f"{key}={json.dumps(value)}")
    return values, sets, mutated | {"config"}


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=120)
@given(case=configs(), suffix=st.sampled_from([".json", ".toml"]))
def test_random_configs_build_or_raise_config_error_naming_the_key(tmp_path, case, suffix):
    from rl.runs.training import build
    from rl.train import build_parser, config_from_args

    values, sets, mutated = case
    mutated = mutated | _keys(values)  # junk tables bring their own (junk) keys
    path = tmp_path / f"run{suffix}"
    _write_config(path, values)
    argv = ["--config", str(path), "--out", str(tmp_path / "out"), *(f"--set={s}" for s in sets)]
    try:
        runner, _ = build(config_from_args(build_parser().parse_args(argv)))
    except ConfigError as error:
        message = str(error)
        assert "\n" not in message
        assert any(key in message for key in mutated), (message, mutated)
        return
    runner.close()


@pytest.mark.parametrize(
    ("values", "key"),
    [
        ({"seeds": 10**9}, "seeds"),  # 4 TB at REPLICA_OVERHEAD_BYTES each
        ({"agent": "teql", "agent_params": {"rank": 10**6}}, "rank"),
        ({"agent": "teql", "agent_params": {"rank": 4000}, "seeds": 1000,
          "env_options": {"state_bins": 10_000}}, "rank"),  # 1.2 TB of factors
        ({"env_options": {"state_bins": 10**7}}, "state_bins"),
        ({"agent": "tabular", "agent_params": {"max_entries": 10**15},
          "env_options": {"state_bins": [1000, 1000, 100, 10]}}, "max_entries"),  # 160 GB
        ({"env": "lowrank", "env_options": {"env_kwargs": {"state_dims": [10**4] * 3}}},
         "state_dims"),
        ({"env": "inventory", "env_options": {"env_kwargs": {"max_demand": 10**9}}},
         "max_demand"),
        ({"agent": "dqn", "agent_params": {"hidden": 10**9}}, "hidden"),
        ({"agent": "sac", "agent_params": {"buffer_size": 10**13}}, "buffer_size"),
    ],
)  # fmt: skip
def test_huge_sizes_are_config_errors_checked_up_front(values, key):
    from rl.runs.training import build

    config = {"env": "cartpole", "agent": "random", "out": "unused", **values}
    with pytest.raises(ConfigError, match=f"'{key}'"):
        build(build_dataclass(TrainConfig, config))


def _agent_config(config):
    """The effective agent config of ``config`` (`rl.runs.config.resolve_settings`)."""
    return resolve_settings(config, build_problem=False).agent


@pytest.mark.parametrize("name", ["episodes", "eval_every", "eval_episodes", "checkpoint_every"])
def test_episode_counts_past_the_int64_loops_are_refused(name: str) -> None:
    TrainConfig(env="cartpole", agent="tlr", out="x", **{name: 2**62})  # the largest
    with pytest.raises(ConfigError, match=rf"'{name}' parameter must be an int in \[\d, {2**62}\]"):
        TrainConfig(env="cartpole", agent="tlr", out="x", **{name: 10**23})


def test_the_training_command_and_a_learner_refuse_an_endless_budget_in_one_line(
    tmp_path, capsys
) -> None:
    import rl
    from rl.train import main as train_main

    argv = ["--env", "cartpole", "--agent", "tlr", "--episodes", "1", "--out", str(tmp_path / "r")]
    assert train_main([*argv, "--eval-every", str(10**23)]) == 2
    assert "'eval_every' parameter must be an int in" in capsys.readouterr().err
    model = rl.Tabular("FrozenLake-v1", seeds=1, verbose=0)
    with pytest.raises(ConfigError, match="'episodes' parameter must be an int in"):
        model.learn(episodes=10**30)
    assert model.episodes_done == 0
