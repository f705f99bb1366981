"""The scan engine (rl.loop.scan): T lockstep steps of the whole loop as one JAX program.

Fed the host generators' draws (``draws="host"``) the scan loop takes the array
engine's actions, which are the reference engine's until the first exact tie or
discrete random action (rl.agents.tensor._array_engine); the readings here draw
neither, so the returns equal the compiled engine's (itself the reference to
1e-12) to `RETURN_TOL`, the last bits of JAX's ``sin`` and ``cos`` aside
(tests/rl/test_device_copies.py). With JAX's own PRNG the runs are other samples
of the same process: the slow test compares their final returns statistically.
JAX compiles the chunk for seconds per runner, so the default run builds few.
"""

import importlib.util
import re
from pathlib import Path

import numpy as np
import pytest

from rl.agents.readings import reading
from rl.agents.tensor.teql import TEQLAgent, TEQLConfig
from rl.agents.tensor.tlr import TLRAgent, TLRConfig
from rl.envs.cartpole import ContinuousCartPole
from rl.loop.runner import Runner
from rl.loop.scan import ScanLoop
from rl.problems import make_problem
from rl.seeding import spawn_replicas
from tensorq.validation import as_numpy
from tests.rl.agent_drivers import cuda_available
from tests.rl.cli_runs import assert_resumed_run_equals_whole

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("jax") is None, reason="JAX is not installed"
)

AGENTS = {
    "teql-released": (TEQLAgent, TEQLConfig),
    "teql-stable": (TEQLAgent, TEQLConfig),
    "tlr-released": (TLRAgent, TLRConfig),
}
RETURN_TOL = 1e-6
"""Returns of the same actions agree to this (JAX's ``sin`` and ``cos``, see the module doc)."""


def _runner(case, engine, env, seeds, eval_every=2, device="cpu"):
    """A runner of ``case`` on the compiled engine or the scan engine (JAX)."""
    agent_class, config_class = AGENTS[case]
    params = reading(*case.split("-")).agent_params(env)
    problem = make_problem(env)
    replicas = spawn_replicas(list(seeds))
    backend = "numpy" if engine == "compiled" else "jax"
    config = config_class(**params, engine=engine, backend=backend, device=device)
    agent = agent_class(problem, config, [s.agent for s in replicas])
    return Runner(problem, agent, replicas, eval_every=eval_every)


def _play(runner, start, stop):
    results = list(runner.episodes(start, stop))
    return (
        np.array([r.returns for r in results]),
        np.array([r.lengths for r in results]),
        np.array([r.greedy_returns for r in results]),
    )


def _host_draws(runner, steps=48, queue=3):
    """Replace the runner's loop by a scan loop on the host generators' draws."""
    runner.loop = ScanLoop(runner.lockstep, steps=steps, queue=queue, draws="host")
    return runner


def _assert_same_episodes(expected, got):
    np.testing.assert_allclose(got[0], expected[0], rtol=0, atol=RETURN_TOL)
    np.testing.assert_array_equal(got[1], expected[1])
    np.testing.assert_allclose(got[2], expected[2], rtol=0, atol=RETURN_TOL)


def _learned(agent):
    """Factors, step counters and visit counts (rows ordered by key: the host tables hand rows
    out in order of first visit, and a replica waiting for its next episode visits later)."""
    state = agent.state_dict()
    visits = state.get("visits")
    counts = None
    if visits is not None:
        counts = (
            visits["counts"][np.argsort(visits["keys"])] if "keys" in visits else visits["counts"]
        )
    return [as_numpy(f) for f in agent.q_.factors], state["steps"], counts


def test_the_scan_engine_picks_the_scan_loop_on_physical_systems():
    """CartPole and Pendulum play on the scan loop; elsewhere the engine acts step by step."""
    assert _runner("teql-released", "scan", "cartpole", (0,)).loop.name == "scan"
    assert _runner("tlr-released", "scan", "pendulum", (0,)).loop.name == "scan"
    assert _runner("teql-released", "compiled", "cartpole", (0,)).loop.name == "fused"
    runner = _runner("teql-released", "scan", "cartpole", (0,))
    runner.fused = False
    assert runner.loop.name == "objects"


def test_the_scan_engine_needs_jax():
    """Another backend is refused with one line naming the fix."""
    with pytest.raises(ValueError, match="'scan' runs on JAX only") as error:
        TEQLConfig(engine="scan", backend="numpy")
    assert "\n" not in str(error.value)


