"""DQN and discrete SAC as they were before batching over replicas: a frozen benchmark yardstick.

Not built from the agents' training steps (`rl.agents.deep.engine`) and not kept
in step with them: it stays as it was, so that `benchmarks.bench_deep` and
`benchmarks.deep_learning` measure the batched agents against a fixed design.
"""

from benchmarks.looped_deep.dqn import LoopedDQN
from benchmarks.looped_deep.sac import LoopedDiscreteSAC

__all__ = ["LoopedDQN", "LoopedDiscreteSAC"]
