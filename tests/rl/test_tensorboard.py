import os
import sys

import numpy as np
import pytest

pytest.importorskip("tensorboard")

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import (  # noqa: E402
    masked_crc32c as tensorboard_crc,
)
from tensorboard.plugins.hparams import metadata as hparams_metadata  # noqa: E402

import rl  # noqa: E402
from rl import sweep as sweep_cli  # noqa: E402
from rl import train as train_cli  # noqa: E402
from rl.runs import tensorboard as board  # noqa: E402
from rl.runs import training  # noqa: E402
from rl.runs.config import ConfigError  # noqa: E402
from rl.runs.metrics import read_metrics  # noqa: E402
from rl.runs.rundir import RunDirError  # noqa: E402

TEQL_RUN = ["--env", "cartpole", "--agent", "teql", "--reading", "stable", "--seeds", "3"]


def _train(*args):
    return train_cli.main([*TEQL_RUN, "--no-progress", "--no-plot", *map(str, args)])


def _scalars(seed_dir):
    events = EventAccumulator(str(seed_dir), size_guidance={"scalars": 0})
    events.Reload()
    return events, {
        tag: ([s.step for s in events.Scalars(tag)], [s.value for s in events.Scalars(tag)])
        for tag in events.Tags()["scalars"]
    }


def _assert_events_equal_metrics(log_dir, metrics_csv, seeds):
    table = read_metrics(metrics_csv)
    for seed in seeds:
        _, scalars = _scalars(log_dir / f"seed_{seed}")
        rows = table["seed"] == seed
        episodes = table["episode"][rows].tolist()
        for tag, column in (("rollout/return", "return"), ("rollout/length", "length")):
            steps, values = scalars[tag]
            assert steps == episodes, tag
            np.testing.assert_array_equal(values, table[column][rows].astype(np.float32))
        greedy = table["greedy_return"][rows]
        evaluated = ~np.isnan(greedy)
        steps, values = scalars.get("eval/greedy_return", ([], []))
        assert steps == np.asarray(episodes)[evaluated].tolist()
        np.testing.assert_array_equal(values, greedy[evaluated].astype(np.float32))


def test_event_files_hold_the_rows_of_metrics_csv_and_the_hparams(tmp_path):
    out, logs = tmp_path / "teql-run", tmp_path / "logs"
    args = ("--episodes", 25, "--eval-every", 5, "--checkpoint-every", 10)
    assert _train(*args, "--out", out, "--tensorboard", logs) == 0
    log_dir = logs / "teql-run_1"
    assert sorted(p.name for p in log_dir.iterdir()) == ["seed_0", "seed_1", "seed_2"]
    _assert_events_equal_metrics(log_dir, out / "metrics.csv", [0, 1, 2])
    events, scalars = _scalars(log_dir / "seed_1")
    # the fused loop plays up to each checkpoint in one call: its state is logged there
    for name in ("step_size", "delta_q_mean", "factor_norm_0", "factor_norm_4"):
        steps, values = scalars[f"train/{name}"]
        assert steps == [10, 20, 25] and np.all(np.isfinite(values)), name
    assert scalars["train/step_size"][1][0] > scalars["train/step_size"][1][-1] > 0
    content = events.PluginTagToContent(hparams_metadata.PLUGIN_NAME)
    start = hparams_metadata.parse_session_start_info_plugin_data(
        content[hparams_metadata.SESSION_START_INFO_TAG]
    )
    assert start.group_name == "teql-run_1"
    assert start.hparams["seed"].number_value == 1
    assert start.hparams["agent_params.alpha0"].number_value == 0.5
    assert start.hparams["reading"].string_value == "stable"
    assert "out" not in start.hparams


def test_appending_while_a_stretch_is_filed_logs_its_diagnostics_at_its_last_episode(
    tmp_path, monkeypatch
):
    """Records are appended after every episode here; the fused loop's state still waits."""
    monkeypatch.setattr(board, "FLUSH_SECONDS", 0.0)
    logs = tmp_path / "logs"
    args = ("--episodes", 12, "--checkpoint-every", 6, "--out", tmp_path / "run")
    assert _train(*args, "--tensorboard", logs) == 0
    _, scalars = _scalars(logs / "run_1" / "seed_0")
    assert scalars["train/step_size"][0] == [6, 12]
    assert scalars["rollout/return"][0] == list(range(1, 13))


