"""The training loop: B replicas of one agent on B copies of a problem, in lockstep.

`rl.loop.runner.Runner` plays episodes step by step through
`rl.loop.replicas.ReplicaEnvs` (one environment per replica, reset with its own
seed); `rl.loop.fused` plays the same steps many at a time in one compiled call
where the environment and the agent have compiled twins;
`rl.loop.device_copies` keeps an array-engine run's CartPole or Pendulum copies on
its device; `rl.loop.slots` holds the episode bookkeeping all of them share.
"""