def test_host_draws_play_the_compiled_engines_episodes():
    """CartPole, TEQL released, 3 seeds x 5 episodes with evaluations, T = 48 and a queue of
    3 (replicas wait for their next initial state): the compiled engine's episodes and state."""
    expected = _runner("teql-released", "compiled", "cartpole", (0, 1, 2))
    got = _host_draws(_runner("teql-released", "scan", "cartpole", (0, 1, 2)))
    _assert_same_episodes(_play(expected, 0, 5), _play(got, 0, 5))
    (fa, sa, ca), (fb, sb, cb) = _learned(expected.agent), _learned(got.agent)
    for a, b in zip(fa, fb, strict=True):
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-9)
    np.testing.assert_array_equal(sb, sa)
    np.testing.assert_array_equal(cb, ca)
    assert got.agent_steps == expected.agent_steps


def test_a_checkpoint_resumes_exactly_between_chunks():
    """JAX's PRNG: episodes 3-5 replayed from the state saved after episode 2 are the same."""
    runner = _runner("teql-released", "scan", "cartpole", (0, 1), eval_every=2)
    runner.loop = ScanLoop(runner.lockstep, steps=40, queue=4)
    _play(runner, 0, 2)
    saved = runner.agent.state_dict()
    first = _play(runner, 2, 5)
    after = _learned(runner.agent)
    runner.agent.load_state_dict(saved)
    again = _play(runner, 2, 5)
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(b, a)
    for a, b in zip(after[0], _learned(runner.agent)[0], strict=True):
        np.testing.assert_array_equal(b, a)
    assert not np.array_equal(first[0][0], first[0][1])  # the replicas differ


@pytest.mark.slow
@pytest.mark.parametrize("case", AGENTS)
@pytest.mark.parametrize("env", ["cartpole", "pendulum"])
def test_long(env, case):
    """4 seeds x 60 episodes on host draws, T = 256: the compiled engine's episodes."""
    seeds = range(4)
    expected = _runner(case, "compiled", env, seeds)
    got = _host_draws(_runner(case, "scan", env, seeds), steps=256, queue=16)
    _assert_same_episodes(_play(expected, 0, 60), _play(got, 0, 60))


@pytest.mark.slow
def test_jax_draws_do_not_depend_on_the_chunk_or_the_batch():
    """A seed's episodes are the same with T = 32 or 100 and with B = 1 or 3."""
    alone = _runner("teql-released", "scan", "cartpole", (1,))
    alone.loop = ScanLoop(alone.lockstep, steps=32, queue=2)
    batch = _runner("teql-released", "scan", "cartpole", (0, 1, 2))
    batch.loop = ScanLoop(batch.lockstep, steps=100)
    a, b = _play(alone, 0, 6), _play(batch, 0, 6)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(y[:, 1], x[:, 0])


@pytest.mark.slow
def test_jax_draws_learn_like_the_reference():
    """8 seeds x 300 CartPole episodes of TEQL released, JAX's PRNG against the compiled engine.

    The statistic: each seed's mean training return over its last 100 episodes. The two
    engines' 8 values pass a two-sided Welch t-test at the 1% level (same mean), and the
    scan engine's differ from the compiled one's for most seeds (other samples).
    """
    from scipy import stats

    seeds, episodes = range(8), 300
    reference = _play(_runner("teql-released", "compiled", "cartpole", seeds, 0), 0, episodes)
    scan = _play(_runner("teql-released", "scan", "cartpole", seeds, 0), 0, episodes)
    a, b = reference[0][-100:].mean(axis=0), scan[0][-100:].mean(axis=0)
    result = stats.ttest_ind(a, b, equal_var=False)
    print(f"final-window returns: compiled {a.mean():.2f} +- {a.std(ddof=1):.2f}, "
          f"scan {b.mean():.2f} +- {b.std(ddof=1):.2f}, Welch p = {result.pvalue:.3f}")  # fmt: skip
    assert result.pvalue > 0.01
    assert np.sum(a != b) >= 6