def test_a_resumed_run_drops_the_replayed_steps_and_equals_metrics_csv(tmp_path):
    out, logs = tmp_path / "run", tmp_path / "logs"
    flags = [*TEQL_RUN, "--episodes", "30", "--checkpoint-every", "10", "--out", str(out)]
    config = train_cli.config_from_args(train_cli.build_parser().parse_args(flags))
    runner, effective = training.build(config)

    def crash(log):
        if log.episode == 25:
            raise RuntimeError("stop here")

    log_dir = board.run_log_dir(logs, "run")
    with pytest.raises(RuntimeError):
        training.run(runner, config, effective, progress=crash, tensorboard=log_dir)
    runner.close()
    _, before = _scalars(log_dir / "seed_0")
    assert before["rollout/return"][0][-1] == 25  # beyond the checkpoint of episode 20
    assert _train("--resume", out, "--tensorboard", logs) == 0
    assert sorted(p.name for p in logs.iterdir()) == ["run_1"]
    assert len(list((log_dir / "seed_0").iterdir())) == 2
    _assert_events_equal_metrics(log_dir, out / "metrics.csv", [0, 1, 2])


def test_learners_log_as_stable_baselines3_names_the_directories(tmp_path):
    logs = tmp_path / "logs"
    options = {"seeds": 2, "checkpoint_every": 4, "eval_every": 3, "verbose": 0}
    options["tensorboard_log"] = logs
    model = rl.TEQL("cartpole", reading="stable", **options)
    model.learn(episodes=4).learn(episodes=4)
    rl.TEQL("cartpole", reading="stable", **options).learn(episodes=2, tb_log_name="short")
    rl.TEQL("cartpole", reading="stable", **options).learn(episodes=2)
    assert sorted(p.name for p in logs.iterdir()) == ["TEQL_1", "TEQL_2", "short_1"]
    _assert_events_equal_metrics(logs / "TEQL_1", model.run_dir / "metrics.csv", [0, 1])


def test_dqn_logs_its_loss_and_epsilon(tmp_path):
    pytest.importorskip("torch")
    logs = tmp_path / "logs"
    model = rl.DQN("cartpole", seeds=2, verbose=0, tensorboard_log=logs)
    model.learn(episodes=3)
    _, scalars = _scalars(logs / "DQN_1" / "seed_1")
    assert scalars["train/epsilon"][0] == [1, 2, 3]
    assert np.all(np.diff(scalars["train/epsilon"][1]) < 0)  # decays with every step
    assert "train/loss" in scalars
    assert scalars["train/q_mean"][0] == [1, 2, 3]  # NaN: no training step before learning_starts


def _taken_q(replica, networks, state, action, scale):
    """Mean over ``networks`` of Q(state, action), from the saved weights of a replica."""
    values = []
    for name in networks:
        net = replica[name]
        hidden = np.maximum(net["0.weight"] @ (state * scale) + net["0.bias"], 0.0)
        values.append((net["2.weight"] @ hidden + net["2.bias"])[action])
    return np.mean(values)


