"""Problems: the factored discrete views of environments that the agents work on.

Agents never see raw observations or environment actions: they work on integer
index vectors, one index per state component and one per action component
(the modes of the Q-tensor). A `Problem` holds the maps between the two
worlds; `make_problem` builds one by short name, by any Gymnasium id
(``"package.module:Env-v0"`` included), or from an environment instance or
factory (users' own environments: `rl.problems.from_gymnasium`, `rl.problems.spaces`).
`exact_model` returns the model of an environment that implements
`rl.envs.ExactModel`, for value iteration and the ``analysis`` tools.

`ENVIRONMENTS` is the one map from short name to everything about a bundled
environment: its Gymnasium id, entry points, episode length and problem
builder. `register_envs` (called by ``import rl``), `make_problem`, the
configuration and the tests all read it; nothing else lists the environments.

=============  ============================  ==============================  =====  ======
name           env id                        state dims ; action dims        steps  vector
=============  ============================  ==============================  =====  ======
``cartpole``   ``rl/ContinuousCartPole-v0``  (10, 10, 20, 20) ; (10,)        100    yes
``pendulum``   ``rl/BoundedPendulum-v0``     (20, 20) ; (10,)                100    yes
``highway``    ``rl/Highway-v0``             (20,) * 9 ; (5,)                50     no
``inventory``  ``rl/Inventory-v0``           (2, 5, 5) ; (3, 3) by default   100    no
``lowrank``    ``rl/LowRankMDP-v0``          (4, 4, 4) ; (3, 3) by default   100    no
``planted``    ``rl/PlantedRankMDP-v0``      (4, 4, 4) ; (3, 3) by default   100    yes
``goalgrid``   ``rl/GoalGrid-v0``            (10, 10) ; (4,) by default      200    no
=============  ============================  ==============================  =====  ======

``highway`` runs on its compiled twin (`rl.envs.highway_twin`, id
``rl/HighwayTwin-v0``, vectorized) wherever it covers the configuration (the
paper's; any ``normalization``), on highway-env itself otherwise (other
``env_kwargs``, such as a ``config``); ``env_kwargs={"engine": "reference"}`` or
``{"engine": "twin"}`` chooses, and `rl.problems.bundled.describe_simulator` says which.

The continuous problems use the paper's grids (`rl.problems.discretize.PRESETS`). The
``index_rule`` option changes how observations are binned; actions always
execute bin centres (as the authors' greedy and EUGE actions do), so that with
10 action bins on [-1, 1] the executed CartPole forces are -0.9, -0.7, ..., 0.9.
"""

from rl.problems.bundled import ENVIRONMENTS, BundledEnv, bundled_env, exact_model, register_envs
from rl.problems.make import EnvSource, make_problem
from rl.problems.problem import EnvFailure, ObservationShapeError, Problem

__all__ = [
    "ENVIRONMENTS",
    "BundledEnv",
    "EnvFailure",
    "EnvSource",
    "ObservationShapeError",
    "Problem",
    "bundled_env",
    "exact_model",
    "make_problem",
    "register_envs",
]
