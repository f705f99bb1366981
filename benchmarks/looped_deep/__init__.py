"""DQN and discrete SAC as they were before batching over replicas (a benchmark yardstick)."""

from benchmarks.looped_deep.dqn import LoopedDQN
from benchmarks.looped_deep.sac import LoopedDiscreteSAC

__all__ = ["LoopedDQN", "LoopedDiscreteSAC"]