@pytest.mark.parametrize("engine", ["compiled", "stacked"])
@pytest.mark.parametrize("name", ["dqn", "sac"])
def test_the_logged_mean_q_is_that_of_the_taken_actions(tmp_path, name, engine):
    """One-transition replays: each step trains on the transition just stored, Q before it."""
    pytest.importorskip("torch")
    from rl.agents.base import Transitions
    from rl.agents.deep import dqn, sac
    from tests.rl.agent_drivers import make_problem, streams

    small = {"hidden": 5, "buffer_size": 1, "batch_size": 1, "learning_starts": 1}
    if name == "dqn":
        agent_class, config, networks = dqn.DQNAgent, dqn.DQNConfig, ("q",)
    else:
        agent_class, config, networks = sac.DiscreteSAC, sac.DiscreteSACConfig, ("q1", "q2")
    problem = make_problem((3, 4), (3,))
    agent = agent_class(problem, config(**small, engine=engine), streams(1, 2, 3))
    assert np.isnan(board.agent_diagnostics(agent)["q_mean"]).all()  # not asked for yet
    board.watch_diagnostics(agent)
    writer = board.TensorBoardWriter(tmp_path / "run_1", [0, 1, 2], {"agent": name})
    scale = np.array([1 / 2, 1 / 3])
    rng = np.random.default_rng(0)
    expected, steps = [], 0
    for episode, length in ((1, 6), (2, 4)):
        taken = [[], [], []]
        for t in range(length):
            active = np.array([True, t % 2 == 0, False])  # replica 2 never trains
            states = rng.integers(0, [3, 4], size=(3, 2))
            actions = agent.act(states, active)
            replicas = agent.state_dict()["replicas"]
            for i in np.flatnonzero(active):
                q = _taken_q(replicas[i], networks, states[i], actions[i, 0], scale)
                taken[i].append(q)
            next_states = rng.integers(0, [3, 4], size=(3, 2))
            agent.observe(
                Transitions(
                    states, actions, rng.normal(size=3), next_states, rng.random(3) < 0.3, active
                )
            )
            steps += 1
        expected.append([np.mean(values) if values else np.nan for values in taken])
        no_greedy = np.full(3, np.nan)
        writer.write(
            episode, np.zeros(3), np.full(3, length), no_greedy, agent_steps=steps,
            diagnostics=lambda: board.agent_diagnostics(agent),
        )  # fmt: skip
    writer.close()
    expected = np.array(expected)
    for i in range(3):
        logged_steps, logged = _scalars(tmp_path / "run_1" / f"seed_{i}")[1]["train/q_mean"]
        assert logged_steps == [1, 2]
        np.testing.assert_allclose(logged, expected[:, i], rtol=1e-5, atol=1e-6)
    assert np.isfinite(expected[:, :2]).all() and np.isnan(expected[:, 2]).all()
    assert expected[0, 0] != expected[1, 0]  # the second stretch starts afresh


def test_run_log_dirs_count_up_and_a_resume_takes_the_latest(tmp_path):
    assert board.run_log_dir(tmp_path, "PPO") == tmp_path / "PPO_1"
    for name in ("PPO_1", "PPO_3", "PPO_x", "PPO_10a", "PPOX_7"):
        (tmp_path / name).mkdir()
    assert board.run_log_dir(tmp_path, "PPO") == tmp_path / "PPO_4"
    assert board.run_log_dir(tmp_path, "PPO", resume=True) == tmp_path / "PPO_3"
    assert board.run_log_dir(tmp_path, "A2C", resume=True) == tmp_path / "A2C_1"
    assert board.tensorboard_dir(None, "PPO") is None


def test_hparams_are_flat_and_of_the_plugins_types():
    effective = {
        "env": "cartpole",
        "out": "runs/x",
        "seeds": 4,
        "backend": None,
        "env_options": {"state_bins": [6, 6], "low": -1.5},
        "agent_params": {"bounded": True, "alpha0": 0.5},
    }
    assert board.hparams_of(effective) == {
        "env": "cartpole",
        "seeds": 4,
        "env_options.state_bins": "[6, 6]",
        "env_options.low": -1.5,
        "agent_params.bounded": True,
        "agent_params.alpha0": 0.5,
    }


def test_checksums_are_tensorboards(tmp_path):
    rng = np.random.default_rng(0)
    for length in range(25):  # every remainder of the eight-byte blocks
        rows = rng.integers(0, 256, size=(3, length), dtype=np.uint8)
        expected = [tensorboard_crc(r.tobytes()) for r in rows]
        assert board.masked_crc32c(rows).tolist() == expected, length
    records = [rng.integers(0, 256, size=n, dtype=np.uint8).tobytes() for n in (53, 0, 9)]
    framed = board.frame_sequence(records)
    assert len(framed) == 62 + 3 * 16
    assert framed[:8] == (53).to_bytes(8, "little") and framed[12:65] == records[0]
    assert framed[65:69] == tensorboard_crc(records[0]).to_bytes(4, "little")
    empty_header = tensorboard_crc(bytes(8)).to_bytes(4, "little")
    assert framed[69:77] == bytes(8) and framed[77:81] == empty_header
    assert framed[97:106] == records[2]


