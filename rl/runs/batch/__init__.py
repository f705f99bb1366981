"""Several training configurations trained as the replicas of one agent (`rl.sweep`'s batches).

`rl.runs.batch.training` builds and trains a batch, writing every
configuration's run directory; `rl.runs.batch.replica_state` cuts the batch's
agent state into each configuration's and joins them back.
"""