@pytest.mark.slow
def test_a_diverged_target_is_named_and_not_learned():
    """Q-values that overflow: the agent's divergence error, and nothing learned."""
    runner = _runner("tlr-released", "scan", "cartpole", (0, 5))
    runner.episode(1)
    agent = runner.agent
    agent.q_.factors[:] = [f * 1e120 for f in agent.q_.factors]
    before = _learned(agent)
    with pytest.raises(ValueError, match="TLRAgent diverged: the TD target of replica 0"):
        runner.episode(2)
    for a, b in zip(before[0], _learned(agent)[0], strict=True):
        np.testing.assert_array_equal(b, a)
    np.testing.assert_array_equal(_learned(agent)[1], before[1])


@pytest.mark.slow
def test_a_non_finite_observation_names_the_replica_and_seed(monkeypatch):
    """Initial states near the largest double: the step's error, as every loop raises it."""
    monkeypatch.setattr(ContinuousCartPole, "reset_interval", (1e308, 1.7e308))
    runner = _runner("teql-released", "scan", "cartpole", (0, 1))
    with pytest.raises(ValueError, match=r"non-finite .* replica 0 \(seed 0\)"):
        list(runner.episodes(0, 2))
    assert runner.agent.state_dict()["steps"].tolist() == [0, 0]


@pytest.mark.slow
def test_request_stop_finishes_started_episodes_and_equals_a_run_to_that_barrier():
    """Chunks of 16 steps (replicas spread out): stopped after episode 2, as a run to there."""
    runner = _runner("teql-released", "scan", "cartpole", (0, 1, 2))
    runner.loop = ScanLoop(runner.lockstep, steps=16)
    seen = []
    for result in runner.episodes(0, 200):
        seen.append(result.episode)
        if result.episode == 2:
            runner.request_stop()
    stop = seen[-1]
    assert seen == list(range(1, stop + 1)) and 2 <= stop < 200
    straight = _runner("teql-released", "scan", "cartpole", (0, 1, 2))
    list(straight.episodes(0, stop))
    for a, b in zip(_learned(runner.agent), _learned(straight.agent), strict=True):
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(y, x)


@pytest.mark.slow
def test_a_resumed_training_run_equals_a_whole_one(tmp_path):
    """`python -m rl.train --backend jax --engine scan`: 3 episodes resumed to 6, as 6."""
    args = ["--env", "cartpole", "--agent", "teql", "--reading", "released", "--seeds", 2,
            "--checkpoint-every", 2, "--eval-every", 2, "--backend", "jax", "--engine",
            "scan", "--no-progress", "--no-plot"]  # fmt: skip

    assert_resumed_run_equals_whole(tmp_path, args, timeout=600)


@pytest.mark.gpu
@pytest.mark.skipif(not Path("/dev/nvidiactl").exists(), reason="no NVIDIA device")
def test_cuda_scan_plays_the_compiled_engines_episodes():
    """On a CUDA device: the chunk's state lives there; host draws give the compiled returns."""
    if not cuda_available("jax"):
        pytest.skip("JAX sees no CUDA device")
    seeds = range(4)
    got = _host_draws(_runner("teql-released", "scan", "cartpole", seeds, device="cuda"))
    played = _play(got, 0, 20)
    assert "cuda" in str(got.loop.obs.devices()).lower() or "gpu" in str(got.loop.obs.devices())
    expected = _play(_runner("teql-released", "compiled", "cartpole", seeds), 0, 20)
    np.testing.assert_allclose(played[0][:3], expected[0][:3], rtol=0, atol=RETURN_TOL)


def test_a_chunk_writes_the_visit_table_in_place():
    """XLA copies none of the visit table's arrays inside the compiled chunk.

    A copy per step would make a step's cost grow with the table (the whole
    index, every step); the chunk's optimized program is read for one.
    """
    runner = _host_draws(_runner("teql-released", "scan", "cartpole", (0,), eval_every=0))
    loop, programs = runner.loop, []
    chunk = loop._chunk

    def recorded(carry, *args):
        programs.append((chunk.lower(carry, *args).compile().as_text(), carry.table))
        return chunk(carry, *args)

    loop._chunk = recorded
    _play(runner, 0, 1)
    text, table = programs[0]
    shapes = {",".join(map(str, a.shape)) for a in table if a.size > 1}
    copied = set(re.findall(r"\[([\d,]+)\]\{[\d,]*\} copy\(", text))
    assert not shapes & copied, f"the chunk copies visit-table arrays of shapes {shapes & copied}"