def test_records_of_several_layouts_appended_together_pass_tensorboards_checks(tmp_path):
    """The checksums of all records kept in memory are computed at the append, in one call."""
    from tensorboard.compat.proto import event_pb2
    from tensorboard.compat.tensorflow_stub import errors
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import PyRecordReader_New

    writer = board.TensorBoardWriter(tmp_path / "run_1", [5, 6], {"env": "cartpole"})
    nan = np.full(2, np.nan)
    for episode in range(1, 8):
        greedy = np.array([-1.5, 2.25]) * episode if episode % 3 == 0 else nan
        writer.write(
            episode,
            np.array([10.0, 20.0]) + episode,
            np.array([3, 4]) * episode,
            greedy,
            agent_steps=episode // 2,
            diagnostics=lambda: {"gap": np.array([0.5, 1e-9]), "long_named_value": np.ones(2)},
        )
        if episode == 4:
            writer.flush()
    writer.close()
    (path,) = (tmp_path / "run_1" / "seed_6").iterdir()
    reader, events = PyRecordReader_New(str(path)), []
    with pytest.raises(errors.OutOfRangeError):  # a failed checksum raises DataLossError
        while True:
            reader.GetNext()
            events.append(event_pb2.Event.FromString(reader.record()))
    values = {
        (event.step, value.tag): value.simple_value
        for event in events[2:]  # the file's version, the hparams
        for value in event.summary.value
    }
    assert values[(6, "rollout/return")] == 26.0 and values[(6, "eval/greedy_return")] == 13.5
    assert values[(7, "rollout/length")] == 28.0 and (7, "eval/greedy_return") not in values
    assert values[(7, "train/gap")] == np.float32(1e-9)
    assert len(events) == 2 + 7 + 4  # diagnostics after agent steps 0, 1, 2 and 3


def test_a_seed_directory_that_is_a_link_is_refused(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "run_1").mkdir()
    os.symlink(tmp_path / "elsewhere", tmp_path / "run_1" / "seed_0")
    with pytest.raises(RunDirError, match="seed_0: it is a symbolic link"):
        board.TensorBoardWriter(tmp_path / "run_1", [0], {"env": "cartpole"})
    assert not list((tmp_path / "elsewhere").iterdir())


def test_without_tensorboard_the_command_says_what_to_install(tmp_path, monkeypatch, capsys):
    for name in [name for name in sys.modules if name.split(".")[0] == "tensorboard"]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "tensorboard", None)
    with pytest.raises(ConfigError, match=r'pip install "teql\[tensorboard\]"'):
        board.TensorBoardWriter(tmp_path / "x_1", [0], {})
    code = _train("--episodes", 2, "--out", tmp_path / "run", "--tensorboard", tmp_path / "logs")
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "error: Writing TensorBoard logs needs the tensorboard package: pip install "
        '"teql[tensorboard]"'
    )
    assert not (tmp_path / "logs").exists()


def test_a_sweep_logs_every_configuration_under_its_name(tmp_path, capsys):
    grid = tmp_path / "grid.toml"
    grid.write_text(
        '[base]\nenv = "cartpole"\nagent = "tlr"\nepisodes = 6\nseeds = 2\neval_every = 3\n'
        'out = "ignored"\n\n[grid]\n"agent_params.alpha" = [0.01, 0.02]\n'
    )
    out, logs = tmp_path / "sweep", tmp_path / "logs"
    command = [str(grid), "--out", str(out), "--workers", "2", "--no-progress", "--no-plot"]
    assert sweep_cli.main([*command, "--tensorboard", str(logs)]) == 0
    names = sorted(p.name for p in out.iterdir() if p.is_dir())
    assert len(names) == 2
    assert sorted(p.name for p in logs.iterdir()) == [f"{name}_1" for name in names]
    for name in names:
        _assert_events_equal_metrics(logs / f"{name}_1", out / name / "metrics.csv", [0, 1])


