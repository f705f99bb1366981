"""Microseconds per agent-step of DQN and discrete SAC, looped over replicas and batched.

Run with ``python -m benchmarks deep``. Three implementations of each agent:
``looped`` (`benchmarks.looped_deep`, the design before batching: one network,
optimizer and buffer per replica, a Python loop over replicas), ``batched``
(`rl.agents.deep.dqn`, `rl.agents.deep.sac`: every tensor stacked over the replicas;
on the CPU they train with the compiled steps of `rl.agents.deep._step_compiled`)
and ``pytorch`` (the same agents training with the stacked PyTorch step
even on the CPU, as they do on a GPU). The problem
is CartPole-sized: 4 state components of 10 bins and 10 actions (in = 4,
|A| = 10), the parameter-matched widths (DQN hidden 46, SAC hidden 15), one
torch thread. Each measurement runs in its own process (so its peak memory
is its own): the agent first runs past its warm-up (``learning_starts``
lowered to the batch size), then ``act`` + ``observe`` (one gradient step
per replica) are timed on random transitions, best of 3 repeats of at least
`MIN_CALLS` lockstep steps. Columns: microseconds per agent-step (one
replica's step), of the whole step and of ``act`` alone; peak resident
memory of the process (CPU) or peak CUDA memory allocated; and the speed-up
over the looped agent at B = 1.
"""

from __future__ import annotations

import argparse
import math
import resource
import timeit

import numpy as np

from benchmarks.child import measure_in_child

STATE_DIMS = (10, 10, 10, 10)
N_ACTIONS = 10
IMPLEMENTATIONS = ("looped", "pytorch", "batched")
AGENTS = ("dqn", "sac")
REPLICAS = (1, 10, 100, 1000)
#: Lockstep steps per timing repeat at least: at B = 100 the default 300 agent-steps are
#: 3 calls, and a mean over 3 is as noisy as one (DQN read 24 or 13 microseconds).
MIN_CALLS = 20


def make_problem():  # noqa: ANN201 (rl.problems.Problem, imported lazily)
    """Return the CartPole-sized toy problem (index vectors in, index vectors out)."""
    from rl.problems import Problem

    return Problem(
        name="cartpole-sized",
        env_id="none",
        env_kwargs={},
        state_dims=STATE_DIMS,
        action_dims=(N_ACTIONS,),
        reward_bound=1.0,
        encode=lambda obs: obs,
        decode=lambda actions: actions,
    )


def make_agent(agent: str, implementation: str, replicas: int, device: str):  # noqa: ANN201
    """Build one agent with the CartPole preset and warm-up lowered to one mini-batch."""
    from benchmarks.looped_deep import LoopedDiscreteSAC, LoopedDQN
    from rl.agents.deep import dqn, sac
    from rl.agents.readings import reading
    from rl.seeding import replica_streams

    module, looped = (dqn, LoopedDQN) if agent == "dqn" else (sac, LoopedDiscreteSAC)
    config_type = module.SPEC.config_class
    params = reading(agent, "paper").agent_params("cartpole")
    params["learning_starts"] = config_type().batch_size
    if implementation != "looped":
        params["device"] = device
    if implementation == "pytorch":
        params["engine"] = "stacked"
    cls = looped if implementation == "looped" else module.SPEC.agent_class
    streams = [replica_streams(seed).agent for seed in range(replicas)]
    return cls(make_problem(), config_type(**params), streams)


def time_agent(agent, replicas: int, number: int) -> dict[str, float]:  # noqa: ANN001
    """Return best-of-3 microseconds per agent-step of step (act + observe) and of act."""
    from rl.agents.base import Transitions

    rng = np.random.default_rng(0)
    active = np.ones(replicas, dtype=bool)
    pool = [rng.integers(0, STATE_DIMS, size=(replicas, len(STATE_DIMS))) for _ in range(16)]
    rewards = rng.normal(size=replicas)
    terminated = np.zeros(replicas, dtype=bool)
    counter = iter(range(10**9))

    def step() -> None:
        i = next(counter)
        states, next_states = pool[i % 16], pool[(i + 1) % 16]
        actions = agent.act(states, active)
        agent.observe(Transitions(states, actions, rewards, next_states, terminated, active))

    for _ in range(agent.config.learning_starts + 2):  # from here every step trains
        step()
    result = {}
    for name, fn in (("step", step), ("act", lambda: agent.act(pool[0], active))):
        best = min(timeit.repeat(fn, number=number, repeat=3)) / number
        result[name] = best * 1e6 / replicas
    return result


def measure(agent: str, implementation: str, replicas: int, device: str, number: int) -> dict:
    """Time one agent in this process; return its row (with this process's peak memory)."""
    import torch

    torch.set_num_threads(1)
    built = make_agent(agent, implementation, replicas, device)
    calls = max(MIN_CALLS, number // replicas)
    row = {"agent": agent, "impl": implementation, "B": replicas, "device": "cpu"}
    if implementation != "looped":
        row["device"] = str(built.device)
    row.update(time_agent(built, replicas, calls))
    if row["device"].startswith("cuda"):
        torch.cuda.synchronize()
        row["peak_mb"] = torch.cuda.max_memory_allocated() / 2**20
    else:
        row["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return row


def run_one(agent: str, implementation: str, replicas: int, device: str, number: int) -> dict:
    """Run `measure` in a fresh Python process and return its row."""
    code = (
        "import json, sys; from benchmarks.bench_deep import measure; "
        f"print(json.dumps(measure({agent!r}, {implementation!r}, {replicas}, {device!r}, "
        f"{number})))"
    )
    row = measure_in_child(["-c", code])
    if isinstance(row, str):
        raise SystemExit(f"{agent} {implementation} B={replicas} failed: {row}")
    return row


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--number",
        type=int,
        default=300,
        help=f"agent-steps per timing repeat (at least {MIN_CALLS} lockstep steps)",
    )
    parser.add_argument(
        "--replicas", type=int, nargs="+", default=list(REPLICAS), help="values of B"
    )
    parser.add_argument("--agents", nargs="+", default=list(AGENTS), choices=AGENTS)
    parser.add_argument(
        "--impls", nargs="+", default=list(IMPLEMENTATIONS), choices=IMPLEMENTATIONS
    )
    parser.add_argument(
        "--device", default="cpu", help="device of the batched agents (cpu, cuda, cuda:N)"
    )
    parser.add_argument(
        "--looped-max-replicas",
        type=int,
        default=math.inf,
        help="skip the looped agent above this B (it costs B times its B = 1 time)",
    )
    args = parser.parse_args(argv)
    print(f"in=4, |A|=10, CartPole widths, one torch thread; batched on {args.device}")
    print(
        f"{'agent':<5} {'impl':<8} {'B':>5} {'device':<7} {'us/agent-step':>13} {'act us':>8} "
        f"{'peak MB':>8} {'vs looped B=1':>13}"
    )
    for agent in args.agents:
        reference = None
        for implementation in args.impls:
            for replicas in args.replicas:
                if implementation == "looped" and replicas > args.looped_max_replicas:
                    continue
                row = run_one(agent, implementation, replicas, args.device, args.number)
                if implementation == "looped" and replicas == 1:
                    reference = row["step"]
                speedup = f"{reference / row['step']:.1f}x" if reference else "-"
                print(
                    f"{agent:<5} {implementation:<8} {replicas:>5} {row['device']:<7} "
                    f"{row['step']:>13.1f} {row['act']:>8.1f} {row['peak_mb']:>8.0f} "
                    f"{speedup:>13}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
