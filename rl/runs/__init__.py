"""Training runs on disk: configuration, run directories, metrics, checkpoints, loading.

`rl.runs.config` turns settings into a `rl.runs.config.TrainConfig` and resolves
them once (`rl.runs.config.resolve_settings`); `rl.runs.training` trains one run
into its directory (`rl.runs.rundir`: safe reads, atomic writes, the lock),
writing `rl.runs.metrics` rows and `rl.runs.checkpoint` files (data, never
code); `rl.runs.load` and `rl.runs.verify` read a finished run back.
"""