def test_a_hooked_event_file_writer_learns_of_every_seed_directory(tmp_path, monkeypatch):
    from tensorboard.summary.writer import event_file_writer as files

    seen = []

    class Hooked(files.EventFileWriter):  # as W&B's sync_tensorboard replaces it
        def __init__(self, logdir, *args, **kwargs):
            seen.append(logdir)
            super().__init__(logdir, *args, **kwargs)

    monkeypatch.setattr(files, "EventFileWriter", Hooked)
    writer = board.TensorBoardWriter(tmp_path / "run_1", [5, 6], {"env": "cartpole"})
    returns, lengths, no_greedy = np.array([1.5, -2.0]), np.array([3, 4]), np.full(2, np.nan)
    writer.write(1, returns, lengths, no_greedy, agent_steps=7, diagnostics=dict)
    writer.close()
    assert seen == [str(tmp_path / "run_1" / "seed_5"), str(tmp_path / "run_1" / "seed_6")]
    _, scalars = _scalars(tmp_path / "run_1" / "seed_6")
    assert scalars["rollout/return"] == ([1], [-2.0])
    assert scalars["rollout/length"] == ([1], [4.0])


@pytest.mark.parametrize("engine", ["compiled", "array"])
def test_logging_leaves_the_run_bitwise_as_it_is(tmp_path, engine):
    """Reading the diagnostics (a sync of the array engine's host copies) changes no result."""
    common = ["--episodes", 8, "--eval-every", 4, "--checkpoint-every", 5]
    common += ["--set", f'engine="{engine}"']
    assert _train(*common, "--out", tmp_path / "plain") == 0
    assert _train(*common, "--out", tmp_path / "logged", "--tensorboard", tmp_path / "logs") == 0
    plain, logged = (read_metrics(tmp_path / name / "metrics.csv") for name in ("plain", "logged"))
    for column in ("seed", "episode", "return", "length", "greedy_return"):
        np.testing.assert_array_equal(plain[column], logged[column], err_msg=column)
    _, scalars = _scalars(tmp_path / "logs" / "logged_1" / "seed_2")
    assert len(scalars["train/delta_q_mean"][0]) >= 2


@pytest.mark.parametrize("agent", ["dqn", "sac"])
def test_watching_the_mean_q_leaves_the_deep_agents_bitwise_as_they_are(tmp_path, agent):
    pytest.importorskip("torch")
    common = ["--env", "cartpole", "--agent", agent, "--seeds", "2", "--episodes", "6"]
    common += ["--set", "learning_starts=40", "--no-progress", "--no-plot"]
    assert train_cli.main([*common, "--out", str(tmp_path / "plain")]) == 0
    logged = ["--out", str(tmp_path / "logged"), "--tensorboard", str(tmp_path / "logs")]
    assert train_cli.main([*common, *logged]) == 0
    plain, logged = (read_metrics(tmp_path / name / "metrics.csv") for name in ("plain", "logged"))
    for column in ("seed", "episode", "return", "length", "greedy_return"):
        np.testing.assert_array_equal(plain[column], logged[column], err_msg=column)
    _, scalars = _scalars(tmp_path / "logs" / "logged_1" / "seed_1")
    assert np.isfinite(scalars["train/q_mean"][1]).any()  # it trained, and the mean Q was read


@pytest.mark.parametrize("storage", ["dense", "sparse"])
def test_mean_delta_q_is_over_each_replicas_visited_entries(storage):
    from rl.agents.tensor.visits import make_visit_table

    visits = make_visit_table(3, 7, 2, storage, compiled=False)
    rng = np.random.default_rng(1)
    expected = [[], [], []]
    active = np.array([True, True, False])  # replica 2 visits nothing
    for _ in range(12):
        states, actions = rng.integers(0, 7, size=3), rng.integers(0, 2, size=3)
        values = rng.normal(size=3)
        visits.increment(states, actions, active)
        visits.set_delta(states, actions, values, active)
        for i in (0, 1):
            expected[i] = [e for e in expected[i] if e[0] != (states[i], actions[i])]
            expected[i].append(((states[i], actions[i]), values[i]))
    means = board.visited_delta_mean(visits)
    np.testing.assert_allclose(means[:2], [np.mean([v for _, v in e]) for e in expected[:2]])
    assert np.isnan(means[2])


