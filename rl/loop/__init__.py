"""The training loop: B replicas of one agent on B copies of a problem, in lockstep.

`rl.loop.runner.Runner` plays the episodes with the one loop it picks when
built (`rl.loop.lockstep.Loop`): the environment objects step by step
(`rl.loop.stepped`, through `rl.loop.replicas.ReplicaEnvs`), the copies in
compiled code (`rl.loop.copies`), the copies on an array engine's device
(`rl.loop.device_copies`), or many steps at a time in one compiled call
(`rl.loop.fused`). `rl.loop.lockstep` holds what they all read (the run's
parts, a segment's results, episode seeds) and `rl.loop.slots` the episode
bookkeeping they share.
"""