@pytest.mark.parametrize("storage", ["dense", "sparse"])
def test_mean_delta_q_adds_each_replicas_entries_in_table_order(storage):
    """The compiled pass equals a plain loop over the table's rows and actions, bitwise."""
    from rl.agents.tensor.visits import make_visit_table

    replicas, n_states, n_actions = 4, 50, 3
    visits = make_visit_table(replicas, n_states, n_actions, storage, compiled=False)
    rng = np.random.default_rng(7)
    for _ in range(300):
        states = rng.integers(0, n_states, size=replicas)
        actions = rng.integers(0, n_actions, size=replicas)
        active = rng.random(replicas) < 0.8
        visits.increment(states, actions, active)  # magnitudes far apart: order shows
        visits.set_delta(
            states,
            actions,
            rng.normal(size=replicas) * 10.0 ** rng.integers(-8, 9, size=replicas),
            active,
        )
    arrays = visits.arrays()
    rows = len(arrays.counts) if storage == "dense" else int(arrays.used[0])
    sums, entries = [0.0] * replicas, [0] * replicas
    for row in range(rows):
        owner = (row if storage == "dense" else int(arrays.row_keys[row])) // n_states
        for action in range(n_actions):
            if arrays.counts[row, action] > 0:
                sums[owner] += float(arrays.delta[row, action])
                entries[owner] += 1
    expected = np.array(sums) / np.array(entries)
    assert board.visited_delta_mean(visits).tolist() == expected.tolist()


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc")
def test_event_files_stay_open_for_the_run_or_are_reopened_past_the_open_file_limit(
    tmp_path, monkeypatch
):
    """Both ways write the same bytes; the files held open are closed with the writer."""
    monkeypatch.setattr(board.time, "time", lambda: 1.7e9)

    def log(name):
        before = len(os.listdir("/proc/self/fd"))
        log_dir = tmp_path / name / "run_1"
        writer = board.TensorBoardWriter(log_dir, [0, 1, 2], {}, resume_after=3)
        held = len(os.listdir("/proc/self/fd")) - before
        for episode in (4, 5):
            ones = np.ones(3)
            writer.write(episode, ones * episode, ones, ones, agent_steps=episode, diagnostics=dict)
            writer.flush()
        writer.close()
        assert len(os.listdir("/proc/self/fd")) == before
        files = sorted(log_dir.glob("seed_*/events.out.tfevents.*"))
        return held, [path.read_bytes() for path in files]

    held, content = log("held")
    assert held == 3 and len(content) == 3
    monkeypatch.setattr(board.resource, "getrlimit", lambda kind: (11, 11))  # 3 x 4 > 11
    assert not board.holds_files_open(3) and board.holds_files_open(2)
    assert log("reopened") == (0, content)


def test_the_step_size_reading_is_each_replica_s_own(tmp_path):
    """With per-replica alpha_0 and kappa, alpha_t of each replica is its own schedule's."""
    from rl.runs.config import TrainConfig, resolve_settings
    from rl.runs.tensorboard import agent_diagnostics
    from rl.seeding import spawn_replicas

    settings = resolve_settings(
        TrainConfig(env="cartpole", agent="teql-released", seeds=3, out=str(tmp_path))
    )
    streams = [s.agent for s in spawn_replicas(range(3))]
    given = {"alpha0": [0.005, 0.01, 0.02], "kappa": [0.001, 0.0, 0.01]}
    agent = settings.spec.agent_class(
        settings.problem, settings.agent, streams, replica_settings=given
    )
    agent.steps_[:] = [0, 10, 100]
    expected = np.array([0.005 / (1 + 0.001), 0.01, 0.02 / (1 + 0.01 * 101)])
    np.testing.assert_allclose(agent_diagnostics(agent)["step_size"], expected, rtol=1e-15)
